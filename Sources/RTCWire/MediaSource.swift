/// The encoded frames of one local track, pulled by `RTC`'s `MediaPump` on its connection's loop thread.
///
/// It lives here, under both `Media` (which implements it: synthetic, file and capture sources) and
/// `RTC` (whose `MediaPump` sends it): the network stack needs no codec library and the codecs no
/// sockets, so neither of those imports the other.
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
    /// Times a pre-encoded source jumped ahead to a keyframe on request (0 for a live encoder).
    var keyframeJumps: Int { get }
    /// The codec of the frames it emits: what the track it feeds must negotiate (default: Opus for
    /// audio, VP8 for video).
    var codec: MediaCodec { get }
}

extension MediaSource {
    public func use(clock: MediaClock) {}
    public var keyframeJumps: Int { 0 }
    public var codec: MediaCodec { kind == .audio ? .opus : .vp8 }
}

/// One media clock for a participant's local sources, as a camera and a microphone share a capture
/// clock: every source is pulled at the time since the clock's origin (its first tick), so content
/// started on different loop turns still lines up, and when the pre-encoded video jumps ahead to a
/// keyframe the audio content jumps with it. The synthetic flash and beep thus leave together
/// whatever the scheduling. Confined to the loop thread of the connection that sends the sources.
// Safe: confined to its sender's loop thread (see above).
public final class MediaClock: @unchecked Sendable {
    /// The loop time of the first tick (nil before).
    public private(set) var origin: UInt64?
    /// How far the content runs ahead of the clock, in nanoseconds (keyframe jumps).
    public private(set) var contentOffset: UInt64 = 0

    /// A clock whose origin is set by its first ``elapsed(now:)``.
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
