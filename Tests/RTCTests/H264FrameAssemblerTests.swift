import RTCWire
import Testing

@testable import RTC

private let ms: UInt64 = 1_000_000

private final class H264Context: RTPFrameAssemblyContext {
    var givenUp: Set<Int64> = []
    var keyframeNeeds = 0
    var consumesFrames = true
    var frames: [EncodedFrame] = []
    func isGivenUp(_ ext: Int64) -> Bool { givenUp.contains(ext) }
    func giveUp(_ ext: Int64) { givenUp.insert(ext) }
    func forgetHoles(before ext: Int64) {}
    func needKeyframe() { keyframeNeeds += 1 }
    func keyframeDelivered() {}
    func deliver(_ frame: EncodedFrame, arrival: UInt64) { frames.append(frame) }
}

private let sps: [UInt8] = [
    0x67, 0x42, 0xc0, 0x0d, 0xd9, 0x01, 0x41, 0xfb, 0x01, 0x10, 0x00, 0x00, 0x03, 0x00, 0x10, 0x00, 0x00, 0x03,
    0x03, 0xc0, 0xf1, 0x42, 0xa4, 0x80,
]
private let pps: [UInt8] = [0x68, 0xcb, 0x83, 0xcb, 0x20]

private func unit(_ type: UInt8, _ count: Int, seed: Int) -> [UInt8] {
    var u: [UInt8] = [0x60 | type]
    for i in 0..<count { u.append(UInt8(truncatingIfNeeded: 0x11 &+ (i &* 7 &+ seed) % 200)) }
    u[1] |= 0x80  // first_mb_in_slice 0
    return u
}

private func annexB(_ units: [[UInt8]]) -> [UInt8] { units.flatMap { [0, 0, 0, 1] + $0 } }

/// One RTP packet of an access unit.
private struct Packet {
    var ext: Int64
    var timestamp: UInt32
    var marker: Bool
    var payload: [UInt8]
}

/// The packets of access units: a key frame carries SPS and PPS in a STAP-A, then its IDR slice in
/// FU-A fragments; delta frames are one slice, fragmented when large.
private struct Stream {
    var ext: Int64 = 0x1_0000
    var timestamp: UInt32 = 9000
    var accessUnits: [[UInt8]] = []

    mutating func frame(key: Bool, size: Int, parameterSets: Bool = true) -> [Packet] {
        var units: [[UInt8]] = []
        if key && parameterSets { units += [sps, pps] }
        units.append(unit(key ? 5 : 1, size, seed: accessUnits.count))
        accessUnits.append(annexB(units))
        var payloads: [[UInt8]] = []
        if key && parameterSets {
            // STAP-A of the parameter sets, as Chromium sends them.
            var stap: [UInt8] = [0x78]
            for u in [sps, pps] {
                stap.append(UInt8(u.count >> 8))
                stap.append(UInt8(u.count & 0xFF))
                stap += u
            }
            payloads.append(stap)
        }
        var scratch: [UInt8] = []
        _ = annexB([units.last!]).withUnsafeBytes {
            H264PayloadFormat.packetize(accessUnit: $0, maxPayloadSize: 200, scratch: &scratch) { p, _ in
                payloads.append([UInt8](p))
            }
        }
        defer { timestamp &+= 3000 }
        return payloads.enumerated().map { i, p in
            defer { ext += 1 }
            return Packet(ext: ext, timestamp: timestamp, marker: i == payloads.count - 1, payload: p)
        }
    }
}

private func insert(_ p: Packet, _ a: VideoFrameAssembler, _ c: H264Context, now: UInt64 = 0) {
    p.payload.withUnsafeBytes { payload in
        let info = try! H264PayloadFormat.inspect(payload)
        if a.isLate(p.ext, now: now) { return }
        a.insert(
            RTPAssemblyPacket(ext: p.ext, timestamp: p.timestamp, marker: p.marker, payload: payload, info: info),
            now: now, context: c)
    }
}

@Suite struct H264FrameAssemblerTests {
    @Test func accessUnitsAcrossPacketsInOrder() {
        var s = Stream()
        let packets = s.frame(key: true, size: 900) + s.frame(key: false, size: 450) + s.frame(key: false, size: 100)
        let a = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms, codec: .h264)
        let c = H264Context()
        for p in packets { insert(p, a, c) }
        #expect(c.frames.map(\.data) == s.accessUnits)
        #expect(c.frames.map(\.isKeyframe) == [true, false, false])
        #expect(c.frames.allSatisfy { $0.codec == .h264 })
        #expect(c.frames.map(\.timestamp) == [9000, 12000, 15000])
    }

    @Test func reorderedPacketsGiveTheSameAccessUnits() {
        var s = Stream()
        var packets = s.frame(key: true, size: 900) + s.frame(key: false, size: 600) + s.frame(key: false, size: 600)
        // Swap neighbours throughout (fragments of one unit and packets of two frames).
        var i = 1
        while i + 1 < packets.count {
            packets.swapAt(i, i + 1)
            i += 3
        }
        let a = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms, codec: .h264)
        let c = H264Context()
        for p in packets { insert(p, a, c) }
        #expect(c.frames.map(\.data) == s.accessUnits)
    }

    @Test func aLostFragmentDropsTheFrameUntilTheNextKeyframe() {
        var s = Stream()
        let key = s.frame(key: true, size: 300)
        let broken = s.frame(key: false, size: 600)
        let after = s.frame(key: false, size: 100)
        let nextKey = s.frame(key: true, size: 300)
        let a = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms, codec: .h264)
        let c = H264Context()
        for p in key { insert(p, a, c) }
        let lost = broken[1]  // a middle FU-A fragment
        for p in broken where p.ext != lost.ext { insert(p, a, c) }
        #expect(c.frames.count == 1)  // waits for the hole
        c.givenUp.insert(lost.ext)
        a.advance(now: 0, context: c)
        for p in after + nextKey { insert(p, a, c) }
        #expect(c.frames.map(\.data) == [s.accessUnits[0], s.accessUnits[3]])
        #expect(c.keyframeNeeds >= 1)
        #expect(a.counters.framesDropped == 2)
    }

    @Test func aLostFirstFragmentIsNotTakenForAFrameStart() {
        // The FU-A start of a delta frame is lost: its other fragments must not become a frame, and
        // the frames after it wait for a key frame.
        var s = Stream()
        let key = s.frame(key: true, size: 300)
        let broken = s.frame(key: false, size: 600)
        let after = s.frame(key: false, size: 100)
        let a = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms, codec: .h264)
        let c = H264Context()
        for p in key { insert(p, a, c) }
        c.givenUp.insert(broken[0].ext)
        for p in broken.dropFirst() + after { insert(p, a, c) }
        a.advance(now: 0, context: c)
        #expect(c.frames.map(\.data) == [s.accessUnits[0]])
        #expect(c.keyframeNeeds >= 1)
    }

    @Test func aLostParameterSetPacketIsMadeUpByTheKeptSets() {
        // The STAP-A (SPS, PPS) of a key frame is lost; its IDR slice starts a picture
        // (first_mb_in_slice 0) and decodes with the parameter sets kept from the last key frame.
        var s = Stream()
        let first = s.frame(key: true, size: 300)
        let second = s.frame(key: true, size: 300)
        let third = s.frame(key: false, size: 100)
        let a = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms, codec: .h264)
        let c = H264Context()
        for p in first { insert(p, a, c) }
        c.givenUp.insert(second[0].ext)
        for p in second.dropFirst() + third { insert(p, a, c) }
        a.advance(now: 0, context: c)
        #expect(c.frames.map(\.data) == s.accessUnits)
        #expect(c.frames.map(\.isKeyframe) == [true, true, false])
    }

    @Test func idrWithoutParameterSetsGetsTheKeptOnes() {
        var s = Stream()
        let key = s.frame(key: true, size: 300)
        let idrOnly = s.frame(key: true, size: 300, parameterSets: false)
        let a = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms, codec: .h264)
        let c = H264Context()
        for p in key + idrOnly { insert(p, a, c) }
        #expect(c.frames.count == 2)
        #expect(c.frames[1].isKeyframe)
        #expect(c.frames[1].data == annexB([sps, pps]) + s.accessUnits[1])
    }

    @Test func anIDRWithoutAnyParameterSetsIsNotAKeyframe() {
        var s = Stream()
        let idrOnly = s.frame(key: true, size: 300, parameterSets: false)
        let a = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms, codec: .h264)
        let c = H264Context()
        for p in idrOnly { insert(p, a, c) }
        #expect(c.frames.isEmpty && c.keyframeNeeds >= 1)
        // Parameter sets from sprop-parameter-sets make it decodable.
        let b = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms, codec: .h264)
        b.setParameterSets(annexB([sps, pps]))
        let d = H264Context()
        for p in idrOnly { insert(p, b, d) }
        #expect(d.frames.count == 1 && d.frames[0].isKeyframe)
    }

    @Test func withoutAConsumerFramesAreCountedNotBuilt() {
        var s = Stream()
        let packets = s.frame(key: true, size: 900) + s.frame(key: false, size: 450)
        let a = VideoFrameAssembler(capacity: 64, reorderWait: 50 * ms, codec: .h264)
        let c = H264Context()
        c.consumesFrames = false
        for p in packets { insert(p, a, c) }
        #expect(c.frames.isEmpty)
        #expect(a.counters.framesDecodable == 2 && a.counters.keyframesReceived == 1)
    }
}
