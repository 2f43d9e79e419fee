import Glibc
import RTCWire

/// Loads the encoded frames of a media file, recognised by its first bytes (not its name).
enum MediaFile {
    enum Container { case ivf, matroska, ogg }

    /// Reads the first bytes of `path` and names the container, or says why it cannot be used.
    static func container(of path: String) throws(MediaSourceError) -> Container {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadable(path: path, errno: errno) }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 12)
        let n = head.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n >= 0 else { throw .unreadable(path: path, errno: errno) }
        guard n >= 4 else { throw .unsupported(path: path, reason: "file is empty or too short (\(n) bytes)") }
        if head[0..<4].elementsEqual(Array("DKIF".utf8)) { return .ivf }
        if head[0..<4].elementsEqual([0x1A, 0x45, 0xDF, 0xA3]) { return .matroska }
        if head[0..<4].elementsEqual(Array("OggS".utf8)) { return .ogg }
        if n >= 8, head[4..<8].elementsEqual(Array("ftyp".utf8)) {
            throw .unsupported(path: path, reason: "MP4/QuickTime files are not supported (use IVF, WebM or Ogg)")
        }
        throw .unsupported(path: path, reason: "not an IVF, WebM/Matroska or Ogg file")
    }

    /// Reader errors carry the path already; keep their text, classifying open failures apart.
    static func wrap(_ error: any Error, path: String) -> MediaSourceError {
        switch error {
        case MediaError.cannotOpen(_, let code), WebMReaderError.cannotOpen(_, let code):
            return .unreadable(path: path, errno: code)
        case MediaError.malformedFile(_, let reason): return .unsupported(path: path, reason: reason)
        default: return .unsupported(path: path, reason: "\(error)")
        }
    }

    /// Converts nanoseconds to `rate` ticks without overflow.
    static func ticks(nanos: Int64, rate: Int64) -> Int64 {
        let whole = nanos / 1_000_000_000
        let rest = nanos % 1_000_000_000
        return whole &* rate &+ rest * rate / 1_000_000_000
    }

    /// The frames of `kind` in `path`, ready to play.
    static func playback(path: String, kind: MediaKind) throws(MediaSourceError) -> LoopingPlayback {
        switch kind {
        case .video: return try videoPlayback(path: path)
        case .audio: return try audioPlayback(path: path)
        }
    }

    /// The VP8 frames of an IVF or WebM file, starting at its first keyframe.
    static func videoPlayback(path: String) throws(MediaSourceError) -> LoopingPlayback {
        var frames: [EncodedFrame]
        var times: [Int64]
        switch try container(of: path) {
        case .ivf:
            let reader: IVFReader
            do { reader = try IVFReader(path: path) } catch { throw wrap(error, path: path) }
            frames = reader.encodedFrames()
            // IVF timestamps are 90 kHz offsets from the first frame (32-bit; files are short).
            times = frames.map { Int64($0.timestamp) }
        case .matroska:
            let reader: WebMReader
            do { reader = try WebMReader(path: path) } catch { throw wrap(error, path: path) }
            guard let track = reader.tracks.first(where: { $0.codec == .vp8 }) else {
                let video = reader.tracks.first { $0.kind == .video }
                throw .unsupported(
                    path: path,
                    reason: video.map { "video track is \($0.codecID); only VP8 (V_VP8) is supported" }
                        ?? "no video track")
            }
            let blocks = reader.frames(track: track.number)
            frames = blocks.map {
                EncodedFrame(codec: .vp8, data: $0.data, timestamp: 0, isKeyframe: VP8KeyframeInfo.isKeyframe($0.data))
            }
            times = blocks.map { ticks(nanos: $0.timestampNanoseconds, rate: 90_000) }
        case .ogg:
            throw .unsupported(path: path, reason: "an Ogg file holds audio; video needs VP8 in IVF or WebM")
        }
        guard let first = frames.firstIndex(where: { $0.isKeyframe }) else {
            throw .unsupported(path: path, reason: "no VP8 keyframe in the file")
        }
        frames.removeFirst(first)
        times.removeFirst(first)
        return LoopingPlayback(frames: frames, timesTicks: times, clockRate: 90_000, defaultDuration: 3000)
    }

    /// The Opus packets of an Ogg Opus or WebM file.
    static func audioPlayback(path: String) throws(MediaSourceError) -> LoopingPlayback {
        var frames: [EncodedFrame] = []
        var times: [Int64] = []
        switch try container(of: path) {
        case .ogg:
            let reader: OggOpusReader
            do { reader = try OggOpusReader(path: path) } catch { throw wrap(error, path: path) }
            frames = reader.encodedFrames()
            // Ogg packets follow each other: their times are cumulative durations (64-bit here).
            var t: Int64 = 0
            for f in frames {
                times.append(t)
                t += Int64(f.duration)
            }
        case .matroska:
            let reader: WebMReader
            do { reader = try WebMReader(path: path) } catch { throw wrap(error, path: path) }
            guard let track = reader.tracks.first(where: { $0.codec == .opus }) else {
                let audio = reader.tracks.first { $0.kind == .audio }
                throw .unsupported(
                    path: path,
                    reason: audio.map { "audio track is \($0.codecID); only Opus (A_OPUS) is supported" }
                        ?? "no audio track")
            }
            for block in reader.frames(track: track.number) {
                guard let samples = OpusDecoder.sampleCount(of: block.data) else { continue }
                // Matroska rounds times to the millisecond; the packet's own length is exact. Follow
                // the container only across a real gap (a recording with lost packets).
                let stored = ticks(nanos: block.timestampNanoseconds, rate: 48_000)
                if let previous = times.last, let last = frames.last {
                    let expected = previous + Int64(last.duration)
                    times.append(stored > expected + 96 ? stored : expected)
                } else {
                    times.append(stored)
                }
                frames.append(
                    EncodedFrame(
                        codec: .opus, data: block.data, timestamp: 0, isKeyframe: true, duration: UInt32(samples)))
            }
        case .ivf:
            throw .unsupported(path: path, reason: "an IVF file holds video; audio needs Opus in Ogg or WebM")
        }
        guard !frames.isEmpty else { throw .unsupported(path: path, reason: "no Opus packets in the file") }
        return LoopingPlayback(frames: frames, timesTicks: times, clockRate: 48_000, defaultDuration: 960)
    }
}
