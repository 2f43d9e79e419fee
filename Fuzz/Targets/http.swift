// library: Signaling
@testable import Signaling

/// libFuzzer entry for HTTP/1.1 framing: the server's request parser (pipelining, Content-Length,
/// chunked bodies and trailers) fed in two pieces split where the first byte says, and the client's
/// response parser over the same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  let split = bytes.isEmpty ? 0 : Int(bytes[0]) * bytes.count / 256
  // Small limits so the size checks are reachable.
  var parser = HTTPRequestParser(maxHeadBytes: 2048, maxBodyBytes: 4096)
  var requests = 0
  do {
    for piece in [bytes[..<split], bytes[split...]] {
      parser.append(piece)
      while let request = try parser.next() {
        requests += 1
        precondition(request.body.count <= 4096, "body over the limit")
        _ = request.queryParameters
        _ = request.keepAlive
        _ = HTTPResponse.text(request.path).serialized(keepAlive: request.keepAlive)
      }
    }
    precondition(parser.bufferedCount >= 0)
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
