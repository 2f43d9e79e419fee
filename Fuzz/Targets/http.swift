// library: Signaling
@testable import Signaling

/// libFuzzer entry for HTTP/1.1 framing: the server's request parser (pipelining, Content-Length,
/// chunked bodies and trailers) fed in pieces of a size the first byte picks (1-64 bytes, or two
/// halves), so decoding resumes mid-body as it does on a slow connection; and the client's
/// response parser over the same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  let split = bytes.isEmpty ? 0 : Int(bytes[0]) * bytes.count / 256
  // Small limits so the size checks are reachable.
  var parser = HTTPRequestParser(maxHeadBytes: 2048, maxBodyBytes: 4096)
  var parsed: [HTTPRequest] = []
  do {
    let step = bytes.isEmpty || bytes[0] >= 0xC0 ? max(1, split) : 1 + Int(bytes[0] & 0x3F)
    var from = 0
    while from < bytes.count {
      let to = min(bytes.count, from + step)
      parser.append(bytes[from..<to])
      from = to
      while let request = try parser.next() {
        parsed.append(request)
        precondition(request.body.count <= 4096, "body over the limit")
        _ = request.queryParameters
        _ = request.keepAlive
        _ = HTTPResponse.text(request.path).serialized(keepAlive: request.keepAlive)
      }
    }
    precondition(parser.bufferedCount >= 0)
    // Differential: the same bytes at once must give the same requests.
    var whole = HTTPRequestParser(maxHeadBytes: 2048, maxBodyBytes: 4096)
    whole.append(bytes)
    var again: [HTTPRequest] = []
    while let request = try? whole.next() { again.append(request) }
    precondition(again.count == parsed.count, "piecewise and whole parses differ in count")
    for (a, b) in zip(again, parsed) {
      precondition(a.method == b.method && a.target == b.target && a.body == b.body, "parses differ")
    }
  } catch {
    precondition([400, 413, 431, 501].contains(error.status))
  }
  _ = parser.takeBuffered()

  var response = HTTPResponseParser(maxHeadBytes: 2048, maxBodyBytes: 4096)
  do {
    try response.append(bytes[..<split])
    try response.append(bytes[split...])
    try response.finish()
    precondition(response.body.count <= 4096, "response body over the limit")
  } catch {}
  return 0
}
