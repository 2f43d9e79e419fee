public import RTCWire

/// Writes VP8, VP9, AV1 or H.264 and/or Opus into one WebM (Matroska) file, live, without transcoding.
///
/// The video codec is the first video keyframe's (or ``VideoTrack/codec``). VP8, VP9 and AV1 make a
/// WebM file (DocType `webm`, `V_VP8`, `V_VP9`, `V_AV1` with the stream's `av1C` as CodecPrivate); H.264 a Matroska file (DocType `matroska`, `V_MPEG4/ISO/AVC` with an
/// `AVCDecoderConfigurationRecord` built from the keyframe's SPS and PPS as CodecPrivate, each access
/// unit written as 4-byte length-prefixed NAL units).
///
/// Layout: EBML header, a Segment of unknown size, a reserved SeekHead, Info (1 ms timecodes),
/// Tracks, then Clusters. A cluster starts at each video keyframe and at least every
/// `maxClusterMs`; each cluster is written with its final size and flushed to the kernel when it
/// ends, so a process killed with SIGKILL leaves a file that plays up to its last whole cluster.
/// `close()` writes Cues and patches the Segment size, Duration and SeekHead.
///
/// Frames of both tracks are interleaved by `pts` through a small reorder buffer. Video delta
/// frames before the first keyframe are dropped and counted. The video size comes from the first
/// keyframe unless configured, so Tracks is written when that keyframe arrives (audio waits for it
/// at most `headerWaitMs`).
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class WebMWriter: @unchecked Sendable {
    /// Video track settings.
    public struct VideoTrack: Sendable {
        /// Picture width; nil = take it from the first keyframe.
        public var width: Int?
        /// Picture height; nil = take it from the first keyframe.
        public var height: Int?
        /// The video codec (`.vp8`, `.vp9` or `.h264`); nil = the first keyframe's.
        public var codec: MediaCodec?
        /// Creates settings.
        public init(width: Int? = nil, height: Int? = nil, codec: MediaCodec? = nil) {
            self.width = width
            self.height = height
            self.codec = codec
        }
    }

    /// Audio track settings.
    public struct AudioTrack: Sendable {
        /// Opus channel count (1 or 2).
        public var channels: Int
        /// Opus encoder delay in 48 kHz samples (CodecDelay and OpusHead pre-skip).
        public var preSkip: Int
        /// Creates settings.
        public init(channels: Int = 1, preSkip: Int = 312) {
            self.channels = channels
            self.preSkip = preSkip
        }
    }

    /// Video frames written.
    public private(set) var videoFramesWritten = 0
    /// Audio packets written.
    public private(set) var audioFramesWritten = 0
    /// Video delta frames dropped because no keyframe had been written yet.
    public private(set) var droppedBeforeKeyframe = 0
    /// Frames dropped because they arrived more than 32 s behind the other track.
    public private(set) var droppedLate = 0
    /// Clusters written to the file.
    public private(set) var clustersWritten = 0

    private struct Pending {
        var frame: EncodedFrame
        var ms: Int64
        var track: UInt8
    }

    private let sink: FileSink
    private let video: VideoTrack?
    private let audio: AudioTrack?
    private let videoTrackNumber: UInt8
    private let audioTrackNumber: UInt8
    private let reorderWindowMs: Int64
    private let headerWaitMs: Int64
    private let maxClusterMs: Int64

    private var headerWritten = false
    private var sawVideoKeyframe = false
    /// The video codec, once the first keyframe (or the configuration) told it.
    public private(set) var videoCodec: MediaCodec?
    /// H.264: the AVCDecoderConfigurationRecord of the first keyframe.
    private var avcConfiguration: [UInt8]?
    /// AV1: the AV1CodecConfigurationRecord of the first keyframe.
    private var av1Configuration: [UInt8]?
    private var videoSize: (width: Int, height: Int)?
    private var pending: [Pending] = []
    private var lastSeenMs: [Int64] = [.min, .min, .min]  // by track number
    private var lastEmittedMs: [Int64] = [-1, -1, -1]  // by track number; -1 before the first block
    private var endMs: Int64 = 0

    private var segmentSizeOffset: Int64 = 0
    private var segmentDataStart: Int64 = 0
    private var seekHeadOffset: Int64 = 0
    private var durationOffset: Int64 = 0
    private var infoPosition: Int64 = 0
    private var tracksPosition: Int64 = 0
    private static let seekHeadReserve = 96

    private var cluster: [UInt8] = []
    private var clusterOpen = false
    private var clusterHasBlocks = false
    private var clusterTimecode: Int64 = 0
    private var clusterCueTime: Int64?
    private var cues: [(time: Int64, position: Int64)] = []
    private var closed = false

    /// Bytes handed to the disk writer thread and not yet written (see ``DiskWriter``).
    public var backlogBytes: Int { sink.backlogBytes }
    /// The file (for the recorder's count of what reached it).
    var fileSink: FileSink { sink }
    /// Frames in the open cluster: handed to the file with it.
    private var clusterFrames = RecordedFrames()

    /// Creates (truncates) `path`. At least one of `video` and `audio` must be given.
    /// Throws ``MediaError/cannotOpen(path:errno:)`` when the file cannot be created.
    public init(
        path: String, video: VideoTrack? = VideoTrack(), audio: AudioTrack? = AudioTrack(),
        reorderWindowMs: Int = 300, headerWaitMs: Int = 5_000, maxClusterMs: Int = 1_000,
        writer: DiskWriter = .shared
    ) throws {
        guard video != nil || audio != nil else {
            throw MediaError.invalidArgument("WebM needs a video or an audio track")
        }
        if let audio, !(audio.channels == 1 || audio.channels == 2) {
            throw MediaError.invalidArgument("WebM Opus channels \(audio.channels)")
        }
        self.video = video
        self.audio = audio
        videoTrackNumber = video == nil ? 0 : 1
        audioTrackNumber = audio == nil ? 0 : (video == nil ? 1 : 2)
        self.reorderWindowMs = Int64(max(0, reorderWindowMs))
        self.headerWaitMs = Int64(max(0, headerWaitMs))
        self.maxClusterMs = Int64(min(max(100, maxClusterMs), 30_000))
        sink = try FileSink(path: path, writer: writer)
        cluster.reserveCapacity(1 << 18)
        pending.reserveCapacity(64)
        if let video, let w = video.width, let h = video.height { videoSize = (w, h) }
        if let codec = video?.codec {
            guard codec != .opus else {
                throw MediaError.invalidArgument("Matroska video codec \(codec)")
            }
            videoCodec = codec
        }
    }

    /// Queues one frame. `pts` is nanoseconds since the recording's start (same origin for audio
    /// and video). Frames of a codec without a configured track are rejected.
    public func write(_ frame: EncodedFrame, pts: Int64) throws {
        guard !closed else { throw MediaError.closed }
        let track: UInt8
        switch frame.codec {
        case .vp8, .vp9, .h264, .av1:
            guard video != nil else { throw MediaError.invalidArgument("WebM writer has no video track") }
            if let videoCodec, videoCodec != frame.codec {
                throw MediaError.invalidArgument("Matroska video track is \(videoCodec), got \(frame.codec)")
            }
            track = videoTrackNumber
            if !sawVideoKeyframe {
                guard let size = frame.keyframePictureSize else {
                    droppedBeforeKeyframe += 1
                    return
                }
                if frame.codec == .h264 {
                    avcConfiguration = frame.data.withUnsafeBytes { H264DecoderConfiguration.record(fromAnnexB: $0) }
                }
                if frame.codec == .av1 {
                    av1Configuration = frame.data.withUnsafeBytes {
                        AV1SequenceHeader.configurationRecord(fromTemporalUnit: $0)
                    }
                }
                sawVideoKeyframe = true
                videoCodec = frame.codec
                if videoSize == nil { videoSize = size }
            }
        case .opus:
            guard audio != nil else { throw MediaError.invalidArgument("WebM writer has no audio track") }
            track = audioTrackNumber
        }
        guard !frame.data.isEmpty else { return }
        let ms = max(0, pts) / 1_000_000
        lastSeenMs[Int(track)] = max(lastSeenMs[Int(track)], ms)
        insert(Pending(frame: frame, ms: ms, track: track))

        if !headerWritten {
            let waitingForVideo = video != nil && !sawVideoKeyframe
            if waitingForVideo {
                guard let first = pending.first, let last = pending.last, last.ms - first.ms > headerWaitMs else {
                    return
                }
            }
            try writeHeader()
        }
        try drain(force: false)
    }

    /// Writes everything buffered, including the open cluster, and waits until the disk writer thread
    /// has handed it to the kernel. After this the file on disk is playable even if the process dies.
    /// (Clusters are handed over as they close without waiting; only this call and `close()` wait.)
    public func flush() throws {
        guard !closed else { throw MediaError.closed }
        if !headerWritten {
            guard !pending.isEmpty else { return }
            try writeHeader()
        }
        try drain(force: true)
        try finishCluster()
        try sink.sync()
    }

    /// Writes the remaining frames, Cues, and the final sizes and duration, then closes the file.
    /// Safe to call twice.
    public func close() throws {
        guard !closed else { return }
        if !headerWritten { try writeHeader() }
        try drain(force: true)
        try finishCluster()
        closed = true
        let cuesPosition = sink.offset - segmentDataStart
        if !cues.isEmpty {
            let cueTrack = UInt64(videoTrackNumber != 0 ? videoTrackNumber : audioTrackNumber)
            sink.buffer.ebmlMaster(0x1C53_BB6B) { c in
                for cue in cues {
                    c.ebmlMaster(0xBB) { p in
                        p.ebmlUInt(0xB3, UInt64(cue.time))
                        p.ebmlMaster(0xB7) { t in
                            t.ebmlUInt(0xF7, cueTrack)
                            t.ebmlUInt(0xF1, UInt64(cue.position))
                        }
                    }
                }
            }
        }
        try sink.flush()
        try sink.patch(at: segmentSizeOffset, EBML.size8(Int(sink.offset - segmentDataStart)))
        var duration: [UInt8] = []
        duration.ebmlFloat(0x4489, Double(endMs))
        try sink.patch(at: durationOffset, duration)
        var seekHead: [UInt8] = []
        seekHead.ebmlMaster(0x114D_9B74) { s in
            var entries: [(id: UInt32, position: Int64)] = [(0x1549_A966, infoPosition), (0x1654_AE6B, tracksPosition)]
            if !cues.isEmpty { entries.append((0x1C53_BB6B, cuesPosition)) }
            for (id, position) in entries {
                s.ebmlMaster(0x4DBB) { e in
                    var idBytes: [UInt8] = []
                    idBytes.ebmlID(id)
                    e.ebmlBytes(0x53AB, idBytes)
                    e.ebmlUInt(0x53AC, UInt64(position), width: 8)
                }
            }
        }
        seekHead.ebmlVoid(total: Self.seekHeadReserve - seekHead.count)
        try sink.patch(at: seekHeadOffset, seekHead)
        try sink.close()
    }

    // MARK: - Internals

    private func insert(_ p: Pending) {
        var i = pending.count
        while i > 0, pending[i - 1].ms > p.ms { i -= 1 }
        pending.insert(p, at: i)
    }

    /// Emits buffered frames in pts order once every active track has caught up with them, or
    /// when the buffer spans more than the reorder window.
    private func drain(force: Bool) throws {
        guard headerWritten else { return }
        var emitted = 0
        while emitted < pending.count {
            let p = pending[emitted]
            if !force {
                var horizon = Int64.max
                if videoTrackNumber != 0 { horizon = min(horizon, lastSeenMs[Int(videoTrackNumber)]) }
                if audioTrackNumber != 0 { horizon = min(horizon, lastSeenMs[Int(audioTrackNumber)]) }
                let newest = pending[pending.count - 1].ms
                guard p.ms <= horizon || newest - p.ms > reorderWindowMs else { break }
            }
            try emit(p)
            emitted += 1
        }
        if emitted > 0 { pending.removeFirst(emitted) }
    }

    private func emit(_ p: Pending) throws {
        // Each track's block times strictly increase (players and ffmpeg reject a repeated DTS; two
        // frames of one track can map to one millisecond when the sender-report clock steps or a
        // burst arrives under load); a track that lags the other is written with negative
        // cluster-relative times (legal in Matroska) rather than re-timed.
        let ms = max(p.ms, lastEmittedMs[Int(p.track)] + 1)
        lastEmittedMs[Int(p.track)] = ms
        if clusterOpen, ms - clusterTimecode < Int64(Int16.min) {
            droppedLate += 1
            return
        }
        let isVideo = p.track == videoTrackNumber && videoTrackNumber != 0
        let isVideoKey = isVideo && p.frame.isKeyframe
        if clusterOpen {
            let rel = ms - clusterTimecode
            if (isVideoKey && clusterHasBlocks) || rel >= maxClusterMs || rel > Int64(Int16.max) {
                try finishCluster()
            }
        }
        if !clusterOpen {
            cluster.removeAll(keepingCapacity: true)
            cluster.ebmlUInt(0xE7, UInt64(ms))
            clusterTimecode = ms
            clusterOpen = true
            clusterHasBlocks = false
            clusterCueTime = (isVideoKey || videoTrackNumber == 0) ? ms : nil
        }
        let rel = Int16(clamping: ms - clusterTimecode)
        // H.264 access units go in as length-prefixed NAL units (the avcC's 4-byte lengths). One
        // with 4-byte start codes only (the RTP assembler's) keeps its size: copied in one block,
        // its start codes rewritten in place; any other goes unit by unit.
        let h264 = p.frame.codec == .h264
        let blockStart = cluster.count
        func blockHeader(_ payloadLength: Int) {
            cluster.append(0xA3)
            cluster.ebmlSize(4 + payloadLength)
            cluster.append(0x80 | p.track)
            cluster.append(UInt8(UInt16(bitPattern: rel) >> 8))
            cluster.append(UInt8(UInt16(bitPattern: rel) & 0xFF))
            cluster.append(isVideo ? (p.frame.isKeyframe ? 0x80 : 0x00) : 0x80)
        }
        blockHeader(p.frame.data.count)
        if h264 {
            // Assume the size stays (4-byte start codes); if not, write the block again with its size.
            let written = p.frame.data.withUnsafeBytes { H264LengthPrefix.append($0, to: &cluster) }
            if written != p.frame.data.count {
                cluster.removeSubrange(blockStart...)
                blockHeader(written)
                p.frame.data.withUnsafeBytes { _ = H264LengthPrefix.append($0, to: &cluster) }
            }
        } else {
            cluster.append(contentsOf: p.frame.data)
        }
        clusterHasBlocks = true
        clusterFrames.add(p.frame)
        let clock = Int64(p.frame.codec.clockRate)
        let durationMs = Int64(p.frame.duration) * 1_000 / max(1, clock)
        endMs = max(endMs, ms + durationMs)
        if isVideo { videoFramesWritten += 1 } else { audioFramesWritten += 1 }
    }

    private func finishCluster() throws {
        guard clusterOpen else { return }
        clusterOpen = false
        guard clusterHasBlocks else { return }
        let position = sink.offset - segmentDataStart
        sink.buffer.ebmlID(0x1F43_B675)
        sink.buffer.append(contentsOf: EBML.size8(cluster.count))
        sink.buffer.append(contentsOf: cluster)
        sink.pendingFrames += clusterFrames
        clusterFrames = RecordedFrames()
        if let time = clusterCueTime { cues.append((time, position)) }
        clustersWritten += 1
        try sink.flush()
    }

    private func writeHeader() throws {
        headerWritten = true
        if video != nil, videoSize == nil {
            // Audio waited long enough and no keyframe came: declare a plausible size.
            videoSize = (video?.width ?? 640, video?.height ?? 360)
        }
        // Without a keyframe yet, the track is declared VP8 unless configured; H.264 and AV1 need
        // their keyframe's parameter sets or sequence header for CodecPrivate, so such a stream
        // that came too late is refused at its first frame rather than written undecodable.
        if video != nil,
            videoCodec == nil || (videoCodec == .h264 && avcConfiguration == nil)
                || (videoCodec == .av1 && av1Configuration == nil)
        {
            videoCodec = .vp8
        }
        let matroska = videoCodec == .h264
        var b = sink.buffer
        sink.buffer = []
        b.ebmlMaster(0x1A45_DFA3) { h in
            h.ebmlUInt(0x4286, 1)
            h.ebmlUInt(0x42F7, 1)
            h.ebmlUInt(0x42F2, 4)
            h.ebmlUInt(0x42F3, 8)
            h.ebmlString(0x4282, matroska ? "matroska" : "webm")
            h.ebmlUInt(0x4287, 4)
            h.ebmlUInt(0x4285, 2)
        }
        let base = sink.flushedLength
        b.ebmlID(0x1853_8067)
        segmentSizeOffset = base + Int64(b.count)
        b.append(contentsOf: EBML.unknownSize8)
        segmentDataStart = base + Int64(b.count)
        seekHeadOffset = segmentDataStart
        b.ebmlVoid(total: Self.seekHeadReserve)

        infoPosition = base + Int64(b.count) - segmentDataStart
        var info: [UInt8] = []
        info.ebmlUInt(0x2A_D7B1, 1_000_000)  // TimecodeScale: 1 ms
        info.ebmlString(0x4D80, "Understudy")
        info.ebmlString(0x5741, "Understudy")
        let durationInInfo = info.count
        info.ebmlVoid(total: 11)  // becomes Duration (float64) at close
        b.ebmlID(0x1549_A966)
        b.ebmlSize(info.count)
        durationOffset = base + Int64(b.count + durationInInfo)
        b.append(contentsOf: info)

        tracksPosition = base + Int64(b.count) - segmentDataStart
        b.ebmlMaster(0x1654_AE6B) { t in
            if let size = videoSize {
                t.ebmlMaster(0xAE) { e in
                    e.ebmlUInt(0xD7, UInt64(videoTrackNumber))
                    e.ebmlUInt(0x73C5, UInt64(videoTrackNumber))
                    e.ebmlUInt(0x83, 1)  // video
                    e.ebmlUInt(0x9C, 0)  // no lacing
                    if matroska, let avcConfiguration {
                        e.ebmlString(0x86, "V_MPEG4/ISO/AVC")
                        e.ebmlBytes(0x63A2, avcConfiguration)
                    } else if videoCodec == .av1, let av1Configuration {
                        e.ebmlString(0x86, "V_AV1")
                        e.ebmlBytes(0x63A2, av1Configuration)
                    } else {
                        e.ebmlString(0x86, videoCodec == .vp9 ? "V_VP9" : "V_VP8")
                    }
                    e.ebmlMaster(0xE0) { v in
                        v.ebmlUInt(0xB0, UInt64(max(1, size.width)))
                        v.ebmlUInt(0xBA, UInt64(max(1, size.height)))
                    }
                }
            }
            if let audio {
                t.ebmlMaster(0xAE) { e in
                    e.ebmlUInt(0xD7, UInt64(audioTrackNumber))
                    e.ebmlUInt(0x73C5, UInt64(audioTrackNumber))
                    e.ebmlUInt(0x83, 2)  // audio
                    e.ebmlUInt(0x9C, 0)
                    e.ebmlString(0x86, "A_OPUS")
                    e.ebmlBytes(0x63A2, OggOpusWriter.opusHead(channels: audio.channels, preSkip: audio.preSkip))
                    e.ebmlUInt(0x56AA, UInt64(audio.preSkip) * 1_000_000_000 / 48_000)  // CodecDelay, ns
                    e.ebmlUInt(0x56BB, 80_000_000)  // SeekPreRoll: 80 ms, as RFC 7845 recommends
                    e.ebmlMaster(0xE1) { a in
                        a.ebmlFloat(0xB5, 48_000)
                        a.ebmlUInt(0x9F, UInt64(audio.channels))
                    }
                }
            }
        }
        sink.buffer = b
        try sink.flush()
    }
}
