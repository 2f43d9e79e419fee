import Foundation
public import RTCWire

/// A loop of encoded audio and video, encoded once and shared by every bot that sends it.
///
/// The video is VP8 or VP9 (libvpx), H.264 (libx264, constrained baseline) or AV1 (libaom),
/// ``videoCodec``.
///
/// Video holds 1–3 simulcast layers: layer 0 is full resolution, layer `k` is downscaled by `2^k`
/// (640x360, 320x180, 160x90 by default). Every layer has a keyframe at the first frame of the
/// loop and every `keyframeIntervalSeconds`, so the loop restarts cleanly and a late joiner gets a
/// keyframe soon; layer `k` has one every `keyframeIntervalSeconds / 2^k` too. A pre-encoded loop
/// cannot answer a keyframe request, and a receiver switched down (an uplink that stopped the
/// upper layers) waits for the lower layer's next keyframe: at most half a second for the
/// 160x90 layer, whose keyframes cost little. The arrays are immutable after init, so sharing across threads is safe.
// Safe: immutable after init (see above).
public final class SyntheticMedia: @unchecked Sendable {
    /// One simulcast layer's encoding parameters.
    public struct Layer: Sendable, Equatable {
        /// Picture width.
        public var width: Int
        /// Picture height.
        public var height: Int
        /// Target bits per second.
        public var bitrate: Int
    }

    /// Video frames per second.
    public let fps: Int
    /// The codec of ``videoFrames``.
    public let videoCodec: MediaCodec
    /// Loop length in seconds.
    public let loopSeconds: Int
    /// Layer parameters, index 0 = full resolution.
    public let layers: [Layer]
    /// Encoded video per layer for one loop; timestamps start at 0 (90 kHz clock).
    public let videoFrames: [[EncodedFrame]]
    /// Encoded Opus packets for one loop; timestamps start at 0 (48 kHz clock).
    public let audioFrames: [EncodedFrame]
    /// Opus channel count.
    public let audioChannels: Int
    /// Opus encoder delay in 48 kHz samples (Ogg pre-skip / WebM CodecDelay).
    public let audioPreSkip: Int
    /// Length of one video loop in 90 kHz ticks.
    public let videoLoopTicks: Int
    /// Length of one audio loop in 48 kHz ticks.
    public let audioLoopTicks: Int

    /// Encodes the synthetic loop.
    /// - Parameters:
    ///   - seconds: loop length; rounded up to a whole number of 2 s marker intervals.
    ///   - layers: number of simulcast layers, 1…3.
    ///   - topBitrate: bits per second of layer 0; layers 1 and 2 get 40 % and 17 % of it.
    ///   - videoCodec: one of ``VideoEncoders/codecs`` (VP8, H.264, VP9 or AV1).
    public init(
        seconds: Int = 10, layers layerCount: Int = 1, width: Int = 640, height: Int = 360, fps: Int = 30,
        topBitrate: Int = 600_000, audioBitrate: Int = 32_000, keyframeIntervalSeconds: Int = 2,
        videoCodec: MediaCodec = .vp8
    ) throws {
        guard VideoEncoders.codecs.contains(videoCodec) else {
            throw MediaError.invalidArgument("video codec \(videoCodec) (need vp8, h264, vp9 or av1)")
        }
        guard (1...3).contains(layerCount) else { throw MediaError.invalidArgument("layers \(layerCount) (need 1…3)") }
        guard fps > 0, fps <= 120, keyframeIntervalSeconds > 0 else { throw MediaError.invalidArgument("fps \(fps)") }
        let markerSeconds = 2
        let loop = max(markerSeconds, (seconds + markerSeconds - 1) / markerSeconds * markerSeconds)
        self.fps = fps
        self.videoCodec = videoCodec
        loopSeconds = loop
        let layerList: [Layer] = (0..<layerCount).map { k in
            Layer(
                width: max(16, (width >> k) & ~1), height: max(16, (height >> k) & ~1),
                bitrate: max(30_000, topBitrate * [100, 40, 17][k] / 100))
        }
        layers = layerList

        let frameCount = loop * fps
        let keyInterval = keyframeIntervalSeconds * fps
        // Layers are independent encodes: run them in parallel (the top layer dominates).
        let results = LayerResults(count: layerList.count)
        DispatchQueue.concurrentPerform(iterations: layerList.count) { k in
            results.set(
                k,
                Result {
                    try Self.encodeLayer(
                        layerList[k], codec: videoCodec, fps: fps, frameCount: frameCount,
                        keyInterval: max(1, keyInterval >> k), markerSeconds: markerSeconds)
                })
        }
        let video = try results.values().map { try $0.get() }
        videoFrames = video
        videoLoopTicks = frameCount * (90_000 / fps)

        let opus = try OpusEncoder(channels: 1, bitrate: audioBitrate, application: .audio)
        let tone = ToneSource(markerIntervalSeconds: markerSeconds)
        let audioCount = loop * 50
        var pcm = [Int16](repeating: 0, count: ToneSource.frameSamples)
        var audio: [EncodedFrame] = []
        audio.reserveCapacity(audioCount)
        for i in 0..<audioCount {
            pcm.withUnsafeMutableBufferPointer { tone.render(frame: i, into: $0) }
            let packet = try pcm.withUnsafeBufferPointer { try opus.encode(pcm: $0) }
            audio.append(
                EncodedFrame(codec: .opus, data: packet, timestamp: UInt32(i * 960), isKeyframe: true, duration: 960))
        }
        audioFrames = audio
        audioChannels = 1
        audioPreSkip = opus.lookahead
        audioLoopTicks = audioCount * 960
    }

    /// Wraps already-encoded frames (e.g. from ``IVFReader`` and ``OggOpusReader``) as a loop.
    ///
    /// Timestamps are rebased so that each list starts at 0. Empty lists are allowed (no video or
    /// no audio).
    public init(
        videoLayers: [[EncodedFrame]], audio: [EncodedFrame], fps: Int = 30, audioChannels: Int = 1,
        audioPreSkip: Int = 312
    ) {
        func rebase(_ frames: [EncodedFrame], defaultDuration: UInt32) -> ([EncodedFrame], Int) {
            guard let first = frames.first else { return ([], 0) }
            var out = frames
            var end = 0
            for i in out.indices {
                let rel = Int(out[i].timestamp &- first.timestamp)
                out[i].timestamp = UInt32(truncatingIfNeeded: rel)
                if out[i].duration == 0 { out[i].duration = defaultDuration }
                end = max(end, rel + Int(out[i].duration))
            }
            return (out, end)
        }
        self.fps = max(1, fps)
        videoCodec = videoLayers.first(where: { !$0.isEmpty })?.first?.codec ?? .vp8
        var video: [[EncodedFrame]] = []
        var vticks = 0
        for layer in videoLayers where !layer.isEmpty {
            let (frames, end) = rebase(layer, defaultDuration: UInt32(90_000 / max(1, fps)))
            video.append(frames)
            vticks = max(vticks, end)
        }
        videoFrames = video
        videoLoopTicks = vticks
        let (a, aticks) = rebase(audio, defaultDuration: 960)
        audioFrames = a
        audioLoopTicks = aticks
        self.audioChannels = audioChannels
        self.audioPreSkip = audioPreSkip
        loopSeconds = max(vticks / 90_000, aticks / 48_000)
        layers = video.map { frames in
            let size = frames.first.flatMap { $0.keyframePictureSize } ?? (width: 0, height: 0)
            return Layer(width: size.width, height: size.height, bitrate: 0)
        }
    }

    private static func encodeLayer(
        _ layer: Layer, codec: MediaCodec, fps: Int, frameCount: Int, keyInterval: Int,
        markerSeconds: Int
    ) throws -> [EncodedFrame] {
        let encoder = try VideoEncoders.make(
            codec: codec, width: layer.width, height: layer.height, fps: fps, bitrate: layer.bitrate,
            keyframeInterval: keyInterval)
        let pattern = TestPatternSource(
            width: layer.width, height: layer.height, fps: fps, markerIntervalSeconds: markerSeconds)
        var picture = I420Image(width: layer.width, height: layer.height)
        var frames: [EncodedFrame] = []
        frames.reserveCapacity(frameCount)
        let ticks = 90_000 / fps
        for i in 0..<frameCount {
            if i % keyInterval == 0 { encoder.forceKeyframe() }
            pattern.render(i, into: &picture)
            for var f in try encoder.encode(i420: picture) {
                f.timestamp = UInt32(frames.count * ticks)
                frames.append(f)
            }
        }
        guard frames.count == frameCount, frames.first?.isKeyframe == true else {
            throw MediaError.invalidArgument(
                "the \(codec) encoder produced \(frames.count) of \(frameCount) frames, first a keyframe")
        }
        return frames
    }

    /// Per-layer results written from concurrent encodes.
    // Safe: the per-layer results are guarded by `lock`.
    private final class LayerResults: @unchecked Sendable {
        private let lock = NSLock()
        private var slots: [Result<[EncodedFrame], any Error>?]
        init(count: Int) { slots = Array(repeating: nil, count: count) }
        func set(_ index: Int, _ value: Result<[EncodedFrame], any Error>) {
            lock.lock()
            slots[index] = value
            lock.unlock()
        }
        func values() throws -> [Result<[EncodedFrame], any Error>] {
            lock.lock()
            defer { lock.unlock() }
            return slots.map { $0 ?? .failure(MediaError.invalidArgument("layer not encoded")) }
        }
    }

    /// Loads `--video FILE.ivf` and/or `--audio FILE.ogg` as a single-layer loop.
    public static func fromFiles(video videoPath: String?, audio audioPath: String?) throws -> SyntheticMedia {
        var video: [EncodedFrame] = []
        var fps = 30
        if let videoPath {
            let reader = try IVFReader(path: videoPath)
            guard reader.codec == .vp8 else {
                throw MediaError.malformedFile(
                    path: videoPath, reason: "IVF holds \(reader.codec.rtpName); this loop is VP8")
            }
            video = reader.encodedFrames()
            fps = reader.framesPerSecond ?? 30
            guard video.first?.isKeyframe == true else {
                throw MediaError.malformedFile(path: videoPath, reason: "first VP8 frame is not a keyframe")
            }
        }
        var audio: [EncodedFrame] = []
        var channels = 1
        var preSkip = 312
        if let audioPath {
            let reader = try OggOpusReader(path: audioPath)
            audio = reader.encodedFrames()
            channels = reader.channels
            preSkip = reader.preSkip
        }
        return SyntheticMedia(
            videoLayers: video.isEmpty ? [] : [video], audio: audio, fps: fps,
            audioChannels: channels, audioPreSkip: preSkip)
    }

    /// Number of video frames in one loop (layer 0).
    public var videoFramesPerLoop: Int { videoFrames.first?.count ?? 0 }
    /// Number of audio packets in one loop.
    public var audioFramesPerLoop: Int { audioFrames.count }

    /// Video frame `index` (counting across loops) of `layer`, with its timestamp extended across
    /// loops (`index × 3000` at 30 fps). `layer` is clamped to the available layers.
    /// Returns nil only when there is no video.
    public func videoFrame(at index: Int, layer: Int = 0) -> EncodedFrame? {
        guard !videoFrames.isEmpty else { return nil }
        let frames = videoFrames[min(max(0, layer), videoFrames.count - 1)]
        guard !frames.isEmpty else { return nil }
        let i = max(0, index)
        var f = frames[i % frames.count]
        f.timestamp = UInt32(truncatingIfNeeded: (i / frames.count) &* videoLoopTicks &+ Int(f.timestamp))
        return f
    }

    /// Audio packet `index` (counting across loops), timestamp extended across loops
    /// (`index × 960` for the synthetic tone). Returns nil only when there is no audio.
    public func audioFrame(at index: Int) -> EncodedFrame? {
        guard !audioFrames.isEmpty else { return nil }
        let i = max(0, index)
        var f = audioFrames[i % audioFrames.count]
        f.timestamp = UInt32(truncatingIfNeeded: (i / audioFrames.count) &* audioLoopTicks &+ Int(f.timestamp))
        return f
    }

    /// The same encoded loop for every caller asking for `layers` layers of `codec` (10 s, default
    /// sizes): every bot of a process sends the frames encoded once.
    ///
    /// The first call per layer count and codec encodes (about a second of CPU); later calls return
    /// the cache. Encoding fixed synthetic content cannot fail short of a broken
    /// libvpx/libx264/libopus install, which stops the process with a message; a codec outside
    /// ``VideoEncoders/codecs`` is a programming error and stops it too (check the option first).
    public static func shared(layers: Int, codec: MediaCodec = .vp8) -> SyntheticMedia {
        do { return try sharedLoop(layers: layers, codec: codec) } catch {
            fatalError("cannot encode the synthetic media loop: \(error)")
        }
    }

    /// ``shared(layers:codec:)`` that throws what the encoder said (``MediaError``) instead of
    /// stopping the process: the agent and the load bots, where a codec library that does not open
    /// is a reported error.
    public static func sharedLoop(layers: Int, codec: MediaCodec) throws -> SyntheticMedia {
        let count = min(max(1, layers), 3)
        cacheLock.lock()
        defer { cacheLock.unlock() }
        if let cached = cache.storage[CacheKey(layers: count, codec: codec)] { return cached }
        let media = try SyntheticMedia(seconds: 10, layers: count, videoCodec: codec)
        cache.storage[CacheKey(layers: count, codec: codec)] = media
        return media
    }

    private struct CacheKey: Hashable {
        var layers: Int
        var codec: MediaCodec
    }
    // Safe: only touched under `cacheLock`.
    private final class Cache: @unchecked Sendable { var storage: [CacheKey: SyntheticMedia] = [:] }
    private static let cache = Cache()
    private static let cacheLock = NSLock()
}
