import Foundation
public import Media
public import RTCWire
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// HTTP Live Streaming (RFC 8216) of a composite: fMP4 or MPEG-TS segments and a media playlist, as files a
/// web server or a CDN's uploader serves from the playlist's folder.
///
/// For `dir/name.m3u8` with fMP4 segments (the default) it writes `dir/name-init.mp4` (the `#EXT-X-MAP`
/// init segment: ftyp + moov) and `dir/name-00000.m4s`, `dir/name-00001.m4s` … (moof + mdat fragments);
/// with ``Options/SegmentFormat/ts`` it writes `dir/name-00000.ts` … (``MPEGTSMuxer``: each segment starts
/// with the PAT and PMT and plays alone; AAC audio only). A segment ends at the first
/// video keyframe that brings it near the target duration (the composite's encoder should make a keyframe
/// every ``keyframeIntervalSeconds``), so every segment starts decodable.
///
/// While running, `name.m3u8` is a live playlist of the last ``Options/window`` segments (a rolling
/// `#EXT-X-MEDIA-SEQUENCE`), replaced atomically (written to a temporary file, then renamed) after each
/// segment, so a reader never sees half a playlist. Older segments stay on disk: at ``finish()`` the
/// playlist becomes a complete VOD playlist (`#EXT-X-PLAYLIST-TYPE:VOD`, every segment, `#EXT-X-ENDLIST`),
/// the whole recording.
///
/// Video is H.264 (as the composite encodes it); audio is AAC-LC encoded here from the mixed PCM (what
/// Safari plays), or the composite's Opus packets as they come (``Options/AudioCodec/opus``).
/// The composite's thread only builds the bytes: every file operation (a segment's open, appends and
/// close, the init segment, each playlist's write and rename) is queued, in order, to a ``DiskWriter``
/// thread, so a slow disk never stalls the composite. A playlist is queued after the segments it
/// lists, so a killed process leaves a playlist whose every segment is whole on disk; ``finish()``
/// waits until every queued file operation is done. The first write error is thrown by the next call
/// (``Failure/writeFailed(path:errno:)``), and so is a disk so slow that more than
/// ``backlogLimit`` bytes wait for it (``Failure/diskBehind(bytes:)``).
///
/// Not thread-safe: the composite calls it from one thread.
// Safe as used: confined to the composite's thread; Sendable only to move it there.
public final class HLSOutput: KeyframePacedOutput, @unchecked Sendable {
    /// Settings of an HLS output.
    public struct Options: Sendable {
        /// The audio codec of the segments.
        public enum AudioCodec: Sendable {
            /// AAC-LC, encoded here from the mixed PCM (plays everywhere, Safari included).
            case aac
            /// The composite's Opus packets, as they are (no encoding; not played by Safari).
            case opus
        }
        /// The duration a segment aims at, in seconds (cut at the keyframe nearest to it).
        public var targetSegmentSeconds: Double
        /// Segments in the live playlist (the rolling window); the VOD playlist at the end lists all.
        public var window: Int
        /// The audio codec.
        public var audioCodec: AudioCodec
        /// AAC bitrate, bits per second.
        public var aacBitrate: Int
        /// The segments' container (`--hls-segment`).
        public enum SegmentFormat: String, Sendable, CaseIterable {
            /// Fragmented MP4 (`.m4s` after an init segment; HLS version 7).
            case fmp4
            /// MPEG-2 transport stream (`.ts`, H.264 + AAC; what older players and many CDNs expect).
            case ts
        }
        /// The segments' container.
        public var segmentFormat: SegmentFormat

        /// Creates options; see the properties for the meaning and the defaults.
        public init(
            targetSegmentSeconds: Double = 2, window: Int = 6, audioCodec: AudioCodec = .aac, aacBitrate: Int = 96_000,
            segmentFormat: SegmentFormat = .fmp4
        ) {
            self.targetSegmentSeconds = targetSegmentSeconds
            self.window = window
            self.audioCodec = audioCodec
            self.aacBitrate = aacBitrate
            self.segmentFormat = segmentFormat
        }
    }

    /// Errors of an HLS output.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The destination is not a usable `.m3u8` path, or an option is out of range.
        case invalidDestination(String)
        /// A file could not be created or written (`errno` is the OS error).
        case writeFailed(path: String, errno: Int32)
        /// The disk is so far behind that more than ``HLSOutput/backlogLimit`` bytes wait for it.
        case diskBehind(bytes: Int)

        public var description: String {
            switch self {
            case .invalidDestination(let why): return "HLS output: \(why)"
            case .writeFailed(let path, let errno):
                return "HLS output: cannot write \(path): \(String(cString: strerror(errno))) (errno \(errno))"
            case .diskBehind(let bytes):
                return "HLS output: the disk is too slow: \(bytes >> 20) MiB wait to be written"
            }
        }
    }

    /// One finished segment.
    public struct Segment: Sendable, Equatable {
        /// Its file name (in the playlist's folder).
        public let name: String
        /// Its duration in seconds.
        public let duration: Double
    }

    public let destination: String
    /// The options it runs with.
    public let options: Options
    public var keyframeIntervalSeconds: Double { options.targetSegmentSeconds }
    /// The segments finished so far, in order.
    public private(set) var segments: [Segment] = []
    /// Whether ``finish()`` ran.
    public private(set) var finished = false

    /// Bytes that may wait for the disk writer before the output fails (``Failure/diskBehind(bytes:)``):
    /// 64 MiB, over three minutes of a 2.5 Mbit/s composite.
    public static let backlogLimit = 64 << 20

    private let folder: String
    private let stem: String
    private let files: SegmentFiles
    /// The fMP4 muxer (nil with TS segments).
    private var muxer: MP4Writer?
    /// The TS muxer (nil with fMP4 segments).
    private var ts: MPEGTSMuxer?
    /// TS: the last video frame's time and the gap before it (the last segment's end at finish).
    private var lastVideoMicros: Int64?
    private var videoGapMicros: Int64 = 0
    private let aac: AACEncoder?
    /// The open segment: whether one is, its name, start (µs), and the last fragment's duration.
    private var segmentOpen = false
    private var segmentName = ""
    private var segmentStart: Int64 = 0
    private var segmentEnd: Int64 = 0
    private var lastFragmentMicros: Int64 = 0
    private var audioStartMicros: Int64?

    /// Prepares an output for `destination` (a path ending in `.m3u8`; its folder must exist). Nothing is
    /// written before the first video keyframe. Throws ``Failure/invalidDestination(_:)`` for another path
    /// or options out of range, `MediaError` when the AAC encoder does not open.
    /// - Parameter writer: the thread that writes the files (default: the process-wide one).
    public init(destination: String, options: Options = Options(), writer: DiskWriter = .shared) throws {
        guard destination.lowercased().hasSuffix(".m3u8"), destination.count > 5 else {
            throw Failure.invalidDestination("'\(destination)' is not a .m3u8 path")
        }
        guard options.targetSegmentSeconds >= 0.5, options.targetSegmentSeconds <= 60 else {
            throw Failure.invalidDestination("segment duration \(options.targetSegmentSeconds) s (0.5…60)")
        }
        guard options.window >= 1 else { throw Failure.invalidDestination("window \(options.window) (at least 1)") }
        let url = URL(fileURLWithPath: destination)
        folder = url.deletingLastPathComponent().path
        stem = url.deletingPathExtension().lastPathComponent
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw Failure.invalidDestination("folder '\(folder)' does not exist")
        }
        self.destination = destination
        self.options = options
        files = SegmentFiles(folder: folder, writer: writer)
        if options.segmentFormat == .ts && options.audioCodec != .aac {
            throw Failure.invalidDestination("TS segments carry AAC audio, not Opus")
        }
        aac = options.audioCodec == .aac ? try AACEncoder(bitrate: options.aacBitrate) : nil
        if options.segmentFormat == .ts, let aac {
            ts = try MPEGTSMuxer(audioSpecificConfig: aac.audioSpecificConfig)
            return
        }
        let audio: MP4Writer.AudioTrack =
            if let aac {
                .aac(audioSpecificConfig: aac.audioSpecificConfig, channels: 1, sampleRate: aac.sampleRate)
            } else {
                .opus(channels: 1, preSkip: 312)
            }
        muxer = try MP4Writer(pieces: { [unowned self] in try self.take($0) }, video: true, audio: audio)
    }

    deinit {
        // Abandoned without finish(): close the open segment after what is queued, as a kill would leave it.
        files.closeSegment()
    }

    public func writeVideo(_ frame: EncodedFrame, ptsMicros: Int64) throws {
        guard !finished else { throw MediaError.closed }
        try files.check()
        guard frame.codec == .h264 else {
            throw Failure.invalidDestination("HLS carries H.264 video, got \(frame.codec.rawValue)")
        }
        if ts != nil { return try writeTSVideo(frame, ptsMicros: ptsMicros) }
        try muxer?.write(frame, pts: ptsMicros * 1_000)
    }

    public func writeAudio(_ opus: EncodedFrame, pcm: UnsafeBufferPointer<Int16>, ptsMicros: Int64) throws {
        guard !finished else { throw MediaError.closed }
        try files.check()
        guard let aac else {
            try muxer?.write(opus, pts: ptsMicros * 1_000)
            return
        }
        let start = audioStartMicros ?? ptsMicros
        if audioStartMicros == nil { audioStartMicros = ptsMicros }
        let rate = Int64(aac.sampleRate)
        try aac.encode(pcm) { bytes, samples in try writeAAC(bytes, ptsMicros: start + samples * 1_000_000 / rate) }
    }

    /// One AAC frame to the open TS segment (none open yet: before the first keyframe, dropped) or the fMP4 muxer.
    private func writeAAC(_ bytes: UnsafeRawBufferPointer, ptsMicros: Int64) throws {
        if ts != nil {
            guard segmentOpen else { return }
            ts?.writeAudio(bytes, ptsMicros: ptsMicros)
            try drainTS()
        } else {
            try muxer?.writeAudio(bytes, pts: ptsMicros * 1_000, duration: AACEncoder.frameSamples)
        }
    }

    /// TS: a keyframe that brings the open segment near its target ends it; one starts at a keyframe
    /// (with the PAT and PMT), so video before the first keyframe is dropped.
    private func writeTSVideo(_ frame: EncodedFrame, ptsMicros: Int64) throws {
        if let last = lastVideoMicros, ptsMicros > last { videoGapMicros = ptsMicros - last }
        lastVideoMicros = ptsMicros
        if frame.isKeyframe {
            if segmentOpen, ptsMicros - segmentStart + videoGapMicros / 2 >= targetMicros {
                segmentEnd = ptsMicros
                try endSegment()
                try writePlaylist(final: false)
            }
            if !segmentOpen {
                openSegment(at: ptsMicros)
                ts?.writeTables()
            }
        }
        guard segmentOpen else { return }
        ts?.writeVideo(frame.data, ptsMicros: ptsMicros, keyframe: frame.isKeyframe)
        segmentEnd = ptsMicros + videoGapMicros
        try drainTS()
    }

    private func drainTS() throws {
        ts?.drain { files.append($0) }
    }

    /// Writes what is held as the last segment and the VOD playlist, and waits until the disk writer
    /// has written every file. Safe to call twice.
    public func finish() throws {
        guard !finished else { return }
        finished = true
        if let aac {
            let start = audioStartMicros ?? 0
            let rate = Int64(aac.sampleRate)
            try aac.flush { bytes, samples in try writeAAC(bytes, ptsMicros: start + samples * 1_000_000 / rate) }
        }
        try muxer?.close()
        try endSegment()
        try writePlaylist(final: true)
        files.closeSegment()
        files.wait()
        try files.check()
    }

    // MARK: - Segments

    /// Takes the muxer's header (the init segment) or a fragment (appended to the open segment, which
    /// ends first when it is long enough: fragments end at keyframes).
    private func take(_ piece: MP4Writer.Piece) throws {
        if piece.isHeader {
            files.replace(name: stem + "-init.mp4", piece.bytes, renaming: nil)
            return
        }
        if segmentOpen, segmentEnd - segmentStart + lastFragmentMicros / 2 >= targetMicros {
            try endSegment()
            try writePlaylist(final: false)
        }
        if !segmentOpen { openSegment(at: piece.startMicros) }
        piece.bytes.withUnsafeBytes { files.append($0) }
        segmentEnd = piece.endMicros
        lastFragmentMicros = piece.endMicros - piece.startMicros
    }

    private var targetMicros: Int64 { Int64(options.targetSegmentSeconds * 1_000_000) }

    /// Opens the next segment file (`name-00000.m4s` or `.ts`), starting at `micros`.
    private func openSegment(at micros: Int64) {
        segmentName = String(format: "%@-%05d.%@", stem, segments.count, ts == nil ? "m4s" : "ts")
        files.openSegment(segmentName)
        segmentOpen = true
        segmentStart = micros
    }

    private func endSegment() throws {
        guard segmentOpen else { return }
        files.closeSegment()
        segmentOpen = false
        segments.append(Segment(name: segmentName, duration: Double(max(0, segmentEnd - segmentStart)) / 1_000_000))
    }

    /// The playlist: live (the window) or VOD (all), replaced atomically.
    private func writePlaylist(final: Bool) throws {
        let listed = final ? segments[...] : segments.suffix(options.window)
        let longest = segments.map(\.duration).max() ?? options.targetSegmentSeconds
        let target = Int(max(options.targetSegmentSeconds, longest).rounded(.up))
        // fMP4 segments need version 7 (EXT-X-MAP without I-frames only); TS segments play from version 3.
        var text = "#EXTM3U\n#EXT-X-VERSION:\(ts == nil ? 7 : 3)\n#EXT-X-TARGETDURATION:\(target)\n"
        text += "#EXT-X-MEDIA-SEQUENCE:\(segments.count - listed.count)\n"
        if final { text += "#EXT-X-PLAYLIST-TYPE:VOD\n" }
        text += "#EXT-X-INDEPENDENT-SEGMENTS\n"
        if ts == nil { text += "#EXT-X-MAP:URI=\"\(stem)-init.mp4\"\n" }
        for segment in listed { text += String(format: "#EXTINF:%.6f,\n", segment.duration) + segment.name + "\n" }
        if final { text += "#EXT-X-ENDLIST\n" }
        let name = (destination as NSString).lastPathComponent
        files.replace(name: "." + name + ".tmp", Array(text.utf8), renaming: name)
    }
}

/// An HLS output's file operations, run in order on a ``DiskWriter`` thread. The composite's thread
/// queues them and never waits, except in ``wait()`` (at the finish); the descriptor of the open
/// segment is the writer thread's. After the first error nothing more is written, and ``check()``
/// throws it on the composite's thread.
// Safe: `fd` and `segmentPath` are touched by the writer thread only; the rest is a Mutex and an atomic.
private final class SegmentFiles: @unchecked Sendable {
    private let folder: String
    private let writer: DiskWriter
    /// Bytes queued and not yet written.
    private let queued = Atomic<Int>(0)
    private let failure = Mutex<HLSOutput.Failure?>(nil)
    // Writer thread only.
    private var fd: Int32 = -1
    private var segmentPath = ""

    init(folder: String, writer: DiskWriter) {
        self.folder = folder
        self.writer = writer
    }

    /// Composite's thread: the first write error, or a disk too far behind.
    func check() throws {
        if let e = failure.withLock({ $0 }) { throw e }
        let waiting = queued.load(ordering: .relaxed)
        if waiting > HLSOutput.backlogLimit { throw HLSOutput.Failure.diskBehind(bytes: waiting) }
    }

    /// Queues the creation of segment `name` (the open one, if any, is closed first).
    func openSegment(_ name: String) {
        let path = folder + "/" + name
        writer.submit { [self] in
            closeFD()
            guard !hasFailed else { return }
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            segmentPath = path
            if fd < 0 { fail(path, errno) }
        }
    }

    /// Queues `bytes` (copied) for the open segment.
    func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        let copy = [UInt8](bytes)
        queued.add(copy.count, ordering: .relaxed)
        writer.submit { [self] in
            defer { queued.subtract(copy.count, ordering: .relaxed) }
            guard fd >= 0, !hasFailed else { return }
            copy.withUnsafeBytes { writeAll(fd, $0, path: segmentPath) }
        }
    }

    /// Queues the close of the open segment.
    func closeSegment() { writer.submit { [self] in closeFD() } }

    /// Queues writing file `name` whole, then (with `renaming`) its rename to that name in the same
    /// folder, which replaces the old file atomically: a reader sees the old one or the new one.
    func replace(name: String, _ bytes: [UInt8], renaming: String?) {
        let path = folder + "/" + name
        let target = renaming.map { folder + "/" + $0 }
        queued.add(bytes.count, ordering: .relaxed)
        writer.submit { [self] in
            defer { queued.subtract(bytes.count, ordering: .relaxed) }
            guard !hasFailed else { return }
            let file = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard file >= 0 else { return fail(path, errno) }
            bytes.withUnsafeBytes { writeAll(file, $0, path: path) }
            close(file)
            if let target, !hasFailed, rename(path, target) != 0 { fail(target, errno) }
        }
    }

    /// Composite's thread: waits until every queued operation is done.
    func wait() { writer.waitForQueued() }

    // MARK: Writer thread

    private var hasFailed: Bool { failure.withLock { $0 != nil } }

    private func fail(_ path: String, _ code: Int32) {
        failure.withLock { if $0 == nil { $0 = .writeFailed(path: path, errno: code) } }
    }

    private func closeFD() {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
    }

    private func writeAll(_ file: Int32, _ raw: UnsafeRawBufferPointer, path: String) {
        var done = 0
        while done < raw.count {
            let n = write(file, raw.baseAddress! + done, raw.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                return fail(path, errno)
            }
            done += n
        }
    }
}
