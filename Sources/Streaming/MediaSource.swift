import Media
import RTCWire

/// The encoded frames of one local track, pulled by ``MediaPump`` on its connection's loop thread.
///
/// Emitted frames carry their own RTP timestamps (90 kHz video, 48 kHz Opus). The time a source is
/// pulled at comes from a ``MediaClock`` that a participant's local sources share, as a camera and
/// a microphone share a capture clock. Sources are created when a track starts (joining the stage,
/// unmuting) and closed when it stops, so a file or a capture device is open only while it is needed.
public protocol MediaSource: AnyObject {
    /// Audio or video.
    var kind: MediaKind { get }
    /// Simulcast layers per frame, lowest first; 1 for audio and single-layer video.
    var layerCount: Int { get }
    /// Hands every frame due by `elapsedNanos` (time on the media clock) to `emit(frame, layer)`.
    /// The first call may come at any clock time: a live source (synthetic, capture) starts with
    /// the content of that moment, a file from its beginning. Called on the loop thread once per
    /// tick; must not block.
    func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void)
    /// The far end asked for a keyframe (PLI/FIR): produce one as soon as possible.
    func requestKeyframe()
    /// Releases files and devices. Called once, on the loop thread, when the track stops.
    func close()
    /// Joins the media clock shared with the other local sources (called once, before the first pull).
    func use(clock: MediaClock)
}

extension MediaSource {
    public func use(clock: MediaClock) {}
}

/// One media clock for a participant's local sources, as a camera and a microphone share a capture
/// clock: every source is pulled at the time since the clock's origin (its first tick), so content
/// started on different loop turns still lines up, and when the pre-encoded video jumps ahead to a
/// keyframe the audio content jumps with it. The synthetic flash and beep thus leave together
/// whatever the scheduling. Confined to the loop thread of the connection that sends the sources.
public final class MediaClock: @unchecked Sendable {
    /// The loop time of the first tick (nil before).
    public private(set) var origin: UInt64?
    /// How far the content runs ahead of the clock, in nanoseconds (keyframe jumps).
    public private(set) var contentOffset: UInt64 = 0

    public init() {}

    /// Clock time at loop time `now`; the first call sets the origin.
    public func elapsed(now: UInt64) -> UInt64 {
        let start = origin ?? now
        origin = start
        return now &- start
    }

    /// Moves the content of every source on this clock forward by `nanos`.
    public func advanceContent(by nanos: UInt64) { contentOffset &+= nanos }
}

/// Makes a fresh source each time a local track starts; `layers` is 3 for simulcast video, else 1.
public typealias MediaSourceFactory = @Sendable (_ kind: MediaKind, _ layers: Int) throws -> MediaSource

/// The pre-encoded test pattern of a ``SyntheticMedia`` loop, in real time.
///
/// A pre-encoded loop cannot make a new keyframe, so a keyframe request jumps the content ahead to
/// the loop's next keyframe while the media clock keeps following the wall clock.
public final class SyntheticVideoSource: MediaSource {
    public let media: SyntheticMedia
    public let kind = MediaKind.video
    public let layerCount: Int
    /// The next frame, counted on the media clock (frame `index` is due at `index` frame intervals).
    private var index = 0
    private var started = false
    private var clock = MediaClock()
    private var keyframeWanted = false
    /// Times a keyframe request moved the content forward.
    public private(set) var keyframeJumps = 0

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
    public let media: SyntheticMedia
    public let kind = MediaKind.audio
    public let layerCount = 1
    /// The next frame, counted on the media clock (frame `index` is due at `index` × 20 ms).
    private var index = 0
    private var started = false
    private var clock = MediaClock()

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
