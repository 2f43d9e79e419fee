import RTCWire

/// The pre-encoded test pattern of a ``SyntheticMedia`` loop, in real time.
///
/// A pre-encoded loop cannot make a new keyframe, so a keyframe request jumps the content ahead to
/// the loop's next keyframe while the media clock keeps following the wall clock.
public final class SyntheticVideoSource: MediaSource {
    /// The pre-encoded loop played.
    public let media: SyntheticMedia
    public let kind = MediaKind.video
    public var codec: MediaCodec { media.videoCodec }
    public let layerCount: Int
    /// The next frame, counted on the media clock (frame `index` is due at `index` frame intervals).
    private var index = 0
    private var started = false
    private var clock = MediaClock()
    private var keyframeWanted = false
    /// Times a keyframe request moved the content forward.
    public private(set) var keyframeJumps = 0

    /// Plays `media`'s test pattern with `layers` simulcast layers (at most the loop's).
    public init(media: SyntheticMedia, layers: Int = 1) {
        self.media = media
        layerCount = max(1, min(layers, media.videoFrames.count))
    }

    public func use(clock: MediaClock) { self.clock = clock }

    private var frameNanos: UInt64 { 1_000_000_000 / UInt64(media.fps) }
    /// The content frame shown at clock frame `index`.
    private var contentIndex: Int { index + Int(clock.contentOffset / frameNanos) }

    public func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void) {
        guard media.videoFramesPerLoop > 0 else { return }
        let frameNanos = self.frameNanos
        if !started {
            // Live: a camera turned on now shows what is in front of it now.
            started = true
            index = Int((elapsedNanos + frameNanos - 1) / frameNanos)
        }
        while UInt64(index) * frameNanos <= elapsedNanos {
            if keyframeWanted { jumpToKeyframe() }
            for layer in 0..<layerCount {
                guard var frame = media.videoFrame(at: contentIndex, layer: layer) else { continue }
                frame.timestamp = UInt32(truncatingIfNeeded: index &* (90_000 / media.fps))
                emit(frame, layer)
            }
            index += 1
        }
    }

    /// Moves the shared content forward to the next keyframe: the audio on the same clock follows.
    private func jumpToKeyframe() {
        keyframeWanted = false
        let perLoop = media.videoFramesPerLoop
        let current = contentIndex
        var j = current
        while !(media.videoFrames[0][j % perLoop].isKeyframe) && j < current + perLoop { j += 1 }
        if j != current { keyframeJumps += 1 }
        clock.advanceContent(by: UInt64(j - current) * frameNanos)
    }

    public func requestKeyframe() { keyframeWanted = true }
    public func close() {}
}

/// The pre-encoded tone (with its sync beeps) of a ``SyntheticMedia`` loop, one Opus frame per 20 ms.
public final class SyntheticAudioSource: MediaSource {
    /// The pre-encoded loop played.
    public let media: SyntheticMedia
    public let kind = MediaKind.audio
    public let layerCount = 1
    /// The next frame, counted on the media clock (frame `index` is due at `index` × 20 ms).
    private var index = 0
    private var started = false
    private var clock = MediaClock()

    /// Plays `media`'s tone.
    public init(media: SyntheticMedia) { self.media = media }

    public func use(clock: MediaClock) { self.clock = clock }

    public func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void) {
        guard !media.audioFrames.isEmpty else { return }
        if !started {
            started = true
            index = Int((elapsedNanos + 19_999_999) / 20_000_000)
        }
        while UInt64(index) * 20_000_000 <= elapsedNanos {
            // The content follows the shared clock, keyframe jumps of the video included.
            let content = index + Int((clock.contentOffset + 10_000_000) / 20_000_000)
            if var frame = media.audioFrame(at: content) {
                frame.timestamp = UInt32(truncatingIfNeeded: index &* 960)
                emit(frame, 0)
            }
            index += 1
        }
    }

    public func requestKeyframe() {}
    public func close() {}
}

extension SyntheticMedia {
    /// A fresh source of this loop for one local track: the test pattern with `layers` simulcast
    /// layers, or the tone. Fits `MediaPump(connection:video:audio:sources:)`.
    public func source(kind: MediaKind, layers: Int) -> MediaSource {
        kind == .video ? SyntheticVideoSource(media: self, layers: layers) : SyntheticAudioSource(media: self)
    }
}
