import Media
import RTCWire
import Testing

/// Files given on the command line (`--video`, `--audio`) are input too (issue 10): hostile
/// headers and timestamps must end in a typed error or sane frames, never a trap.
@Suite("Hostile media files")
struct IVFReaderTests {
    /// An IVF header (VP80, `rate`/`scale`) followed by `frames` as (pts, bytes).
    func ivf(rate: UInt32, scale: UInt32, frames: [(UInt64, [UInt8])]) -> [UInt8] {
        func le(_ v: UInt64, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) } }
        var b = Array("DKIF".utf8) + le(0, 2) + le(32, 2) + Array("VP80".utf8) + le(64, 2) + le(48, 2)
        b += le(UInt64(rate), 4) + le(UInt64(scale), 4) + le(UInt64(frames.count), 4) + le(0, 4)
        for (pts, data) in frames { b += le(UInt64(data.count), 4) + le(pts, 8) + data }
        return b
    }

    @Test func ivfTimestampsNearTheLimitDoNotOverflow() throws {
        // 1 fps: the last frame sits 55 807 ticks below Int.max and the default duration is 90 000;
        // adding them overflowed `Int`.
        let keyframe: [UInt8] = [0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a, 0x40, 0x00, 0x30, 0x00]
        let pts = UInt64(Int.max / 90_000)
        let reader = try IVFReader(bytes: ivf(rate: 1, scale: 1, frames: [(0, keyframe), (pts, [0x01])]))
        let frames = reader.encodedFrames()
        #expect(frames.count == 2)
        #expect(frames[1].duration == 90_000)
        #expect(frames[0].duration == UInt32.max)  // the gap, clamped
        // A time base whose product overflows, and timestamps going backwards.
        let odd = try IVFReader(
            bytes: ivf(rate: 7, scale: .max, frames: [(.max, keyframe), (0, [0x01]), (.max - 1, [0x01])]))
        #expect(odd.encodedFrames().count == 3)
    }

    @Test func ivfHeaderLiesAreErrors() {
        var long = ivf(rate: 30, scale: 1, frames: [(0, [0x10])])
        long[6] = 0xFF  // header length past the end
        long[7] = 0xFF
        #expect(throws: MediaError.self) { try IVFReader(bytes: long) }
        var huge = ivf(rate: 30, scale: 1, frames: [(0, [0x10])])
        for i in 32..<36 { huge[i] = 0xFF }  // frame size 4 GiB
        #expect(throws: MediaError.self) { try IVFReader(bytes: huge) }
    }
}
