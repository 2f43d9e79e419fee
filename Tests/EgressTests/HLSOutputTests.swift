import Egress
import Foundation
import Media
import SystemCalls
import TestSupport
import Testing

/// HLS with fMP4 segments: the VOD playlist at the end plays whole in ffmpeg with the fed duration, the
/// live playlist rolls its window and ffmpeg follows it while it is written, and bad destinations are
/// refused with a clear error.
@Suite struct HLSOutputTests {
    func text(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

    @Test(arguments: HLSOutput.Options.SegmentFormat.allCases)
    func vodPlaylistPlaysWholeWithTheFedDuration(format: HLSOutput.Options.SegmentFormat) async throws {
        let dir = scratchFolder("vod-\(format)")
        let output = try HLSOutput(destination: dir + "/room.m3u8", options: .init(segmentFormat: format))
        let feed = try CompositeFeed(keyframeSeconds: output.keyframeIntervalSeconds)
        try await feed.feed(seconds: 7, to: [output])
        try await onOwnThread { try output.finish() }
        // Keyframes every 2 s: 0-2, 2-4, 4-6, then the 1 s tail.
        let suffix = format == .ts ? "ts" : "m4s"
        #expect(output.segments.map(\.name) == (0..<4).map { String(format: "room-%05d.%@", $0, suffix) })
        for segment in output.segments.dropLast() { #expect(abs(segment.duration - 2) < 0.01) }
        let playlist = try text(dir + "/room.m3u8")
        #expect(playlist.contains("#EXT-X-PLAYLIST-TYPE:VOD"))
        #expect(playlist.contains("#EXT-X-MAP:URI=\"room-init.mp4\"") == (format == .fmp4))
        #expect(playlist.hasSuffix("#EXT-X-ENDLIST\n"))
        let probed = try await probe(dir + "/room.m3u8")
        #expect(probed.codecs == ["aac", "h264"])
        #expect(probed.errors.isEmpty, "\(probed.errors)")
        #expect(abs(probed.duration - 7) < 7 * 0.01, "duration \(probed.duration)")
        #expect(try await decodeErrors(dir + "/room.m3u8").isEmpty)
        let counts = try await frameCounts(dir + "/room.m3u8")
        #expect(counts["h264"] == 7 * 30)
        // 7 s of 1024-sample AAC frames at 48 kHz (the encoder's priming frame included).
        #expect(abs((counts["aac"] ?? 0) - 7 * 48_000 / 1024) <= 2, "\(counts)")
    }

    @Test func opusAudioIsAnOption() async throws {
        let dir = scratchFolder("opus")
        let output = try HLSOutput(destination: dir + "/o.m3u8", options: .init(audioCodec: .opus))
        let feed = try CompositeFeed()
        try await feed.feed(seconds: 3, to: [output])
        try await onOwnThread { try output.finish() }
        let probed = try await probe(dir + "/o.m3u8")
        #expect(probed.codecs == ["h264", "opus"])
        #expect(abs(probed.duration - 3) < 0.05, "duration \(probed.duration)")
    }

    @Test func livePlaylistRollsItsWindowAndKeepsTheSegments() async throws {
        let dir = scratchFolder("window")
        let output = try HLSOutput(destination: dir + "/w.m3u8", options: .init(targetSegmentSeconds: 1, window: 2))
        let feed = try CompositeFeed(keyframeSeconds: 1)
        try await feed.feed(seconds: 6.5, to: [output])
        DiskWriter.shared.waitForQueued()  // the files are written on the disk writer's thread
        let live = try text(dir + "/w.m3u8")
        #expect(!live.contains("#EXT-X-ENDLIST"))
        #expect(!live.contains("PLAYLIST-TYPE"))
        #expect(live.components(separatedBy: "#EXTINF").count - 1 == 2)
        #expect(live.contains("#EXT-X-MEDIA-SEQUENCE:\(output.segments.count - 2)"))
        #expect(output.segments.count >= 5)
        try await onOwnThread { try output.finish() }
        let vod = try text(dir + "/w.m3u8")
        #expect(vod.contains("#EXT-X-MEDIA-SEQUENCE:0"))
        #expect(vod.components(separatedBy: "#EXTINF").count - 1 == output.segments.count)
        for segment in output.segments { #expect(FileManager.default.fileExists(atPath: dir + "/" + segment.name)) }
    }

    /// ffmpeg opens the live playlist after the first segments, follows it as segments come (paced at
    /// about real time), and stops at the `#EXT-X-ENDLIST` of the finish: it copies the whole stream.
    @Test(arguments: HLSOutput.Options.SegmentFormat.allCases)
    func ffmpegFollowsTheLivePlaylistWhileItIsWritten(format: HLSOutput.Options.SegmentFormat) async throws {
        let dir = scratchFolder("live-\(format)")
        let output = try HLSOutput(
            destination: dir + "/live.m3u8", options: .init(targetSegmentSeconds: 1, window: 3, segmentFormat: format))
        let feed = try CompositeFeed(keyframeSeconds: 1)
        try await feed.feed(seconds: 2.5, to: [output])
        DiskWriter.shared.waitForQueued()
        let reader = try ChildProcess(
            "/usr/bin/ffmpeg",
            [
                "-nostdin", "-v", "error", "-live_start_index", "0", "-i", dir + "/live.m3u8", "-c", "copy", "-y",
                dir + "/copy.mp4",
            ], standardError: .null)
        for _ in 0..<10 {
            try await feed.feed(seconds: 0.5, to: [output])
            try await Task.sleep(nanoseconds: 500_000_000)
        }
        try await onOwnThread { try output.finish() }
        let deadline = Date().addingTimeInterval(30)
        while !reader.hasExited && Date() < deadline { try await Task.sleep(nanoseconds: 100_000_000) }
        reader.signal(SIGTERM)
        #expect(reader.wait() == 0)
        let copied = try await probe(dir + "/copy.mp4")
        #expect(copied.codecs == ["aac", "h264"])
        #expect(abs(copied.duration - 7.5) < 0.1, "duration \(copied.duration)")
    }

    /// A disk that stalls (the writer thread held until the feed is done), then takes 0.2 s per file
    /// operation: the feed (the composite's thread) never waits for it, every operation is still
    /// queued when the feed returns; every live playlist on disk lists only segments already written
    /// whole (a kill -9 leaves a playable playlist); and the finish waits for all of it, so the VOD
    /// playlist plays whole with the fed duration.
    @Test func aSlowDiskDoesNotStallTheCompositeAndTheFinishWritesEverything() async throws {
        let dir = scratchFolder("slow-disk")
        let writer = DiskWriter(name: "slow-disk-test", delayPerWrite: 200_000_000)
        let stall = DispatchSemaphore(value: 0)
        writer.submit { stall.wait() }
        let output = try HLSOutput(
            destination: dir + "/slow.m3u8", options: .init(targetSegmentSeconds: 1), writer: writer)
        let feed = try CompositeFeed(keyframeSeconds: 1)
        try await feed.feed(seconds: 5, to: [output])
        // Five segments' files and playlists, all waiting behind the stall: the feed did not wait.
        let waiting = writer.queuedOperations
        #expect(waiting >= 15, "\(waiting) operations waiting: the feed waited for the disk")
        #expect(!FileManager.default.fileExists(atPath: dir + "/slow.m3u8"))
        stall.signal()
        #expect(output.segments.count >= 3)
        // Whatever playlist is on disk now names only segments whose bytes are all there.
        var checked = 0
        let deadline = Date().addingTimeInterval(30)
        while writer.queuedOperations > 0 && Date() < deadline {
            try await Task.sleep(nanoseconds: 400_000_000)
            guard let live = try? text(dir + "/slow.m3u8") else { continue }
            for name in live.split(separator: "\n") where name.hasSuffix(".m4s") {
                // A segment plays after the init segment: each holds its whole second (30 frames).
                let joined = dir + "/joined.mp4"
                let bytes =
                    try Data(contentsOf: URL(fileURLWithPath: dir + "/slow-init.mp4"))
                    + Data(contentsOf: URL(fileURLWithPath: dir + "/" + name))
                try bytes.write(to: URL(fileURLWithPath: joined))
                let frames = try await frameCounts(joined)["h264"] ?? 0
                #expect(frames == 30, "\(name) listed with \(frames) frames in it")
                checked += 1
            }
        }
        #expect(checked > 0, "no live playlist seen while the disk was behind")
        try await onOwnThread { try output.finish() }
        #expect(writer.queuedOperations == 0)
        let probed = try await probe(dir + "/slow.m3u8")
        #expect(probed.errors.isEmpty, "\(probed.errors)")
        #expect(abs(probed.duration - 5) < 5 * 0.01, "duration \(probed.duration)")
        #expect(try await frameCounts(dir + "/slow.m3u8")["h264"] == 5 * 30)
    }

    @Test func badDestinationsAreRefusedClearly() {
        #expect(throws: HLSOutput.Failure.invalidDestination("'out.mp4' is not a .m3u8 path")) {
            try HLSOutput(destination: "out.mp4")
        }
        #expect(throws: HLSOutput.Failure.invalidDestination("folder '/nonexistent-understudy' does not exist")) {
            try HLSOutput(destination: "/nonexistent-understudy/x.m3u8")
        }
        #expect(throws: HLSOutput.Failure.self) {
            try HLSOutput(destination: "/tmp/x.m3u8", options: .init(window: 0))
        }
        #expect(throws: HLSOutput.Failure.invalidDestination("TS segments carry AAC audio, not Opus")) {
            try HLSOutput(destination: "/tmp/x.m3u8", options: .init(audioCodec: .opus, segmentFormat: .ts))
        }
    }
}
