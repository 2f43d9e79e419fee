import Foundation
import Media
public import RTCWire

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
/// Files are written on the caller's thread (the composite's, never the packet loop's).
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

        public var description: String {
            switch self {
            case .invalidDestination(let why): return "HLS output: \(why)"
            case .writeFailed(let path, let errno):
                return "HLS output: cannot write \(path): \(String(cString: strerror(errno))) (errno \(errno))"
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

    private let folder: String
    private let stem: String
    /// The fMP4 muxer (nil with TS segments).
    private var muxer: MP4Writer?
    /// The TS muxer (nil with fMP4 segments).
    private var ts: MPEGTSMuxer?
    /// TS: the last video frame's time and the gap before it (the last segment's end at finish).
    private var lastVideoMicros: Int64?
    private var videoGapMicros: Int64 = 0
    private let aac: AACEncoder?
    /// The open segment: its file, name, start (µs), and the last fragment's duration.
    private var segmentFD: Int32 = -1
    private var segmentName = ""
    private var segmentStart: Int64 = 0
    private var segmentEnd: Int64 = 0
    private var lastFragmentMicros: Int64 = 0
    private var audioStartMicros: Int64?

    /// Prepares an output for `destination` (a path ending in `.m3u8`; its folder must exist). Nothing is
    /// written before the first video keyframe. Throws ``Failure/invalidDestination(_:)`` for another path
    /// or options out of range, `MediaError` when the AAC encoder does not open.
    public init(destination: String, options: Options = Options()) throws {
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
        if segmentFD >= 0 { close(segmentFD) }
    }

    public func writeVideo(_ frame: EncodedFrame, ptsMicros: Int64) throws {
        guard !finished else { throw MediaError.closed }
        guard frame.codec == .h264 else {
            throw Failure.invalidDestination("HLS carries H.264 video, got \(frame.codec.rawValue)")
        }
        if ts != nil { return try writeTSVideo(frame, ptsMicros: ptsMicros) }
        try muxer?.write(frame, pts: ptsMicros * 1_000)
    }

    public func writeAudio(_ opus: EncodedFrame, pcm: UnsafeBufferPointer<Int16>, ptsMicros: Int64) throws {
        guard !finished else { throw MediaError.closed }
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
            guard segmentFD >= 0 else { return }
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
            if segmentFD >= 0, ptsMicros - segmentStart + videoGapMicros / 2 >= targetMicros {
                segmentEnd = ptsMicros
                try endSegment()
                try writePlaylist(final: false)
            }
            if segmentFD < 0 {
                try openSegment(at: ptsMicros)
                ts?.writeTables()
            }
        }
        guard segmentFD >= 0 else { return }
        ts?.writeVideo(frame.data, ptsMicros: ptsMicros, keyframe: frame.isKeyframe)
        segmentEnd = ptsMicros + videoGapMicros
        try drainTS()
    }

    private func drainTS() throws {
        let fd = segmentFD
        let name = segmentName
        try ts?.drain { try writeAll(fd, $0, path: name) }
    }

    /// Writes what is held as the last segment and the VOD playlist. Safe to call twice.
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
    }

    // MARK: - Segments

    /// Takes the muxer's header (the init segment) or a fragment (appended to the open segment, which
    /// ends first when it is long enough: fragments end at keyframes).
    private func take(_ piece: MP4Writer.Piece) throws {
        if piece.isHeader {
            try writeFile(name: stem + "-init.mp4", piece.bytes)
            return
        }
        if segmentFD >= 0, segmentEnd - segmentStart + lastFragmentMicros / 2 >= targetMicros {
            try endSegment()
            try writePlaylist(final: false)
        }
        if segmentFD < 0 { try openSegment(at: piece.startMicros) }
        try piece.bytes.withUnsafeBytes { try writeAll(segmentFD, $0, path: segmentName) }
        segmentEnd = piece.endMicros
        lastFragmentMicros = piece.endMicros - piece.startMicros
    }

    private var targetMicros: Int64 { Int64(options.targetSegmentSeconds * 1_000_000) }

    /// Opens the next segment file (`name-00000.m4s` or `.ts`), starting at `micros`.
    private func openSegment(at micros: Int64) throws {
        segmentName = String(format: "%@-%05d.%@", stem, segments.count, ts == nil ? "m4s" : "ts")
        segmentFD = open(folder + "/" + segmentName, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard segmentFD >= 0 else { throw Failure.writeFailed(path: folder + "/" + segmentName, errno: errno) }
        segmentStart = micros
    }

    private func endSegment() throws {
        guard segmentFD >= 0 else { return }
        close(segmentFD)
        segmentFD = -1
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
        let temporary = "." + name + ".tmp"
        try writeFile(name: temporary, Array(text.utf8))
        guard rename(folder + "/" + temporary, destination) == 0 else {
            throw Failure.writeFailed(path: destination, errno: errno)
        }
    }

    private func writeFile(name: String, _ bytes: [UInt8]) throws {
        let path = folder + "/" + name
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Failure.writeFailed(path: path, errno: errno) }
        defer { close(fd) }
        try bytes.withUnsafeBytes { try writeAll(fd, $0, path: path) }
    }

    private func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer, path: String) throws {
        var done = 0
        while done < raw.count {
            let n = write(fd, raw.baseAddress! + done, raw.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure.writeFailed(path: path, errno: errno)
            }
            done += n
        }
    }
}
