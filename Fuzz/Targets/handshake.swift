// library: Signaling
@testable import Signaling

/// libFuzzer entry for the WebSocket opening handshake: every request the HTTP parser accepts
/// is validated as an upgrade; an accepted one must carry a well-formed key.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  var parser = HTTPRequestParser(maxHeadBytes: 8192, maxBodyBytes: 1024)
  parser.append(UnsafeBufferPointer(start: data, count: size))
  while let request = try? parser.next() {
    _ = WebSocketHandshake.isUpgradeRequest(request)
    switch WebSocketHandshake.validate(request) {
    case .success(let accept):
      precondition(accept.utf8.count == 28, "Sec-WebSocket-Accept is base64 of 20 bytes")
    case .failure(let rejection):
      precondition(rejection.status == 400 || rejection.status == 426)
      _ = rejection.response.serialized(keepAlive: false)
    }
  }
  return 0
}
