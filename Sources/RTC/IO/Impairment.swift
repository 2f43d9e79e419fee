import Glibc
import RTCWire

/// A shaped, lossy link applied in user space at a ``UDPSocket``: what the socket receives goes
/// through ``down``, what it sends through ``up``. ICE, DTLS, RTCP and media all cross it, as they
/// would cross a real link.
///
/// Each direction is a ``LinkImpairment`` (rate limit, delay, jitter, loss, burst loss, reordering,
/// duplication). Decisions come from a seeded generator, so the same seed and the same packets give
/// the same outcome. Presets (``preset(named:)``) and a JSON form (``parse(_:)``) are documented
/// in docs/load-testing.md.
public struct Impairment: Sendable, Equatable, Codable {
    /// What the socket receives.
    public var down: LinkImpairment
    /// What the socket sends.
    public var up: LinkImpairment
    /// Seed of the decision sequences (each direction derives its own from it).
    public var seed: UInt64

    /// Creates an impairment.
    public init(down: LinkImpairment = LinkImpairment(), up: LinkImpairment = LinkImpairment(), seed: UInt64 = 1) {
        self.down = down
        self.up = up
        self.seed = seed
    }

    /// Random loss of this share of received datagrams only (the historical receive drop).
    public init(receiveDropRate: Double, seed: UInt64 = 1) {
        self.init(down: LinkImpairment(loss: min(max(receiveDropRate, 0), 1)), seed: seed)
    }

    /// True when neither direction changes anything.
    public var isNone: Bool { down.isNone && up.isNone }

    /// The same impairment with another seed (bots of a load run each get their own).
    public func withSeed(_ seed: UInt64) -> Impairment {
        var copy = self
        copy.seed = seed
        return copy
    }

    /// The process-wide impairment from `UNDERSTUDY_IMPAIR_DROP` (rate) and
    /// `UNDERSTUDY_IMPAIR_SEED` (default 1), or nil when the rate is unset or zero.
    public static let fromEnvironment: Impairment? = {
        guard let rateText = getenv("UNDERSTUDY_IMPAIR_DROP").map({ String(cString: $0) }),
            let rate = Double(rateText), rate > 0
        else { return nil }
        let seed = getenv("UNDERSTUDY_IMPAIR_SEED").flatMap { UInt64(String(cString: $0)) } ?? 1
        return Impairment(receiveDropRate: min(rate, 1), seed: seed)
    }()
}

/// One direction of an ``Impairment``. Every field's zero (or nil) means "not impaired that way".
///
/// A datagram goes through, in order: random loss (``loss``), burst loss (``burst``), duplication
/// (``duplicate``: the copy is shaped like an original), the rate limiter (``rateKbps``), then
/// delay, jitter and reordering. The rate limiter is a token bucket of ``bucketBytes`` whose queue
/// holds at most ``queueMs`` of traffic: a datagram that would wait longer is dropped (tail drop).
public struct LinkImpairment: Sendable, Equatable, Codable {
    /// Bottleneck rate in kbit/s (0: unlimited).
    public var rateKbps: Double
    /// Token-bucket depth in bytes: how much may pass at once above the rate.
    public var bucketBytes: Int
    /// Longest wait in the rate limiter's queue, in ms; datagrams that would wait longer are dropped.
    public var queueMs: Double
    /// Fixed one-way delay in ms.
    public var delayMs: Double
    /// Jitter in ms: each datagram's delay is drawn uniformly from `delayMs ± jitterMs` (never below 0).
    public var jitterMs: Double
    /// Whether jitter may reorder datagrams; when false a datagram never leaves before the one sent
    /// before it (a FIFO link whose latency varies).
    public var jitterReorders: Bool
    /// Share of datagrams lost at random, in [0, 1].
    public var loss: Double
    /// Burst loss (Gilbert-Elliott), or nil.
    public var burst: GilbertElliott?
    /// Share of datagrams held back ``reorderMs`` longer than the rest, so that later ones overtake them.
    public var reorder: Double
    /// Extra hold of a reordered datagram, in ms.
    public var reorderMs: Double
    /// Share of datagrams delivered twice.
    public var duplicate: Double

    /// Creates one direction of an impairment.
    public init(
        rateKbps: Double = 0, bucketBytes: Int = 3000, queueMs: Double = 300, delayMs: Double = 0,
        jitterMs: Double = 0, jitterReorders: Bool = false, loss: Double = 0, burst: GilbertElliott? = nil,
        reorder: Double = 0, reorderMs: Double = 20, duplicate: Double = 0
    ) {
        self.rateKbps = rateKbps
        self.bucketBytes = bucketBytes
        self.queueMs = queueMs
        self.delayMs = delayMs
        self.jitterMs = jitterMs
        self.jitterReorders = jitterReorders
        self.loss = loss
        self.burst = burst
        self.reorder = reorder
        self.reorderMs = reorderMs
        self.duplicate = duplicate
    }

    /// True when the direction changes nothing.
    public var isNone: Bool { !holds && loss <= 0 && burst == nil }

    /// Whether datagrams are held for a while (and so copied into the link's ring) rather than
    /// only dropped or passed.
    var holds: Bool { rateKbps > 0 || delayMs > 0 || jitterMs > 0 || reorder > 0 || duplicate > 0 }

    /// Longest time a datagram can be held, in ns (sizes the ring).
    var longestHold: UInt64 {
        let ms = (rateKbps > 0 ? queueMs : 0) + delayMs + jitterMs + (reorder > 0 ? reorderMs : 0)
        return UInt64(max(ms, 0) * 1_000_000)
    }
}

/// The Gilbert-Elliott two-state loss model: a good and a bad state, each with its own loss.
///
/// Before each datagram the link moves from good to bad with probability ``p`` and from bad to good
/// with probability ``r``; the datagram is then lost with ``lossGood`` or ``lossBad``. In the long
/// run the link is bad a share p / (p + r) of the time, a bad spell lasts 1 / r datagrams on
/// average, and the loss is (r·lossGood + p·lossBad) / (p + r).
public struct GilbertElliott: Sendable, Equatable, Codable {
    /// Probability of moving from good to bad.
    public var p: Double
    /// Probability of moving from bad to good.
    public var r: Double
    /// Loss in the bad state.
    public var lossBad: Double
    /// Loss in the good state.
    public var lossGood: Double

    /// Creates the model.
    public init(p: Double, r: Double, lossBad: Double = 1, lossGood: Double = 0) {
        self.p = p
        self.r = r
        self.lossBad = lossBad
        self.lossGood = lossGood
    }

    /// The long-run loss rate.
    public var meanLoss: Double { p + r > 0 ? (r * lossGood + p * lossBad) / (p + r) : lossGood }
}
