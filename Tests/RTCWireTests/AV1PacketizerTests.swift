import RTCWire
import Testing

/// AV1Packetizer on hand-built temporal units: OBUs aggregated with and without `W`, an OBU
/// fragmented across several packets, the size fields dropped on the wire and restored by
/// AV1TemporalUnitBuilder (encoder output end to end: VideoPublishRoundTripTests).
@Suite struct AV1PacketizerTests {
    /// A sized OBU of `type` with `payload` (and an extension byte when given).
    func obu(_ type: UInt8, _ payload: [UInt8], extensionByte: UInt8? = nil) -> [UInt8] {
        var out: [UInt8] = [type << 3 | 0x02 | (extensionByte == nil ? 0 : 0x04)]
        if let extensionByte { out.append(extensionByte) }
        var length = [UInt8](repeating: 0, count: 8)
        let n = length.withUnsafeMutableBytes { AV1LEB128.write(payload.count, into: $0, at: 0) }
        return out + length[0..<n] + payload
    }

    func packetize(_ unit: [UInt8], key: Bool, max: Int) -> [(payload: [UInt8], last: Bool)] {
        var packetizer = AV1Packetizer()
        var out: [(payload: [UInt8], last: Bool)] = []
        _ = unit.withUnsafeBytes { u in
            packetizer.packetize(temporalUnit: u, isKeyframe: key, maxPayloadSize: max) { p, last in
                out.append(([UInt8](p), last))
            }
        }
        return out
    }

    func rebuild(_ payloads: [[UInt8]]) -> [UInt8]? {
        var builder = AV1TemporalUnitBuilder()
        for p in payloads { p.withUnsafeBytes { builder.append($0) } }
        builder.finish()
        guard !builder.malformed else { return nil }
        var out = [UInt8](repeating: 0, count: builder.encodedLength)
        out.withUnsafeMutableBytes { _ = builder.write(into: $0) }
        return out
    }

    let sequenceHeader: [UInt8] = [0x00, 0x00, 0x00, 0x42, 0xAB, 0xBF, 0xC3, 0x71]

    @Test func smallOBUsShareAPacketWithCountedElements() {
        let unit = obu(1, sequenceHeader) + obu(6, (0..<40).map { UInt8($0) })
        let packets = packetize(obu(2, []) + unit, key: true, max: 1200)
        #expect(packets.count == 1)
        let p = packets[0].payload
        #expect(packets[0].last)
        #expect(p[0] == 0x28)  // W = 2, N; no Z, no Y
        // On the wire the OBUs have no size field; the temporal delimiter is gone.
        #expect(p[1] == UInt8(1 + sequenceHeader.count))
        #expect(p[2] == 1 << 3)
        #expect(rebuild(packets.map(\.payload)) == unit)
    }

    @Test func moreThanThreeOBUsUseLengthsForEveryElement() {
        let unit = (0..<5).flatMap { obu(5, [UInt8($0), 0xEE]) } + obu(6, [1, 2, 3], extensionByte: 0x20)
        let packets = packetize(unit, key: false, max: 1200)
        #expect(packets.count == 1)
        #expect(packets[0].payload[0] == 0x00)  // W = 0, not a key frame
        #expect(rebuild(packets.map(\.payload)) == unit)
    }

    @Test func aLargeOBUIsFragmentedAcrossPacketsAndJoinedAgain() throws {
        let big = obu(6, (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let unit = obu(1, sequenceHeader) + big + obu(5, [9, 9])
        for max in [8, 20, 100, 333] {
            let packets = packetize(unit, key: true, max: max)
            #expect(packets.allSatisfy { $0.payload.count <= max })
            #expect(packets.count >= 1000 / max)
            #expect(packets.map(\.last) == Array(repeating: false, count: packets.count - 1) + [true])
            // N on the first packet only; Z on a packet exactly when the one before had Y.
            var open = false
            for (k, p) in packets.enumerated() {
                let h = p.payload[0]
                #expect((h & 0x08 != 0) == (k == 0))
                #expect((h & 0x80 != 0) == open)
                open = h & 0x40 != 0
                let info = try p.payload.withUnsafeBytes { try AV1PayloadFormat.inspect($0) }
                #expect(info.startsFrame == (k == 0))
            }
            #expect(!open)
            #expect(rebuild(packets.map(\.payload)) == unit)
            // A lost middle fragment makes the unit malformed, never a wrong OBU.
            var lossy = packets.map(\.payload)
            lossy.remove(at: packets.count / 2)
            #expect(rebuild(lossy) != unit)
        }
    }

    @Test func nothingToSendGivesNoPacket() {
        #expect(packetize(obu(2, []) + obu(15, [0, 0]), key: false, max: 1200).isEmpty)
        #expect(packetize(obu(6, [1]), key: false, max: 7).isEmpty)
        // A size field past the end stops the walk; what came before is sent.
        let cut = obu(5, [1, 2]) + [6 << 3 | 0x02, 50, 1, 2]
        let packets = packetize(cut, key: false, max: 1200)
        #expect(rebuild(packets.map(\.payload)) == obu(5, [1, 2]))
    }
}
