import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// The libx264 encoder: IDRs that carry their parameter sets, constrained baseline, keyframes on
/// request, a rate that changes at run time, and a stream ffmpeg decodes without error.
@Suite struct H264EncoderTests {
    /// The NAL unit types of an Annex B access unit, in order.
    func unitTypes(_ frame: EncodedFrame) -> [UInt8] {
        var types: [UInt8] = []
        frame.data.withUnsafeBytes { H264AnnexB.forEachUnit($0) { types.append($0[0] & 0x1F) } }
        return types
    }

    func sps(_ frame: EncodedFrame) -> H264SPS? {
        var found: H264SPS?
        frame.data.withUnsafeBytes {
            H264AnnexB.forEachUnit($0) { unit in if found == nil { found = H264SPS.parse(unit) } }
        }
        return found
    }

    @Test func idrsCarrySPSAndPPSAndTheStreamDecodes() throws {
        let encoder = try H264Encoder(width: 320, height: 180, fps: 30, bitrate: 400_000, keyframeInterval: 1000)
        let pattern = TestPatternSource(width: 320, height: 180)
        var keyframes: [Int] = []
        var stream: [UInt8] = []
        for i in 0..<40 {
            if i == 17 { encoder.forceKeyframe() }
            let frames = try encoder.encode(i420: pattern.frame(at: i))
            #expect(frames.count == 1)
            let f = try #require(frames.first)
            #expect(f.codec == .h264)
            #expect(f.timestamp == UInt32(i * 3000))
            #expect(Array(f.data.prefix(4)) == [0, 0, 0, 1])
            let types = unitTypes(f)
            if f.isKeyframe {
                keyframes.append(i)
                // SPS and PPS lead every IDR, so a receiver can start at any keyframe.
                #expect(Array(types.filter { $0 != H264NALType.sei }.prefix(3)) == [7, 8, 5])
                let s = try #require(sps(f))
                #expect(s.width == 320 && s.height == 180)
                #expect(s.profile == 66)  // baseline
                #expect(s.constraints & 0x40 != 0)  // constraint_set1: constrained baseline
                #expect(s.level <= 31)
            } else {
                #expect(types.allSatisfy { $0 == H264NALType.slice })
            }
            stream += f.data
        }
        #expect(keyframes == [0, 17])
        let path = temporaryPath("x264-encoder-\(UUID().uuidString).h264")
        defer { unlink(path) }
        _ = FileManager.default.createFile(atPath: path, contents: Data(stream))
        #expect(try probeFrameCounts(path)["h264"] == 40)
        #expect(try ffmpegDecodeErrors(path) == "")
    }

    @Test func bitrateChangesAtRunTime() throws {
        let encoder = try H264Encoder(width: 320, height: 180, fps: 30, bitrate: 1_000_000, keyframeInterval: 1000)
        // Noise: content no rate fits, so the bytes follow the target (the test pattern is so easy
        // that it stays far below any target).
        var seed: UInt32 = 12345
        var picture = I420Image(width: 320, height: 180)
        func bytes(_ range: Range<Int>) throws -> Int {
            var sum = 0
            for _ in range {
                for i in picture.y.indices {
                    seed = seed &* 1_664_525 &+ 1_013_904_223
                    picture.y[i] = UInt8(truncatingIfNeeded: seed >> 24)
                }
                sum += try encoder.encode(i420: picture).first?.data.count ?? 0
            }
            return sum
        }
        _ = try bytes(0..<30)  // past the first IDR and the rate control's start
        let high = try bytes(30..<90)
        try encoder.setTargetBitrate(100_000)
        #expect(encoder.targetBitrate == 100_000)
        _ = try bytes(90..<120)
        let low = try bytes(120..<180)
        // Two seconds each: the lower target must show (well under half of the bytes).
        #expect(low * 2 < high, "high \(high) B, low \(low) B")
        #expect(throws: MediaError.self) { try encoder.setTargetBitrate(0) }
    }

    @Test func rejectsBadInputWithMediaErrors() throws {
        #expect(throws: MediaError.self) { try H264Encoder(width: 321, height: 180) }
        #expect(throws: MediaError.self) { try H264Encoder(width: 320, height: 180, fps: 0) }
        #expect(throws: MediaError.self) { try H264Encoder(width: 320, height: 180, preset: "warp-speed") }
        let encoder = try H264Encoder(width: 64, height: 64)
        #expect(throws: MediaError.self) { try encoder.encode(i420: I420Image(width: 32, height: 32)) }
        #expect(throws: MediaError.self) {
            try VideoEncoders.make(codec: .opus, width: 64, height: 64, fps: 30, bitrate: 100_000, keyframeInterval: 30)
        }
        #expect(throws: MediaError.self) { try VP9Encoder(width: 63, height: 64) }
        #expect(throws: MediaError.self) { try AV1Encoder(width: 64, height: 64, speed: 11) }
        for codec in [MediaCodec.vp9, .av1] {
            let e = try VideoEncoders.make(
                codec: codec, width: 64, height: 64, fps: 30, bitrate: 100_000, keyframeInterval: 30)
            #expect(e.codec == codec)
            try e.setTargetBitrate(50_000)
            #expect(e.targetBitrate == 50_000)
            #expect(throws: MediaError.self) { try e.setTargetBitrate(0) }
        }
        let vp8 = try VideoEncoders.make(
            codec: .vp8, width: 64, height: 64, fps: 30, bitrate: 100_000, keyframeInterval: 30)
        #expect(vp8.codec == .vp8)
    }

    /// The macroblock map marks exactly the macroblocks no changed region touches: a 640x360 tile of
    /// a 1280x720 canvas clears 40 columns by 23 rows (its last row of macroblocks straddles y 360);
    /// odd edges widen to the chroma grid (two pixels), and nothing changed marks every macroblock.
    @Test func theMacroblockMapMarksExactlyTheUnchangedOnes() {
        let constant = UInt8(1)  // X264_MBINFO_CONSTANT
        let tile = PixelRect(x: 0, y: 0, width: 640, height: 360)
        let map = H264Encoder.constantMacroblocks(width: 1280, height: 720, changed: [tile])
        #expect(map.count == 80 * 45)
        for row in 0..<45 {
            for column in 0..<80 {
                let touched = column < 40 && row <= 22
                #expect(map[row * 80 + column] == (touched ? 0 : constant), "macroblock \(column),\(row)")
            }
        }
        #expect(H264Encoder.constantMacroblocks(width: 1280, height: 720, changed: []).allSatisfy { $0 == constant })
        // x 17..<31 lies in column 1 only; x 31..<33 touches columns 1 and 2 (chroma pixel 15 spans x 30, 31).
        let inside = H264Encoder.constantMacroblocks(
            width: 64, height: 32, changed: [PixelRect(x: 17, y: 1, width: 14, height: 14)])
        #expect(inside == [constant, 0, constant, constant] + [UInt8](repeating: constant, count: 4))
        let edge = H264Encoder.constantMacroblocks(
            width: 64, height: 32, changed: [PixelRect(x: 31, y: 16, width: 2, height: 2)])
        #expect(edge == [UInt8](repeating: constant, count: 4) + [constant, 0, 0, constant])
        // Regions past the picture are clipped, empty ones ignored; a 30-pixel-high picture has 2 rows.
        let clipped = H264Encoder.constantMacroblocks(
            width: 64, height: 30,
            changed: [
                PixelRect(x: 60, y: 20, width: 100, height: 100),
                PixelRect(x: 0, y: 0, width: 0, height: 10),
                PixelRect(x: -50, y: -50, width: 10, height: 10),
            ])
        #expect(clipped == [UInt8](repeating: constant, count: 7) + [0])
    }

    /// libx264 (Debian's build) honours the map: a picture that changed everywhere but is said to be
    /// unchanged decodes as the previous one (its macroblocks were skipped unanalysed); said to have
    /// changed on its right half, that half (and only that) shows the new picture.
    @Test func libx264SkipsTheMacroblocksMarkedUnchanged() throws {
        let encoder = try H264Encoder(width: 128, height: 64, fps: 30, bitrate: 400_000, keyframeInterval: 1000)
        let decoder = try VideoDecoder(codec: .h264)
        func meanLuma(_ p: I420Image, columns: Range<Int>) -> Double {
            var sum = 0
            for row in 0..<p.height { for x in columns { sum += Int(p.y[row * p.strideY + x]) } }
            return Double(sum) / Double(p.height * columns.count)
        }
        func roundTrip(_ picture: I420Image, changed: [PixelRect]?) throws -> I420Image {
            let frames = try encoder.encode(i420: picture, changed: changed)
            let frame = try #require(frames.first)
            return try #require(try decoder.decode(frame.data))
        }
        let dark = I420Image(width: 128, height: 64, fillY: 50)
        let bright = I420Image(width: 128, height: 64, fillY: 200)
        let first = try roundTrip(dark, changed: nil)
        #expect(abs(meanLuma(first, columns: 0..<128) - 50) < 3)
        // Told nothing changed: the old picture stays.
        let kept = try roundTrip(bright, changed: [])
        #expect(abs(meanLuma(kept, columns: 0..<128) - 50) < 3, "mean \(meanLuma(kept, columns: 0..<128))")
        // Told the right half changed: only that half is coded anew.
        let half = try roundTrip(bright, changed: [PixelRect(x: 64, y: 0, width: 64, height: 64)])
        #expect(abs(meanLuma(half, columns: 64..<128) - 200) < 3, "right \(meanLuma(half, columns: 64..<128))")
        #expect(abs(meanLuma(half, columns: 0..<64) - 50) < 3, "left \(meanLuma(half, columns: 0..<64))")
        // No map: everything is analysed, and the whole picture is the new one.
        let whole = try roundTrip(bright, changed: nil)
        #expect(abs(meanLuma(whole, columns: 0..<128) - 200) < 3)
    }
}
