// library: Signaling
@testable import Signaling

/// libFuzzer entry for WebSocket framing: the byte stream a connection receives, through the same
/// frame decoder and message assembler it uses (masking, 16/64-bit lengths, fragmentation,
/// control frames, close payloads, UTF-8), as a server (masked frames) or a client (the first
/// byte's low bit picks). Every frame the decoder accepts must re-encode to the same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  guard size >= 1 else { return 0 }
  let server = data[0] & 1 == 0
  let stream = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
  var assembler = WebSocketMessageAssembler(maxMessageBytes: 8192, expectMasked: server)
  var at = 0
  while at < stream.count {
    let window = UnsafeRawBufferPointer(rebasing: stream[at...])
    // The codec alone: an accepted frame round-trips through the encoder.
    if let (frame, length) = try? WebSocketFrameCodec.decode(window, expectMasked: server, maxPayload: 8192) {
      precondition(length >= 2 && length <= window.count && frame.payload.count <= 8192)
      let key: UInt32? =
        server ? UInt32(window[length - frame.payload.count - 4]) << 24
          | UInt32(window[length - frame.payload.count - 3]) << 16
          | UInt32(window[length - frame.payload.count - 2]) << 8 | UInt32(window[length - frame.payload.count - 1])
        : nil
      let again = WebSocketFrameCodec.encode(opcode: frame.opcode, payload: frame.payload, fin: frame.fin, maskKey: key)
      precondition(again.elementsEqual(window[..<length]), "frame does not re-encode to its bytes")
    }
    let step: (event: WebSocketEvent?, length: Int)?
    do throws(WebSocketProtocolViolation) {
      step = try assembler.next(window)
    } catch {
      precondition(WebSocketCloseCode.isValidOnWire(error.code), "violation with an unsendable code")
      return 0
    }
    guard let step else { return 0 }
    precondition(step.length > 0)
    switch step.event {
    case .text(let text)?: precondition(text.utf8.count <= 8192)
    case .binary(let bytes)?: precondition(bytes.count <= 8192)
    case .ping(let p)?, .pong(let p)?: precondition(p.count <= 125)
    case .close(let code, _)?:
      precondition(code == WebSocketCloseCode.noStatus || WebSocketCloseCode.isValidOnWire(code))
      _ = WebSocketFrameCodec.closePayload(code: code, reason: "")
    case nil: break
    }
    at += step.length
  }
  return 0
}
