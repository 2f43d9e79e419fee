import Foundation
import RTC
import RTCWire

#if canImport(Glibc)
    import Glibc
#endif

/// Counters of one received track (one consumer), confined to its bot's loop thread.
// Safe: confined to its bot's loop thread; Sendable only to be handed to it.
final class TrackCounter: @unchecked Sendable {
    let subscriberID: String
    let publisherID: String
    let kind: MediaKind
    let mid: String
    /// Loop clock time of the `consumerCreated` that announced the track.
    let createdAt: UInt64
    var closedAt: UInt64 = 0
    var packets: UInt64 = 0
    var bytes: UInt64 = 0
    var repairs: UInt64 = 0
    var firstPacket: UInt64 = 0
    var lastPacket: UInt64 = 0
    var firstKeyframe: UInt64 = 0
    /// When the first `subscriberOffer` after this track's creation arrived, and when its answer was
    /// acknowledged (0: not yet): the negotiation steps before the first key frame.
    var offered: UInt64 = 0
    var answered: UInt64 = 0
    /// When the subscribe connection first connected (ICE and DTLS done; 0: never), set at the end.
    var connected: UInt64 = 0
    var latencySum: UInt64 = 0
    var latencyCount: UInt64 = 0
    var latencyMax: UInt64 = 0
    /// The receiver statistics of a track whose subscribe connection a rejoin replaced (nil while
    /// its connection is the bot's current one).
    var retiredReceiver: ReceiverTotals?

    init(subscriberID: String, publisherID: String, kind: MediaKind, mid: String, createdAt: UInt64) {
        self.subscriberID = subscriberID
        self.publisherID = publisherID
        self.kind = kind
        self.mid = mid
        self.createdAt = createdAt
    }
}

/// A fixed histogram of latencies: 100 µs buckets up to 100 ms, then 1 ms buckets up to 5 s, then
/// one overflow bucket. Recording is an index and an increment, with no allocation.
struct LatencyHistogram: Sendable {
    static let fineNanos: UInt64 = 100_000
    static let fineCount = 1000
    static let coarseNanos: UInt64 = 1_000_000
    static let coarseCount = 4900
    static let bucketCount = fineCount + coarseCount
    var buckets: [UInt32] = Array(repeating: 0, count: bucketCount + 1)
    var count: UInt64 = 0
    var maxNanos: UInt64 = 0

    @inline(__always)
    static func bucket(_ nanos: UInt64) -> Int {
        let fine = nanos / fineNanos
        if fine < UInt64(fineCount) { return Int(fine) }
        let coarse = (nanos - UInt64(fineCount) * fineNanos) / coarseNanos
        return fineCount + Int(min(coarse, UInt64(coarseCount)))
    }

    /// The midpoint of bucket `i` in milliseconds.
    static func midpointMilliseconds(_ i: Int) -> Double {
        if i < fineCount { return (Double(i) + 0.5) * Double(fineNanos) / 1e6 }
        return Double(UInt64(fineCount) * fineNanos) / 1e6 + (Double(i - fineCount) + 0.5) * Double(coarseNanos) / 1e6
    }

    @inline(__always)
    mutating func add(_ nanos: UInt64) {
        buckets[Self.bucket(nanos)] &+= 1
        count &+= 1
        if nanos > maxNanos { maxNanos = nanos }
    }

    /// (bucket, count) of every non-empty bucket: the compact form a report carries.
    var nonEmptyBuckets: [[UInt64]] {
        buckets.indices.compactMap { buckets[$0] > 0 ? [UInt64($0), UInt64(buckets[$0])] : nil }
    }

    /// The histogram of ``nonEmptyBuckets`` pairs (pairs out of range are ignored).
    init(buckets pairs: [[UInt64]], maxNanos: UInt64) {
        for pair in pairs where pair.count == 2 && pair[0] < UInt64(buckets.count) {
            let n = UInt32(clamping: pair[1])
            buckets[Int(pair[0])] &+= n
            count &+= UInt64(n)
        }
        self.maxNanos = maxNanos
    }

    init() {}

    mutating func merge(_ other: LatencyHistogram) {
        for i in buckets.indices { buckets[i] &+= other.buckets[i] }
        count &+= other.count
        maxNanos = max(maxNanos, other.maxNanos)
    }

    /// The value (ms, bucket midpoint) below which `fraction` of the samples lie; nil when empty.
    func percentileMilliseconds(_ fraction: Double) -> Double? {
        guard count > 0 else { return nil }
        let target = max(1, UInt64((Double(count) * fraction).rounded(.up)))
        var seen: UInt64 = 0
        for (i, n) in buckets.enumerated() {
            seen += UInt64(n)
            if seen >= target {
                if i == Self.bucketCount { return Double(maxNanos) / 1e6 }
                return min(Self.midpointMilliseconds(i), Double(maxNanos) / 1e6)
            }
        }
        return Double(maxNanos) / 1e6
    }
}

/// Totals of all bots sharing one event loop, updated on that loop's thread with plain integers and
/// read through `loop.submit` for the progress line and the final report.
// Safe: written on its loop thread only and read through `loop.submit` (the hop orders it).
final class LoopCounters: @unchecked Sendable {
    let loop: EventLoop
    var packets: UInt64 = 0
    var bytes: UInt64 = 0
    var unroutedPackets: UInt64 = 0
    /// Tracks announced to subscribers on this loop, and those since closed.
    var tracksCreated = 0
    var tracksClosed = 0
    var latency = LatencyHistogram()
    /// Subscribe connections living on this loop (for receiver statistics).
    var subscribeConnections: [PeerConnection] = []
    /// What the subscribe connections a rejoin replaced had received and lost, so the run's totals
    /// never go backwards.
    var retiredReceived: UInt64 = 0
    var retiredLost: Int64 = 0

    init(loop: EventLoop) { self.loop = loop }

    /// Takes `pc` out of the live set, keeping its totals (loop thread).
    func retire(_ pc: PeerConnection) {
        for s in pc.receiverStats() {
            retiredReceived &+= s.stats.packetsReceived
            retiredLost &+= max(0, s.stats.packetsLost)
        }
        subscribeConnections.removeAll { $0 === pc }
    }

    /// Packets received and lost so far by every receiver on this loop (loop thread).
    func receiverTotals() -> (received: UInt64, lost: Int64) {
        var received = retiredReceived
        var lost = retiredLost
        for pc in subscribeConnections {
            for s in pc.receiverStats() {
                received &+= s.stats.packetsReceived
                lost &+= max(0, s.stats.packetsLost)
            }
        }
        return (received, lost)
    }
}

/// Wall-clock nanoseconds since 1970 (the clock abs-capture-time is stamped with).
@inline(__always)
func wallClockNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// CPU time consumed by the calling thread, in nanoseconds.
func threadCPUNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// CPU time (user + system) of the whole process, in seconds.
func currentProcessCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
    let system = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    return user + system
}

/// Resident set size of the process in bytes (from /proc/self/statm).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count >= 2, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Whether a VP8 RTP payload starts a key frame (S=1, partition 0, P bit clear in the frame header).
@inline(__always)
func vp8PayloadStartsKeyframe(_ payload: UnsafeRawBufferPointer) -> Bool {
    guard payload.count >= 1 else { return false }
    let b0 = payload[0]
    guard b0 & 0x10 != 0, b0 & 0x07 == 0 else { return false }
    var i = 1
    if b0 & 0x80 != 0 {
        guard payload.count > i else { return false }
        let x = payload[i]
        i += 1
        if x & 0x80 != 0 {
            guard payload.count > i else { return false }
            i += payload[i] & 0x80 != 0 ? 2 : 1
        }
        if x & 0x40 != 0 { i += 1 }
        if x & 0x30 != 0 { i += 1 }
    }
    guard payload.count > i else { return false }
    return payload[i] & 0x01 == 0
}

/// Receiver counters summed over the streams of one m-line (simulcast switches keep one SSRC, but a
/// reused m-line may have had several).
struct ReceiverTotals: Sendable {
    var packetsReceived: UInt64 = 0
    var packetsLost: Int64 = 0
    var nacksSent: UInt64 = 0
    var plisSent: UInt64 = 0
    var retransmissionsReceived: UInt64 = 0
    var bytesReceived: UInt64 = 0
    /// The quality reading of the m-line's stream with the most frames (the track's current one).
    var quality: ReceiveQualitySnapshot?

    /// The receive statistics of `connection`, summed per mid (loop thread).
    static func byMid(_ connection: PeerConnection) -> [String: ReceiverTotals] {
        var out: [String: ReceiverTotals] = [:]
        for s in connection.receiverStats() {
            guard let mid = s.mid else { continue }
            var total = out[mid] ?? ReceiverTotals()
            total.packetsReceived &+= s.stats.packetsReceived
            total.packetsLost &+= max(0, s.stats.packetsLost)
            total.nacksSent &+= s.stats.nacksSent
            total.plisSent &+= s.stats.plisSent &+ s.stats.firsSent
            total.retransmissionsReceived &+= s.stats.retransmissionsReceived
            total.bytesReceived &+= s.stats.bytesReceived
            if total.quality.map({ $0.frames < s.stats.quality.frames }) ?? true { total.quality = s.stats.quality }
            out[mid] = total
        }
        return out
    }
}
