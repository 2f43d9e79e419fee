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
  precondition(sameMessage(reparsed.jsonValue, envelope.jsonValue), "envelope changed in a round trip")
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

/// Equal values, except that a number that is not an integer below 2^63 may come back a few ulps
/// off: Foundation's JSON parser does not round the exponent form correctly (1.0044444444444443e+74
/// reads back as 1.0044444444444448e+74). Integers, the common case, are written and read exactly.
func sameMessage(_ a: JSONValue, _ b: JSONValue) -> Bool {
  switch (a, b) {
  case (.number(let x), .number(let y)): return x == y || abs(x - y) <= 1e-13 * max(abs(x), abs(y))
  case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { sameMessage($0, $1) }
  case (.object(let x), .object(let y)):
    return x.count == y.count && x.allSatisfy { key, value in y[key].map { sameMessage(value, $0) } ?? false }
  default: return a == b
  }
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
