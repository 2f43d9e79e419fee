import RTCWire
import Testing

@testable import RTC
@testable import SFU

/// The forwarding core without sockets: ``SFUProducer`` → ``SFUConsumer`` → a recording
/// ``SFUDownTrack``, with a recording ``SFUUpstream``, fed synthetic VP8 packets on a synthetic clock
/// (after mediasoup's `TestSimulcastConsumer` and LiveKit's forwarder tests).
@Suite("SFU forwarding core without sockets")
struct SFUForwardingCoreTests {
    static let low = SyntheticVP8Layer(
        index: 0, ssrc: 0x100, width: 320, height: 180, firstSequenceNumber: 1000, firstTimestamp: 10_000,
        firstPictureID: 100, firstTL0PicIdx: 5)
    /// Its sequence number, timestamp, picture ID and TL0PICIDX all wrap around near the switch.
    static let high = SyntheticVP8Layer(
        index: 2, ssrc: 0x300, width: 1280, height: 720, firstSequenceNumber: 65528, firstTimestamp: 4_000_000_000,
        firstPictureID: 32760, firstTL0PicIdx: 250)
    static let start: UInt64 = 1_000_000_000
    static let frame: UInt64 = 33_333_333
    static func time(_ k: Int) -> UInt64 { start + UInt64(k) * frame }

    /// Both layers' sender reports put frame `k` of each at the same wall-clock instant.
    static func setSenderReports(_ upstream: RecordingUpstream) {
        let ntp = NTPTime(seconds: 3_900_000_000, fraction: 0)
        upstream.reports[low.ssrc] = (ntp, low.firstTimestamp, start)
        upstream.reports[high.ssrc] = (ntp, high.firstTimestamp, start)
    }

    /// What the subscriber must see for frame `k`, whichever layer carried it: one continuous stream
    /// numbered from the first frame forwarded (sequence number 1000 + k, timestamp 10 000 + 3000 k,
    /// picture ID 100 + k, TL0PICIDX 5 + k).
    static func expectContinuous(_ sent: RecordingDownTrack.Sent, frame k: Int, layer: SyntheticVP8Layer) {
        #expect(sent.sequenceNumber == 1000 &+ UInt16(k), "frame \(k)")
        #expect(sent.timestamp == 10_000 &+ UInt32(k) * 3000, "frame \(k)")
        #expect(sent.info.pictureID == 100 + UInt16(k), "frame \(k)")
        #expect(sent.info.tl0PicIdx == 5 &+ UInt8(k), "frame \(k)")
        #expect(sent.sourceLayer == layer.index, "frame \(k)")
        #expect(sent.sourceSequenceNumber == layer.sequenceNumber(k), "frame \(k)")
        #expect(sent.marker)
    }

    @Test func layerSwitchWithLossAndReorderingKeepsOneContinuousStream() async throws {
        let rig = SFUUnitRig(rids: ["q", "h", "f"])
        let (producer, upstream) = (rig.producer, rig.upstream)
        Self.setSenderReports(upstream)
        let (consumer, track) = rig.consume(quality: .low)
        let (low, high) = (Self.low, Self.high)

        // Nothing forwarded before the target layer's key frame; the first delta asks for one.
        try producer.receive(low.packet(0, keyframe: false), rid: "q", arrival: Self.time(0))
        try producer.receive(high.packet(0, keyframe: false), rid: "f", arrival: Self.time(0))
        #expect(track.sent.isEmpty)
        #expect(upstream.keyframeRequests == ["q"])
        #expect(producer.keyframeRequests.isPending(0))

        // The key frame starts the stream and clears the request.
        try producer.receive(low.packet(1, keyframe: true), rid: "q", arrival: Self.time(1))
        try producer.receive(high.packet(1, keyframe: false), rid: "f", arrival: Self.time(1))
        #expect(!producer.keyframeRequests.isPending(0))
        #expect(consumer.currentLayer == 0)

        // Frame 3 is lost upstream, 5 arrives before 4.
        for k in [2, 5, 4] {
            try producer.receive(low.packet(k, keyframe: false), rid: "q", arrival: Self.time(k))
            try producer.receive(high.packet(k, keyframe: false), rid: "f", arrival: Self.time(k))
        }
        // The subscriber asks for the high layer: a PLI for it, and the low layer goes on until its key frame.
        consumer.quality = .high
        consumer.retarget(now: Self.time(5))
        #expect(consumer.targetLayer == 2)
        #expect(upstream.keyframeRequests == ["q", "f"])
        for k in [6, 7] {
            try producer.receive(low.packet(k, keyframe: false), rid: "q", arrival: Self.time(k))
            try producer.receive(high.packet(k, keyframe: false), rid: "f", arrival: Self.time(k))
        }
        #expect(upstream.keyframeRequests == ["q", "f"], "the pending request is throttled, not repeated per packet")

        // The high layer's key frame arrives 100 ms late (a loop-clock guess would be off by 9000
        // ticks): the switch lines timestamps up by the sender reports.
        try producer.receive(high.packet(8, keyframe: true), rid: "f", arrival: Self.time(8) + 100_000_000)
        try producer.receive(low.packet(8, keyframe: false), rid: "q", arrival: Self.time(8) + 100_000_000)
        #expect(!producer.keyframeRequests.isPending(2))
        #expect(consumer.currentLayer == 2)
        #expect(consumer.layerSwitches == 1)

        // After the switch: a late packet from before it is refused, frame 10 is lost, 12 comes before
        // 11, and the upstream repair of 10 arrives last.
        try producer.receive(high.packet(9, keyframe: false), rid: "f", arrival: Self.time(9) + 100_000_000)
        try producer.receive(high.packet(7, keyframe: false), rid: "f", arrival: Self.time(9) + 100_000_000)
        for k in [12, 11, 13] {
            try producer.receive(high.packet(k, keyframe: false), rid: "f", arrival: Self.time(k) + 100_000_000)
            try producer.receive(low.packet(k, keyframe: false), rid: "q", arrival: Self.time(k) + 100_000_000)
        }
        try producer.receive(high.packet(10, keyframe: false), rid: "f", arrival: Self.time(14), repair: true)

        let expected: [(SyntheticVP8Layer, Int)] = [
            (low, 1), (low, 2), (low, 5), (low, 4), (low, 6), (low, 7),
            (high, 8), (high, 9), (high, 12), (high, 11), (high, 13), (high, 10),
        ]
        #expect(track.sent.count == expected.count)
        for (sent, (layer, k)) in zip(track.sent, expected) {
            Self.expectContinuous(sent, frame: k, layer: layer)
        }
        #expect(upstream.keyframeRequests == ["q", "f"])
        await rig.close()
    }

    /// A switch down on an overloaded path stops the current layer at once (its packets would keep the
    /// bottleneck queue full and the lower layer's key frame would be lost with them); a switch down
    /// for any other reason keeps the current layer until the target's key frame, as before.
    @Test func aSwitchDownOnAnOverloadedPathStopsTheCurrentLayerAtOnce() async throws {
        let rig = SFUUnitRig(rids: ["q", "h", "f"])
        let (producer, upstream) = (rig.producer, rig.upstream)
        Self.setSenderReports(upstream)
        let (low, high) = (Self.low, Self.high)
        let (calm, calmTrack) = rig.consume(quality: .high)
        let (overloaded, overloadedTrack) = rig.consume(quality: .high)
        for consumer in [calm, overloaded] { consumer.allocate(position: 2, now: Self.time(0)) }
        for k in 0...2 {
            try producer.receive(high.packet(k, keyframe: k == 0), rid: "f", arrival: Self.time(k))
            try producer.receive(low.packet(k, keyframe: k == 0), rid: "q", arrival: Self.time(k))
        }
        #expect(calmTrack.sent.count == 3 && overloadedTrack.sent.count == 3)
        calm.allocate(position: 0, now: Self.time(3))
        overloaded.allocate(position: 0, now: Self.time(3), overloaded: true)
        #expect(upstream.keyframeRequests.last == "q")
        for k in 3...4 {
            try producer.receive(high.packet(k, keyframe: false), rid: "f", arrival: Self.time(k))
            try producer.receive(low.packet(k, keyframe: false), rid: "q", arrival: Self.time(k))
        }
        #expect(calmTrack.sent.count == 5, "the current layer goes on until the target's key frame")
        #expect(overloadedTrack.sent.count == 3, "held back on the overloaded path")
        // Nor are its NACKs repaired meanwhile.
        overloaded.handleNACK([overloadedTrack.sent[2].sequenceNumber], now: Self.time(4))
        #expect(overloadedTrack.retransmissions.isEmpty)
        // The low layer's key frame: both switch, and the stream continues.
        try producer.receive(low.packet(5, keyframe: true), rid: "q", arrival: Self.time(5))
        #expect(calm.currentLayer == 0 && overloaded.currentLayer == 0)
        #expect(overloadedTrack.sent.count == 4 && overloadedTrack.sent.last?.sourceLayer == low.index)
        #expect(overloaded.dropCurrentUntil == 0)
        // The layer left behind is not repaired any more; the new one is.
        calm.handleNACK([calmTrack.sent[4].sequenceNumber], now: Self.time(6))
        #expect(calmTrack.retransmissions.isEmpty)
        calm.handleNACK([calmTrack.sent[5].sequenceNumber], now: Self.time(6))
        #expect(calmTrack.retransmissions.count == 1)
        await rig.close()
    }

    /// A current layer that stopped at its publisher (an uplink that dropped it) gives way to the
    /// next lower layer's key frame at once, before the allocator measures the stop; a short gap does
    /// not, and the layer comes back at its own key frame.
    @Test func aLowerKeyframeTakesOverFromAStalledLayer() async throws {
        let rig = SFUUnitRig(rids: ["q", "h", "f"])
        let (producer, upstream) = (rig.producer, rig.upstream)
        Self.setSenderReports(upstream)
        let (low, high) = (Self.low, Self.high)
        let (consumer, track) = rig.consume(quality: .high)
        consumer.allocate(position: 2, now: Self.time(0))
        for k in 0...2 {
            try producer.receive(high.packet(k, keyframe: k == 0), rid: "f", arrival: Self.time(k))
            try producer.receive(low.packet(k, keyframe: false), rid: "q", arrival: Self.time(k))
        }
        #expect(consumer.currentLayer == 2 && track.sent.count == 3)
        // The top layer stops. A low key frame 200 ms after its last packet: too soon to call it stopped.
        try producer.receive(low.packet(8, keyframe: true), rid: "q", arrival: Self.time(2) + 200_000_000)
        #expect(consumer.currentLayer == 2 && track.sent.count == 3)
        // The next one, 400 ms after: the low layer takes over, the stream continuous.
        try producer.receive(low.packet(14, keyframe: true), rid: "q", arrival: Self.time(2) + 400_000_000)
        #expect(consumer.currentLayer == 0 && consumer.targetLayer == 2)
        #expect(track.sent.count == 4 && track.sent.last?.sourceLayer == low.index)
        #expect(track.sent.last?.sequenceNumber == track.sent[2].sequenceNumber &+ 1)
        // The top layer resumes at its key frame (still the target).
        try producer.receive(high.packet(20, keyframe: true), rid: "f", arrival: Self.time(20))
        #expect(consumer.currentLayer == 2 && consumer.layerSwitches == 2)
        await rig.close()
    }

    /// A key frame that never comes does not hold the current layer back for good.
    @Test func theCurrentLayerHeldBackFlowsAgainAfterALimit() async throws {
        let rig = SFUUnitRig(rids: ["q", "h", "f"])
        let (producer, high) = (rig.producer, Self.high)
        let (consumer, track) = rig.consume(quality: .high)
        consumer.allocate(position: 2, now: Self.time(0))
        try producer.receive(high.packet(0, keyframe: true), rid: "f", arrival: Self.time(0))
        consumer.allocate(position: 0, now: Self.time(1), overloaded: true)
        try producer.receive(high.packet(1, keyframe: false), rid: "f", arrival: Self.time(1))
        #expect(track.sent.count == 1)
        let late = Self.time(1) + SFUConsumer.dropCurrentLimit
        try producer.receive(high.packet(2, keyframe: false), rid: "f", arrival: late)
        #expect(track.sent.count == 2 && consumer.dropCurrentUntil == 0)
        await rig.close()
    }

    @Test func nacksAreAnsweredFromTheProducersSharedBuffer() async throws {
        let rig = SFUUnitRig(rids: ["q", "h", "f"])
        let producer = rig.producer
        Self.setSenderReports(rig.upstream)
        let (first, firstTrack) = rig.consume(quality: .low)
        let (second, secondTrack) = rig.consume(quality: .low)
        let (low, high) = (Self.low, Self.high)

        try producer.receive(low.packet(0, keyframe: true), rid: "q", arrival: Self.time(0))
        for k in 1...5 where k != 3 {  // frame 3 never arrives
            try producer.receive(low.packet(k, keyframe: false), rid: "q", arrival: Self.time(k))
        }
        first.quality = .high
        first.retarget(now: Self.time(5))
        for k in 6...9 {
            try producer.receive(high.packet(k, keyframe: k == 6), rid: "f", arrival: Self.time(k))
            try producer.receive(low.packet(k, keyframe: false), rid: "q", arrival: Self.time(k))
        }
        #expect(first.currentLayer == 2)
        #expect(second.currentLayer == 0)
        let sentByFirst = Dictionary(firstTrack.sent.map { ($0.sequenceNumber, $0) }) { a, _ in a }
        let sentBySecond = Dictionary(secondTrack.sent.map { ($0.sequenceNumber, $0) }) { a, _ in a }

        // One packet of each layer, and one that never arrived upstream.
        let now = Self.time(10)
        first.handleNACK([1002, 1003, 1007], now: now)
        #expect(firstTrack.retransmissions.map(\.sequenceNumber) == [1002, 1007])
        #expect(firstTrack.retransmissions.first == sentByFirst[1002], "the same bytes, rewrites and timestamp")
        #expect(firstTrack.retransmissions.last == sentByFirst[1007])
        #expect(firstTrack.retransmissions.last?.sourceLayer == high.index)
        #expect(first.nackMisses == 1)

        // A repeated NACK while the resend may still be in flight is not doubled; later it is.
        first.handleNACK([1002], now: now + 10_000_000)
        #expect(firstTrack.retransmissions.count == 2)
        #expect(first.nackMisses == 2)
        first.handleNACK([1002], now: now + 60_000_000)
        #expect(firstTrack.retransmissions.count == 3)

        // The other consumer (still on the low layer) is answered from the same buffer.
        second.handleNACK([1007], now: now)
        #expect(secondTrack.retransmissions.count == 1)
        #expect(secondTrack.retransmissions.first == sentBySecond[1007])
        #expect(secondTrack.retransmissions.first?.sourceLayer == low.index)
        #expect(producer.buffers.count == 3, "one buffer per layer, none per consumer")
        await rig.close()
    }

    @Test func keyframeRequestsReachTheUpstreamAndStopWhenTheKeyframeArrives() async throws {
        let rig = SFUUnitRig(rids: [])
        let (producer, upstream) = (rig.producer, rig.upstream)
        let (consumer, track) = rig.consume(quality: .high)
        let layer = Self.low
        let interval = rig.sfu.configuration.keyframeRequestInterval

        try producer.receive(layer.packet(0, keyframe: true), rid: nil, arrival: Self.time(0))
        #expect(track.sent.count == 1)
        #expect(upstream.keyframeRequests.isEmpty)

        // The subscriber's PLI reaches the publisher at once; a second one within the interval waits.
        let asked = Self.time(1)
        consumer.keyframeRequested(now: asked)
        #expect(upstream.keyframeRequests == [nil])
        consumer.keyframeRequested(now: asked + 100_000_000)
        #expect(upstream.keyframeRequests == [nil])
        #expect(producer.keyframeRequests.isPending(0))

        // The key frame does not come: a delta after the interval brings the retry.
        try producer.receive(layer.packet(1, keyframe: false), rid: nil, arrival: asked + interval / 2)
        #expect(upstream.keyframeRequests.count == 1)
        try producer.receive(layer.packet(2, keyframe: false), rid: nil, arrival: asked + interval + 1)
        #expect(upstream.keyframeRequests.count == 2)

        // The key frame clears the request: no more PLIs, however long the deltas go on.
        try producer.receive(layer.packet(3, keyframe: true), rid: nil, arrival: asked + interval + 2)
        #expect(!producer.keyframeRequests.isPending(0))
        for k in 4..<10 {
            try producer.receive(layer.packet(k, keyframe: false), rid: nil, arrival: asked + UInt64(k) * interval)
        }
        #expect(upstream.keyframeRequests.count == 2)
        #expect(consumer.plisReceived == 2)
        #expect(track.sent.count == 10)
        await rig.close()
    }

    @Test func audioIsForwardedWithItsLevelAndTheFirstPacketsNumbering() async throws {
        let rig = SFUUnitRig(audioLevelID: 3)
        let (consumer, track) = rig.consume(quality: .high)
        // 30001 is lost upstream; 29999, from before the first packet forwarded, arrives late.
        let order: [UInt16] = [30000, 30002, 29999, 30003]
        for (i, seq) in order.enumerated() {
            try rig.producer.receive(
                syntheticOpusPacket(
                    ssrc: 0x500, sequenceNumber: seq, timestamp: 960 * UInt32(seq), extensionID: 3,
                    level: UInt8(10 + i), voice: i % 2 == 0), rid: nil, arrival: Self.time(i))
        }
        #expect(track.sent.map(\.sequenceNumber) == [30000, 30002, 30003])
        let timestamps: [UInt32] = [30000, 30002, 30003].map { 960 * $0 }
        #expect(track.sent.map(\.timestamp) == timestamps)
        let levels: [UInt8?] = [10, 11, 13]
        #expect(track.sent.map { $0.audioLevel?.level } == levels)
        let voice: [Bool?] = [true, false, false]
        #expect(track.sent.map { $0.audioLevel?.voiceActivity } == voice)
        #expect(consumer.packetsDropped == 1)
        #expect(rig.producer.buffers.isEmpty, "audio is never NACKed: no shared buffer")
        await rig.close()
    }
}
