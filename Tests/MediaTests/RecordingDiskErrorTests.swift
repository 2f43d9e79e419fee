import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// What the disk writer thread reported, gathered from its callbacks.
private final class DiskReport: @unchecked Sendable {
    private let lock = NSLock()
    private var writtenSum = RecordedFrames()
    private var failures: [(MediaError, RecordedFrames)] = []

    var events: DiskEvents {
        DiskEvents(
            written: { [self] frames in lock.withLock { writtenSum += frames } },
            failed: { [self] error, frames in lock.withLock { failures.append((error, frames)) } })
    }
    var written: RecordedFrames { lock.withLock { writtenSum } }
    var failed: [(MediaError, RecordedFrames)] { lock.withLock { failures } }
}

/// Issue 31 item 16: with a full disk the agent claimed about 300 frames recorded while the file held
/// about 110, and the error appeared only at close. A write error is reported when the disk writer
/// meets it, the file is cut back to its last whole chunk, and only frames in the file are counted.
@Suite struct RecordingDiskErrorTests {
    static func probe(_ path: String) throws -> [String: Int] {
        let out = try runToolText(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-count_frames", "-show_entries", "stream=codec_name,nb_read_frames", "-of", "csv=p=0",
                path,
            ])
        return Dictionary(
            uniqueKeysWithValues: out.split(separator: "\n").compactMap { line -> (String, Int)? in
                let parts = line.split(separator: ",")
                guard parts.count == 2, let n = Int(parts[1]) else { return nil }
                return (String(parts[0]), n)
            })
    }

    /// The files this process has open (from /proc/self/fd).
    static func openPaths() -> Set<String> {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(
            entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) })
    }

    /// Feeds ten seconds of VP8 + Opus into `recording`, in presentation order.
    static func feed(_ recording: Recording, _ media: SyntheticMedia) {
        let start: UInt64 = 1_000_000_000
        var v = 0
        var a = 0
        while v < 10 * media.fps || a < 10 * 50 {
            let vPts = UInt64(v) * 1_000_000_000 / UInt64(media.fps)
            let aPts = UInt64(a) * 20_000_000
            if v < 10 * media.fps && (a >= 10 * 50 || vPts <= aPts) {
                if let f = media.videoFrame(at: v) { recording.write(f, arrival: start + vPts) }
                v += 1
            } else {
                if let f = media.audioFrame(at: a) { recording.write(f, arrival: start + aPts) }
                a += 1
            }
        }
    }

    @Test(arguments: ["webm", "ivf", "ogg"])
    func aFullDiskIsReportedWhenItHappensAndOnlyWhatReachedTheFileCounts(_ ext: String) async throws {
        let media = try SyntheticMedia(seconds: 4, layers: 1)
        let limit: Int64 = ext == "ogg" ? 6_000 : 60_000
        // Writes past `limit` bytes fail with EFBIG, as under a file size limit; a full disk is the same path.
        let fullDisk = DiskWriter(name: "test-full-disk-\(ext)", fileSizeLimit: limit)
        let path = NSTemporaryDirectory() + "understudy-full-disk-\(getpid()).\(ext)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recording = try Recording(path: path, opusChannels: media.audioChannels, writer: fullDisk)
        let report = DiskReport()
        recording.observeDisk(report.events)
        Self.feed(recording, media)

        // Reported while the recording is still open, not at close.
        try await waitUntil("the disk writer reports the error", seconds: 30) { !report.failed.isEmpty }
        let failure = try #require(recording.diskError)
        #expect(failure == .writeFailed(path: path, errno: EFBIG))
        #expect(failure.description.contains("File too large"), "\(failure)")
        #expect(report.failed.count == 1)
        let atFailure = report.failed[0].1
        #expect(atFailure == recording.writtenFrames, "nothing is counted after the failure")
        #expect(report.written == recording.writtenFrames, "every written frame was reported")
        // A frame after the failure is refused and not counted.
        if let f = media.videoFrame(at: 0) { recording.write(f, arrival: 20_000_000_000) }
        #expect(recording.writtenFrames == atFailure)

        #expect(throws: RecordingError.self) { try recording.close() }
        #expect(recording.writtenFrames == atFailure)
        #expect(!Self.openPaths().contains(path), "the failed file is still open after close()")
        #expect(recording.framesNotWritten > 0)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(size <= Int(limit), "the file holds \(size) bytes")

        // The counts are exactly what ffprobe reads from the file (no partial chunk was left in it).
        let counts = try Self.probe(path)
        if ext != "ogg" { #expect(counts["vp8"] == recording.videoFrames, "ffprobe: \(counts)") }
        if ext != "ivf" { #expect(counts["opus"] == recording.audioFrames, "ffprobe: \(counts)") }
        #expect(recording.videoFrames + recording.audioFrames > 0)
        #expect(recording.videoFrames + recording.audioFrames < 10 * media.fps + 10 * 50)
    }

    /// Without a failure, the counts after close are every frame, and they match the file.
    @Test func aHealthyDiskCountsEveryFrameOnceWritten() throws {
        let media = try SyntheticMedia(seconds: 4, layers: 1)
        let path = NSTemporaryDirectory() + "understudy-healthy-disk-\(getpid()).webm"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recording = try Recording(path: path, opusChannels: media.audioChannels)
        let report = DiskReport()
        recording.observeDisk(report.events)
        Self.feed(recording, media)
        try recording.close()
        #expect(recording.diskError == nil && report.failed.isEmpty)
        #expect(recording.videoFrames == 10 * media.fps && recording.audioFrames == 10 * 50)
        #expect(recording.framesNotWritten == 0)
        #expect(report.written == recording.writtenFrames)
        let counts = try Self.probe(path)
        #expect(counts["vp8"] == recording.videoFrames && counts["opus"] == recording.audioFrames)
    }
}
