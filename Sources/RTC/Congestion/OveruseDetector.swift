/// What the delay detector concludes about the path.
public enum BandwidthUsage: Sendable, Equatable {
    case normal
    /// Queues drain: the sender sends less than the path carries.
    case underusing
    /// Queues build: the sender sends more than the path carries.
    case overusing
}

/// GCC's overuse detector: compares the trendline's modified trend with a threshold that adapts
/// to it (quickly up when the trend exceeds it, slowly down otherwise), so that a path whose delay
/// varies on its own (or a competing TCP flow) does not starve the estimate, and says overuse
/// only when the trend stays above the threshold for ``overuseTimeMs`` and more than one group.
struct OveruseDetector {
    static let initialThreshold = 12.5
    static let minThreshold = 6.0
    static let maxThreshold = 600.0
    static let upGain = 0.0087
    static let downGain = 0.039
    static let overuseTimeMs = 10.0
    /// Trends this far past the threshold (a spike) do not move it.
    static let maxAdaptOffset = 15.0

    private(set) var threshold = OveruseDetector.initialThreshold
    private(set) var usage = BandwidthUsage.normal
    private var timeOverusingMs = -1.0
    private var overuseCount = 0
    private var previousTrend = 0.0
    private var lastUpdateMs: Double?

    init() {}

    /// Classifies one modified trend (from ``TrendlineFilter/update(_:)``) for a group that was
    /// sent `sendDeltaMs` after its predecessor and arrived at `nowMs`.
    mutating func detect(trend: Double, sendDeltaMs: Double, nowMs: Double) -> BandwidthUsage {
        if trend > threshold {
            if timeOverusingMs < 0 {
                timeOverusingMs = sendDeltaMs / 2  // assume the overuse began halfway
            } else {
                timeOverusingMs += sendDeltaMs
            }
            overuseCount += 1
            if timeOverusingMs > Self.overuseTimeMs, overuseCount > 1, trend >= previousTrend {
                timeOverusingMs = 0
                overuseCount = 0
                usage = .overusing
            }
        } else if trend < -threshold {
            timeOverusingMs = -1
            overuseCount = 0
            usage = .underusing
        } else {
            timeOverusingMs = -1
            overuseCount = 0
            usage = .normal
        }
        previousTrend = trend
        adaptThreshold(trend: trend, nowMs: nowMs)
        return usage
    }

    private mutating func adaptThreshold(trend: Double, nowMs: Double) {
        let last = lastUpdateMs ?? nowMs
        lastUpdateMs = nowMs
        let magnitude = abs(trend)
        if magnitude > threshold + Self.maxAdaptOffset { return }
        let gain = magnitude < threshold ? Self.downGain : Self.upGain
        let dt = min(max(nowMs - last, 0), 100)
        threshold += gain * (magnitude - threshold) * dt
        threshold = min(max(threshold, Self.minThreshold), Self.maxThreshold)
    }
}
