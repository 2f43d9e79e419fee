import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// A small single-layer loop for the sync tests (6 s: three markers).
private let syncMedia: SyntheticMedia = {
    do { return try SyntheticMedia(seconds: 6, layers: 1, width: 320, height: 180) } catch { fatalError("\(error)") }
}()

/// Writes `seconds` of `syncMedia` to a WebM at `path`, with audio pts shifted by `audioShiftMs`.
private func writeSyncRecording(path: String, seconds: Int = 6, audioShiftMs: Int64 = 0) throws {
    let writer = try WebMWriter(
        path: path, video: .init(), audio: .init(channels: syncMedia.audioChannels, preSkip: syncMedia.audioPreSkip))
    try feed(seconds: Double(seconds), media: syncMedia) { frame, pts in
        try writer.write(frame, pts: frame.codec == .opus ? pts + audioShiftMs * 1_000_000 : pts)
    }
    try writer.close()
}

/// An ffmpeg-made WebM (libvpx + libopus), made once per test process. `piped` writes to a pipe,
/// so ffmpeg cannot seek back and leaves the Segment size unknown.
private func makeFFmpegWebM(piped: Bool) -> String {
    let path = temporaryPath(piped ? "analysis-ffmpeg-pipe.webm" : "analysis-ffmpeg.webm")
    let command =
        "/usr/bin/ffmpeg -nostdin -v error -y -f lavfi -i testsrc=size=320x240:rate=30 -f lavfi -i sine=f=440 "
        + "-t 3 -c:v libvpx -c:a libopus -f webm " + (piped ? "pipe: > '\(path)'" : "'\(path)'")
    _ = try? runTool("/bin/sh", ["-c", command])
    return path
}

private let ffmpegWebM = makeFFmpegWebM(piped: false)
private let ffmpegPipedWebM = makeFFmpegWebM(piped: true)

@Suite("Analysis")
struct AnalysisTests {
    @Test("aligned recording measures |offset| < 10 ms")
    func alignedOffset() throws {
        let path = temporaryPath("analysis-aligned.webm")
        try writeSyncRecording(path: path)
        let report = try SyncMarkerAnalyzer.analyze(path: path)
        #expect(report.pairs >= 2, "flashes \(report.flashTimesMs) beeps \(report.beepOnsetsMs)")
        let offset = try #require(report.offsetMilliseconds)
        #expect(abs(offset) < 10, "offset \(offset) ms; pairs \(report.matched)")
        // Markers are every 2 s starting at 0.
        #expect(report.flashTimesMs.map { ($0 / 2_000).rounded() } == [0, 1, 2])
    }

    @Test("audio 100 ms late measures +100 ms")
    func shiftedOffset() throws {
        let path = temporaryPath("analysis-shifted.webm")
        try writeSyncRecording(path: path, audioShiftMs: 100)
        let report = try SyncMarkerAnalyzer.analyze(path: path)
        #expect(report.pairs >= 2, "flashes \(report.flashTimesMs) beeps \(report.beepOnsetsMs)")
        let offset = try #require(report.offsetMilliseconds)
        #expect(abs(offset - 100) <= 10, "offset \(offset) ms; pairs \(report.matched)")
    }

    @Test("offset survives an ffmpeg remux (ffmpeg's block layout and CodecDelay)")
    func remuxedOffset() throws {
        let ours = temporaryPath("analysis-remux-src.webm")
        let remuxed = temporaryPath("analysis-remux.webm")
        try writeSyncRecording(path: ours, audioShiftMs: 100)
        let r = try runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", ours, "-c", "copy", remuxed])
        #expect(r.status == 0, "\(r.err)")
        let report = try SyncMarkerAnalyzer.analyze(path: remuxed)
        #expect(report.pairs >= 2)
        let offset = try #require(report.offsetMilliseconds)
        #expect(abs(offset - 100) <= 10, "offset \(offset) ms; pairs \(report.matched)")
    }

    @Test("reader counts the frames ffprobe counts in an ffmpeg WebM", arguments: [false, true])
    func readsFFmpegFile(piped: Bool) throws {
        let path = piped ? ffmpegPipedWebM : ffmpegWebM
        let expected = try probeFrameCounts(path)
        let vp8 = try #require(expected["vp8"])
        let opus = try #require(expected["opus"])
        let reader = try WebMReader(path: path)
        let video = try #require(reader.tracks.first { $0.codec == .vp8 })
        let audio = try #require(reader.tracks.first { $0.codec == .opus })
        #expect(video.width == 320 && video.height == 240)
        #expect(audio.codecPrivate.starts(with: Array("OpusHead".utf8)))
        #expect(audio.channels >= 1)
        #expect(reader.frames(track: video.number).count == vp8)
        #expect(reader.frames(track: audio.number).count == opus)
        #expect(reader.frames(track: video.number).first?.isKeyframe == true)
        #expect(!reader.isTruncated)
        // Video timestamps are one frame (33 ms) apart and increase.
        let times = reader.frames(track: video.number).map(\.timestampNanoseconds)
        #expect(zip(times, times.dropFirst()).allSatisfy { $1 > $0 })
    }

    @Test("reader reads our writer's file: counts match the writer's")
    func readsOwnFile() throws {
        let path = temporaryPath("analysis-own.webm")
        let writer = try WebMWriter(path: path)
        try feed(seconds: 3, media: syncMedia) { try writer.write($0, pts: $1) }
        try writer.close()
        let reader = try WebMReader(path: path)
        #expect(reader.timecodeScale == 1_000_000)
        let video = try #require(reader.firstTrack(of: .video))
        let audio = try #require(reader.firstTrack(of: .audio))
        #expect(reader.frames(track: video.number).count == writer.videoFramesWritten)
        #expect(reader.frames(track: audio.number).count == writer.audioFramesWritten)
        #expect(audio.codecDelayNanoseconds > 0)
        #expect(video.width == 320 && video.height == 180)
    }

    @Test("file cut at 70 % reads up to the cut", arguments: ["own", "ffmpeg"])
    func truncatedFile(source: String) throws {
        let full: String
        if source == "own" {
            full = temporaryPath("analysis-full.webm")
            try writeSyncRecording(path: full, seconds: 4)
        } else {
            full = ffmpegWebM
        }
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: full)))
        let whole = try WebMReader(bytes: bytes)
        let cut = Array(bytes.prefix(bytes.count * 7 / 10))
        let partial = try WebMReader(bytes: cut)
        #expect(partial.isTruncated)
        #expect(partial.frames.count > whole.frames.count / 3)
        #expect(partial.frames.count < whole.frames.count)
        // What was read is exactly the start of the whole file's frames.
        for (a, b) in zip(partial.frames, whole.frames) {
            #expect(a.track == b.track && a.timestampNanoseconds == b.timestampNanoseconds && a.data == b.data)
            if a.data != b.data { break }
        }
    }

    @Test("garbage and short input give typed errors")
    func malformedInput() throws {
        #expect(throws: WebMReaderError.notEBML) { try WebMReader(bytes: []) }
        #expect(throws: WebMReaderError.notEBML) { try WebMReader(bytes: Array("hello, not a webm file".utf8)) }
        #expect(throws: WebMReaderError.truncatedHeader(offset: 0)) { try WebMReader(bytes: [0x1A, 0x45]) }
        #expect(throws: WebMReaderError.truncatedHeader(offset: 0)) {
            try WebMReader(bytes: [0x1A, 0x45, 0xDF, 0xA3, 0x88, 0x42])
        }
        #expect(throws: WebMReaderError.self) { try WebMReader(path: "/nonexistent/x.webm") }

        // A valid file's header with its bytes scrambled must fail with a WebMReaderError, not trap.
        let path = temporaryPath("analysis-garbage.webm")
        try writeSyncRecording(path: path, seconds: 2)
        let good = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        var rng = SystemRandomNumberGenerator()
        for round in 0..<400 {
            var bad = good
            // Half the rounds hit the header, half anywhere (cluster and block headers too).
            let span = round % 2 == 0 ? min(bad.count, 600) : bad.count
            for _ in 0..<8 {
                let i = Int.random(in: 0..<span, using: &rng)
                bad[i] = UInt8.random(in: 0...255, using: &rng)
            }
            let length = Int.random(in: 0...bad.count, using: &rng)
            do {
                _ = try WebMReader(bytes: Array(bad.prefix(length)))
            } catch {
                // Typed throws: the only possible error type; reaching here without a trap is the point.
                #expect(!error.description.isEmpty)
            }
        }
        // Header cut inside Tracks.
        let tracksAt = try #require(indexOf([0x16, 0x54, 0xAE, 0x6B], in: good))
        #expect(throws: WebMReaderError.self) { try WebMReader(bytes: Array(good.prefix(tracksAt + 8))) }
    }

    @Test("laced blocks are rejected with a clear error")
    func lacing() throws {
        let path = temporaryPath("analysis-lace.webm")
        try writeSyncRecording(path: path, seconds: 2)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        // First SimpleBlock after the first Cluster: set Xiph lacing in its flags.
        let cluster = try #require(indexOf([0x1F, 0x43, 0xB6, 0x75], in: bytes))
        let block = try #require(indexOf([0xA3], in: bytes, from: cluster + 12))
        // A3, size (1–4 bytes), track vint (1 byte), int16, flags.
        let sizeLength = bytes[block + 1].leadingZeroBitCount + 1
        let flags = block + 1 + sizeLength + 1 + 2
        bytes[flags] |= 0x02
        #expect {
            try WebMReader(bytes: bytes)
        } throws: { error in
            guard case WebMReaderError.unsupportedLacing(_, let kind) = error else { return false }
            return kind == "Xiph"
        }
    }

    @Test("unknown-size clusters read like known-size ones")
    func unknownSizeCluster() throws {
        let path = temporaryPath("analysis-unknown.webm")
        try writeSyncRecording(path: path, seconds: 3)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let whole = try WebMReader(bytes: bytes)
        // Our writer gives each Cluster an 8-byte size: replace every one with "unknown".
        var live = bytes
        var at = 0
        var clusters = 0
        while let c = indexOf([0x1F, 0x43, 0xB6, 0x75, 0x01], in: live, from: at) {
            live.replaceSubrange((c + 4)..<(c + 12), with: [0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
            clusters += 1
            at = c + 12
        }
        #expect(clusters >= 3)
        let reader = try WebMReader(bytes: live)
        #expect(reader.frames.count == whole.frames.count)
        #expect(zip(reader.frames, whole.frames).allSatisfy { $0.timestampNanoseconds == $1.timestampNanoseconds })
    }
}

private func indexOf(_ pattern: [UInt8], in bytes: [UInt8], from start: Int = 0) -> Int? {
    guard !pattern.isEmpty, bytes.count >= pattern.count, start <= bytes.count - pattern.count else { return nil }
    for i in start...(bytes.count - pattern.count) where bytes[i..<(i + pattern.count)].elementsEqual(pattern) {
        return i
    }
    return nil
}
