/// What a transport's send-side bandwidth estimator currently believes the path to its peer can carry
/// (issue 33): the rate the transport's media should fit in, and why.
///
/// Read it on the transport's loop (``MediaTransport/bandwidthEstimate``,
/// ``PeerConnection/bandwidthEstimate``); ``MediaTransport/onBandwidthEstimate`` reports each change.
public struct BandwidthEstimate: Sendable, Equatable {
    /// What the estimate rests on.
    public enum Source: String, Sendable {
        /// Nothing from the peer yet: the configured start rate.
        case none
        /// Transport-cc feedback (the delay- and loss-based estimators).
        case transportCC
        /// Only REMB from the peer (a receive-side estimate, e.g. aiortc).
        case remb
    }

    /// The estimator's state.
    public enum State: String, Sendable {
        /// No feedback yet: ``targetBitrate`` is the start rate.
        case starting
        /// The delay detector sees an underused or normal path: the rate grows.
        case increasing
        /// The detector saw queues draining (underuse) or a decrease just happened: the rate holds.
        case holding
        /// Queues build up (overuse), losses above 10 %, or feedback stopped: the rate goes down.
        case decreasing
        /// The sender sends far less than the estimate: it does not grow past what was proven
        /// (1.5 × the acknowledged rate).
        case applicationLimited
    }

    /// The rate the transport's media should fit in, bits per second: the minimum of the delay-based
    /// and loss-based estimates and of the peer's REMB, within the configured bounds.
    public var targetBitrate: Int
    public var state: State
    public var source: Source
    /// The delay-based (AIMD) estimate, bits per second.
    public var delayBasedBitrate: Int
    /// The loss-based estimate, bits per second.
    public var lossBasedBitrate: Int
    /// The last REMB from the peer, bits per second (nil: none received).
    public var receiverLimit: Int?
    /// What the peer acknowledged receiving, bits per second over the last half second (0: unknown).
    public var acknowledgedBitrate: Int
    /// Fraction of the packets reported in recent feedback as lost, 0…1.
    public var lossFraction: Double
    /// Transport-cc feedback messages taken in, and those known to be missing (from the feedback
    /// packet counter).
    public var feedbackReceived: UInt64
    public var feedbackLost: UInt64
    /// The path is overloaded: a large share of what is sent is lost while the queue is full (the
    /// delay detector saw it fill), so the estimate was cut to what arrived. Unlike a GCC decrease
    /// this is no estimator noise: a sender that can drop a layer should drop it now, to one that
    /// fits the estimate without slack. Cleared once the loss falls back.
    public var overloaded: Bool

    public init(
        targetBitrate: Int, state: State = .starting, source: Source = .none, delayBasedBitrate: Int? = nil,
        lossBasedBitrate: Int? = nil, receiverLimit: Int? = nil, acknowledgedBitrate: Int = 0, lossFraction: Double = 0,
        feedbackReceived: UInt64 = 0, feedbackLost: UInt64 = 0, overloaded: Bool = false
    ) {
        self.targetBitrate = targetBitrate
        self.state = state
        self.source = source
        self.delayBasedBitrate = delayBasedBitrate ?? targetBitrate
        self.lossBasedBitrate = lossBasedBitrate ?? targetBitrate
        self.receiverLimit = receiverLimit
        self.acknowledgedBitrate = acknowledgedBitrate
        self.lossFraction = lossFraction
        self.feedbackReceived = feedbackReceived
        self.feedbackLost = feedbackLost
        self.overloaded = overloaded
    }
}

/// Bounds and start of a send-side bandwidth estimate, bits per second.
public struct BandwidthEstimatorConfiguration: Sendable, Equatable {
    /// The rate before any feedback (libwebrtc also starts at 300 kbit/s).
    public var startBitrate: Int
    public var minBitrate: Int
    public var maxBitrate: Int

    public init(startBitrate: Int = 300_000, minBitrate: Int = 30_000, maxBitrate: Int = 20_000_000) {
        self.minBitrate = max(1_000, minBitrate)
        self.maxBitrate = max(self.minBitrate, maxBitrate)
        self.startBitrate = min(max(startBitrate, self.minBitrate), self.maxBitrate)
    }
}
