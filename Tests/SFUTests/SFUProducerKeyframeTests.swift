import RTCWire
import Testing

@testable import RTC
@testable import SFU

/// The producer's key-frame requests against packets fed straight into it, on the SFU's loop.
@Suite("SFU producer key-frame requests")
struct SFUProducerKeyframeTests {
    /// One plaintext VP8 RTP packet (delta frame unless `keyframe`) handed to `body` as the SFU sees it.
    static func withPacket(
        ssrc: UInt32, sequenceNumber: UInt16, keyframe: Bool, arrival: UInt64,
        _ body: (ReceivedRTPPacket) -> Void
    ) throws {
        var bytes: [UInt8] = [0x80, 96, UInt8(sequenceNumber >> 8), UInt8(sequenceNumber & 0xFF), 0, 0, 0, 0]
        bytes += [UInt8(ssrc >> 24), UInt8((ssrc >> 16) & 0xFF), UInt8((ssrc >> 8) & 0xFF), UInt8(ssrc & 0xFF)]
        bytes += [0x10, keyframe ? 0x00 : 0x01, 0, 0]  // VP8 descriptor (S=1) and a frame tag
        try bytes.withUnsafeBytes { raw in
            let header = try RTPHeader.parse(raw)
            var info = RTPPayloadInfo()
            info.isKeyframe = keyframe
            info.headerLength = 1
            body(
                ReceivedRTPPacket(
                    packet: raw, header: header, mediaSSRC: ssrc, sequenceNumber: sequenceNumber,
                    payload: UnsafeRawBufferPointer(rebasing: raw[12...]), info: info, isRepair: false,
                    arrival: arrival))
        }
    }

    @Test func aRequestMadeBeforeALayersFirstPacketIsSentAgainOnIt() async throws {
        let sfu = SFU()
        let counts = try await sfu.loop.submit { [sfu] () throws -> (before: UInt64, after: UInt64, next: UInt64) in
            let publisher = try PeerConnection(loop: sfu.loop)
            let transceiver = publisher.addTransceiver(kind: .video, direction: .recvonly)
            let producer = SFUProducer(
                id: "p-1", participantID: "alice", kind: .video, source: .webcam, transceiver: transceiver,
                publisher: publisher, sfu: sfu)
            let now: UInt64 = 10_000_000_000
            // A consumer needs a key frame before any packet of the layer arrived: the PLI has no
            // stream to go out on.
            producer.requestKeyframe(layer: 0, now: now)
            let before = producer.plisSent
            // The layer's first packet (a delta frame) arrives 100 ms later: ask again now, not
            // when the 500 ms interval ends.
            try Self.withPacket(ssrc: 0xABCD, sequenceNumber: 1, keyframe: false, arrival: now + 100_000_000) {
                producer.receive(rid: nil, $0)
            }
            let after = producer.plisSent
            // Later packets of the same layer inside the interval add nothing.
            try Self.withPacket(ssrc: 0xABCD, sequenceNumber: 2, keyframe: false, arrival: now + 150_000_000) {
                producer.receive(rid: nil, $0)
            }
            let next = producer.plisSent
            producer.closed = true
            publisher.close()
            return (before, after, next)
        }
        #expect(counts.before == 1)
        #expect(counts.after == 2, "the first packet of a layer with a pending request sends the PLI again")
        #expect(counts.next == 2)
        await sfu.shutdown()
    }
}
