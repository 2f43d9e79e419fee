import Foundation
import Media
import RTCWire
import TestSupport
import Testing

@Suite("Recorders judged by ffprobe/ffmpeg")
struct RecorderTests {
    @Test func webmWithVideoAndAudioPlays() throws {
        let path = temporaryPath("av.webm")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try WebMWriter(path: path)
        try feed(seconds: 3) { try writer.write($0, pts: $1) }
        try writer.close()
        #expect(writer.videoFramesWritten == 90 && writer.audioFramesWritten == 150)
        #expect(writer.droppedBeforeKeyframe == 0)
        let counts = try probeFrameCounts(path)
        #expect(counts["vp8"] == 90)
        #expect(counts["opus"] == 150)
        #expect(try ffmpegDecodeErrors(path) == "")
        let size = try runTool(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-select_streams", "v:0", "-show_entries",
                "stream=width,height", "-of", "csv=p=0", path,
            ])
        #expect(size.out.trimmingCharacters(in: .whitespacesAndNewlines) == "640,360")
        let duration = try runTool(
            "/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path])
        let seconds = Double(duration.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(seconds > 2.9 && seconds < 3.2, "duration \(seconds)")
    }

    /// Two frames of one track that map to one millisecond (a sender-report step, a burst after a
    /// stall) are written at strictly increasing times: ffmpeg rejects a repeated DTS.
    @Test func webmBlockTimesStrictlyIncreasePerTrack() throws {
        let path = temporaryPath("repeat.webm")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try WebMWriter(path: path)
        for i in 0..<60 {
            // Every fifth video frame repeats the previous frame's time, every seventh goes back 2 ms.
            let base = Int64(i) * 33_333_333
            let pts = i % 5 == 4 ? base - 33_333_333 : i % 7 == 6 ? base - 35_333_333 : base
            if let f = testMedia.videoFrame(at: i, layer: 2) { try writer.write(f, pts: pts) }
        }
        for a in 0..<100 { if let f = testMedia.audioFrame(at: a) { try writer.write(f, pts: Int64(a) * 20_000_000) } }
        try writer.close()
        #expect(try probeFrameCounts(path) == ["vp8": 60, "opus": 100])
        let decodeErrors = try ffmpegDecodeErrors(path)
        #expect(decodeErrors == "", "\(decodeErrors)")
        for stream in ["v:0"] {
            let times = try runTool(
                "/usr/bin/ffprobe",
                ["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts", "-of", "csv=p=0", path]
            ).out.split(separator: "\n").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            #expect(times.count > 50)
            #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 }, "\(stream): \(times)")
        }
    }

    @Test func webmAudioOnlyAndVideoOnlyPlay() throws {
        let audioPath = temporaryPath("audio.webm")
        defer { try? FileManager.default.removeItem(atPath: audioPath) }
        let audioWriter = try WebMWriter(path: audioPath, video: nil)
        try feed(seconds: 2) { f, pts in if f.codec == .opus { try audioWriter.write(f, pts: pts) } }
        try audioWriter.close()
        #expect(try probeFrameCounts(audioPath) == ["opus": 100])
        #expect(try ffmpegDecodeErrors(audioPath) == "")

        let videoPath = temporaryPath("video.webm")
        defer { try? FileManager.default.removeItem(atPath: videoPath) }
        let videoWriter = try WebMWriter(path: videoPath, audio: nil)
        try feed(seconds: 2, layer: 2) { f, pts in if f.codec == .vp8 { try videoWriter.write(f, pts: pts) } }
        try videoWriter.close()
        #expect(try probeFrameCounts(videoPath) == ["vp8": 60])
        #expect(try ffmpegDecodeErrors(videoPath) == "")
        #expect(throws: MediaError.self) { try videoWriter.write(testMedia.audioFrames[0], pts: 0) }
    }

    @Test func webmDropsDeltaFramesBeforeFirstKeyframe() throws {
        let path = temporaryPath("late.webm")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try WebMWriter(path: path)
        // Join mid-GOP: frames 10…59 of the top layer are deltas, 60 is the next keyframe.
        for i in 10..<120 {
            let pts = Int64(i) * 1_000_000_000 / 30
            if let f = testMedia.videoFrame(at: i, layer: 0) { try writer.write(f, pts: pts) }
        }
        for a in 17..<200 { if let f = testMedia.audioFrame(at: a) { try writer.write(f, pts: Int64(a) * 20_000_000) } }
        try writer.close()
        #expect(writer.droppedBeforeKeyframe == 50)
        let counts = try probeFrameCounts(path)
        #expect(counts["vp8"] == 60)
        #expect(counts["opus"] == 183)
        #expect(try ffmpegDecodeErrors(path) == "")
    }

    @Test func webmAbandonedAfterFlushStillPlays() throws {
        let path = temporaryPath("abandoned.webm")
        defer { try? FileManager.default.removeItem(atPath: path) }
        var writer: WebMWriter? = try WebMWriter(path: path)
        try feed(seconds: 2) { try writer?.write($0, pts: $1) }
        try writer?.flush()
        // More frames that never reach a finished cluster, then the writer is dropped without close().
        for i in 60..<70 { if let f = testMedia.videoFrame(at: i) { try writer?.write(f, pts: Int64(i) * 33_333_333) } }
        writer = nil
        let counts = try probeFrameCounts(path)
        #expect(counts["vp8"] == 60)
        #expect(counts["opus"] == 100)
        #expect(try ffmpegDecodeErrors(path) == "")
    }

    /// A child process writes a WebM file and is killed with SIGKILL mid-recording; ffprobe must
    /// still read every frame up to the last cluster written.
    @Test func webmSurvivesSIGKILL() throws {
        let path = temporaryPath("killed.webm")
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Warm up every code path in this process so the forked child needs no lazy initialisation.
        let warmPath = temporaryPath("warm.webm")
        defer { try? FileManager.default.removeItem(atPath: warmPath) }
        let warm = try WebMWriter(path: warmPath)
        try feed(seconds: 1) { try warm.write($0, pts: $1) }
        try warm.close()
        // A forked child has no writer thread: it writes on its own thread, as the container layout
        // (each cluster handed to the kernel whole) is what this test is about.
        let writer = try WebMWriter(path: path, writer: .inline)
        let pid = fork()
        #expect(pid >= 0)
        if pid == 0 {
            // Child: 2 s of media in clusters at each 1 s boundary, then half a cluster more, then die.
            do { try feed(seconds: 2.5) { try writer.write($0, pts: $1) } } catch { _exit(3) }
            kill(getpid(), SIGKILL)
            _exit(4)
        }
        var status: Int32 = 0
        var waited = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            waited += 1
            if waited > 3000 {  // 30 s: the child is stuck, fail instead of hanging
                kill(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                Issue.record("child did not finish")
                return
            }
            usleep(10_000)
        }
        #expect(status & 0x7f == SIGKILL, "child must die by SIGKILL, status \(status)")
        let counts = try probeFrameCounts(path)
        // Clusters end at each video keyframe (0 s, 2 s) and every second; the reorder window may hold
        // back a few frames, so the file holds at least the first 2 s.
        let video = counts["vp8"] ?? 0
        let audio = counts["opus"] ?? 0
        #expect(video >= 60 && video < 75, "video frames \(video)")
        #expect(audio >= 95 && audio < 125, "audio frames \(audio)")
        #expect(try ffmpegDecodeErrors(path) == "")
    }

    @Test func ivfRoundTripAndFFprobe() throws {
        let path = temporaryPath("video.ivf")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try IVFWriter(path: path)
        // Start on a delta frame: it must be dropped.
        for i in 59..<150 {
            if let f = testMedia.videoFrame(at: i, layer: 1) { try writer.write(f, pts: Int64(i) * 33_333_333) }
        }
        try writer.close()
        #expect(writer.droppedBeforeKeyframe == 1 && writer.framesWritten == 90)
        #expect(try probeFrameCounts(path) == ["vp8": 90])
        #expect(try ffmpegDecodeErrors(path) == "")
        let reader = try IVFReader(path: path)
        #expect(reader.width == 320 && reader.height == 180 && reader.frames.count == 90 && !reader.truncated)
        let frames = reader.encodedFrames()
        #expect(frames.first?.isKeyframe == true)
        #expect(frames[1].timestamp - frames[0].timestamp == 3000)
        #expect(frames.map(\.data) == (60..<150).compactMap { testMedia.videoFrame(at: $0, layer: 1)?.data })
    }

    @Test func oggOpusRoundTripAndFFprobe() throws {
        let path = temporaryPath("audio.ogg")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try OggOpusWriter(path: path, channels: 1, preSkip: testMedia.audioPreSkip)
        for i in 0..<150 { if let f = testMedia.audioFrame(at: i) { try writer.write(f, pts: Int64(i) * 20_000_000) } }
        try writer.close()
        #expect(writer.packetsWritten == 150 && writer.gapPacketsInserted == 0)
        #expect(try probeFrameCounts(path) == ["opus": 150])
        #expect(try ffmpegDecodeErrors(path) == "")
        let reader = try OggOpusReader(path: path)
        #expect(reader.channels == 1 && reader.preSkip == 312 && reader.packets.count == 150 && !reader.truncated)
        #expect(reader.packets == Array(testMedia.audioFrames.prefix(150)).map(\.data))
        let frames = reader.encodedFrames()
        let last = try #require(frames.last)
        #expect(last.timestamp == UInt32(149 * 960))
        // ffprobe agrees on the duration: 3 s minus the pre-skip.
        let duration = try runTool(
            "/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path])
        let seconds = Double(duration.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(abs(seconds - (3.0 - 312.0 / 48_000)) < 0.01, "duration \(seconds)")
    }

    @Test func oggOpusFillsGaps() throws {
        let path = temporaryPath("gap.ogg")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try OggOpusWriter(path: path)
        for i in [0, 1, 2, 13, 14] {
            if let f = testMedia.audioFrame(at: i) { try writer.write(f, pts: Int64(i) * 20_000_000) }
        }
        try writer.close()
        #expect(writer.gapPacketsInserted == 10)
        #expect(try ffmpegDecodeErrors(path) == "")
        #expect(try OggOpusReader(path: path).packets.count == 15)
    }

    @Test func fileSourcesLoadAsALoop() throws {
        let ivf = temporaryPath("loop.ivf")
        let ogg = temporaryPath("loop.ogg")
        defer { try? FileManager.default.removeItem(atPath: ivf) }
        defer { try? FileManager.default.removeItem(atPath: ogg) }
        let v = try IVFWriter(path: ivf)
        let a = try OggOpusWriter(path: ogg)
        for i in 0..<60 {
            if let f = testMedia.videoFrame(at: i, layer: 2) { try v.write(f, pts: Int64(i) * 33_333_333) }
        }
        for i in 0..<100 { if let f = testMedia.audioFrame(at: i) { try a.write(f, pts: Int64(i) * 20_000_000) } }
        try v.close()
        try a.close()
        let media = try SyntheticMedia.fromFiles(video: ivf, audio: ogg)
        #expect(media.videoFramesPerLoop == 60 && media.audioFramesPerLoop == 100)
        let video = try #require(media.videoFrame(at: 61))
        #expect(video.timestamp == UInt32(61 * 3000))
        let audio = try #require(media.audioFrame(at: 101))
        #expect(audio.timestamp == UInt32(101 * 960))
        #expect(media.layers.first?.width == 160)
    }

    @Test func badFilesGiveClearErrors() throws {
        let junk = temporaryPath("junk.bin")
        defer { try? FileManager.default.removeItem(atPath: junk) }
        try Data("definitely not media".utf8).write(to: URL(fileURLWithPath: junk))
        #expect(throws: MediaError.self) { try IVFReader(path: junk) }
        #expect(throws: MediaError.self) { try OggOpusReader(path: junk) }
        #expect(throws: MediaError.cannotOpen(path: "/nonexistent/x.ivf", errno: ENOENT)) {
            try IVFReader(path: "/nonexistent/x.ivf")
        }
        // A corrupted Ogg page fails its CRC.
        let ogg = temporaryPath("corrupt.ogg")
        defer { try? FileManager.default.removeItem(atPath: ogg) }
        let w = try OggOpusWriter(path: ogg)
        for i in 0..<20 { if let f = testMedia.audioFrame(at: i) { try w.write(f) } }
        try w.close()
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: ogg)))
        bytes[bytes.count - 10] ^= 0xFF
        #expect(throws: MediaError.self) { try OggOpusReader(bytes: bytes) }
        // A truncated IVF keeps its whole frames.
        let ivf = temporaryPath("trunc.ivf")
        defer { try? FileManager.default.removeItem(atPath: ivf) }
        let v = try IVFWriter(path: ivf)
        for i in 0..<10 { if let f = testMedia.videoFrame(at: i, layer: 2) { try v.write(f) } }
        try v.close()
        let ivfBytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: ivf)))
        let cut = try IVFReader(bytes: Array(ivfBytes.dropLast(3)))
        #expect(cut.truncated && cut.frames.count == 9)
    }

    @Test func unwritablePathsThrow() {
        #expect(throws: MediaError.self) { try WebMWriter(path: "/nonexistent-dir/x.webm") }
        #expect(throws: MediaError.self) { try IVFWriter(path: "/nonexistent-dir/x.ivf") }
        // Opening works here; the write fails on the disk writer thread, and close() reports it.
        #expect(throws: MediaError.self) { try OggOpusWriter(path: "/proc/version").close() }
    }
}
