// library: RTC
import RTCWire

@testable import RTC

/// libFuzzer entry for the RTP send engine's handling of peer feedback: NACK (resend from history,
/// as RTX or not), PLI, FIR and report blocks (RTT), interleaved with frames it sends.
///
/// Input: one option byte (bit 0: VP8 or Opus; bit 1: RTX; bits 2-7: history size), then records
/// of [length][milliseconds since the previous record][bytes]. A record whose first byte is 0x80-0xBF
/// and second byte 200-206 is RTCP for the sender (SSRC 0x11111111); any other record is a frame to
/// send. Every packet the sender emits must parse as RTP with its SSRC.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  guard size >= 1 else { return 0 }
  let input = UnsafeBufferPointer(start: data, count: size)
  let options = input[0]
  let codec: MediaCodec = options & 1 == 0 ? .vp8 : .opus
  let rtx: (payloadType: UInt8, ssrc: UInt32)? = options & 2 != 0 ? (97, 0x2222_2222) : nil
  let sender = RTPSender(
    ssrc: 0x1111_1111, payloadType: codec == .vp8 ? 96 : 111, codec: codec, rtx: rtx,
    extensions: RTPSendExtensions(), mid: "0", maxPayloadSize: 200, historySize: 1 + Int(options >> 2) * 8,
    cname: "fuzz", initialSequenceNumber: 65_500, initialTimestamp: 0, seed: 1)
  func check(_ buffer: UnsafeMutableRawBufferPointer, _ length: Int) {
    precondition(length > 0 && length <= buffer.count)
    let bytes = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[0..<length])
    guard let header = try? RTPHeader.parse(bytes) else { fatalError("sender emitted a packet that does not parse") }
    precondition(header.ssrc == 0x1111_1111 || header.ssrc == rtx?.ssrc, "packet with a foreign SSRC")
  }
  var now: UInt64 = 1_000_000_000
  var timestamp: UInt32 = 0
  var at = 1
  while at + 2 <= size {
    let length = Int(input[at])
    now &+= UInt64(input[at + 1]) * 1_000_000
    at += 2
    let end = min(size, at + length)
    let record = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(input)[at..<end])
    at = end
    if record.count >= 2, record[0] & 0xC0 == 0x80, (200...206).contains(record[1]) {
      // The same RTCPRouter a PeerConnection runs every received compound through.
      try? sender.handleRTCP(record, now: now) { check($0, $1) }
    } else {
      timestamp &+= codec == .vp8 ? 3000 : 960
      let frame = EncodedFrame(
        codec: codec, data: Array(record), timestamp: timestamp, isKeyframe: record.first.map { $0 & 1 == 0 } ?? false,
        duration: codec == .vp8 ? 3000 : 960)
      sender.send(frame, now: now) { check($0, $1) }
    }
    sender.tick(now: now) { buffer, length in
      precondition(length > 0 && length <= buffer.count)
      precondition((try? RTCPCompound.parse(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))) != nil)
    }
  }
  return 0
}
