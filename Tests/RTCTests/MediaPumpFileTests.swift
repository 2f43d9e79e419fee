import Foundation
import Media
import RTC
import RTCWire
import TestSupport
import Testing

/// File sources played through a real ``PeerConnection`` pair by a ``MediaPump``, recorded on the
/// far side and checked with ffprobe and ffmpeg.
@Suite(.serialized) struct MediaPumpFileTests {
    /// Sends `videoPath`/`audioPath` through a real PeerConnection pair for 4.5 s, records what
    /// arrives, and checks the file with ffprobe and ffmpeg.
    func loopback(video videoPath: String, audio audioPath: String) async throws {
        let (tx, rx, video, audio) = try await connectedPair()
        let path = NSTemporaryDirectory() + "file-sources-\(UUID().uuidString).webm"
        let recording = try Recording(path: path)
        await rx.loop.submit {
            rx.onFrame = { _, _, frame, timing in recording.write(frame, arrival: timing.arrivalTime) }
        }
        let videoSource = try FileVideoSource(path: videoPath)
        let audioSource = try FileAudioSource(path: audioPath)
        let pump = MediaPump(
            connection: tx, video: video, videoSource: videoSource, audio: audio, audioSource: audioSource)
        await tx.loop.submit { pump.attach() }
        try await Task.sleep(nanoseconds: 4_500_000_000)
        await tx.loop.submit { pump.close() }
        try await Task.sleep(nanoseconds: 300_000_000)
        await rx.loop.submit { rx.onFrame = nil }
        try recording.close()
        await shutdown(tx, rx)
        defer { try? FileManager.default.removeItem(atPath: path) }

        // The 2 s files looped at least once.
        #expect(videoSource.loops >= 1 && audioSource.loops >= 1)
        #expect(pump.videoFramesSent >= 80 && pump.audioFramesSent >= 130)
        let probe = try runToolText(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-count_frames", "-show_entries", "stream=codec_name,nb_read_frames", "-of", "csv=p=0",
                path,
            ])
        var counts: [String: Int] = [:]
        for line in probe.split(separator: "\n") {
            let parts = line.split(separator: ",")
            if parts.count == 2 { counts[String(parts[0])] = Int(parts[1]) }
        }
        #expect((counts["vp8"] ?? 0) >= 80, "ffprobe: \(probe)")
        #expect((counts["opus"] ?? 0) >= 130, "ffprobe: \(probe)")
        #expect((counts["vp8"] ?? 0) == recording.videoFrames)
        let decode = try runToolText(
            "/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-enc_time_base", "-1", "-f", "null", "-"])
        #expect(decode.isEmpty, "ffmpeg reported errors: \(decode)")
        // Across the loop the recorded times keep increasing and cover the whole send.
        let file = try WebMReader(path: path)
        for kind in [MediaKind.video, .audio] {
            guard let track = file.firstTrack(of: kind) else {
                Issue.record("no \(kind) track")
                continue
            }
            let times = file.frames(track: track.number).map(\.timestampNanoseconds)
            #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 }, "\(kind) times increase")
            #expect((times.last ?? 0) - (times.first ?? 0) > 3_000_000_000, "\(kind) spans the loop")
        }
    }

    @Test func ivfAndOggFilesPlayThroughAPeerConnection() async throws {
        let files = try SourceFixtures.get()
        try await loopback(video: files.ivf, audio: files.ogg)
    }

    @Test func webmFilePlaysThroughAPeerConnection() async throws {
        let files = try SourceFixtures.get()
        try await loopback(video: files.webm, audio: files.webm)
    }
}
