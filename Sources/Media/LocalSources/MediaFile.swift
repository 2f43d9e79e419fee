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

    /// The frames of `kind` in `path`, ready to play (video: frames of `codec`).
    static func playback(path: String, kind: MediaKind, codec: MediaCodec) throws(MediaSourceError) -> LoopingPlayback {
        switch kind {
        case .video: return try videoPlayback(path: path, codec: codec)
        case .audio: return try audioPlayback(path: path)
        }
    }

    /// The files a video of `codec` is read from, for messages.
    static func videoFileKinds(_ codec: MediaCodec) -> String { codec == .h264 ? "H.264 .mkv" : ".ivf/.webm" }

    /// The VP8, VP9 or AV1 frames of an IVF or WebM file, or the H.264 frames of a Matroska file
    /// (as Annex B access units, each keyframe led by the file's SPS and PPS), starting at the first
    /// keyframe: sent as they are, never re-encoded.
    static func videoPlayback(path: String, codec: MediaCodec = .vp8) throws(MediaSourceError) -> LoopingPlayback {
        var frames: [EncodedFrame]
        var times: [Int64]
        let container = try container(of: path)
        if codec == .h264 {
            guard container == .matroska else {
                throw .unsupported(path: path, reason: "--video-codec h264 reads H.264 from Matroska (.mkv) files")
            }
            (frames, times) = try h264Frames(path: path)
        } else {
            (frames, times) = try codedFrames(path: path, container: container, codec: codec)
        }
        guard let first = frames.firstIndex(where: { $0.isKeyframe }) else {
            throw .unsupported(path: path, reason: "no \(codec.rtpName) keyframe in the file")
        }
        frames.removeFirst(first)
        times.removeFirst(first)
        return LoopingPlayback(frames: frames, timesTicks: times, clockRate: 90_000, defaultDuration: 3000)
    }

    /// The H.264 track of a Matroska file (`V_MPEG4/ISO/AVC`, length-prefixed NAL units after an
    /// avcC CodecPrivate) as Annex B access units with their 90 kHz times.
    static func h264Frames(path: String) throws(MediaSourceError) -> ([EncodedFrame], [Int64]) {
        let (reader, track) = try matroskaTrack(path: path, codec: .h264, kind: .video) {
            "video track is \($0.codecID); --video-codec h264 needs V_MPEG4/ISO/AVC"
        }
        guard let config = AVCConfiguration(track.codecPrivate) else {
            throw .unsupported(path: path, reason: "the H.264 track's avcC CodecPrivate does not parse")
        }
        var frames: [EncodedFrame] = []
        var times: [Int64] = []
        for block in reader.frames(track: track.number) {
            guard let unit = config.annexB(block.data) else {
                throw .unsupported(path: path, reason: "an H.264 block's NAL unit lengths overrun it")
            }
            frames.append(EncodedFrame(codec: .h264, data: unit.bytes, timestamp: 0, isKeyframe: unit.isKeyframe))
            times.append(ticks(nanos: block.timestampNanoseconds, rate: 90_000))
        }
        return (frames, times)
    }

    /// The `codec` (VP8, VP9 or AV1) frames of an IVF or WebM file with their 90 kHz times.
    static func codedFrames(
        path: String, container: Container, codec: MediaCodec
    ) throws(MediaSourceError) -> ([EncodedFrame], [Int64]) {
        var frames: [EncodedFrame]
        var times: [Int64]
        switch container {
        case .ivf:
            let reader: IVFReader
            do { reader = try IVFReader(path: path) } catch { throw wrap(error, path: path) }
            guard reader.codec == codec else { throw .unsupported(path: path, reason: otherCodec(reader.codec, codec)) }
            frames = reader.encodedFrames()
            // IVF timestamps are 90 kHz offsets from the first frame (32-bit; files are short).
            times = frames.map { Int64($0.timestamp) }
        case .matroska:
            let (reader, track) = try matroskaTrack(path: path, codec: codec, kind: .video) { track in
                track.codec.map { otherCodec($0, codec) }
                    ?? "video track is \(track.codecID); VP8, VP9, AV1 (V_VP8, V_VP9, V_AV1) or H.264 are sent"
            }
            // Matroska keeps AV1 in the low-overhead format without temporal delimiters, as sent.
            let blocks = reader.frames(track: track.number)
            frames = blocks.map {
                EncodedFrame(
                    codec: codec, data: $0.data, timestamp: 0, isKeyframe: EncodedFrame.isKeyframe(codec, $0.data))
            }
            times = blocks.map { ticks(nanos: $0.timestampNanoseconds, rate: 90_000) }
        case .ogg:
            throw .unsupported(
                path: path, reason: "an Ogg file holds audio; video needs VP8, VP9 or AV1 in IVF or WebM")
        }
        return (frames, times)
    }

    /// The Matroska file at `path` and its `codec` track. Without one the file is unsupported: the
    /// reason is `otherTrack` of its first `kind` track, or that it has no `kind` track at all.
    static func matroskaTrack(
        path: String, codec: MediaCodec, kind: MediaKind, otherTrack: (WebMReader.Track) -> String
    ) throws(MediaSourceError) -> (WebMReader, WebMReader.Track) {
        let reader: WebMReader
        do { reader = try WebMReader(path: path) } catch { throw wrap(error, path: path) }
        guard let track = reader.tracks.first(where: { $0.codec == codec }) else {
            let other = reader.tracks.first { $0.kind == kind }
            throw .unsupported(path: path, reason: other.map(otherTrack) ?? "no \(kind.rawValue) track")
        }
        return (reader, track)
    }

    /// Why a file of video codec `found` is not sent as `wanted`: the option that sends it.
    static func otherCodec(_ found: MediaCodec, _ wanted: MediaCodec) -> String {
        "video is \(found.rtpName), not \(wanted.rtpName); send it with --video-codec \(found.rawValue)"
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
            let (reader, track) = try matroskaTrack(path: path, codec: .opus, kind: .audio) {
                "audio track is \($0.codecID); only Opus (A_OPUS) is supported"
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
