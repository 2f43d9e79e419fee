import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// A slow disk must never stall the thread that records: frames past the backlog limit are dropped
/// and counted, and the file still plays.
@Suite struct RecordingBacklogTests {
    /// Ten seconds of VP8 + Opus fed as fast as possible to a recording whose disk writer sleeps 100 ms
    /// before every write. Feeding finishes while the writer is still far behind (so it never waited
    /// for the disk), frames were dropped and counted, and ffprobe decodes exactly the frames written.
    @Test func slowDiskDropsWholeFramesAndTheFileStillPlays() throws {
        let media = try SyntheticMedia(seconds: 4, layers: 1)
        let slowDisk = DiskWriter(name: "test-slow-disk", delayPerWrite: 100_000_000)
        let path = NSTemporaryDirectory() + "understudy-backlog-\(getpid()).webm"
        defer { try? FileManager.default.removeItem(atPath: path) }
        // A small limit so that the backlog fills within a few clusters.
        let recording = try Recording(
            path: path, opusChannels: media.audioChannels, writer: slowDisk, backlogLimit: 20_000)
        let start: UInt64 = 1_000_000_000
        var v = 0
        var a = 0
        let videoCount = 10 * media.fps
        let audioCount = 10 * 50
        var maxBacklog = 0
        while v < videoCount || a < audioCount {
            let vPts = UInt64(v) * 1_000_000_000 / UInt64(media.fps)
            let aPts = UInt64(a) * 20_000_000
            if v < videoCount && (a >= audioCount || vPts <= aPts) {
                if let f = media.videoFrame(at: v) { recording.write(f, arrival: start + vPts) }
                v += 1
            } else {
                if let f = media.audioFrame(at: a) { recording.write(f, arrival: start + aPts) }
                a += 1
            }
            maxBacklog = max(maxBacklog, recording.backlogBytes)
        }
        // Every frame was handled without waiting: the writer still holds queued chunks.
        #expect(slowDisk.queuedOperations > 0)
        #expect(recording.droppedFrames > 0)
        #expect(maxBacklog > recording.backlogLimit)
        try recording.close()
        #expect(recording.backlogBytes == 0)
        #expect(recording.videoFrames + recording.audioFrames + recording.droppedFrames == videoCount + audioCount)

        let out = try runToolText(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-count_frames", "-show_entries", "stream=codec_name,nb_read_frames", "-of", "csv=p=0",
                path,
            ])
        let counts = Dictionary(
            uniqueKeysWithValues: out.split(separator: "\n").compactMap { line -> (String, Int)? in
                let parts = line.split(separator: ",")
                guard parts.count == 2, let n = Int(parts[1]) else { return nil }
                return (String(parts[0]), n)
            })
        #expect(counts["vp8"] == recording.videoFrames)
        #expect(counts["opus"] == recording.audioFrames)
        let errors = try runToolText("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-f", "null", "-"])
        #expect(errors.isEmpty, "ffmpeg reported: \(errors)")
    }
}
