import Media
import RTCWire
import Testing

@testable import RTC

private let ms: UInt64 = 1_000_000

private final class Collector: RTPFrameAssemblyContext {
    var givenUp: Set<Int64> = []
    var consumesFrames = true
    var frames: [EncodedFrame] = []
    func isGivenUp(_ ext: Int64) -> Bool { givenUp.contains(ext) }
    func giveUp(_ ext: Int64) { givenUp.insert(ext) }
    func forgetHoles(before ext: Int64) {}
    func needKeyframe() {}
    func keyframeDelivered() {}
    func deliver(_ frame: EncodedFrame, arrival: UInt64) { frames.append(frame) }
}

/// What the agent publishes in VP9 and AV1, end to end without a network: the real encoders, the
/// sender's packetizers (small packets, so key frames and large OBUs fragment), the receive path's
/// payload readers and frame assembler, and libavcodec decoding what comes out.
@Suite struct VideoPublishRoundTripTests {
    struct Sent {
        var frames: [EncodedFrame] = []
        /// (sequence number, marker, timestamp, payload) of every packet, in send order.
        var packets: [(seq: UInt16, marker: Bool, timestamp: UInt32, payload: [UInt8])] = []
    }

    func encodeAndSend(_ codec: MediaCodec, frames count: Int, keyframeAt: Int) throws -> Sent {
        let encoder = try VideoEncoders.make(
            codec: codec, width: 320, height: 180, fps: 30, bitrate: 300_000, keyframeInterval: 1000)
        let pattern = TestPatternSource(width: 320, height: 180)
        let sender = RTPSender(
            ssrc: 0x1234, payloadType: 98, codec: codec, maxPayloadSize: 300, cname: "c", initialSequenceNumber: 100,
            initialTimestamp: 0, seed: 7)
        var sent = Sent()
        for i in 0..<count {
            if i == keyframeAt { encoder.forceKeyframe() }
            for frame in try encoder.encode(i420: pattern.frame(at: i)) {
                sent.frames.append(frame)
                sender.send(frame, now: UInt64(i) * 33 * ms) { b, n in
                    let packet = UnsafeRawBufferPointer(rebasing: b[0..<n])
                    guard let h = try? RTPHeader.parse(packet) else { return }
                    let payload = Array(packet[h.payloadOffset..<(h.payloadOffset + h.payloadLength)])
                    sent.packets.append((h.sequenceNumber, h.marker, h.timestamp, payload))
                }
            }
        }
        #expect(sender.stats.framesFailed == 0)
        return sent
    }

    func assemble(_ codec: MediaCodec, _ packets: [(seq: UInt16, marker: Bool, timestamp: UInt32, payload: [UInt8])])
        throws -> [EncodedFrame]
    {
        let assembler = VideoFrameAssembler(capacity: 512, reorderWait: 50 * ms, codec: codec)
        let collector = Collector()
        for p in packets {
            try p.payload.withUnsafeBytes { payload in
                let info = try codec.inspect(payload)
                let ext = 0x1_0000 + Int64(p.seq)
                guard !assembler.isLate(ext, now: 0) else { return }
                assembler.insert(
                    RTPAssemblyPacket(ext: ext, timestamp: p.timestamp, marker: p.marker, payload: payload, info: info),
                    now: 0, context: collector)
            }
        }
        return collector.frames
    }

    func checkRoundTrip(_ codec: MediaCodec) throws {
        let sent = try encodeAndSend(codec, frames: 30, keyframeAt: 12)
        #expect(sent.frames.count == 30)
        #expect(sent.frames.enumerated().filter(\.element.isKeyframe).map(\.offset) == [0, 12])
        #expect(sent.packets.allSatisfy { $0.payload.count <= 300 })
        // The requested key frame does not fit one 300-byte packet: the split across packets is
        // exercised (the first picture of the pattern is nearly flat and small).
        #expect(sent.packets.filter { $0.timestamp == sent.frames[12].timestamp }.count > 2)
        #expect(sent.packets.filter(\.marker).count == 30)

        // The first packet of each key frame reads as one, with the picture size.
        for key in sent.frames.filter(\.isKeyframe) {
            let first = try #require(sent.packets.first { $0.timestamp == key.timestamp })
            let info = try first.payload.withUnsafeBytes { try codec.inspect($0) }
            #expect(info.isKeyframe && info.startsFrame)
            #expect(info.width == 320 && info.height == 180)
        }

        let received = try assemble(codec, sent.packets)
        #expect(received.map(\.data) == sent.frames.map(\.data))
        #expect(received.map(\.isKeyframe) == sent.frames.map(\.isKeyframe))

        // Reordered neighbours (fragments of one frame and packets of two) give the same frames.
        var shuffled = sent.packets
        var i = 1
        while i + 1 < shuffled.count {
            shuffled.swapAt(i, i + 1)
            i += 3
        }
        #expect(try assemble(codec, shuffled).map(\.data) == sent.frames.map(\.data))

        // libavcodec decodes every frame to a 320x180 picture.
        let decoder = try VideoDecoder(codec: codec)
        var pictures = 0
        for frame in received {
            if let picture = try decoder.decode(frame.data) {
                #expect(picture.width == 320 && picture.height == 180)
                pictures += 1
            }
        }
        if try decoder.finish() != nil { pictures += 1 }
        #expect(pictures >= 1)
        #expect(pictures <= 30)
    }

    @Test func vp9FramesSurviveTheNonFlexibleModeAndDecode() throws {
        try checkRoundTrip(.vp9)
        // Every packet carries the picture ID and TL0PICIDX (libwebrtc drops non-flexible frames
        // without it); both count up by one a frame.
        let sent = try encodeAndSend(.vp9, frames: 4, keyframeAt: 100)
        var ids: [UInt16] = []
        var tl0s: [UInt8] = []
        for p in sent.packets where p.payload[0] & 0x08 != 0 {  // B: a frame's first packet
            let info = try p.payload.withUnsafeBytes { try VP9PayloadFormat.inspect($0) }
            #expect(info.hasPictureID && info.pictureIDIs15Bit && info.hasTL0PicIdx && info.temporalLayer == 0)
            ids.append(info.pictureID)
            tl0s.append(info.tl0PicIdx)
        }
        #expect(ids.count == 4)
        #expect(zip(ids, ids.dropFirst()).allSatisfy { ($1 &- $0) & 0x7FFF == 1 })
        #expect(zip(tl0s, tl0s.dropFirst()).allSatisfy { $1 &- $0 == 1 })
    }

    @Test func av1TemporalUnitsSurviveOBUAggregationAndDecode() throws {
        try checkRoundTrip(.av1)
        // N only on a key frame's first packet; Z and Y agree from packet to packet.
        let sent = try encodeAndSend(.av1, frames: 3, keyframeAt: 100)
        var open = false
        for (k, p) in sent.packets.enumerated() {
            let h = p.payload[0]
            #expect((h & 0x08 != 0) == (k == 0))
            #expect((h & 0x80 != 0) == open)
            open = h & 0x40 != 0
            if p.marker { #expect(!open) }
        }
    }
}
