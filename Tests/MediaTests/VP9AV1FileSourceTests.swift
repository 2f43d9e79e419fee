import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// `--video FILE --video-codec vp9|av1`: VP9 and AV1 read from IVF and WebM files that ffmpeg made
/// (libvpx-vp9, libaom-av1) and sent as they are, without re-encoding (issue 35).
@Suite struct VP9AV1FileSourceTests {
    /// Two seconds of ffmpeg's test pattern at 320x240, 30 fps, a key frame every 30 frames.
    static func makeFile(_ codec: MediaCodec, _ ext: String) throws -> String {
        let path = temporaryPath("file-source-\(codec.rawValue)-\(UUID().uuidString).\(ext)")
        let encoder: [String] =
            codec == .vp9
            ? ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-lag-in-frames", "0"]
            : ["-c:v", "libaom-av1", "-usage", "realtime", "-cpu-used", "8", "-lag-in-frames", "0"]
        let run = try runTool(
            "ffmpeg",
            ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", fixturePattern, "-t", "2", "-pix_fmt", "yuv420p"]
                + encoder + ["-g", "30", "-b:v", "300k", path])
        try #require(run.status == 0, "ffmpeg: \(run.err)")
        return path
    }

    @Test(arguments: [(MediaCodec.vp9, "ivf"), (.vp9, "webm"), (.av1, "ivf"), (.av1, "webm")])
    func aFileIsSentFrameForFrameAndDecodes(codec: MediaCodec, ext: String) throws {
        let path = try Self.makeFile(codec, ext)
        defer { unlink(path) }
        let source = try FileVideoSource(path: path, codec: codec)
        #expect(source.codec == codec)
        #expect(source.framesPerLoop == 60)
        let played = pullFrames(source, seconds: 1.9)
        #expect(played.count >= 50)
        #expect(played.allSatisfy { $0.codec == codec })
        let size = try #require(played[0].keyframePictureSize)
        #expect(size.width == 320 && size.height == 240)
        #expect(played.indices.filter { played[$0].isKeyframe }.first == 0)
        if codec == .av1 {
            // Temporal units in the low-overhead format the packetizer takes: no temporal delimiter.
            #expect(played.allSatisfy { ($0.data[0] >> 3) & 0x0F != AV1OBUType.temporalDelimiter })
        }
        // Each frame is what the file holds (no re-encoding): libavcodec decodes every one at its size.
        let decoder = try VideoDecoder(codec: codec)
        var pictures = 0
        for frame in played {
            if let picture = try decoder.decode(frame.data) {
                #expect(picture.width == 320 && picture.height == 240)
                pictures += 1
            }
        }
        if try decoder.finish() != nil { pictures += 1 }
        #expect(pictures >= played.count - 2, "\(pictures) pictures of \(played.count) frames")

        // The file's codec, asked for as another, is refused naming the option that sends it.
        do {
            _ = try FileVideoSource(path: path, codec: .vp8)
            Issue.record("a \(codec.rtpName) file was accepted as VP8")
        } catch {
            #expect("\(error)".contains("--video-codec \(codec.rawValue)"), "\(error)")
        }
        try LocalSources.validate(video: path, audio: "none", videoCodec: codec.rawValue)
    }

    @Test func anIVFOfAnotherCodecIsRefusedWithItsFourcc() throws {
        let path = temporaryPath("file-source-bad-\(UUID().uuidString).ivf")
        defer { unlink(path) }
        var header = Array("DKIF".utf8) + [0, 0, 32, 0] + Array("H264".utf8) + [UInt8](repeating: 0, count: 20)
        header += [4, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + [1, 2, 3, 4]
        try Data(header).write(to: URL(fileURLWithPath: path))
        #expect(
            throws: MediaError.malformedFile(
                path: path, reason: "IVF codec 'H264' is not VP8 (VP80), VP9 (VP90) or AV1 (AV01)")
        ) {
            try IVFReader(path: path)
        }
        #expect(throws: MediaSourceError.self) { try FileVideoSource(path: path, codec: .vp9) }
    }
}
