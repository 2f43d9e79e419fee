import RTCWire
import Testing

@testable import Media

@Suite struct H264LengthPrefixTests {
    /// The recorders' one-pass rewrite: where it succeeds it gives exactly the length-prefixed
    /// units of the scan, and it succeeds on every access unit with 4-byte start codes only.
    @Test func inPlaceLengthPrefixRewriteAgreesWithTheScan() {
        func lengthPrefixed(_ b: [UInt8]) -> [UInt8] {
            var out: [UInt8] = []
            b.withUnsafeBytes { bytes in
                H264AnnexB.forEachUnitRange(bytes) { unit in
                    let n = UInt32(unit.count)
                    out += [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
                    out += bytes[unit]
                }
            }
            return out
        }
        var rng = SplitMix64(seed: 6184)
        var rewrittenCount = 0
        for round in 0..<5000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                // Well-formed: 4-byte start codes before units that hold no start code and end nonzero.
                bytes = []
                for _ in 0..<(1 + Int(rng.next() % 5)) {
                    bytes += [0, 0, 0, 1]
                    var unit = (0..<(1 + Int(rng.next() % 40))).map { _ in UInt8(truncatingIfNeeded: rng.next() % 4 + 2)
                    }
                    unit[0] = 0x65
                    bytes += unit
                }
            } else {
                // Anything: zeros and ones, so short start codes and trailing zeros are common.
                bytes = [0, 0, 0, 1]
                bytes += (0..<Int(rng.next() % 64)).map { _ -> UInt8 in
                    let r = rng.next() % 8
                    return r < 4 ? 0 : r < 6 ? 1 : UInt8(truncatingIfNeeded: rng.next())
                }
            }
            var copy = bytes
            let ok = copy.withUnsafeMutableBytes { H264LengthPrefix.rewriteAsLengthPrefixed($0) }
            if round % 2 == 0 { #expect(ok, "round \(round): \(bytes)") }
            if ok {
                rewrittenCount += 1
                #expect(copy == lengthPrefixed(bytes), "round \(round): \(bytes)")
            }
        }
        #expect(rewrittenCount > 2500)
        // Not Annex B with a 4-byte start code first: refused, not rewritten.
        for bad: [UInt8] in [[], [0, 0, 1, 0x65, 1], [0, 0, 0, 1], [0, 0, 0, 1, 0, 0, 1]] {
            var b = bad
            #expect(!b.withUnsafeMutableBytes { H264LengthPrefix.rewriteAsLengthPrefixed($0) }, "\(bad)")
        }
    }

    @Test func appendGivesTheScansLengthEitherWay() {
        let fourByte: [UInt8] = [0, 0, 0, 1, 0x67, 5, 6, 0, 0, 0, 1, 0x65, 9, 9, 9]
        let mixed: [UInt8] = [0, 0, 0, 1, 0x67, 5, 6, 0, 0, 1, 0x65, 9, 9, 9, 0]
        // The scan keeps an access unit's trailing zero bytes in its last unit.
        let expected: [[UInt8]] = [
            [0, 0, 0, 3, 0x67, 5, 6, 0, 0, 0, 4, 0x65, 9, 9, 9],
            [0, 0, 0, 3, 0x67, 5, 6, 0, 0, 0, 5, 0x65, 9, 9, 9, 0],
        ]
        for (bytes, want) in zip([fourByte, mixed], expected) {
            var out: [UInt8] = [0xAA]
            let n = bytes.withUnsafeBytes { H264LengthPrefix.append($0, to: &out) }
            #expect(n == bytes.withUnsafeBytes { H264LengthPrefix.length($0) } && out.count == n + 1)
            #expect(Array(out[1...]) == want)
        }
    }
}
