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
}
