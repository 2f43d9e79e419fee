import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// Fragmented MP4 through `MP4Writer` and `Recording`, judged by ffprobe and ffmpeg.
@Suite struct MP4WriterTests {
    /// H.264 access units from libx264 with Opus from the synthetic tone, interleaved in time.
    private func feedH264(seconds: Int, _ sink: (EncodedFrame, Int64) throws -> Void) throws -> (video: Int, audio: Int)
    {
        let video = try x264AccessUnits(seconds: seconds)
        let audioCount = seconds * 50
        var v = 0
        var a = 0
        while v < video.count || a < audioCount {
            let vPts = Int64(v) * 33_333_333
            let aPts = Int64(a) * 20_000_000
            if v < video.count && (a >= audioCount || vPts <= aPts) {
                try sink(video[v], vPts)
                v += 1
            } else {
                if let f = testMedia.audioFrame(at: a) { try sink(f, aPts) }
                a += 1
            }
        }
        return (video.count, audioCount)
    }

    private func probe(_ path: String, _ entries: String) throws -> [String] {
        let r = try runToolText("ffprobe", ["-v", "error", "-show_entries", entries, "-of", "csv=p=0", path])
        return r.split(separator: "\n").map(String.init)
    }

    @Test func h264AndOpusPlayAsFragmentedMP4() throws {
        let path = temporaryPath("h264.mp4")
        defer { unlink(path) }
        let recording = try Recording(path: path)
        #expect(recording.container == .mp4)
        var arrival: UInt64 = 1_000_000
        let fed = try feedH264(seconds: 3) { frame, pts in
            arrival = 1_000_000 + UInt64(pts)
            recording.write(frame, arrival: arrival)
        }
        try recording.close()
        #expect(recording.path == path)
        #expect(recording.videoCodec == .h264)
        #expect(recording.videoFrames == fed.video)
        #expect(recording.audioFrames == fed.audio)
        let counts = try probeFrameCounts(path)
        #expect(counts["h264"] == fed.video)
        #expect(counts["opus"] == fed.audio)
        #expect(try ffmpegDecodeErrors(path) == "")
        #expect(try probe(path, "stream=codec_name,width,height").first == "h264,320,240")
        #expect(try probe(path, "format=format_name").first == "\"mov,mp4,m4a,3gp,3g2,mj2\"")
        let duration = Double(try probe(path, "format=duration").first ?? "") ?? 0
        #expect(abs(duration - 3.0) < 0.1, "duration \(duration)")
    }

    @Test func vp8AndOpusPlayAsFragmentedMP4() throws {
        let path = temporaryPath("vp8.mp4")
        defer { unlink(path) }
        let writer = try MP4Writer(path: path)
        try feed(seconds: 3) { try writer.write($0, pts: $1) }
        try writer.close()
        #expect(writer.videoCodec == .vp8)
        #expect(writer.fragmentsWritten >= 3)
        let counts = try probeFrameCounts(path)
        #expect(counts["vp8"] == 90)
        #expect(counts["opus"] == 150)
        #expect(try ffmpegDecodeErrors(path) == "")
    }

    /// What a SIGKILL leaves: every whole fragment plays; the open one is lost.
    @Test func anAbandonedFilePlaysUpToItsLastFragment() throws {
        let path = temporaryPath("abandoned.mp4")
        defer { unlink(path) }
        var writer: MP4Writer? = try MP4Writer(path: path, writer: .inline)
        try feed(seconds: 2.5) { try writer?.write($0, pts: $1) }
        writer = nil
        let counts = try probeFrameCounts(path)
        // Fragments end at each keyframe and every second: at least the first 2 s are in the file.
        let video = counts["vp8"] ?? 0
        let audio = counts["opus"] ?? 0
        #expect(video >= 60 && video < 75, "video frames \(video)")
        #expect(audio >= 95 && audio < 125, "audio frames \(audio)")
        #expect(try ffmpegDecodeErrors(path) == "")
    }

    @Test func withoutAKeyframeTheFileIsAudioOnly() throws {
        let path = temporaryPath("audio-only.mp4")
        defer { unlink(path) }
        let writer = try MP4Writer(path: path, headerWaitMs: 500)
        let delta = try #require(testMedia.videoFrame(at: 1))
        #expect(!delta.isKeyframe)
        try writer.write(delta, pts: 0)
        for a in 0..<100 { if let f = testMedia.audioFrame(at: a) { try writer.write(f, pts: Int64(a) * 20_000_000) } }
        // The header is written: a keyframe now is refused (counted), not a broken video track.
        if let key = testMedia.videoFrame(at: 0) { try writer.write(key, pts: 2_000_000_000) }
        try writer.close()
        #expect(writer.droppedBeforeKeyframe == 2)
        #expect(try probeFrameCounts(path) == ["opus": 100])
        #expect(try ffmpegDecodeErrors(path) == "")
    }

    @Test func badArgumentsAreRefused() throws {
        let path = temporaryPath("bad.mp4")
        defer { unlink(path) }
        #expect(throws: MediaError.self) { try MP4Writer(path: path, video: false, audioChannels: nil) }
        #expect(throws: MediaError.self) { try MP4Writer(path: path, audioChannels: 3) }
        let audioOnly = try MP4Writer(path: path, video: false)
        let key = try #require(testMedia.videoFrame(at: 0))
        #expect(throws: MediaError.self) { try audioOnly.write(key, pts: 0) }
        try audioOnly.close()
    }
}
