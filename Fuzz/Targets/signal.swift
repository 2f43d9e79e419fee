// library: Signaling
import Signaling

/// libFuzzer entry for the signalling protocol: a WebSocket text message through
/// `SignalEnvelope.parse`, then every accessor the room server reads method parameters with
/// (`data[key]`, string/int/bool/double/array/object values, at any depth). A parsed envelope must
/// serialize to text that parses back to the same envelope.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
  guard let envelope = try? SignalEnvelope.parse(text) else { return 0 }
  let reparsed: SignalEnvelope
  do {
    reparsed = try SignalEnvelope.parse(envelope.text)
  } catch {
    fatalError("envelope does not re-parse: \(error)")
  }
  precondition(reparsed == envelope, "envelope changed in a round trip")
  switch envelope {
  case .request(_, let method, let params), .notification(let method, let params):
    precondition(!method.isEmpty)
    walk(params, depth: 0)
  case .response(_, .success(let result)):
    walk(result, depth: 0)
  case .response(_, .failure(let error)):
    _ = error.code
  }
  return 0
}

/// Reads `value` the way method handlers do, recursing into members and elements.
func walk(_ value: JSONValue, depth: Int) {
  _ = value.stringValue
  _ = value.boolValue
  _ = value.doubleValue
  _ = value.intValue
  _ = value.isNull
  for key in ["participantId", "roomId", "token", "sdp", "kind", "topic", "revision", "width", "reason"] {
    _ = value[key]?.intValue
    _ = value[key]?.stringValue
  }
  _ = value[0]
  _ = value[-1]
  if let n = value.intValue { precondition(Double(n) == value.doubleValue) }
  guard depth < 64 else { return }
  if let array = value.arrayValue { for element in array { walk(element, depth: depth + 1) } }
  if let object = value.objectValue { for (_, member) in object { walk(member, depth: depth + 1) } }
}
