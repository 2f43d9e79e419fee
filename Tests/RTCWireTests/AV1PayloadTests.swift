import RTCWire
import Testing

/// The AV1 RTP payload format on hand-built payloads: aggregation header, OBU elements, fragments
/// across packets, and the low-overhead format the builder writes (libaom streams:
/// AV1RecordingTests).
@Suite struct AV1PayloadTests {
    private func inspect(_ bytes: [UInt8]) throws -> RTPPayloadInfo {
        try bytes.withUnsafeBytes { b throws(RTPPayloadError) in try AV1PayloadFormat.inspect(b) }
    }

    private func build(_ payloads: [[UInt8]]) -> (data: [UInt8], malformed: Bool) {
        var builder = AV1TemporalUnitBuilder()
        for p in payloads { p.withUnsafeBytes { builder.append($0) } }
        builder.finish()
        guard !builder.malformed else { return ([], true) }
        var out = [UInt8](repeating: 0, count: builder.encodedLength)
        let n = out.withUnsafeMutableBytes { builder.write(into: $0) }
        #expect(n == out.count)
        return (out, false)
    }

    /// An OBU header byte of `type`, without extension or size field.
    private func header(_ type: UInt8) -> UInt8 { type << 3 }

    @Test func leb128RoundTrips() {
        for value in [0, 1, 127, 128, 300, 16_383, 16_384, 1 << 28] {
            var out = [UInt8](repeating: 0, count: 8)
            let n = out.withUnsafeMutableBytes { AV1LEB128.write(value, into: $0, at: 0) }
            #expect(n == AV1LEB128.length(value))
            let back = out.withUnsafeBytes { AV1LEB128.read($0, at: 0) }
            #expect(back?.0 == UInt64(value) && back?.1 == n)
        }
        let tooLong = [UInt8](repeating: 0x80, count: 9)
        #expect(tooLong.withUnsafeBytes { AV1LEB128.read($0, at: 0) } == nil)
    }

    @Test func elementsWithLengthsAndACountedLastElementGiveSizedOBUs() {
        let frameOBU: [UInt8] = [header(6), 0xAA, 0xBB, 0xCC]
        let metadata: [UInt8] = [header(5), 0x01]
        // W = 0: every element with its length; a temporal delimiter is dropped.
        let w0 = build([[0x00, 0x01, header(2), 0x02] + metadata + [0x04] + frameOBU])
        #expect(w0.data == [header(5) | 0x02, 0x01, 0x01, header(6) | 0x02, 0x03, 0xAA, 0xBB, 0xCC])
        // W = 2: the first element has a length, the last takes the rest.
        let w2 = build([[0x20, 0x02] + metadata + frameOBU])
        #expect(w2.data == w0.data)
    }

    @Test func anOBUFragmentedAcrossPacketsIsJoined() {
        let obu: [UInt8] = [header(6)] + (0..<40).map { UInt8($0) }
        let first: [UInt8] = [0x40 | 0x10] + obu[0..<15]  // Y, W = 1
        let middle: [UInt8] = [0x80 | 0x40 | 0x10] + obu[15..<30]  // Z, Y
        let last: [UInt8] = [0x80 | 0x10] + obu[30...]  // Z
        let built = build([first, middle, last])
        #expect(!built.malformed)
        #expect(built.data == [header(6) | 0x02, 40] + obu.dropFirst())
    }

    @Test func aLostFragmentMakesTheUnitMalformed() {
        let obu: [UInt8] = [header(6)] + (0..<40).map { UInt8($0) }
        let first: [UInt8] = [0x40 | 0x10] + obu[0..<15]
        let last: [UInt8] = [0x80 | 0x10] + obu[30...]
        #expect(build([last]).malformed)  // a continuation without its start
        #expect(build([first]).malformed)  // an OBU never finished
        #expect(build([[0x00, 0x09, header(6)]]).malformed)  // a length past the packet
        #expect(build([[0x30, 0x01, header(6)]]).malformed)  // W = 3 but one element
    }

    @Test func inspectReadsTheAggregationHeader() throws {
        let key = try inspect([0x18, header(6), 0x00])  // N, W = 1
        #expect(key.startsFrame && key.isKeyframe && key.headerLength == 0)
        let delta = try inspect([0x10, header(6), 0x00])
        #expect(!delta.startsFrame && !delta.isKeyframe)
        // An extension header's temporal id.
        let layered = try inspect([0x10, header(6) | 0x04, 0x40, 0x00])
        #expect(layered.temporalLayer == 2)
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x88, header(6)]) }  // Z with N
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x00, 0x05, header(6)]) }  // length past end
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x10]) }  // no element
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x10, 0x80]) }  // forbidden bit
        let padding = try inspect([])
        #expect(!padding.startsFrame)
    }

    /// Found by the fuzzer: a size field that does not cover its OBU, and a continuation of an
    /// empty element, make the unit malformed instead of a broken file or a trap.
    @Test func inconsistentElementsFoundByTheFuzzerAreMalformed() {
        // W = 2; the last OBU says it has a size field whose value is not its length.
        #expect(build([[0x20, 0x02, header(5), 0x30, header(5) | 0x02, 0x05, 0xBB]]).malformed)
        // The same OBU with a size field that matches is kept as it is.
        let sized = build([[0x20, 0x02, header(5), 0x30, header(5) | 0x02, 0x01, 0xBB]])
        #expect(!sized.malformed && sized.data == [header(5) | 0x02, 0x01, 0x30, header(5) | 0x02, 0x01, 0xBB])
        // Y after an empty element, then a continuation.
        #expect(build([[0x40, 0x00], [0xD0, 0xFF]]).malformed)
        // The forbidden bit.
        #expect(build([[0x10, 0x80 | header(6), 0x00]]).malformed)
    }
}
