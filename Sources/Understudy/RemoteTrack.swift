import RTC
import RTCWire

/// Receives the frames of a ``RemoteTrack``.
///
/// Every call comes on the track's ``RemoteTrack/loop`` thread, the thread that received the
/// packets: a sink must return quickly and must not block (hand slow work, such as disk writes, to a
/// thread of its own through a bounded queue, as `Recording` does).
public protocol RemoteTrackSink: AnyObject {
    /// One received frame; `arrival` is the loop's monotonic clock (`EventLoop.now()`) in nanoseconds.
    func receive(_ frame: EncodedFrame, arrival: UInt64, track: RemoteTrack)
    /// The track ended (its consumer closed, or the room left or lost its connections); no more
    /// frames follow and the track has dropped its sinks.
    func trackEnded(_ track: RemoteTrack)
}

extension RemoteTrackSink {
    public func trackEnded(_ track: RemoteTrack) {}
}

/// A ``RemoteTrackSink`` made of closures, for small consumers and tests.
/// Sendable so it can be made anywhere and handed to the loop; its closures run on the loop only.
// Safe: immutable closures, called on the loop only (see above).
public final class FrameSink: RemoteTrackSink, @unchecked Sendable {
    private let onFrame: (EncodedFrame, UInt64, RemoteTrack) -> Void
    private let onEnd: (RemoteTrack) -> Void

    /// `frame` runs for each frame and `ended` once when the track ends, both on the track's loop.
    public init(
        _ frame: @escaping (EncodedFrame, UInt64, RemoteTrack) -> Void,
        ended: @escaping (RemoteTrack) -> Void = { _ in }
    ) {
        onFrame = frame
        onEnd = ended
    }

    public func receive(_ frame: EncodedFrame, arrival: UInt64, track: RemoteTrack) { onFrame(frame, arrival, track) }
    public func trackEnded(_ track: RemoteTrack) { onEnd(track) }
}

/// One consumed stream of a remote participant: its frames as they are assembled, handed to sinks.
///
/// A track is created when the server confirms a consumer (``Room/onTrack`` reports it) and ends
/// when the consumer closes. It lives on the subscribe connection's event loop: ``addSink(_:)``,
/// ``removeSink(_:)`` and every sink call happen on ``loop``'s thread, so delivering a frame takes
/// no lock and no search (the connection finds the track by its transceiver's mid in a dictionary,
/// then calls the sinks in the order they were added).
// Safe: sinks are touched on `loop` only (see above); the rest is immutable.
public final class RemoteTrack: @unchecked Sendable {
    /// The participant who publishes the stream.
    public let participantId: String
    /// Which of the participant's streams this is.
    public let kind: StreamKind
    /// The server's id of the published stream (the ``MediaStream/id``).
    public let producerId: String
    /// The server's id of this device's consumer of it.
    public let consumerId: String
    /// The subscribe connection's media line that carries the stream.
    public let mid: String
    /// The thread every sink call happens on. Use `loop.execute` to add a sink from elsewhere.
    public let loop: EventLoop

    // Loop-confined.
    private var sinks: [any RemoteTrackSink] = []
    /// True after the track ended; sinks added then are told at once.
    public private(set) var isEnded = false
    /// Frames delivered so far.
    public private(set) var framesReceived: UInt64 = 0
    /// The sender's wall-clock time of the frame being delivered, mapped through the stream's latest
    /// RTCP sender report (nil before the first one). Read it in ``RemoteTrackSink/receive(_:arrival:track:)``:
    /// the streams of one sender share that clock, which lines them up (lip sync). Loop thread only.
    public private(set) var senderTime: NTPTime?
    private let keyframeRequest: @Sendable () -> Void

    init(
        participantId: String, kind: StreamKind, producerId: String, consumerId: String, mid: String, loop: EventLoop,
        requestKeyframe: @escaping @Sendable () -> Void
    ) {
        self.participantId = participantId
        self.kind = kind
        self.producerId = producerId
        self.consumerId = consumerId
        self.mid = mid
        self.loop = loop
        keyframeRequest = requestKeyframe
    }

    /// Whether the track carries audio or video frames.
    public var mediaKind: MediaKind { kind == .audio || kind == .shareAudio ? .audio : .video }

    /// Adds `sink` (held strongly until removed or the track ends); adding the same sink twice has no
    /// effect, and a sink added to an ended track gets `trackEnded` at once. Call it on ``loop``'s
    /// thread (in ``Room/onTrack``, before the first frame); from another thread the change is
    /// handed to the loop and takes effect there shortly after.
    public func addSink(_ sink: any RemoteTrackSink) {
        guard loop.isInLoop else {
            let box = SinkBox(sink)
            // A loop that has shut down ran its last frame: the track has ended for this sink too.
            if !loop.execute({ [self] in addSink(box.sink) }) { sink.trackEnded(self) }
            return
        }
        if isEnded { return sink.trackEnded(self) }
        guard !sinks.contains(where: { $0 === sink }) else { return }
        sinks.append(sink)
    }

    /// Removes `sink`; on ``loop``'s thread it gets no further calls. From another thread the removal
    /// is handed to the loop (await `loop.submit { track.removeSink(sink) }` to know when it is done).
    public func removeSink(_ sink: any RemoteTrackSink) {
        guard loop.isInLoop else {
            let box = SinkBox(sink)
            loop.execute { [self] in removeSink(box.sink) }
            return
        }
        sinks.removeAll { $0 === sink }
    }

    /// Asks the sender for a keyframe (a PLI through the server), for example after a sink dropped
    /// frames. Callable from any thread; video tracks only.
    public func requestKeyframe() {
        guard mediaKind == .video else { return }
        keyframeRequest()
    }

    /// Loop thread: hands one frame to every sink.
    func deliver(_ frame: EncodedFrame, arrival: UInt64, senderTime: NTPTime? = nil) {
        framesReceived &+= 1
        self.senderTime = senderTime
        for sink in sinks { sink.receive(frame, arrival: arrival, track: self) }
    }

    /// Loop thread: the consumer is gone; sinks hear it once and are dropped.
    func end() {
        guard !isEnded else { return }
        isEnded = true
        let ending = sinks
        sinks.removeAll()
        for sink in ending { sink.trackEnded(self) }
    }
}

/// Carries a sink to the loop thread (sinks are loop-confined, not `Sendable`).
// Safe: carries a sink to the loop thread, which alone touches it from then on.
private struct SinkBox: @unchecked Sendable {
    let sink: any RemoteTrackSink
    init(_ sink: any RemoteTrackSink) { self.sink = sink }
}
