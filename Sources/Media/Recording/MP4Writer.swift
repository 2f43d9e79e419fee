public import RTCWire

/// Writes H.264, VP8, VP9 or AV1 and/or Opus into one fragmented MP4 file (ISO/IEC 14496-12), live, without
/// transcoding.
///
/// Layout: `ftyp`, then `moov` (the tracks, no samples, an `mvex` with `trex` per track and a
/// `mehd` patched with the duration at close), then one `moof` + `mdat` pair per fragment. A
/// fragment ends before each video keyframe and at least every `maxFragmentMs`; it is written whole
/// and handed to the kernel as it ends, so a process killed with SIGKILL leaves a file that plays up
/// to its last whole fragment. Nothing is rewritten afterwards except the `mehd` duration.
///
/// The `moov` needs the video's codec configuration, so it is written at the first video keyframe
/// (H.264: an `avcC` from its SPS and PPS; AV1: an `av1C` with its sequence header; VP8, VP9: a
/// `vpcC`); audio that comes earlier waits in the
/// first fragment. When no keyframe comes within `headerWaitMs` of audio, the file is audio only and
/// later video is refused (counted in ``droppedBeforeKeyframe``). H.264 access units are stored as
/// 4-byte length-prefixed NAL units; video decode and presentation times are equal (WebRTC senders
/// use no B-frames). Sample durations are the gaps between presentation times; the last sample of
/// each track takes its frame's own duration.
///
/// The same muxer serves segmenters (HLS with fMP4 segments): ``init(pieces:video:audio:maxFragmentMs:)``
/// hands the header (the init segment) and each fragment to a closure instead of a file, and the audio track
/// may be AAC (``writeAudio(_:pts:duration:)``) as well as Opus.
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class MP4Writer: @unchecked Sendable {
    /// Video frames written to the file.
    public private(set) var videoFramesWritten = 0
    /// Audio packets written to the file.
    public private(set) var audioFramesWritten = 0
    /// Video frames dropped: before the first keyframe, or refused by an audio-only file.
    public private(set) var droppedBeforeKeyframe = 0
    /// Fragments written.
    public private(set) var fragmentsWritten = 0
    /// The video codec, once the first keyframe told it.
    public private(set) var videoCodec: MediaCodec?

    /// One track's samples of the open fragment.
    private struct Track {
        let id: UInt32
        let timescale: UInt32
        /// Per sample: duration (0 while the next sample is unknown), size and flags.
        var durations: [UInt32] = []
        var sizes: [UInt32] = []
        var flags: [UInt32] = []
        var data: [UInt8] = []
        /// Decode time of the fragment's first sample, in the track's timescale.
        var baseTime: UInt64 = 0
        /// Decode time of the last sample taken.
        var lastTime: UInt64 = 0
        var started = false
        /// The last sample's frame duration in the timescale (used at close).
        var lastFrameDuration: UInt32 = 0

        init(id: UInt32, timescale: UInt32) {
            self.id = id
            self.timescale = timescale
            durations.reserveCapacity(128)
            sizes.reserveCapacity(128)
            flags.reserveCapacity(128)
            data.reserveCapacity(1 << 18)
        }
    }

    /// The audio track's codec and its configuration.
    public enum AudioTrack: Sendable {
        /// Opus, 1 or 2 channels, with the decoder's pre-skip in 48 kHz samples.
        case opus(channels: Int, preSkip: Int)
        /// AAC with its AudioSpecificConfig (from ``AACEncoder/audioSpecificConfig``).
        case aac(audioSpecificConfig: [UInt8], channels: Int, sampleRate: Int)
    }

    /// One piece of the output for a segmenter: the header (ftyp + moov, HLS's init segment) or one
    /// fragment (moof + mdat). `bytes` is valid during the call only.
    public struct Piece {
        /// Whether this is the header or a fragment.
        public let isHeader: Bool
        /// The bytes of the piece.
        public let bytes: [UInt8]
        /// A fragment's media time span in microseconds from the first frame (the video track's when there
        /// is one, which is where a segmenter cuts); 0 for the header.
        public let startMicros: Int64
        public let endMicros: Int64
    }

    private let sink: FileSink?
    private let onPiece: ((Piece) throws -> Void)?
    private var pieceBuffer: [UInt8] = []
    private let wantsVideo: Bool
    private let audioChannels: Int?
    private let audioTrack: AudioTrack?
    private let preSkip: Int
    private let headerWaitNs: Int64
    private let maxFragmentNs: Int64
    private var video: Track?
    private var audio: Track?
    private var headerWritten = false
    private var videoSize: (width: Int, height: Int) = (0, 0)
    private var avcConfiguration: [UInt8]?
    private var vp9Profile: UInt8 = 0
    private var av1Configuration: [UInt8]?
    private var firstPTS: Int64?
    private var fragmentStartPTS: Int64 = 0
    private var sequence: UInt32 = 0
    private var mehdOffset: Int64 = 0
    private var endTimeMs: UInt64 = 0
    private var closed = false
    private var moof: [UInt8] = []

    /// Bytes handed to the disk writer thread and not yet written (see ``DiskWriter``).
    public var backlogBytes: Int { sink?.backlogBytes ?? 0 }
    /// The file (for the recorder's count of what reached it); nil when writing pieces.
    var fileSink: FileSink? { sink }

    /// Creates (truncates) `path`. `video`: whether a video track is expected; `audioChannels`: the
    /// Opus channel count (1 or 2), nil for no audio track. Throws ``MediaError`` for bad arguments or
    /// a file that cannot be created.
    public init(
        path: String, video: Bool = true, audioChannels: Int? = 2, preSkip: Int = 312, headerWaitMs: Int = 5_000,
        maxFragmentMs: Int = 1_000, writer: DiskWriter = .shared
    ) throws {
        guard video || audioChannels != nil else {
            throw MediaError.invalidArgument("MP4 needs a video or an audio track")
        }
        if let audioChannels, !(audioChannels == 1 || audioChannels == 2) {
            throw MediaError.invalidArgument("MP4 Opus channels \(audioChannels)")
        }
        wantsVideo = video
        self.audioChannels = audioChannels
        audioTrack = audioChannels.map { .opus(channels: $0, preSkip: preSkip) }
        self.preSkip = preSkip
        headerWaitNs = Int64(max(0, headerWaitMs)) * 1_000_000
        maxFragmentNs = Int64(min(max(100, maxFragmentMs), 30_000)) * 1_000_000
        sink = try FileSink(path: path, writer: writer)
        onPiece = nil
        if video { self.video = Track(id: 1, timescale: 90_000) }
        if audioChannels != nil { audio = Track(id: video ? 2 : 1, timescale: 48_000) }
        moof.reserveCapacity(4096)
    }

    /// Creates a muxer that hands its header and each fragment to `pieces` (on the caller's thread, from
    /// ``write(_:pts:)``, ``writeAudio(_:pts:duration:)`` and ``close()``) instead of writing a file. Fragments
    /// end before each video keyframe and at least every `maxFragmentMs`. An error `pieces` throws comes
    /// out of the call that wrote. Throws ``MediaError/invalidArgument(_:)`` for a bad audio configuration.
    public init(
        pieces: @escaping (Piece) throws -> Void, video: Bool = true, audio: AudioTrack?, headerWaitMs: Int = 5_000,
        maxFragmentMs: Int = 30_000
    ) throws {
        guard video || audio != nil else { throw MediaError.invalidArgument("MP4 needs a video or an audio track") }
        var timescale: UInt32 = 48_000
        switch audio {
        case .opus(let channels, _) where !(channels == 1 || channels == 2):
            throw MediaError.invalidArgument("MP4 Opus channels \(channels)")
        case .aac(let config, let channels, let rate):
            guard config.count >= 2, (1...8).contains(channels), (8_000...96_000).contains(rate) else {
                throw MediaError.invalidArgument("MP4 AAC config \(config.count) bytes, \(channels) ch, \(rate) Hz")
            }
            timescale = UInt32(rate)
        default: break
        }
        wantsVideo = video
        audioTrack = audio
        if case .opus(let channels, let skip) = audio {
            audioChannels = channels
            preSkip = skip
        } else {
            audioChannels = audio == nil ? nil : 1
            preSkip = 0
        }
        headerWaitNs = Int64(max(0, headerWaitMs)) * 1_000_000
        maxFragmentNs = Int64(min(max(100, maxFragmentMs), 30_000)) * 1_000_000
        sink = nil
        onPiece = pieces
        if video { self.video = Track(id: 1, timescale: 90_000) }
        if audio != nil { self.audio = Track(id: video ? 2 : 1, timescale: timescale) }
        moof.reserveCapacity(4096)
        pieceBuffer.reserveCapacity(1 << 18)
    }

    /// Takes one audio frame of a codec ``MediaCodec`` does not name (AAC): its bytes, `pts` in nanoseconds
    /// as ``write(_:pts:)`` takes them, and its `duration` in samples.
    public func writeAudio(_ data: UnsafeRawBufferPointer, pts: Int64, duration: Int) throws {
        guard !closed else { throw MediaError.closed }
        guard var track = audio else { throw MediaError.invalidArgument("MP4 writer has no audio track") }
        guard !data.isEmpty else { return }
        let start = firstPTS ?? pts
        if firstPTS == nil {
            firstPTS = pts
            fragmentStartPTS = pts
        }
        audio = nil
        let time = advance(&track, to: UInt64(max(0, pts - start)))
        append(data, h264: false, key: true, duration: UInt32(clamping: duration), time: time, to: &track)
        audio = track
        try afterSample(pts: pts, start: start)
    }

    /// Takes one frame. `pts` is nanoseconds since the recording's start (same origin for audio and
    /// video), increasing per track.
    public func write(_ frame: EncodedFrame, pts: Int64) throws {
        guard !closed else { throw MediaError.closed }
        guard !frame.data.isEmpty else { return }
        let isVideo = frame.codec.kind == .video
        if isVideo {
            guard wantsVideo else { throw MediaError.invalidArgument("MP4 writer has no video track") }
            guard video != nil else {
                // The file went audio only (no keyframe within the header wait).
                droppedBeforeKeyframe += 1
                return
            }
            if let videoCodec, videoCodec != frame.codec {
                throw MediaError.invalidArgument("MP4 video track is \(videoCodec), got \(frame.codec)")
            }
            if videoCodec == nil {
                guard frame.codec != .opus else {
                    throw MediaError.invalidArgument("MP4 video codec \(frame.codec)")
                }
                guard let size = frame.keyframePictureSize else {
                    droppedBeforeKeyframe += 1
                    return
                }
                if frame.codec == .vp9 {
                    vp9Profile = frame.data.withUnsafeBytes { VP9FrameHeader.keyframeInfo($0)?.profile } ?? 0
                }
                if frame.codec == .av1 {
                    av1Configuration = frame.data.withUnsafeBytes {
                        AV1SequenceHeader.configurationRecord(fromTemporalUnit: $0)
                    }
                    guard av1Configuration != nil else {
                        droppedBeforeKeyframe += 1
                        return
                    }
                }
                if frame.codec == .h264 {
                    avcConfiguration = frame.data.withUnsafeBytes { H264DecoderConfiguration.record(fromAnnexB: $0) }
                }
                videoCodec = frame.codec
                videoSize = size
            }
        } else {
            guard audio != nil else { throw MediaError.invalidArgument("MP4 writer has no audio track") }
        }
        let start = firstPTS ?? pts
        if firstPTS == nil {
            firstPTS = pts
            fragmentStartPTS = pts
        }
        let relative = UInt64(max(0, pts - start))
        if isVideo, var track = video {
            video = nil
            let time = advance(&track, to: relative)
            video = track
            // A keyframe starts a fragment, so that each fragment opens decodable.
            if frame.isKeyframe && track.sizes.isEmpty == false { try cut(at: pts, videoToo: true) }
            if var track = video {
                video = nil
                append(frame, time: time, to: &track)
                video = track
            }
            if !headerWritten { try writeHeader() }
        } else if !isVideo, var track = audio {
            audio = nil
            let time = advance(&track, to: relative)
            append(frame, time: time, to: &track)
            audio = track
        }
        try afterSample(pts: pts, start: start)
    }

    /// Writes the header once audio waited long enough for video, and cuts a fragment that grew too long.
    private func afterSample(pts: Int64, start: Int64) throws {
        if !headerWritten {
            // Audio waited long enough and no keyframe came: an audio-only file.
            guard pts - start > headerWaitNs else { return }
            video = nil
            try writeHeader()
        }
        if pts - fragmentStartPTS >= maxFragmentNs { try cut(at: pts, videoToo: false) }
    }

    /// The decode time of a sample at `relative` nanoseconds, increasing; the previous sample's
    /// duration becomes known.
    private func advance(_ track: inout Track, to relative: UInt64) -> UInt64 {
        var time = relative * UInt64(track.timescale) / 1_000_000_000
        guard let last = track.durations.indices.last else {
            return track.started ? max(time, track.lastTime + 1) : time
        }
        if time <= track.lastTime { time = track.lastTime + 1 }
        if track.durations[last] == 0 { track.durations[last] = UInt32(clamping: time - track.lastTime) }
        return time
    }

    /// Appends a sample at decode time `time` (its duration is set by the next one, or at close).
    private func append(_ frame: EncodedFrame, time: UInt64, to track: inout Track) {
        let clock = UInt64(max(1, frame.codec.clockRate))
        let duration = UInt32(clamping: UInt64(frame.duration) * UInt64(track.timescale) / clock)
        frame.data.withUnsafeBytes { bytes in
            append(
                bytes, h264: frame.codec == .h264, key: frame.codec.kind == .audio || frame.isKeyframe,
                duration: duration, time: time, to: &track)
        }
    }

    /// Appends a sample's bytes (H.264 Annex B converted to length-prefixed units); `duration` in the
    /// track's timescale is used for the last sample only.
    private func append(
        _ bytes: UnsafeRawBufferPointer, h264: Bool, key: Bool, duration: UInt32, time: UInt64, to track: inout Track
    ) {
        if track.sizes.isEmpty { track.baseTime = time }
        track.started = true
        track.lastTime = time
        track.lastFrameDuration = duration
        let before = track.data.count
        if h264 {
            H264LengthPrefix.append(bytes, to: &track.data)
        } else {
            track.data.append(contentsOf: bytes)
        }
        track.durations.append(0)
        track.sizes.append(UInt32(track.data.count - before))
        // sample_depends_on 2 (independent) for sync samples; 1 plus is_non_sync_sample otherwise.
        track.flags.append(key ? 0x0200_0000 : 0x0101_0000)
    }

    /// Writes the open fragment. A track's last sample waits for the next one, whose time gives its
    /// duration, except the video track's when a keyframe (whose time was just taken) starts the
    /// next fragment.
    private func cut(at pts: Int64, videoToo: Bool) throws {
        guard headerWritten else { return }
        fragmentStartPTS = pts
        var counts: [(Int, Bool)] = []
        if let v = video { counts.append((videoToo ? v.sizes.count : max(0, v.sizes.count - 1), true)) }
        if let a = audio { counts.append((max(0, a.sizes.count - 1), false)) }
        try writeFragment(counts: counts)
    }

    /// Writes `moof` + `mdat` with the first `count` samples of each track, keeping the rest.
    private func writeFragment(counts: [(Int, Bool)]) throws {
        guard counts.contains(where: { $0.0 > 0 }) else { return }
        sequence += 1
        moof.removeAll(keepingCapacity: true)
        var dataOffsetPositions: [(position: Int, track: Bool)] = []
        moof.mp4Box("moof") { m in
            m.mp4FullBox("mfhd", version: 0, flags: 0) { $0.appendBE32(sequence) }
            for (count, isVideo) in counts where count > 0 {
                guard let t = isVideo ? video : audio else { continue }
                m.mp4Box("traf") { f in
                    f.mp4FullBox("tfhd", version: 0, flags: 0x02_0000) { $0.appendBE32(t.id) }  // default-base-is-moof
                    f.mp4FullBox("tfdt", version: 1, flags: 0) { $0.appendBE64(t.baseTime) }
                    // data-offset, sample-duration, sample-size and sample-flags present.
                    f.mp4FullBox("trun", version: 0, flags: 0x00_0701) { r in
                        r.appendBE32(UInt32(count))
                        dataOffsetPositions.append((r.count, isVideo))
                        r.appendBE32(0)
                        for i in 0..<count {
                            r.appendBE32(max(1, t.durations[i]))
                            r.appendBE32(t.sizes[i])
                            r.appendBE32(t.flags[i])
                        }
                    }
                }
            }
        }
        // Data offsets are from the start of the moof to each track's bytes in the mdat.
        var mdatSize = 8
        var trackOffsets: [Bool: Int] = [:]
        var byteCounts: [Bool: Int] = [:]
        for (count, isVideo) in counts where count > 0 {
            guard let t = isVideo ? video : audio else { continue }
            let bytes = t.sizes[0..<count].reduce(0) { $0 + Int($1) }
            trackOffsets[isVideo] = moof.count + mdatSize
            byteCounts[isVideo] = bytes
            mdatSize += bytes
        }
        for (position, isVideo) in dataOffsetPositions {
            moof.setBE32(at: position, UInt32(trackOffsets[isVideo] ?? 0))
        }
        // The piece's span: the video track's when it has samples here (a segmenter cuts at its keyframes).
        var spanStart: Int64 = 0
        var spanEnd: Int64 = 0
        var frames = RecordedFrames()
        try emit { out in
            out.append(contentsOf: moof)
            out.appendBE32(UInt32(mdatSize))
            out.append(contentsOf: [0x6D, 0x64, 0x61, 0x74])  // "mdat"
            for (count, isVideo) in counts where count > 0 {
                guard var t = isVideo ? video : audio else { continue }
                let bytes = byteCounts[isVideo] ?? 0
                out.append(contentsOf: t.data[0..<bytes])
                if isVideo {
                    frames.video = count
                    frames.videoBytes = bytes
                    frames.keyframes = t.flags[0..<count].reduce(0) { $0 + ($1 == 0x0200_0000 ? 1 : 0) }
                    videoFramesWritten += count
                } else {
                    frames.audio = count
                    frames.audioBytes = bytes
                    audioFramesWritten += count
                }
                let endTime = t.baseTime + t.durations[0..<count].reduce(0) { $0 + UInt64(max(1, $1)) }
                if isVideo || spanEnd == 0 {
                    spanStart = Int64(t.baseTime) * 1_000_000 / Int64(t.timescale)
                    spanEnd = Int64(endTime) * 1_000_000 / Int64(t.timescale)
                }
                endTimeMs = max(endTimeMs, endTime * 1_000 / UInt64(t.timescale))
                t.data.removeSubrange(0..<bytes)
                t.durations.removeSubrange(0..<count)
                t.sizes.removeSubrange(0..<count)
                t.flags.removeSubrange(0..<count)
                t.baseTime = endTime
                if isVideo { video = t } else { audio = t }
            }
            sink?.pendingFrames += frames
        } piece: {
            Piece(isHeader: false, bytes: $0, startMicros: spanStart, endMicros: spanEnd)
        }
        fragmentsWritten += 1
    }

    /// Builds a piece of output: into the file's buffer (then handed to the disk writer), or into the
    /// piece buffer, then handed to the segmenter.
    private func emit(_ body: (inout [UInt8]) -> Void, piece: ([UInt8]) -> Piece) throws {
        if let sink {
            body(&sink.buffer)
            try sink.flush()
            return
        }
        pieceBuffer.removeAll(keepingCapacity: true)
        body(&pieceBuffer)
        try onPiece?(piece(pieceBuffer))
    }

    /// Writes everything held, patches the duration and closes the file. Safe to call twice.
    public func close() throws {
        guard !closed else { return }
        if !headerWritten {
            if video?.sizes.isEmpty != false { video = nil }
            try writeHeader()
        }
        for isVideo in [true, false] {
            guard var t = isVideo ? video : audio, let last = t.durations.indices.last, t.durations[last] == 0 else {
                continue
            }
            t.durations[last] = max(1, t.lastFrameDuration)
            if isVideo { video = t } else { audio = t }
        }
        try writeFragment(counts: [(video?.sizes.count ?? 0, true), (audio?.sizes.count ?? 0, false)])
        closed = true
        guard let sink else { return }
        try sink.flush()
        var duration: [UInt8] = []
        duration.appendBE64(endTimeMs)
        try sink.patch(at: mehdOffset, duration)
        try sink.close()
    }

    // MARK: - Header

    private func writeHeader() throws {
        headerWritten = true
        var b: [UInt8] = []
        b.mp4Box("ftyp") { f in
            f.appendFourCC("iso5")
            f.appendBE32(512)
            for brand: StaticString in ["iso5", "iso6", "mp41"] { f.appendFourCC(brand) }
            if videoCodec == .h264 { f.appendFourCC("avc1") }
            if videoCodec == .av1 { f.appendFourCC("av01") }
        }
        let base = sink?.flushedLength ?? 0
        var mehdPosition = 0
        b.mp4Box("moov") { m in
            m.mp4FullBox("mvhd", version: 0, flags: 0) { h in
                h.appendBE32(0)  // creation time
                h.appendBE32(0)  // modification time
                h.appendBE32(1_000)  // timescale: ms
                h.appendBE32(0)  // duration: in the fragments
                h.appendBE32(0x0001_0000)  // rate 1.0
                h.appendBE16(0x0100)  // volume 1.0
                h.append(contentsOf: [UInt8](repeating: 0, count: 10))
                h.appendMatrix()
                h.append(contentsOf: [UInt8](repeating: 0, count: 24))
                h.appendBE32(UInt32((audio != nil ? 1 : 0) + (video != nil ? 1 : 0) + 1))  // next track id
            }
            if let video {
                m.appendTrack(
                    id: video.id, timescale: video.timescale, sound: false, width: videoSize.width,
                    height: videoSize.height
                ) { s in self.videoSampleEntry(&s) }
            }
            if let audio {
                m.appendTrack(id: audio.id, timescale: audio.timescale, sound: true, width: 0, height: 0) { s in
                    if case .aac(let config, let channels, let rate) = self.audioTrack {
                        self.aacSampleEntry(&s, config: config, channels: channels, sampleRate: rate)
                    } else {
                        self.opusSampleEntry(&s)
                    }
                }
            }
            m.mp4Box("mvex") { x in
                x.mp4FullBox("mehd", version: 1, flags: 0) { e in
                    mehdPosition = e.count
                    e.appendBE64(0)  // fragment duration (ms), patched at close
                }
                for t in [video, audio].compactMap({ $0 }) {
                    x.mp4FullBox("trex", version: 0, flags: 0) { e in
                        e.appendBE32(t.id)
                        e.appendBE32(1)  // sample description index
                        e.appendBE32(0)
                        e.appendBE32(0)
                        e.appendBE32(0)
                    }
                }
            }
        }
        mehdOffset = base + Int64(mehdPosition)
        try emit {
            $0.append(contentsOf: b)
        } piece: {
            Piece(isHeader: true, bytes: $0, startMicros: 0, endMicros: 0)
        }
    }

    private func videoSampleEntry(_ s: inout [UInt8]) {
        let h264 = videoCodec == .h264
        let entry: StaticString =
            switch videoCodec {
            case .h264: "avc1"
            case .av1: "av01"
            case .vp9: "vp09"
            default: "vp08"
            }
        s.mp4Box(entry) { e in
            e.append(contentsOf: [0, 0, 0, 0, 0, 0])
            e.appendBE16(1)  // data reference index
            e.append(contentsOf: [UInt8](repeating: 0, count: 16))
            e.appendBE16(UInt16(clamping: videoSize.width))
            e.appendBE16(UInt16(clamping: videoSize.height))
            e.appendBE32(0x0048_0000)  // 72 dpi
            e.appendBE32(0x0048_0000)
            e.appendBE32(0)
            e.appendBE16(1)  // frame count
            e.append(contentsOf: [UInt8](repeating: 0, count: 32))  // compressor name
            e.appendBE16(0x0018)  // depth
            e.appendBE16(0xFFFF)
            if h264 {
                e.mp4Box("avcC") { $0.append(contentsOf: avcConfiguration ?? []) }
            } else if videoCodec == .av1 {
                e.mp4Box("av1C") { $0.append(contentsOf: av1Configuration ?? []) }
            } else {
                // VP codec configuration: the profile, 8-bit (10-bit for VP9 profiles 2 and 3) 4:2:0.
                e.mp4FullBox("vpcC", version: 1, flags: 0) { c in
                    let profile = videoCodec == .vp9 ? vp9Profile : 0
                    c.append(profile)
                    c.append(10)  // level 1.0
                    c.append(profile >= 2 ? 0xA2 : 0x82)  // bit depth, chroma 4:2:0 colocated, limited range
                    c.append(2)  // colour primaries: unspecified
                    c.append(2)  // transfer: unspecified
                    c.append(2)  // matrix: unspecified
                    c.appendBE16(0)  // no initialization data
                }
            }
        }
    }

    /// `mp4a` with an `esds` (ISO/IEC 14496-1 descriptors) carrying the AudioSpecificConfig.
    private func aacSampleEntry(_ s: inout [UInt8], config: [UInt8], channels: Int, sampleRate: Int) {
        s.mp4Box("mp4a") { e in
            e.appendAudioSampleEntryFields(channels: channels, sampleRate: sampleRate)
            e.mp4FullBox("esds", version: 0, flags: 0) { d in
                let specific = config.count
                let decoderConfig = 13 + 2 + specific
                // ES_Descriptor: id 1, no flags; DecoderConfigDescriptor; SLConfigDescriptor (predefined 2).
                d.append(contentsOf: [0x03, UInt8(3 + 2 + decoderConfig + 3), 0x00, 0x01, 0x00])
                d.append(contentsOf: [0x04, UInt8(decoderConfig), 0x40, 0x15])  // MPEG-4 audio, audio stream
                d.append(contentsOf: [0x00, 0x00, 0x00])  // buffer size
                d.appendBE32(0)  // max bitrate
                d.appendBE32(0)  // average bitrate
                d.append(contentsOf: [0x05, UInt8(specific)])
                d.append(contentsOf: config)
                d.append(contentsOf: [0x06, 0x01, 0x02])
            }
        }
    }

    private func opusSampleEntry(_ s: inout [UInt8]) {
        let channels = audioChannels ?? 2
        s.mp4Box("Opus") { e in
            e.appendAudioSampleEntryFields(channels: channels, sampleRate: 48_000)
            // Opus-in-ISOBMFF: the OpusHead fields, big-endian, without the magic.
            e.mp4Box("dOps") { d in
                d.append(0)  // version
                d.append(UInt8(channels))
                d.appendBE16(UInt16(clamping: preSkip))
                d.appendBE32(48_000)
                d.appendBE16(0)  // output gain
                d.append(0)  // channel mapping family
            }
        }
    }
}

extension Array where Element == UInt8 {
    mutating func appendBE16(_ v: UInt16) {
        append(UInt8(v >> 8))
        append(UInt8(v & 0xFF))
    }
    mutating func appendBE32(_ v: UInt32) {
        appendBE16(UInt16(v >> 16))
        appendBE16(UInt16(v & 0xFFFF))
    }
    mutating func appendBE64(_ v: UInt64) {
        appendBE32(UInt32(v >> 32))
        appendBE32(UInt32(v & 0xFFFF_FFFF))
    }
    mutating func setBE32(at i: Int, _ v: UInt32) {
        self[i] = UInt8(v >> 24)
        self[i + 1] = UInt8(v >> 16 & 0xFF)
        self[i + 2] = UInt8(v >> 8 & 0xFF)
        self[i + 3] = UInt8(v & 0xFF)
    }
    mutating func appendFourCC(_ code: StaticString) {
        code.withUTF8Buffer { append(contentsOf: $0) }
    }
    /// Appends a box: its size (patched when `body` is done), its type, then what `body` appends.
    mutating func mp4Box(_ type: StaticString, _ body: (inout [UInt8]) -> Void) {
        let start = count
        appendBE32(0)
        appendFourCC(type)
        body(&self)
        setBE32(at: start, UInt32(count - start))
    }
    /// Appends a full box (a box with a version and 24 bits of flags).
    mutating func mp4FullBox(_ type: StaticString, version: UInt8, flags: UInt32, _ body: (inout [UInt8]) -> Void) {
        mp4Box(type) { b in
            b.appendBE32(UInt32(version) << 24 | flags & 0xFF_FFFF)
            body(&b)
        }
    }
    /// The fields every audio sample entry starts with (ISO/IEC 14496-12 AudioSampleEntry).
    mutating func appendAudioSampleEntryFields(channels: Int, sampleRate: Int) {
        append(contentsOf: [0, 0, 0, 0, 0, 0])
        appendBE16(1)  // data reference index
        append(contentsOf: [UInt8](repeating: 0, count: 8))
        appendBE16(UInt16(channels))
        appendBE16(16)  // sample size
        appendBE32(0)
        appendBE32(UInt32(sampleRate) << 16)
    }
    /// The unity transformation matrix of `mvhd` and `tkhd`.
    mutating func appendMatrix() {
        for v: UInt32 in [0x0001_0000, 0, 0, 0, 0x0001_0000, 0, 0, 0, 0x4000_0000] { appendBE32(v) }
    }
    /// Appends a `trak` with no samples (they are in the fragments).
    mutating func appendTrack(
        id: UInt32, timescale: UInt32, sound: Bool, width: Int, height: Int, sampleEntry: (inout [UInt8]) -> Void
    ) {
        mp4Box("trak") { t in
            t.mp4FullBox("tkhd", version: 0, flags: 3) { h in  // enabled, in movie
                h.appendBE32(0)
                h.appendBE32(0)
                h.appendBE32(id)
                h.appendBE32(0)
                h.appendBE32(0)  // duration
                h.append(contentsOf: [UInt8](repeating: 0, count: 8))
                h.appendBE16(0)  // layer
                h.appendBE16(sound ? 1 : 0)  // alternate group
                h.appendBE16(sound ? 0x0100 : 0)  // volume
                h.appendBE16(0)
                h.appendMatrix()
                h.appendBE32(UInt32(clamping: width) << 16)
                h.appendBE32(UInt32(clamping: height) << 16)
            }
            t.mp4Box("mdia") { m in
                m.mp4FullBox("mdhd", version: 0, flags: 0) { h in
                    h.appendBE32(0)
                    h.appendBE32(0)
                    h.appendBE32(timescale)
                    h.appendBE32(0)
                    h.appendBE16(0x55C4)  // language "und"
                    h.appendBE16(0)
                }
                m.mp4FullBox("hdlr", version: 0, flags: 0) { h in
                    h.appendBE32(0)
                    h.appendFourCC(sound ? "soun" : "vide")
                    h.append(contentsOf: [UInt8](repeating: 0, count: 12))
                    h.appendFourCC(sound ? "Sound" : "Video")
                    h.append(0)
                }
                m.mp4Box("minf") { i in
                    if sound {
                        i.mp4FullBox("smhd", version: 0, flags: 0) { $0.appendBE32(0) }
                    } else {
                        i.mp4FullBox("vmhd", version: 0, flags: 1) { $0.append(contentsOf: [0, 0, 0, 0, 0, 0, 0, 0]) }
                    }
                    i.mp4Box("dinf") { d in
                        d.mp4FullBox("dref", version: 0, flags: 0) { r in
                            r.appendBE32(1)
                            r.mp4FullBox("url ", version: 0, flags: 1) { _ in }  // media in this file
                        }
                    }
                    i.mp4Box("stbl") { s in
                        s.mp4FullBox("stsd", version: 0, flags: 0) { d in
                            d.appendBE32(1)
                            sampleEntry(&d)
                        }
                        s.mp4FullBox("stts", version: 0, flags: 0) { $0.appendBE32(0) }
                        s.mp4FullBox("stsc", version: 0, flags: 0) { $0.appendBE32(0) }
                        s.mp4FullBox("stsz", version: 0, flags: 0) { z in
                            z.appendBE32(0)
                            z.appendBE32(0)
                        }
                        s.mp4FullBox("stco", version: 0, flags: 0) { $0.appendBE32(0) }
                    }
                }
            }
        }
    }
}
