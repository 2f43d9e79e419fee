import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// H.264 into Matroska through `Recording`, judged by ffprobe and ffmpeg.
@Suite struct MatroskaH264Tests {
    @Test func h264IsWrittenAsMatroskaWithAvcCAndRenamed() throws {
        let frames = try x264AccessUnits(seconds: 2)
        let base = temporaryPath("h264-recording")
        let path = base + ".webm"
        defer {
            unlink(path)
            unlink(base + ".mkv")
        }
        let recording = try Recording(path: path)
        // A delta frame before the first keyframe is never written.
        recording.write(frames[1], arrival: 1_000_000)
        for (i, frame) in frames.enumerated() {
            recording.write(frame, arrival: 2_000_000 + UInt64(i) * 33_333_333)
        }
        try recording.close()
        #expect(recording.videoCodec == .h264)
        #expect(recording.path == base + ".mkv")
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(recording.videoFrames == frames.count)
        // The Opus track is declared (as for VP8) and empty here.
        #expect(try probeFrameCounts(recording.path)["h264"] == frames.count)
        #expect(try ffmpegDecodeErrors(recording.path) == "")
        let header = try runToolText(
            "ffprobe",
            [
                "-v", "error", "-show_entries", "stream=codec_name,profile,width,height", "-of", "csv=p=0",
                recording.path,
            ])
        #expect(header.split(separator: "\n").first == "h264,Constrained Baseline,320,240")
    }

    @Test func aVP8TrackRefusesH264() throws {
        let path = temporaryPath("h264-mixed.webm")
        defer { unlink(path) }
        let writer = try WebMWriter(path: path, video: WebMWriter.VideoTrack(codec: .vp8), audio: nil)
        let frames = try x264AccessUnits(seconds: 1)
        #expect(throws: MediaError.self) { try writer.write(frames[0], pts: 0) }
        try writer.close()
    }
}
