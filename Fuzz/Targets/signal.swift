// library: RoomProtocol
import RoomProtocol
import Signaling

/// libFuzzer entry for the signalling protocol: a WebSocket text message through
/// `SignalEnvelope.parse`, then every accessor the room server reads method parameters with
/// (`data[key]`, string/int/bool/double/array/object values, at any depth). A parsed envelope must
/// serialize to text that parses back to the same envelope.
///
/// The same text is parsed as the server, the SDK and the cluster restore parse it, with the PubSub
/// payload paths kept raw (`JSONRawPaths.pubsubPayloads` in RoomProtocol, and a stored message's
/// `payload`, as read back from Redis): it must be accepted exactly when the plain parse accepts it,
/// every raw value must be a piece of the input that parses to the value the plain parse built, and
/// the text written from it must parse back to the same raw values.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
  checkRawPaths(text)
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

/// The payload paths of the room protocol (RoomProtocol's `JSONRawPaths.pubsubPayloads`) and of a
/// stored message (RoomServer's `RoomStateSnapshot.storedMessage`); this library has neither module.
let rawPaths = JSONRawPaths(
  [.key("data"), .key("payload")], [.key("data"), .key("messages"), .anyElement, .key("payload")],
  [.key("payload")])

func checkRawPaths(_ text: String) {
  let plain = try? JSONValue.parse(text)
  let raw = try? JSONValue.parse(text, keepingRaw: rawPaths)
  precondition((plain == nil) == (raw == nil), "raw paths changed what is accepted")
  precondition((plain == nil) == ((try? RawJSON(validating: text)) == nil), "RawJSON disagrees with the parser")
  guard let plain, let raw else { return }
  precondition(sameRaw(raw, plain, in: text), "a raw value differs from the parsed one")
  let written = raw.jsonString
  guard let again = try? JSONValue.parse(written, keepingRaw: rawPaths) else {
    fatalError("text written from raw values does not parse")
  }
  precondition(sameRaw(again, plain, in: written), "raw values changed in a round trip")
}

/// `raw` is `plain` with some values kept as written: each such value is a piece of `text` and
/// parses to the plain one.
func sameRaw(_ raw: JSONValue, _ plain: JSONValue, in text: String) -> Bool {
  switch (raw, plain) {
  case (.raw(let r), _):
    guard text.contains(r.text), let parsed = try? JSONValue.parse(r.text) else { return false }
    return sameMessage(parsed, plain)
  case (.array(let x), .array(let y)):
    return x.count == y.count && zip(x, y).allSatisfy { sameRaw($0, $1, in: text) }
  case (.object(let x), .object(let y)):
    return x.count == y.count && x.allSatisfy { key, value in y[key].map { sameRaw(value, $0, in: text) } ?? false }
  default: return sameMessage(raw, plain)
  }
}
