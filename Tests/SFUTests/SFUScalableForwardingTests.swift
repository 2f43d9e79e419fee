import RTCWire
import Testing

@testable import RTC
@testable import SFU

/// A synthetic VP9 L3T3 publisher (one SSRC, as Chromium sends `scalabilityMode: 'L3T3_KEY'`):
/// non-flexible descriptors with a 15-bit picture ID, layer indices and TL0PICIDX; the temporal
/// pattern 0, 2, 1, 2; per picture four packets: S0 in two, S1 and S2 in one each; the key picture's
/// first packet carries the scalability structure (320×180, 640×360, 1280×720). Sequence number,
/// timestamp and picture ID wrap around within the first pictures. The last three payload bytes
/// are the SID and the source sequence number.
struct SyntheticVP9SVC {
    let ssrc: UInt32 = 0x900
    let firstSequenceNumber: UInt16 = 65530
    let firstTimestamp: UInt32 = 4_294_960_000
    let firstPictureID: UInt16 = 32765
    static let packetsPerPicture = 4
    /// Packet `i` of a picture: its spatial layer, whether it begins and ends that layer frame.
    static let layout: [(sid: UInt8, begins: Bool, ends: Bool)] = [
        (0, true, false), (0, false, true), (1, true, true), (2, true, true),
    ]

    func temporalLayer(_ k: Int) -> UInt8 { [0, 2, 1, 2][k % 4] }
    func sequenceNumber(_ k: Int, _ i: Int) -> UInt16 {
        firstSequenceNumber &+ UInt16(truncatingIfNeeded: k * Self.packetsPerPicture + i)
    }
    func timestamp(_ k: Int) -> UInt32 { firstTimestamp &+ UInt32(k) * 3000 }

    /// Packet `i` of picture `k`; `switchingUp` sets the U bit on every layer frame of the picture.
    func packet(_ k: Int, _ i: Int, keyframe: Bool = false, switchingUp: Bool = false) -> [UInt8] {
        let (sid, begins, ends) = Self.layout[i]
        let seq = sequenceNumber(k, i)
        var bytes: [UInt8] = [
            0x80, (i == Self.packetsPerPicture - 1 ? 0x80 : 0) | 98, UInt8(seq >> 8), UInt8(seq & 0xFF),
        ]
        bytes += withUnsafeBytes(of: timestamp(k).bigEndian, Array.init)
        bytes += withUnsafeBytes(of: ssrc.bigEndian, Array.init)
        let structure = keyframe && i == 0
        var b0: UInt8 = 0x80 | 0x20  // I, L; non-flexible
        if !keyframe { b0 |= 0x40 }  // P
        if begins { b0 |= 0x08 }
        if ends { b0 |= 0x04 }
        if structure { b0 |= 0x02 }
        let pid = (firstPictureID &+ UInt16(k)) & 0x7FFF
        let tid = temporalLayer(k)
        let layer = tid << 5 | (switchingUp ? 0x10 : 0) | sid << 1 | (keyframe && sid > 0 ? 1 : 0)
        bytes += [b0, 0x80 | UInt8(pid >> 8), UInt8(pid & 0xFF), layer, UInt8(truncatingIfNeeded: 40 + k / 4)]
        if structure {
            bytes += [2 << 5 | 0x10]  // N_S = 2 (three layers), Y
            for (w, h) in [(320, 180), (640, 360), (1280, 720)] as [(UInt16, UInt16)] {
                bytes += [UInt8(w >> 8), UInt8(w & 0xFF), UInt8(h >> 8), UInt8(h & 0xFF)]
            }
        }
        bytes += [0xAA, 0xBB, sid, UInt8(seq >> 8), UInt8(seq & 0xFF)]
        return bytes
    }

    /// Every packet of picture `k`, in order.
    func picture(_ k: Int, keyframe: Bool = false, switchingUp: Bool = false) -> [[UInt8]] {
        (0..<Self.packetsPerPicture).map { packet(k, $0, keyframe: keyframe, switchingUp: switchingUp) }
    }
}

extension SFUUnitRig {
    /// A single-encoding video producer of `codec`.
    init(codec: MediaCodec, sfu: SFU = SFU()) {
        self.sfu = sfu
        producer = SFUProducer(
            id: "p-1", participantID: "alice", kind: .video, source: .webcam, mid: "0", rids: [], upstream: upstream,
            sfu: sfu, codec: codec)
    }
}

/// VP9 SVC forwarding without sockets (issue 35, item 2): each consumer gets the spatial and temporal
/// layers it asked for out of one stream, as one gap-free stream with the marker on its pictures' ends.
@Suite("SFU scalable (VP9 SVC) forwarding")
struct SFUScalableForwardingTests {
    static let svc = SyntheticVP9SVC()
    static func time(_ k: Int) -> UInt64 { 1_000_000_000 + UInt64(k) * 33_333_333 }

    static func feed(_ producer: SFUProducer, _ k: Int, keyframe: Bool = false, switchingUp: Bool = false) throws {
        for p in svc.picture(k, keyframe: keyframe, switchingUp: switchingUp) {
            try producer.receive(p, rid: nil, arrival: time(k))
        }
    }

    /// The VP9 descriptor of a sent packet (the recording track reads payloads as VP8).
    static func vp9(_ sent: RecordingDownTrack.Sent) throws -> RTPPayloadInfo {
        try sent.payload.withUnsafeBytes { try VP9PayloadFormat.inspect($0) }
    }

    /// Outgoing sequence numbers are consecutive from the first one (wrapping).
    static func expectGapFree(_ sent: [RecordingDownTrack.Sent], _ label: String) {
        guard let first = sent.first else { return }
        for (n, s) in sent.enumerated() {
            #expect(s.sequenceNumber == first.sequenceNumber &+ UInt16(n), "\(label): packet \(n)")
        }
    }

    @Test func eachConsumerGetsItsSpatialLayersWithTheMarkerOnItsPictureEnd() throws {
        let rig = SFUUnitRig(codec: .vp9)
        let (low, lowTrack) = rig.consume(quality: .low)
        let (medium, mediumTrack) = rig.consume(quality: .medium)
        let (high, highTrack) = rig.consume(quality: .high)

        try Self.feed(rig.producer, 0, keyframe: true)
        for k in 1..<8 { try Self.feed(rig.producer, k) }

        let layers = try #require(rig.producer.scalable)
        #expect(layers.spatialCount == 3 && layers.temporalCount == 3)
        #expect(layers.ladder.map { [$0.spatial, $0.temporal] } == [[0, 0], [0, 1], [0, 2], [1, 2], [2, 2]])
        #expect(rig.producer.layers[0].width == 1280)
        for (consumer, spatial) in [(low, 0), (medium, 1), (high, 2)] {
            #expect(consumer.targetSpatial == spatial && consumer.currentSpatial == spatial)
            #expect(consumer.targetTemporal == 2 && consumer.currentTemporal == 2)
        }

        for (track, top, label) in [(lowTrack, 0, "low"), (mediumTrack, 1, "medium"), (highTrack, 2, "high")] {
            // Per picture: S0's two packets and one per higher layer forwarded, every picture.
            #expect(track.sent.count == 8 * (2 + top), "\(label)")
            Self.expectGapFree(track.sent, label)
            for (n, sent) in track.sent.enumerated() {
                let info = try Self.vp9(sent)
                #expect(Int(info.spatialLayer) <= top, "\(label): packet \(n)")
                #expect(Int(info.spatialLayer) == Int(sent.sourceLayer))
                // The marker ends the picture the subscriber sees: the end of its highest layer.
                let last = Int(info.spatialLayer) == top && info.endsLayerFrame
                #expect(sent.marker == last, "\(label): packet \(n)")
            }
            // Timestamps pass through unchanged within one stream.
            #expect(track.sent.first?.timestamp == Self.svc.timestamp(0))
        }
        #expect(rig.upstream.keyframeRequests.isEmpty)

        let stats = medium.stats()
        #expect(stats.currentSpatialLayer == 1 && stats.targetSpatialLayer == 1)
        #expect(stats.currentTemporalLayer == 2 && stats.targetTemporalLayer == 2)
        #expect(stats.currentRID == nil)
    }

    @Test func spatialSwitchUpWaitsForAKeyPictureAndDownHappensAtThePictureBoundary() throws {
        let rig = SFUUnitRig(codec: .vp9)
        let (consumer, track) = rig.consume(quality: .low)
        try Self.feed(rig.producer, 0, keyframe: true)
        try Self.feed(rig.producer, 1)

        // Up to the top: a PLI, and S0 alone until the key picture.
        consumer.quality = .high
        consumer.retarget(now: Self.time(1))
        #expect(consumer.targetSpatial == 2 && consumer.currentSpatial == 0)
        #expect(rig.upstream.keyframeRequests == [nil])
        for k in 2...4 { try Self.feed(rig.producer, k) }
        #expect(track.sent.count == 5 * 2, "only S0 before the key picture")
        #expect(consumer.currentSpatial == 0)

        try Self.feed(rig.producer, 5, keyframe: true)
        #expect(consumer.currentSpatial == 2)
        #expect(!rig.producer.keyframeRequests.isPending(0))
        #expect(track.sent.count == 5 * 2 + 4)

        // Down in the middle of picture 6: its remaining layers still go (the subscriber is
        // decoding it), picture 7 is S0 only.
        let picture6 = Self.svc.picture(6)
        try rig.producer.receive(picture6[0], rid: nil, arrival: Self.time(6))
        consumer.quality = .low
        consumer.retarget(now: Self.time(6))
        for p in picture6.dropFirst() { try rig.producer.receive(p, rid: nil, arrival: Self.time(6)) }
        try Self.feed(rig.producer, 7)
        #expect(consumer.currentSpatial == 0)
        #expect(track.sent.count == 5 * 2 + 4 + 4 + 2)
        #expect(rig.upstream.keyframeRequests == [nil], "a switch down needs no key frame")
        Self.expectGapFree(track.sent, "switches")
        let markers = track.sent.filter(\.marker).count
        #expect(markers == 8, "one marker per picture")
        #expect(track.sent.last?.marker == true)
    }

    @Test func temporalLayersFollowTheAllocatorAndRiseAtASwitchingUpPoint() throws {
        let rig = SFUUnitRig(codec: .vp9)
        let (consumer, track) = rig.consume(quality: .high)
        try Self.feed(rig.producer, 0, keyframe: true)
        try Self.feed(rig.producer, 1)

        // The allocator's lowest rung: S0 at the base frame rate (no key frame needed to go down).
        #expect(consumer.allocate(position: 0, now: Self.time(1)))
        #expect(consumer.targetSpatial == 0 && consumer.targetTemporal == 0)
        let before = track.sent.count
        for k in 2...8 { try Self.feed(rig.producer, k) }
        let base = track.sent[before...]
        #expect(base.count == 2 * 2, "pictures 4 and 8 (TID 0), S0 only")
        #expect(try base.allSatisfy { try Self.vp9($0).temporalLayer == 0 && $0.sourceLayer == 0 })
        #expect(rig.upstream.keyframeRequests.isEmpty)

        // Back up to S0 at every frame rate: not at picture 9 (no U bit), at the switching-up
        // point of picture 12 (TID 0, U), with no key frame asked for.
        #expect(consumer.allocate(position: 2, now: Self.time(8)))
        for k in 9...11 { try Self.feed(rig.producer, k) }
        #expect(consumer.currentTemporal == 0)
        try Self.feed(rig.producer, 12, switchingUp: true)
        try Self.feed(rig.producer, 13)
        #expect(consumer.currentTemporal == 2)
        #expect(rig.upstream.keyframeRequests.isEmpty)
        let after = track.sent[(before + 4)...]
        #expect(after.count == 2 * 2, "pictures 12 and 13, S0")
        #expect(consumer.stats().currentTemporalLayer == 2)
        Self.expectGapFree(track.sent, "temporal")

        // Paused by the allocator and resumed: forwarding restarts at a key picture.
        #expect(consumer.allocate(position: -1, now: Self.time(14)))
        try Self.feed(rig.producer, 14)
        #expect(consumer.stats().currentSpatialLayer == nil)
        #expect(consumer.allocate(position: 4, now: Self.time(15)))
        try Self.feed(rig.producer, 15)
        #expect(consumer.currentLayer == -1)
        try Self.feed(rig.producer, 16, keyframe: true)
        #expect(consumer.currentSpatial == 2 && consumer.currentTemporal == 2)
        Self.expectGapFree(track.sent, "resumed")
    }

    @Test func lossAndReorderingKeepNumbersAndRepairsFillTheHole() throws {
        let rig = SFUUnitRig(codec: .vp9)
        let (consumer, track) = rig.consume(quality: .medium)
        let svc = Self.svc
        try Self.feed(rig.producer, 0, keyframe: true)
        // Picture 1: S0's second packet is lost upstream; picture 2 arrives with its S1 before S0.
        for i in [0, 2, 3] { try rig.producer.receive(svc.packet(1, i), rid: nil, arrival: Self.time(1)) }
        for i in [2, 0, 1, 3] { try rig.producer.receive(svc.packet(2, i), rid: nil, arrival: Self.time(2)) }
        // The repair of the lost packet comes last.
        try rig.producer.receive(svc.packet(1, 1), rid: nil, arrival: Self.time(3), repair: true)
        try Self.feed(rig.producer, 3)

        // Medium forwards S0 (two packets) and S1: three per picture, numbered as in order.
        let first = track.sent[0].sequenceNumber
        func outgoing(_ k: Int, _ i: Int) -> UInt16 { first &+ UInt16(k * 3 + i) }
        let bySource = Dictionary(track.sent.map { ($0.sourceSequenceNumber, $0.sequenceNumber) }) { a, _ in a }
        for k in 0...3 {
            for i in 0...2 { #expect(bySource[svc.sequenceNumber(k, i)] == outgoing(k, i), "picture \(k) packet \(i)") }
        }
        #expect(track.sent.count == 12)
        #expect(!track.sent.contains { $0.sourceLayer == 2 })
        // The repair went out with the number the subscriber saw missing; a NACK for it is answered.
        #expect(track.sent[8].sourceSequenceNumber == svc.sequenceNumber(1, 1))
        consumer.handleNACK([outgoing(1, 1)], now: Self.time(4))
        #expect(track.retransmissions.map(\.sourceSequenceNumber) == [svc.sequenceNumber(1, 1)])
        #expect(track.retransmissions.first?.marker == false)
        #expect(track.sent.filter(\.marker).map(\.sourceSequenceNumber) == (0...3).map { svc.sequenceNumber($0, 2) })
    }

    @Test func viewportPicksTheSmallestCoveringSpatialLayerAndTheAllocatorSeesCumulativeRates() throws {
        let rig = SFUUnitRig(codec: .vp9)
        let (consumer, track) = rig.consume(quality: .high)
        consumer.viewport = (600, 300)
        consumer.updateTarget()
        try Self.feed(rig.producer, 0, keyframe: true)
        #expect(consumer.targetSpatial == 1, "640×360 covers 600×300")
        #expect(track.sent.count == 3)

        for k in 1...30 { try Self.feed(rig.producer, k) }
        rig.producer.measureRates(elapsed: 1_000_000_000)
        let rates = rig.producer.ratesByQuality
        #expect(rates.count == 5)
        for position in 1..<5 { #expect(rates[position] > rates[position - 1], "position \(position)") }
        #expect(consumer.preferredPosition == 3)
    }
}
