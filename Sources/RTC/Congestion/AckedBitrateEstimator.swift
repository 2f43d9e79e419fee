/// The rate at which the peer says it received our packets (bytes acknowledged by transport-cc
/// feedback, by their arrival times on the peer's clock), over the last ``windowMicros``.
///
/// The rate controller decreases to a fraction of it on overuse and will not grow far past it when
/// the sender is application-limited. 50 ms buckets in a fixed ring: no allocation.
struct AckedBitrateEstimator {
    static let bucketMicros: Int64 = 50_000
    static let bucketCount = 16
    static let windowMicros: Int64 = 500_000
    /// Less than this much arrival time seen: no rate yet.
    static let minimumSpanMicros: Int64 = 150_000

    private var bytes = [Int](repeating: 0, count: AckedBitrateEstimator.bucketCount)
    private var bucketOf = [Int64](repeating: .min, count: AckedBitrateEstimator.bucketCount)
    private var firstArrival: Int64?
    private var latestArrival: Int64 = .min

    init() {}

    private static func bucket(_ micros: Int64) -> Int64 {
        micros >= 0 ? micros / bucketMicros : (micros - bucketMicros + 1) / bucketMicros
    }

    /// Adds `size` bytes that arrived at `arrivalMicros` (peer clock).
    mutating func add(arrivalMicros: Int64, size: Int) {
        if firstArrival == nil { firstArrival = arrivalMicros }
        let b = Self.bucket(arrivalMicros)
        // Older than the ring holds: too late to count.
        if latestArrival != .min, b <= Self.bucket(latestArrival) - Int64(Self.bucketCount) { return }
        let slot = Int(((b % Int64(Self.bucketCount)) + Int64(Self.bucketCount)) % Int64(Self.bucketCount))
        if bucketOf[slot] != b {
            bucketOf[slot] = b
            bytes[slot] = 0
        }
        bytes[slot] += size
        latestArrival = max(latestArrival, arrivalMicros)
    }

    /// Bits per second over the last half second of arrivals; nil until enough was seen.
    var bitrate: Int? {
        guard let firstArrival, latestArrival != .min else { return nil }
        let windowStart = max(firstArrival, latestArrival - Self.windowMicros)
        let span = latestArrival - windowStart
        guard span >= Self.minimumSpanMicros else { return nil }
        let first = Self.bucket(windowStart)
        let last = Self.bucket(latestArrival)
        var total = 0
        var b = first
        while b <= last {
            let slot = Int(((b % Int64(Self.bucketCount)) + Int64(Self.bucketCount)) % Int64(Self.bucketCount))
            if bucketOf[slot] == b { total += bytes[slot] }
            b += 1
        }
        // The window's span in whole buckets, so a bucket counted whole is divided by its length.
        let covered = (last - first + 1) * Self.bucketMicros
        return Int(Int64(total) * 8 * 1_000_000 / max(covered, 1))
    }

    mutating func reset() {
        for i in 0..<Self.bucketCount {
            bytes[i] = 0
            bucketOf[i] = .min
        }
        firstArrival = nil
        latestArrival = .min
    }
}
