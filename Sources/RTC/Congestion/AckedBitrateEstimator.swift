/// The rate at which the peer says it received our packets: the bytes each transport-cc feedback
/// message acknowledges over the arrival time it covers (on the peer's clock), summed over the
/// last ``windowMicros`` of covered time.
///
/// Counting per message, and the time each one covers, keeps the rate right when feedback
/// messages are lost: a lost message's bytes are missing, and so is its time (a rate from bytes per
/// wall-clock bucket would read 30 % low with 30 % of the feedback lost, and the rate controller
/// would cut to that). A fixed ring of samples: no allocation.
struct AckedBitrateEstimator {
    static let capacity = 32
    static let windowMicros: Int64 = 500_000
    /// Less covered time than this: no rate yet.
    static let minimumSpanMicros: Int64 = 150_000

    private var bytes = [Int](repeating: 0, count: AckedBitrateEstimator.capacity)
    private var spans = [Int64](repeating: 0, count: AckedBitrateEstimator.capacity)
    private var count = 0
    private var head = 0
    /// The last arrival of the previous message, for a message that follows it without a gap.
    private var lastArrival: Int64?

    init() {}

    /// Adds one feedback message's acknowledged packets: `bytes` in total, the first of them
    /// (`firstSize` bytes) arriving at `firstArrival` and the last at `lastArrival` (µs, peer
    /// clock). `contiguous`: the message directly follows the previous one (no feedback lost), so
    /// it covers the time from that one's last arrival.
    mutating func add(bytes total: Int, firstSize: Int, firstArrival: Int64, lastArrival last: Int64, contiguous: Bool)
    {
        defer { lastArrival = last }
        let sample: Int
        let span: Int64
        if contiguous, let previous = lastArrival, last > previous {
            sample = total
            span = last - previous
        } else {
            // The first packet opens the span: its bytes arrived before it.
            sample = total - firstSize
            span = last - firstArrival
        }
        guard span > 0 else { return }
        bytes[head] = sample
        spans[head] = span
        head = (head + 1) % Self.capacity
        count = min(count + 1, Self.capacity)
    }

    /// Bits per second over the last half second of covered arrival time; nil until enough was seen.
    var bitrate: Int? { bitrate(overMicros: Self.windowMicros) }

    /// Bits per second over about the last `window` µs of covered arrival time (whole messages, at
    /// least ``minimumSpanMicros``); nil until enough was seen.
    func bitrate(overMicros window: Int64) -> Int? {
        var total = 0
        var span: Int64 = 0
        var k = 0
        while k < count, span < window {
            let slot = (head - 1 - k + Self.capacity) % Self.capacity
            total += bytes[slot]
            span += spans[slot]
            k += 1
        }
        guard span >= Self.minimumSpanMicros else { return nil }
        return Int(Int64(total) * 8 * 1_000_000 / span)
    }
}
