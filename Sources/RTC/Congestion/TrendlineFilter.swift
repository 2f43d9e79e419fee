/// GCC's arrival-time filter: the slope of the (smoothed) accumulated one-way delay variation over
/// the last ``windowSize`` send-time groups. A positive slope means queues are building on the
/// path; a negative one that they drain.
///
/// The samples are a fixed ring (no allocation); each update is one least-squares fit over it.
struct TrendlineFilter {
    static let windowSize = 20
    static let smoothing = 0.9
    /// The slope is scaled by this and by the number of deltas seen (at most 60), as libwebrtc's
    /// detector expects its threshold (6–600 ms) to be compared with.
    static let gain = 4.0
    static let maxDeltaCount = 60

    /// The window's samples (x: arrival time since the first group, y: smoothed delay), a ring
    /// allocated once.
    private var xs = [Double](repeating: 0, count: TrendlineFilter.windowSize)
    private var ys = [Double](repeating: 0, count: TrendlineFilter.windowSize)
    private var count = 0
    private var head = 0
    private var firstArrivalMs: Double?
    private var accumulatedDelayMs = 0.0
    private var smoothedDelayMs = 0.0
    private(set) var deltaCount = 0
    /// The last fitted slope (ms of delay per ms of time), unscaled.
    private(set) var slope = 0.0

    init() {}

    /// Takes one group delta and returns the modified trend that the overuse detector compares
    /// with its threshold.
    mutating func update(_ delta: InterArrivalGrouper.Delta) -> Double {
        deltaCount = min(deltaCount + 1, Self.maxDeltaCount)
        accumulatedDelayMs += delta.arrivalDeltaMs - delta.sendDeltaMs
        smoothedDelayMs = Self.smoothing * smoothedDelayMs + (1 - Self.smoothing) * accumulatedDelayMs
        if firstArrivalMs == nil { firstArrivalMs = delta.arrivalTimeMs }
        let x = delta.arrivalTimeMs - firstArrivalMs!
        xs[head] = x
        ys[head] = smoothedDelayMs
        head = (head + 1) % Self.windowSize
        count = min(count + 1, Self.windowSize)
        if count == Self.windowSize, let fitted = fit() { slope = fitted }
        return slope * Double(deltaCount) * Self.gain
    }

    /// Least-squares slope of y over x for the samples held; nil when x does not vary.
    private func fit() -> Double? {
        var sumX = 0.0
        var sumY = 0.0
        for i in 0..<count {
            sumX += xs[i]
            sumY += ys[i]
        }
        let meanX = sumX / Double(count)
        let meanY = sumY / Double(count)
        var numerator = 0.0
        var denominator = 0.0
        for i in 0..<count {
            let dx = xs[i] - meanX
            numerator += dx * (ys[i] - meanY)
            denominator += dx * dx
        }
        return denominator == 0 ? nil : numerator / denominator
    }
}
