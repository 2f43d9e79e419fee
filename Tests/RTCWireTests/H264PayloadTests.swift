import Testing

@testable import RTCWire

/// A real SPS and PPS (libx264, 320x240 constrained baseline, level 1.3; the SPS carries an
/// emulation-prevention byte).
let h264SPS: [UInt8] = hexBytes("6742c00dd90141fb0110000003001000000303c0f142a480")
let h264PPS: [UInt8] = hexBytes("68cb83cb20")

func hexBytes(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var it = s.makeIterator()
    while let a = it.next(), let b = it.next() { out.append(UInt8(String([a, b]), radix: 16)!) }
    return out
}

/// A NAL unit of `type` with `count` bytes after the header, free of start-code-like runs.
func h264Unit(_ type: UInt8, count: Int, firstSlice: Bool = true, seed: Int = 0) -> [UInt8] {
    var u: [UInt8] = [0x60 | type]
    for i in 0..<count { u.append(UInt8(truncatingIfNeeded: 0x11 &+ (i &* 7 &+ seed) % 200)) }
    if type == 1 || type == 5, count > 0 { u[1] = firstSlice ? u[1] | 0x80 : u[1] & 0x7F }
    return u
}

func annexB(_ units: [[UInt8]]) -> [UInt8] { units.flatMap { [0, 0, 0, 1] + $0 } }

private func inspect(_ p: [UInt8]) throws -> RTPPayloadInfo {
    try p.withUnsafeBytes { b throws(RTPPayloadError) in try H264PayloadFormat.inspect(b) }
}

private func makeStapA(_ units: [[UInt8]]) -> [UInt8] {
    [0x78] + units.flatMap { [UInt8($0.count >> 8), UInt8($0.count & 0xFF)] + $0 }
}

@Suite struct H264PayloadTests {
    @Test func spsGivesSizeProfileAndLevel() {
        let sps = h264SPS.withUnsafeBytes { H264SPS.parse($0) }
        #expect(sps == H264SPS(profile: 66, constraints: 0xC0, level: 13, width: 320, height: 240))
        #expect(h264PPS.withUnsafeBytes { H264SPS.parse($0) } == nil)
    }

    @Test func singleNALUnits() throws {
        let sps = try inspect(h264SPS)
        #expect(sps.startsFrame && sps.isKeyframe && sps.headerLength == 0)
        #expect(sps.width == 320 && sps.height == 240)
        let pps = try inspect(h264PPS)
        #expect(!pps.startsFrame && !pps.isKeyframe)
        let idr = try inspect(h264Unit(5, count: 40))
        #expect(idr.startsFrame && idr.isKeyframe)
        let secondSlice = try inspect(h264Unit(1, count: 40, firstSlice: false))
        #expect(!secondSlice.startsFrame && !secondSlice.isKeyframe)
        let delta = try inspect(h264Unit(1, count: 40))
        #expect(delta.startsFrame && !delta.isKeyframe)
        #expect(try inspect([]).startsFrame == false)
    }

    @Test func stapA() throws {
        let info = try inspect(makeStapA([h264SPS, h264PPS]))
        #expect(info.startsFrame && info.isKeyframe && info.width == 320)
        // A length past the end, a zero length, an empty aggregate, a forbidden bit: malformed.
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x78, 0x00, 0x09] + h264PPS) }
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x78, 0x00, 0x00]) }
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x78]) }
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x78, 0x00, 0x01, 0x80]) }
    }

    @Test func fuA() throws {
        let start = try inspect([0x7C, 0x85, 0x88, 0x01])
        #expect(start.startsFrame && start.isKeyframe)
        let middle = try inspect([0x7C, 0x05, 0x01, 0x02])
        #expect(!middle.startsFrame && !middle.isKeyframe)
        // Start and end in one fragment, a missing FU header, interleaved-mode types: refused.
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x7C, 0xC5, 0x88]) }
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x7C, 0x85]) }
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x7D, 0x85, 0x88]) }
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x79, 0x00, 0x01, 0x65]) }
    }

    @Test func startCodeScanAgreesWithAByteByByteScan() {
        // The byte-by-byte rule: a unit starts after each 00 00 01; trailing zeros belong to the
        // next start code; empty units are skipped.
        func reference(_ b: [UInt8]) -> [Range<Int>] {
            var out: [Range<Int>] = []
            var i = 0
            var start = -1
            while i + 2 < b.count {
                if b[i] == 0, b[i + 1] == 0, b[i + 2] == 1 {
                    if start >= 0 {
                        var end = i
                        while end > start, b[end - 1] == 0 { end -= 1 }
                        if end > start { out.append(start..<end) }
                    }
                    i += 3
                    start = i
                } else {
                    i += 1
                }
            }
            if start >= 0, start < b.count { out.append(start..<b.count) }
            return out
        }
        var rng = SplitMix64(seed: 35)
        for round in 0..<6000 {
            // Mostly zeros and ones, so start codes, runs of zeros and near misses are common; every
            // other round like slice data (zeros rare), so the word-at-a-time skip runs too.
            let sparse = round % 2 == 1
            let count = Int(rng.next() % (sparse ? 300 : 64))
            let bytes = (0..<count).map { _ -> UInt8 in
                let r = rng.next() % (sparse ? 64 : 8)
                return r < 4 ? 0 : r < 6 ? 1 : UInt8(truncatingIfNeeded: rng.next() % 255 + 1)
            }
            var fast: [Range<Int>] = []
            bytes.withUnsafeBytes { H264AnnexB.forEachUnitRange($0) { fast.append($0) } }
            #expect(fast == reference(bytes), "round \(round): \(bytes)")
        }
    }

    @Test func packetizeThenRebuildGivesTheAccessUnit() {
        let au = annexB([h264SPS, h264PPS, h264Unit(5, count: 1000), h264Unit(5, count: 50, firstSlice: false)])
        var scratch: [UInt8] = []
        var payloads: [[UInt8]] = []
        var markers: [Bool] = []
        let n = au.withUnsafeBytes {
            H264PayloadFormat.packetize(accessUnit: $0, maxPayloadSize: 300, scratch: &scratch) { p, last in
                payloads.append([UInt8](p))
                markers.append(last)
            }
        }
        #expect(n == payloads.count && n == 2 + 4 + 1)
        #expect(markers == Array(repeating: false, count: n - 1) + [true])
        #expect(payloads.allSatisfy { $0.count <= 300 })
        #expect(payloads.allSatisfy { p in (try? inspect(p)) != nil })
        var counter = H264PayloadFormat.AnnexBWriter(output: nil)
        for p in payloads { p.withUnsafeBytes { counter.append($0) } }
        counter.finish()
        #expect(counter.length == au.count && !counter.sawNonContinuousFragment)
        #expect(counter.hasIDR && counter.hasParameterSets)
        var out = [UInt8](repeating: 0, count: counter.length)
        out.withUnsafeMutableBytes { buffer in
            var writer = H264PayloadFormat.AnnexBWriter(output: buffer)
            for p in payloads { p.withUnsafeBytes { writer.append($0) } }
            writer.finish()
        }
        #expect(out == au)
    }

    @Test func stapASplitsIntoUnits() {
        var writer = H264PayloadFormat.AnnexBWriter(output: nil)
        var bytes = [UInt8](repeating: 0, count: 64)
        bytes.withUnsafeMutableBytes { buffer in
            writer = H264PayloadFormat.AnnexBWriter(output: buffer)
            makeStapA([h264SPS, h264PPS]).withUnsafeBytes { writer.append($0) }
        }
        #expect(Array(bytes[0..<writer.length]) == annexB([h264SPS, h264PPS]))
        #expect(writer.hasParameterSets && !writer.hasIDR)
    }

    @Test func fragmentWithoutItsStartIsDamage() {
        var writer = H264PayloadFormat.AnnexBWriter(output: nil)
        [UInt8]([0x7C, 0x05, 0x01, 0x02]).withUnsafeBytes { writer.append($0) }
        #expect(writer.sawNonContinuousFragment && writer.length == 0)
        var open = H264PayloadFormat.AnnexBWriter(output: nil)
        [UInt8]([0x7C, 0x85, 0x88, 0x02]).withUnsafeBytes { open.append($0) }
        open.finish()
        #expect(open.sawNonContinuousFragment)
    }

    @Test func profileLevelIDs() throws {
        #expect(H264ProfileLevelID("42e01f")?.profile == .constrainedBaseline)
        #expect(H264ProfileLevelID("42001f")?.profile == .baseline)
        #expect(H264ProfileLevelID("4d001f")?.profile == .main)
        #expect(H264ProfileLevelID("640c1f")?.profile == .constrainedHigh)
        #expect(H264ProfileLevelID("64001f")?.profile == .high)
        #expect(H264ProfileLevelID("42e0") == nil && H264ProfileLevelID("42e0zz") == nil)
        func params(_ fmtp: String) -> H264FormatParameters? {
            H264FormatParameters(
                fmtp.split(separator: ";").map {
                    let kv = $0.split(separator: "=", maxSplits: 1)
                    return SDPParameter(key: String(kv[0]), value: kv.count > 1 ? String(kv[1]) : nil)
                })
        }
        let cb = try #require(params("level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"))
        // Levels may differ; profiles and packetization modes must match.
        #expect(cb.isCompatible(with: try #require(params("packetization-mode=1;profile-level-id=42e034"))))
        #expect(!cb.isCompatible(with: try #require(params("packetization-mode=0;profile-level-id=42e01f"))))
        #expect(!cb.isCompatible(with: try #require(params("packetization-mode=1;profile-level-id=4d001f"))))
        #expect(!cb.isCompatible(with: try #require(params("packetization-mode=1;profile-level-id=42001f"))))
        #expect(params("packetization-mode=2;profile-level-id=42e01f") == nil)
        // Absent: baseline, mode 0.
        let bare = try #require(params("x=1"))
        #expect(bare.packetizationMode == 0 && bare.profileLevelID.profile == .baseline)
        #expect(cb.fmtp == "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f")
    }

    @Test func spropParameterSetsDecode() throws {
        // base64 of the SPS and PPS above.
        let p = try #require(
            H264FormatParameters([
                SDPParameter(key: "packetization-mode", value: "1"),
                SDPParameter(key: "sprop-parameter-sets", value: "Z0LADdkBQfsBEAAAAwAQAAADA8DxQqSA,aMuDyyA="),
            ]))
        #expect(p.spropAnnexB == annexB([h264SPS, h264PPS]))
    }

    @Test func decoderConfigurationRecord() throws {
        let au = annexB([h264SPS, h264PPS, h264Unit(5, count: 10)])
        let record = try #require(au.withUnsafeBytes { H264DecoderConfiguration.record(fromAnnexB: $0) })
        #expect(Array(record[0..<6]) == [1, 0x42, 0xC0, 0x0D, 0xFF, 0xE1])
        #expect(Array(record[6..<8]) == [0, UInt8(h264SPS.count)])
        #expect(Array(record[(8 + h264SPS.count)...]) == [1, 0, UInt8(h264PPS.count)] + h264PPS)
        let noPPS = annexB([h264SPS, h264Unit(5, count: 10)])
        #expect(noPPS.withUnsafeBytes { H264DecoderConfiguration.record(fromAnnexB: $0) } == nil)
        let prefixed = au.withUnsafeBytes { H264DecoderConfiguration.lengthPrefixed(fromAnnexB: $0) }
        #expect(prefixed.count == au.count && Array(prefixed[0..<4]) == [0, 0, 0, UInt8(h264SPS.count)])
    }
}

@Suite struct H264SPSHostileTests {
    /// A high-profile SPS whose scaling-list delta is huge (found by the h264 fuzz target): parsed
    /// or refused, never a trap.
    @Test func aHugeScalingDeltaDoesNotTrap() {
        let unit: [UInt8] = [
            0x67, 0x53, 0x75, 0x73, 0x75, 0x53, 0x75, 0x62, 0x73, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0x00,
        ]
        _ = unit.withUnsafeBytes { H264SPS.parse($0) }
        var info = RTPPayloadInfo()
        unit.withUnsafeBytes { H264PayloadFormat.readSize($0, into: &info) }
        #expect(info.width < 16_384)
    }
}
