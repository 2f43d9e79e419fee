import RTCWire
import Testing

@testable import RTC
@testable import SFU

/// The producer's key-frame requests against packets fed straight into it, on a recording upstream.
@Suite("SFU producer key-frame requests")
struct SFUProducerKeyframeTests {
    @Test func aRequestMadeBeforeALayersFirstPacketIsSentAgainOnIt() async throws {
        let rig = SFUUnitRig(rids: [])
        let producer = rig.producer
        let layer = SyntheticVP8Layer(
            index: 0, ssrc: 0xABCD, width: 320, height: 180, firstSequenceNumber: 1, firstTimestamp: 0,
            firstPictureID: 0, firstTL0PicIdx: 0)
        let now: UInt64 = 10_000_000_000
        // A consumer needs a key frame before any packet of the layer arrived: the PLI has no
        // stream to go out on.
        producer.requestKeyframe(layer: 0, now: now)
        #expect(producer.plisSent == 1)
        // The layer's first packet (a delta frame) arrives 100 ms later: ask again now, not
        // when the request interval ends.
        try producer.receive(layer.packet(0, keyframe: false), rid: nil, arrival: now + 100_000_000)
        #expect(producer.plisSent == 2, "the first packet of a layer with a pending request sends the PLI again")
        // Later packets of the same layer inside the interval add nothing.
        try producer.receive(layer.packet(1, keyframe: false), rid: nil, arrival: now + 150_000_000)
        #expect(producer.plisSent == 2)
        #expect(rig.upstream.keyframeRequests == [nil, nil])
        await rig.close()
    }
}
