import Media
import RTCWire

/// The encoded frames of one local track, pulled by ``MediaPump`` on its connection's loop thread.
///
/// A source owns its media clock: emitted frames carry their own RTP timestamps (90 kHz video,
/// 48 kHz Opus). Sources are created when a track starts (joining the stage, unmuting) and closed
/// when it stops, so a file or a capture device is open only while it is needed.
public protocol MediaSource: AnyObject {
    /// Audio or video.
    var kind: MediaKind { get }
    /// Simulcast layers per frame, lowest first; 1 for audio and single-layer video.
    var layerCount: Int { get }
    /// Hands every frame due by `elapsedNanos` (time since the track started) to `emit(frame, layer)`.
    /// Called on the loop thread once per tick; must not block.
    func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void)
    /// The far end asked for a keyframe (PLI/FIR): produce one as soon as possible.
    func requestKeyframe()
    /// Releases files and devices. Called once, on the loop thread, when the track stops.
    func close()
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
    private var index = 0
    /// Added to the frame index to pick content: moves forward to reach a keyframe on request.
    private var contentOffset = 0
    private var keyframeWanted = false
    /// Times a keyframe request moved the content forward.
    public private(set) var keyframeJumps = 0

    public init(media: SyntheticMedia, layers: Int = 1) {
        self.media = media
        layerCount = max(1, min(layers, media.videoFrames.count))
    }

    public func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void) {
        guard media.videoFramesPerLoop > 0 else { return }
        let frameNanos = 1_000_000_000 / UInt64(media.fps)
        while UInt64(index) * frameNanos <= elapsedNanos {
            if keyframeWanted { jumpToKeyframe() }
            for layer in 0..<layerCount {
                guard var frame = media.videoFrame(at: index + contentOffset, layer: layer) else { continue }
                frame.timestamp = UInt32(truncatingIfNeeded: index &* (90_000 / media.fps))
                emit(frame, layer)
            }
            index += 1
        }
    }

    private func jumpToKeyframe() {
        keyframeWanted = false
        let perLoop = media.videoFramesPerLoop
        var j = index + contentOffset
        while !(media.videoFrames[0][j % perLoop].isKeyframe) && j < index + contentOffset + perLoop { j += 1 }
        if j != index + contentOffset { keyframeJumps += 1 }
        contentOffset = j - index
    }

    public func requestKeyframe() { keyframeWanted = true }
    public func close() {}
}

/// The pre-encoded tone (with its sync beeps) of a ``SyntheticMedia`` loop, one Opus frame per 20 ms.
public final class SyntheticAudioSource: MediaSource {
    public let media: SyntheticMedia
    public let kind = MediaKind.audio
    public let layerCount = 1
    private var index = 0

    public init(media: SyntheticMedia) { self.media = media }

    public func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void) {
        guard !media.audioFrames.isEmpty else { return }
        while UInt64(index) * 20_000_000 <= elapsedNanos {
            if var frame = media.audioFrame(at: index) {
                frame.timestamp = UInt32(truncatingIfNeeded: index &* 960)
                emit(frame, 0)
            }
            index += 1
        }
    }

    public func requestKeyframe() {}
    public func close() {}
}
