import RTCWire

/// The send side of transport-wide congestion control for one transport (issue 33, item 2): what
/// we sent (``TransportSendHistory``) meets what the peer says arrived (transport-cc feedback) and
/// becomes a target bitrate, GCC's way:
///
/// ```
/// feedback ─► send/arrival pairs ─► InterArrivalGrouper ─► TrendlineFilter ─► OveruseDetector
///                 │                                                                │ usage
///                 └► AckedBitrateEstimator ──────────── acknowledged rate ──► AIMDRateController ─┐
///             losses ─► LossBasedController ──────────────────────────────────────────────────────┤
///             REMB (a receive-side estimate, e.g. from aiortc) ─────────────────────────────────── min ─► estimate
/// ```
///
/// Loop-thread confined; recording a packet and reading a feedback message allocate nothing (the
/// history ring is allocated with the first packet sent). Times come from the caller (`now`, loop
/// nanoseconds) so the unit tests drive it with a synthetic clock.
public final class SendSideBandwidthEstimator {
    /// No feedback for this long while sending: the path (or the feedback) is gone, and the
    /// estimate is cut by ``feedbackTimeoutCut`` each time it elapses again.
    static let feedbackTimeoutMicros: Int64 = 1_000_000
    static let feedbackTimeoutCut = 0.8
    /// The acknowledged rate an overload cut goes to is measured over this much arrival time: the
    /// last two short windows, after the queue filled. Over 300 ms it still held some of the rate
    /// from before the path fell: a viewer's first cut chose a middle layer, and the switch down went
    /// through two key frames instead of one.
    static let overloadCarriedMicros: Int64 = 200_000

    public let configuration: BandwidthEstimatorConfiguration
    /// The current estimate.
    public private(set) var estimate: BandwidthEstimate

    var history = TransportSendHistory()
    var grouper = InterArrivalGrouper()
    var trendline = TrendlineFilter()
    var detector = OveruseDetector()
    var acknowledged = AckedBitrateEstimator()
    var rate: AIMDRateController
    var loss: LossBasedController
    var overload = OverloadDetector()
    /// The last cut for overload (µs): at most one per ``LossBasedController``'s decrease interval.
    private var lastOverloadCutMicros: Int64?
    /// The last overloaded window (µs), and how long after it delay-based overuse is taken for the
    /// overloaded queue draining.
    private var lastOverloadMicros: Int64?
    static let overloadDrainMicros: Int64 = 1_000_000

    private var lastFeedbackCount: UInt8?
    private var lastFeedbackMicros: Int64?
    private var lastTimeoutCutMicros: Int64?
    /// The first packet sent since the last feedback message (nil: none yet).
    private var unansweredSince: Int64?
    private var timedOut = false

    public init(configuration: BandwidthEstimatorConfiguration = BandwidthEstimatorConfiguration()) {
        self.configuration = configuration
        estimate = BandwidthEstimate(targetBitrate: configuration.startBitrate)
        rate = AIMDRateController(
            startBitrate: configuration.startBitrate, minBitrate: configuration.minBitrate,
            maxBitrate: configuration.maxBitrate)
        loss = LossBasedController(
            startBitrate: configuration.startBitrate, minBitrate: configuration.minBitrate,
            maxBitrate: configuration.maxBitrate)
    }

    deinit { history.release() }

    /// The round-trip time to the peer (from RTCP receiver reports), which paces decreases and
    /// the additive increase.
    public var roundTripTimeMs: Double {
        get { rate.rttMs }
        set {
            rate.rttMs = min(max(newValue, 10), 2_000)
            loss.rttMs = rate.rttMs
        }
    }

    /// Records a packet that carried transport-wide sequence number `sequence` and left with
    /// `size` bytes on the wire at `now` (loop ns). Returns true when the estimate changed (the
    /// feedback timed out).
    @discardableResult
    public func packetSent(_ sequence: UInt16, size: Int, now: UInt64) -> Bool {
        let micros = Int64(now / 1_000)
        history.record(sequence, size: size, nowMicros: micros)
        // Silence counts from the first packet sent after the last feedback: a sender that paused
        // (nothing to answer) is not cut when it resumes.
        let since = unansweredSince ?? micros
        unansweredSince = since
        guard lastFeedbackMicros != nil, micros - since > Self.feedbackTimeoutMicros,
            micros - (lastTimeoutCutMicros ?? since) > Self.feedbackTimeoutMicros
        else { return false }
        // Sending, and no feedback for a second: it is lost or the path is. Back off step by step.
        lastTimeoutCutMicros = micros
        timedOut = true
        let cut = Double(estimate.targetBitrate) * Self.feedbackTimeoutCut
        rate.set(cut)
        loss.set(cut)
        publish(state: .decreasing)
        return true
    }

    /// Takes one transport-cc feedback message (a view from ``RTCPCompound/forEach(_:_:)``)
    /// received at `now`. Returns true when the estimate changed.
    @discardableResult
    public func handleTransportFeedback(_ view: RTCPPacketView, now: UInt64) throws(RTCPError) -> Bool {
        guard view.isTransportCC, view.bytes.count >= 20 else { throw .badFCI }
        let b = view.bytes
        let referenceUnits =
            Int32(bitPattern: (UInt32(b[16]) << 24) | (UInt32(b[17]) << 16) | (UInt32(b[18]) << 8)) >> 8
        let feedbackCount = b[19]
        let nowMicros = Int64(now / 1_000)
        var arrival = Int64(referenceUnits) * 64_000
        var received = 0
        var lost = 0
        var sawOveruse = false
        var sawUsage = false
        var ackedBytes = 0
        var firstSize = 0
        var firstArrival: Int64 = 0
        var lastArrival: Int64 = 0
        try view.forEachTransportCCStatus { status in
            if status.received {
                arrival += Int64(status.deltaMicros)
                guard let sent = history.take(status.sequenceNumber) else { return }
                if received == 0 {
                    firstSize = sent.size
                    firstArrival = arrival
                }
                received += 1
                ackedBytes += sent.size
                lastArrival = max(lastArrival, arrival)
                if let delta = grouper.add(sendMicros: sent.sendMicros, arrivalMicros: arrival, size: sent.size) {
                    let trend = trendline.update(delta)
                    let usage = detector.detect(
                        trend: trend, sendDeltaMs: delta.sendDeltaMs, nowMs: delta.arrivalTimeMs)
                    sawUsage = true
                    if usage == .overusing { sawOveruse = true }
                }
            } else if history.isPending(status.sequenceNumber) {
                lost += 1
            }
        }
        let contiguous = lastFeedbackCount.map { feedbackCount == $0 &+ 1 } ?? false
        if received > 0 {
            acknowledged.add(
                bytes: ackedBytes, firstSize: firstSize, firstArrival: firstArrival,
                lastArrival: max(lastArrival, firstArrival), contiguous: contiguous)
        }
        var estimate = self.estimate
        if let lastFeedbackCount {
            let gap = feedbackCount &- lastFeedbackCount
            // A counter that moved by more than one (and not backwards, which a duplicate or
            // reordered message does): the messages between were lost.
            if gap > 1, gap < 128 { estimate.feedbackLost &+= UInt64(gap - 1) }
        }
        lastFeedbackCount = feedbackCount
        lastFeedbackMicros = nowMicros
        unansweredSince = nil
        lastTimeoutCutMicros = nil
        timedOut = false
        estimate.feedbackReceived &+= 1
        self.estimate = estimate
        guard received + lost > 0 else { return false }
        var usage: BandwidthUsage = sawOveruse ? .overusing : (sawUsage ? detector.usage : .normal)
        if usage == .overusing, let seen = lastOverloadMicros, nowMicros - seen < Self.overloadDrainMicros {
            // The queue an overload filled drains now, and the acknowledged rate falls with what the
            // sender dropped: a delay-based cut to 0.85 × that rate paused a viewer the overload had
            // just moved to a layer that fits (issue 33). The overload's own cut answers it: hold.
            usage = .underusing
        }
        rate.update(usage: usage, acknowledged: acknowledged.bitrate, nowMicros: nowMicros)
        loss.update(received: received, lost: lost, nowMicros: nowMicros)
        let overloadedNow = overload.update(
            received: received, lost: lost, overuse: usage == .overusing, nowMicros: nowMicros)
        if usage == .normal, !rate.decreased, !loss.decreased, overload.windowLoss < LossBasedController.highLoss,
            let carried = acknowledged.bitrate
        {
            // What arrived without a queue building is what the path carries now: a rate that fell
            // while the sender sent little (a paused layer, an overload it has left) climbs back
            // at once when a probe or the media shows more, not at 8 % a second.
            rate.raise(toCarried: Double(carried))
            if loss.hasDecreased { loss.raise(toCarried: Double(carried)) }
        }
        // Until losses first cut the rate, the loss-based estimate follows the delay-based one
        // up (libwebrtc's start phase); after, it grows on its own at 8 % a second.
        if !loss.hasDecreased { loss.set(rate.bitrate) }
        loss.cap(at: rate.bitrate)
        var cutForOverload = false
        // The losses of an overload are answered here (or were by a delay-based cut): the loss-based
        // window starts again, or they would cut once more after the sender dropped to what fits.
        if overloadedNow {
            loss.restartWindow(nowMicros: nowMicros)
            lastOverloadMicros = nowMicros
        }
        if overloadedNow, let carried = acknowledged.bitrate(overMicros: Self.overloadCarriedMicros),
            lastOverloadCutMicros.map({ nowMicros - $0 >= Int64((300 + rate.rttMs) * 1000) }) ?? true
        {
            // What got through the full queue is what the path carries: the rate goes there at once,
            // below it by GCC's decrease factor so that the queue drains.
            let cut = AIMDRateController.beta * Double(carried)
            if cut < min(rate.bitrate, loss.bitrate) {
                rate.set(cut)
                loss.set(cut)
                lastOverloadCutMicros = nowMicros
                cutForOverload = true
            }
        }
        let state: BandwidthEstimate.State
        if rate.decreased || loss.decreased || cutForOverload {
            state = .decreasing
        } else if rate.applicationLimited {
            state = .applicationLimited
        } else if rate.phase == .hold || (loss.lossFraction >= LossBasedController.lowLoss) {
            state = .holding
        } else {
            state = .increasing
        }
        return publish(state: state, source: .transportCC)
    }

    /// Takes a REMB (the peer's own receive-side estimate, bits/s). Alone (a peer without
    /// transport-cc, such as aiortc) it is the estimate; with transport-cc it caps it.
    @discardableResult
    public func handleREMB(_ bitrate: UInt64, now: UInt64) -> Bool {
        var estimate = self.estimate
        estimate.receiverLimit = Int(clamping: bitrate)
        self.estimate = estimate
        if estimate.source == .transportCC { return publish(state: estimate.state) }
        lastFeedbackMicros = nil  // REMB has its own pace (about one a second); no timeout
        let previous = Double(estimate.targetBitrate)
        let target = Double(min(Int(clamping: bitrate), configuration.maxBitrate))
        return publish(
            state: target < previous ? .decreasing : target > previous ? .increasing : .holding, source: .remb)
    }

    /// Recomputes the target from the parts; true when it or the state changed.
    @discardableResult
    private func publish(state: BandwidthEstimate.State, source: BandwidthEstimate.Source? = nil) -> Bool {
        var next = estimate
        if let source { next.source = source }
        next.state = state
        next.delayBasedBitrate = Int(rate.bitrate)
        next.lossBasedBitrate = Int(loss.bitrate)
        next.acknowledgedBitrate = acknowledged.bitrate ?? 0
        next.lossFraction = loss.lossFraction
        next.overloaded = overload.overloaded
        var target: Int
        switch next.source {
        case .none: target = configuration.startBitrate
        case .transportCC: target = min(next.delayBasedBitrate, next.lossBasedBitrate)
        case .remb: target = next.receiverLimit ?? configuration.startBitrate
        }
        if let limit = next.receiverLimit { target = min(target, limit) }
        next.targetBitrate = min(max(target, configuration.minBitrate), configuration.maxBitrate)
        let changed =
            next.targetBitrate != estimate.targetBitrate || next.state != estimate.state
            || next.overloaded != estimate.overloaded
        estimate = next
        return changed
    }
}
