// library: RTC
import RTCWire

@testable import RTC

/// libFuzzer entry for the RTP receive engine: the jitter buffer, frame assembly, NACK/PLI
/// bookkeeping and receiver reports, fed a stream of packets as a peer would send them.
///
/// Input: one option byte (bit 0: video or Opus; bit 1: RTX bound; bits 2-7: buffer size; bit 7 also
/// H.264 rather than VP8), then
/// records of [length][milliseconds since the previous packet][packet]. The SSRC of each packet is
/// set to the media or RTX SSRC (by its top bit) so it reaches the engine. Every RTCP compound the
/// receiver emits must parse.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let input = UnsafeBufferPointer(start: data, count: size)
    let options = input[0]
    // Bit 0: audio (Opus); else bit 7 picks H.264 over VP8 (same payload type, so a corpus serves both).
    let codec: MediaCodec = options & 1 == 0 ? (options & 0x80 != 0 ? .h264 : .vp8) : .opus
    var receiverOptions = RTPReceiverOptions()
    receiverOptions.bufferPackets = 16 + Int(options >> 2) * 8
    let receiver = RTPReceiver(
        ssrc: 0x1111_1111, codec: codec, payloadType: codec == .opus ? 111 : 96,
        rtxPayloadType: options & 2 != 0 ? 97 : nil, rtxSSRC: options & 2 != 0 ? 0x2222_2222 : nil,
        localSSRC: 0x3333_3333, options: receiverOptions, seed: 1)
    var frames = 0
    receiver.onFrame = { frame, _ in
        frames += 1
        precondition(frame.codec == codec)
    }
    var now: UInt64 = 1_000_000_000
    var packet = [UInt8](repeating: 0, count: 256)
    var at = 1
    while at + 2 <= size {
        let length = Int(input[at])
        now &+= UInt64(input[at + 1]) * 1_000_000
        at += 2
        let end = min(size, at + length)
        let count = end - at
        packet.withUnsafeMutableBytes { buffer in
            for i in 0..<count { buffer[i] = input[at + i] }
            if count >= 12 {
                let ssrc: UInt32 = buffer[8] & 0x80 != 0 && options & 2 != 0 ? 0x2222_2222 : 0x1111_1111
                for i in 0..<4 { buffer[8 + i] = UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * UInt32(i))) }
            }
            let bytes = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[0..<count])
            if let header = try? RTPHeader.parse(bytes) {
                receiver.receive(bytes, header: header, now: now)
            } else if count >= 8 {
                // Not RTP: use it as a sender report for the timing path.
                receiver.handleSenderReport(
                    ntp: UInt64(bytes.load(fromByteOffset: 0, as: UInt64.self)), rtpTimestamp: UInt32(count), now: now)
            }
        }
        at = end
        receiver.tick(now: now) { buffer, length in
            precondition(length > 0 && length <= buffer.count)
            guard (try? RTCPCompound.parse(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))) != nil else {
                fatalError("receiver emitted RTCP that does not parse")
            }
        }
        if input[at - 1] == 0xFF { receiver.requestKeyframe() }
    }
    _ = frames
    return 0
}
