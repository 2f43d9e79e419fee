// library: RTMP
@testable import RTMP

/// libFuzzer entry for what an RTMP server sends the composite's RTMP client after the handshake
/// (Sources/Egress/Outputs/RTMPChunkReader.swift, AMF0.swift): the chunk stream read whole and in pieces
/// of sizes the input chooses gives the same messages and fails at the same place; every command or data
/// message's AMF0 values, once decoded, encode to bytes that decode and encode to the same bytes.
/// Seeds: replies captured from nginx-rtmp and `ffmpeg -listen 1` (Fuzz/seeds/rtmp).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  var whole = RTMPChunkReader()
  whole.append(bytes[...])
  let (items, failure) = drain(&whole)
  var pieces = RTMPChunkReader()
  var pieceItems: [RTMPChunkReader.Item] = []
  var pieceFailure: RTMPChunkReader.Malformed?
  var at = 0
  var k = 0
  while at < bytes.count && pieceFailure == nil {
    let n = 1 + Int(bytes[k % bytes.count]) % 61
    pieces.append(bytes[at..<min(bytes.count, at + n)])
    at += n
    k += 1
    let (more, failed) = drain(&pieces)
    pieceItems += more
    pieceFailure = failed
  }
  precondition(items == pieceItems, "the messages depend on how the bytes arrived")
  precondition(failure == pieceFailure, "the failure depends on how the bytes arrived")
  for case .message(let type, let payload) in items
  where type == RTMPMessageType.commandAMF0 || type == RTMPMessageType.dataAMF0 {
    guard let values = try? AMF0.decode(payload[...]) else { continue }
    let once = encode(values)
    guard let again = try? AMF0.decode(once[...]) else { preconditionFailure("encoded AMF0 does not decode") }
    precondition(encode(again) == once, "AMF0 does not encode what it decoded")
  }
  return 0
}

private func drain(_ reader: inout RTMPChunkReader) -> ([RTMPChunkReader.Item], RTMPChunkReader.Malformed?) {
  var items: [RTMPChunkReader.Item] = []
  do {
    while let item = try reader.next() { items.append(item) }
  } catch {
    return (items, error)
  }
  return (items, nil)
}

private func encode(_ values: [AMF0.Value]) -> [UInt8] {
  var out: [UInt8] = []
  for value in values { AMF0.append(value, to: &out) }
  return out
}
