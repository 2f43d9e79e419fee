import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// A 6 s single-layer 320x180 H.264 loop (x264, constrained baseline), so an 8 s recording crosses a
/// loop restart.
private let h264Loop: SyntheticMedia = {
    do { return try SyntheticMedia(seconds: 6, layers: 1, width: 320, height: 180, videoCodec: .h264) } catch {
        fatalError("\(error)")
    }
}()

/// `understudy analyze` on the recordings of every codec and container (issue 35, codecs item 2):
/// H.264 in Matroska and MP4 is length-prefixed with its parameter sets in the avcC, which the
/// analysis turns back into Annex B; files written by our writers and files ffmpeg remuxed.
// Each test encodes and decodes for seconds: that work runs on a thread of its own (`offThePool`),
// one test at a time, so that it never holds the cooperative pool other suites' waits need.
@Suite("Recording quality of H.264, VP9 and AV1 recordings", .serialized)
struct RecordingQualityCodecTests {
    /// `seconds` of `media` through `write`, video and Opus.
    func record(media: SyntheticMedia, seconds: Double, _ write: (EncodedFrame, Int64) throws -> Void) throws {
        try feed(seconds: seconds, media: media) { frame, pts in try write(frame, pts) }
    }

    func matroska(_ name: String, media: SyntheticMedia = h264Loop, seconds: Double = 8) throws -> String {
        let path = temporaryPath(name)
        let writer = try WebMWriter(
            path: path, video: .init(codec: media.videoCodec),
            audio: .init(channels: media.audioChannels, preSkip: media.audioPreSkip))
        try record(media: media, seconds: seconds) { try writer.write($0, pts: $1) }
        try writer.close()
        return path
    }

    func mp4(_ name: String, media: SyntheticMedia = h264Loop, seconds: Double = 8) throws -> String {
        let path = temporaryPath(name)
        let writer = try MP4Writer(path: path, audioChannels: media.audioChannels, preSkip: media.audioPreSkip)
        try record(media: media, seconds: seconds) { try writer.write($0, pts: $1) }
        try writer.close()
        return path
    }

    /// Every frame numbered and decoded, a high PSNR, the flashes paired with the beeps.
    func expectClean(_ q: RecordingQuality, codec: String, frames: Int = 240, pairs: Int = 3) {
        #expect(q.videoCodec == codec && !q.truncated, "\(q.path)")
        #expect(q.video.frames == frames && q.video.numbered == frames && q.video.undecodable == 0, "\(q.video)")
        #expect(q.video.dropped == 0 && q.video.outOfOrder == 0, "\(q.video)")
        #expect((q.video.psnr?.mean ?? 0) > 30, "\(q.video.psnr as Any)")
        #expect(q.syncPairs >= pairs, "\(q.path): \(q.beepOnsetsMs)")
        #expect(abs(q.avOffsetMs ?? 99) < 15, "\(q.path): \(q.avOffsetMs as Any)")
    }

    @Test func h264MatroskaFromOurWriter() async throws {
        let q = try await offThePool { try RecordingQuality.analyze(path: try self.matroska("quality-h264.mkv")) }
        expectClean(q, codec: "h264")
    }

    @Test func h264FragmentedMP4FromOurWriter() async throws {
        let q = try await offThePool { try RecordingQuality.analyze(path: try self.mp4("quality-h264.mp4")) }
        expectClean(q, codec: "h264")
    }

    /// ffmpeg's own muxers: a plain MP4 (sample tables in `moov`, `stss` key frames, no fragments)
    /// and a Matroska file with ffmpeg's block layout, both remuxed from our recording without
    /// re-encoding, so the frame numbers still read.
    @Test func h264RemuxedByFFmpegIntoPlainMP4AndMatroska() async throws {
        let ours = try await offThePool { try self.matroska("quality-h264-source.mkv") }
        for name in ["quality-h264-ffmpeg.mp4", "quality-h264-ffmpeg.mkv"] {
            let out = temporaryPath(name)
            let (samples, q) = try await offThePool {
                _ = try runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", ours, "-c", "copy", out])
                let samples = name.hasSuffix(".mp4") ? try MP4Reader(path: out).frames(track: 1).count : 240
                return (samples, try RecordingQuality.analyze(path: out))
            }
            #expect(samples == 240)
            expectClean(q, codec: "h264")
        }
    }

    /// ffmpeg's libx264 with B-frames (decode order differs from presentation order): the samples'
    /// times are their presentation times and nothing fails to decode. (The decoder hands back only
    /// the newest of the pictures it holds at the end: one B-frame short of the 90.)
    @Test func h264EncodedByFFmpegWithBFrames() async throws {
        let out = temporaryPath("quality-x264-bframes.mp4")
        let (times, q) = try await offThePool {
            _ = try runTool(
                "/usr/bin/ffmpeg",
                [
                    "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-t", "3",
                    "-c:v", "libx264", "-bf", "2", "-pix_fmt", "yuv420p", out,
                ])
            let times = try MP4Reader(path: out).frames(track: 1).map(\.timestampNanoseconds)
            return (times, try RecordingQuality.analyze(path: out))
        }
        #expect(times.count == 90 && times != times.sorted())  // reordered: B-frames
        #expect(Set(times).count == 90)
        #expect(q.videoCodec == "h264" && q.video.frames >= 89 && q.video.undecodable == 0, "\(q.video)")
    }

    @Test func vp9AndAV1WebMAndMP4FromOurWriters() async throws {
        // Short (a 2 s loop, 4 s recorded): the AV1 and VP9 encoders are slow.
        for codec in [MediaCodec.vp9, .av1] {
            let (webm, mp4) = try await offThePool {
                let media = try SyntheticMedia(seconds: 2, layers: 1, width: 320, height: 180, videoCodec: codec)
                return (
                    try RecordingQuality.analyze(
                        path: try self.matroska("quality-\(codec.rawValue).webm", media: media, seconds: 4)),
                    try RecordingQuality.analyze(
                        path: try self.mp4("quality-\(codec.rawValue).mp4", media: media, seconds: 4))
                )
            }
            expectClean(webm, codec: codec.rawValue, frames: 120, pairs: 1)
            expectClean(mp4, codec: codec.rawValue, frames: 120, pairs: 1)
        }
    }

    /// A recorder killed mid-fragment: the MP4 is read up to its last whole sample.
    @Test func aCutMP4IsReadUpToItsLastWholeSample() async throws {
        let path = try await offThePool { try self.mp4("quality-h264-cut.mp4") }
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        let cut = temporaryPath("quality-h264-cut-short.mp4")
        try Data(bytes[0..<(bytes.count * 3 / 4)]).write(to: URL(fileURLWithPath: cut))
        let q = try await offThePool { try RecordingQuality.analyze(path: cut) }
        #expect(q.truncated && q.video.frames > 120 && q.video.frames < 240 && q.video.undecodable == 0, "\(q.video)")
        // Not an MP4 past its ftyp: a clear error, no crash.
        let stub = temporaryPath("quality-stub.mp4")
        try Data(bytes[0..<40]).write(to: URL(fileURLWithPath: stub))
        #expect(throws: RecordingQuality.Failure.self) { try RecordingQuality.analyze(path: stub) }
    }
}
