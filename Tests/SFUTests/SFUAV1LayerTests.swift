import RTCWire
import Testing

@testable import RTC
@testable import SFU

/// Dependency descriptors of headless Chromium 156 publishing AV1 (640x360, `scalabilityMode`
/// L1T3 and L3T3, whose structure at that size has two spatial layers), as the SFU received them: one line
/// per packet, "sequence-number timestamp marker descriptor-hex". Each key frame's first packet
/// carries the template structure (two-byte extension form: the L1T3 one is 20 bytes).
enum ChromiumAV1Capture {
    static let l1t3 = [
        "3192 2953878232 1 c00001800214eaa860414d1410208427027f0167",
        "3193 2953882822 1 c30002",
        "3194 2953887592 1 c20003",
        "3195 2953891822 1 c40004",
        "3196 2953896322 0 810005",
        "3197 2953896322 1 410005",
        "3198 2953900822 1 c30006",
        "3199 2953905502 0 820007",
        "3200 2953905502 1 420007",
        "3201 2953909822 1 c40008",
        "3202 2953914322 1 c00009800214eaa860414d1410208427027f0167",
        "3203 2953918732 0 83000a",
        "3204 2953918732 1 43000a",
        "3205 2953923232 0 82000b",
        "3206 2953923232 1 42000b",
        "3207 2953927822 0 84000c",
        "3208 2953927822 1 44000c",
        "3209 2953932322 0 81000d",
        "3210 2953932322 0 01000d",
        "3211 2953932322 1 41000d",
        "3212 2953936732 1 c3000e",
        "3213 2953941322 0 82000f",
        "3214 2953941322 0 02000f",
        "3215 2953941322 1 42000f",
        "3216 2953945822 0 840010",
        "3217 2953945822 1 440010",
        "3218 2953950232 0 810011",
        "3219 2953950232 1 410011",
        "3220 2953954822 0 830012",
        "3221 2953954822 1 430012",
        "3222 2953959232 0 820013",
        "3223 2953959232 1 420013",
        "3224 2953963732 0 840014",
        "3225 2953963732 1 440014",
        "3226 2953968322 1 c10015",
        "3227 2953972822 0 830016",
        "3228 2953972822 1 430016",
        "3229 2953977232 0 820017",
        "3230 2953977232 1 420017",
        "3231 2953981732 0 840018",
        "3232 2953981732 1 440018",
        "3233 2953986322 0 810019",
        "3234 2953986322 0 010019",
        "3235 2953986322 1 410019",
        "3236 2953990822 1 c3001a",
    ]
    static let l3t3 = [
        "22220 3560477498 0 c10001800514853abfaaa18f04304302a02a006001001b934515e082704608c0c787004321651111543276809f8059813f80b380",
        "22221 3560477498 1 c60002",
        "22222 3560481908 0 c30003",
        "22223 3560481908 1 c80004",
        "22224 3560486408 0 c20005",
        "22225 3560486408 1 c70006",
        "22226 3560490908 0 c40007",
        "22227 3560490908 1 c90008",
        "22228 3560495318 0 c00009",
        "22229 3560495318 1 c5000a",
        "22230 3560499908 0 c3000b",
        "22231 3560499908 1 c8000c",
        "22232 3560504408 0 c2000d",
        "22233 3560504408 1 c7000e",
        "22234 3560508908 0 c1000f800514853abfaaa18f04304302a02a006001001b934515e082704608c0c787004321651111543276809f8059813f80b380",
        "22235 3560508908 0 860010",
        "22236 3560508908 1 460010",
        "22237 3560513318 0 c30011",
        "22238 3560513318 1 c80012",
        "22239 3560517908 0 c20013",
        "22240 3560517908 1 c70014",
        "22241 3560522408 0 c40015",
        "22242 3560522408 1 c90016",
        "22243 3560526908 0 c00017",
        "22244 3560526908 0 850018",
        "22245 3560526908 0 050018",
        "22246 3560526908 1 450018",
        "22247 3560531318 0 c30019",
        "22248 3560531318 1 c8001a",
        "22249 3560536178 0 c2001b",
        "22250 3560536178 1 c7001c",
        "22251 3560540408 0 c4001d",
        "22252 3560540408 1 c9001e",
        "22253 3560544818 0 c0001f",
        "22254 3560544818 1 c50020",
        "22255 3560549318 0 c30021",
        "22256 3560549318 1 c80022",
        "22257 3560553908 0 c20023",
        "22258 3560553908 1 c70024",
        "22259 3560558408 0 c40025",
    ]

    struct Packet {
        var sequenceNumber: UInt16
        var timestamp: UInt32
        var marker: Bool
        var descriptor: [UInt8]
    }

    static func packets(_ lines: [String]) -> [Packet] {
        lines.map { line in
            let f = line.split(separator: " ")
            var bytes: [UInt8] = []
            var i = f[3].startIndex
            while i < f[3].endIndex {
                let j = f[3].index(i, offsetBy: 2)
                bytes.append(UInt8(f[3][i..<j], radix: 16)!)
                i = j
            }
            return Packet(
                sequenceNumber: UInt16(f[0])!, timestamp: UInt32(f[1])!, marker: f[2] == "1", descriptor: bytes)
        }
    }

    static let extensionID: UInt8 = 12

    /// The RTP packet for a captured line: the descriptor in a two-byte extension block, an AV1
    /// aggregation header (N on a key frame's first packet, Z on a frame's later packets) and a
    /// frame OBU's first bytes, or its continuation.
    static func rtp(_ p: Packet, key: Bool) -> [UInt8] {
        var bytes: [UInt8] = [
            0x90, (p.marker ? 0x80 : 0) | 45, UInt8(p.sequenceNumber >> 8), UInt8(p.sequenceNumber & 0xFF),
        ]
        bytes += withUnsafeBytes(of: p.timestamp.bigEndian, Array.init)
        bytes += withUnsafeBytes(of: UInt32(0xA1).bigEndian, Array.init)
        var block: [UInt8] = [extensionID, UInt8(p.descriptor.count)] + p.descriptor
        while block.count % 4 != 0 { block.append(0) }
        bytes += [0x10, 0x00, UInt8((block.count / 4) >> 8), UInt8((block.count / 4) & 0xFF)] + block
        let startsFrame = p.descriptor[0] & 0x80 != 0
        if startsFrame {
            bytes += [0x10 | (key ? 0x08 : 0), 0x32, 0x10]  // W=1 (N), a frame OBU with its size field
        } else {
            bytes += [0x90, 0x44]  // Z, W=1: the OBU continues
        }
        bytes += [0xAA, UInt8(p.sequenceNumber >> 8), UInt8(p.sequenceNumber & 0xFF)]
        return bytes
    }
}

extension SFUUnitRig {
    /// An AV1 producer whose publisher negotiated the dependency descriptor as `id`.
    init(av1DependencyDescriptorID id: UInt8, sfu: SFU = SFU()) {
        self.sfu = sfu
        producer = SFUProducer(
            id: "p-1", participantID: "alice", kind: .video, source: .webcam, mid: "0", rids: [], upstream: upstream,
            dependencyDescriptorExtensionID: id, sfu: sfu, codec: .av1)
    }
}

/// AV1 layer selection in the SFU (issue 35): each consumer gets the frames of its decode target out
/// of one stream, read from Chromium's dependency descriptors, and the descriptors go on with them.
@Suite("SFU AV1 layers by dependency descriptor")
struct SFUAV1LayerTests {
    static func rig() -> SFUUnitRig { SFUUnitRig(av1DependencyDescriptorID: ChromiumAV1Capture.extensionID) }

    /// Feeds captured packets `range` (key frames: those whose descriptor carries a structure).
    static func feed(_ rig: SFUUnitRig, _ packets: [ChromiumAV1Capture.Packet], _ range: Range<Int>) throws {
        for i in range {
            let p = packets[i]
            let key = p.descriptor.count > 3 && p.descriptor[3] & 0x80 != 0
            try rig.producer.receive(
                ChromiumAV1Capture.rtp(p, key: key), rid: nil, arrival: 1_000_000_000 + UInt64(i) * 16_000_000)
        }
    }

    /// The descriptor of every captured packet, read in order (the structure kept as a receiver does).
    static func descriptors(_ packets: [ChromiumAV1Capture.Packet]) throws -> [AV1DependencyDescriptor] {
        var structure: AV1DependencyStructure?
        return try packets.map { p in
            let d = try p.descriptor.withUnsafeBytes { try AV1DependencyDescriptor.parse($0, structure: structure) }
            if let s = d.structure { structure = s }
            return d
        }
    }

    static func expectGapFree(_ sent: [RecordingDownTrack.Sent], _ label: String) {
        guard let first = sent.first else { return }
        for (n, s) in sent.enumerated() {
            #expect(s.sequenceNumber == first.sequenceNumber &+ UInt16(n), "\(label): packet \(n)")
        }
    }

    @Test func l1t3ConsumerAtTheBaseFrameRateGetsOnlyTemporalLayerZero() throws {
        let packets = ChromiumAV1Capture.packets(ChromiumAV1Capture.l1t3)
        let descriptors = try Self.descriptors(packets)
        let rig = Self.rig()
        let (_, fullTrack) = rig.consume(quality: .high)
        let (base, baseTrack) = rig.consume(quality: .high)
        try Self.feed(rig, packets, 0..<7)
        let layers = try #require(rig.producer.scalable)
        #expect(layers.temporalCount == 3 && layers.spatialCount == 1)
        #expect(layers.ladder.map(\.temporal) == [0, 1, 2])
        // Each rung is one of Chromium's three decode targets.
        #expect((0..<3).map { layers.decodeTarget(spatial: 0, temporal: $0) } == [0, 1, 2])
        base.allocate(position: 0, now: 1_200_000_000)
        #expect(base.targetTemporal == 0)
        try Self.feed(rig, packets, 7..<packets.count)

        #expect(fullTrack.sent.count == packets.count)
        Self.expectGapFree(fullTrack.sent, "full")
        // Every packet goes on with the publisher's descriptor, byte for byte.
        #expect(fullTrack.sent.map { $0.dependencyDescriptor ?? [] } == packets.map(\.descriptor))

        let baseFrom7 = (7..<packets.count).filter { descriptors[$0].temporalID == 0 }
        let sentSources = baseTrack.sent.map { Int($0.sourceSequenceNumber &- packets[0].sequenceNumber) }
        #expect(Array(sentSources.drop { $0 < 7 }) == baseFrom7, "only T0 frames after the allocator's decision")
        #expect(baseFrom7.count >= 5 && baseFrom7.count < packets.count - 7)
        Self.expectGapFree(baseTrack.sent, "base")
        #expect(base.stats().currentTemporalLayer == 0)
        #expect(rig.upstream.keyframeRequests.isEmpty, "a temporal switch needs no key frame")
    }

    @Test func l1t3SwitchUpWaitsForASwitchPointWithoutAKeyFrame() throws {
        let packets = ChromiumAV1Capture.packets(ChromiumAV1Capture.l1t3)
        let descriptors = try Self.descriptors(packets)
        let rig = Self.rig()
        let (consumer, track) = rig.consume(quality: .high)
        try Self.feed(rig, packets, 0..<4)
        consumer.allocate(position: 0, now: 1_100_000_000)
        try Self.feed(rig, packets, 4..<20)
        #expect(consumer.currentTemporal == 0)
        consumer.allocate(position: 2, now: 1_400_000_000)
        #expect(consumer.targetTemporal == 2)
        try Self.feed(rig, packets, 20..<packets.count)
        #expect(consumer.currentTemporal == 2)
        // The first packet forwarded above T0 after the switch is where decode target 2 may start, or
        // follows one that was.
        let sources = track.sent.map { Int($0.sourceSequenceNumber &- packets[0].sequenceNumber) }
        let firstUp = try #require(sources.first { $0 >= 20 && descriptors[$0].temporalID > 0 })
        let switchAt = try #require((20...firstUp).first { descriptors[$0].indication(2) == .switch })
        #expect(switchAt <= firstUp)
        // From the switch on, every packet flows.
        #expect(Array(sources.drop { $0 < switchAt }) == Array(switchAt..<packets.count))
        #expect(rig.upstream.keyframeRequests.isEmpty)
        Self.expectGapFree(track.sent, "switched")
    }

    @Test func l3t3LowConsumerGetsTheBaseSpatialLayerWithTheMarkerOnItsFrameEnds() throws {
        let packets = ChromiumAV1Capture.packets(ChromiumAV1Capture.l3t3)
        let descriptors = try Self.descriptors(packets)
        let rig = Self.rig()
        let (low, lowTrack) = rig.consume(quality: .low)
        let (high, highTrack) = rig.consume(quality: .high)
        try Self.feed(rig, packets, 0..<packets.count)

        let layers = try #require(rig.producer.scalable)
        // At 640x360 Chromium's L3T3 structure names two spatial layers (three temporal each).
        let structure = try #require(rig.producer.dependencyStructure)
        #expect(structure.maxSpatialID == 1 && structure.maxTemporalID == 2 && structure.decodeTargetCount == 6)
        #expect(layers.spatialCount == 2)
        #expect(low.currentSpatial == 0 && high.currentSpatial == 1)
        #expect(highTrack.sent.count == packets.count)
        #expect(highTrack.sent.map(\.marker) == packets.map(\.marker))

        let s0 = packets.indices.filter { descriptors[$0].spatialID == 0 }
        #expect(s0.count >= 15 && s0.count < packets.count)
        let sources = lowTrack.sent.map { Int($0.sourceSequenceNumber &- packets[0].sequenceNumber) }
        #expect(sources == s0)
        // The end of each base-layer frame ends the picture the low subscriber sees.
        #expect(lowTrack.sent.map(\.marker) == s0.map { descriptors[$0].endOfFrame })
        Self.expectGapFree(lowTrack.sent, "low")
        #expect(low.stats().currentSpatialLayer == 0 && high.stats().currentSpatialLayer == 1)
    }

    @Test func repairsCarryTheDescriptorTheOriginalDid() throws {
        let packets = ChromiumAV1Capture.packets(ChromiumAV1Capture.l1t3)
        let rig = Self.rig()
        let (consumer, track) = rig.consume(quality: .high)
        try Self.feed(rig, packets, 0..<12)
        let key = try #require(track.sent.first)
        consumer.handleNACK([key.sequenceNumber, track.sent[5].sequenceNumber], now: 2_000_000_000)
        #expect(track.retransmissions.count == 2)
        #expect(track.retransmissions.first?.dependencyDescriptor == packets[0].descriptor)
        #expect(track.retransmissions.last?.dependencyDescriptor == packets[5].descriptor)
    }

    @Test func anUnreadableDescriptorLeavesThePacketAsItWas() throws {
        let packets = ChromiumAV1Capture.packets(ChromiumAV1Capture.l1t3)
        let rig = Self.rig()
        let (_, track) = rig.consume(quality: .high)
        // A delta frame's descriptor before any structure: counted, the packet forwarded unselected
        // (here dropped: no key frame yet).
        try Self.feed(rig, packets, 1..<3)
        #expect(rig.producer.dependencyDescriptorErrors == 2)
        #expect(rig.producer.scalable == nil && track.sent.isEmpty)
        try Self.feed(rig, packets, 10..<14)
        #expect(track.sent.count == 4)
    }
}
