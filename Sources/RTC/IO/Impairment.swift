import Glibc

/// Deterministic packet loss injected on receive, for tests and the interop loss run.
public struct Impairment: Sendable, Equatable {
    /// Probability in [0, 1] that a received datagram is dropped before its handler sees it.
    public var receiveDropRate: Double
    /// Seed of the drop decision sequence: the same seed drops the same packet indices.
    public var seed: UInt64

    /// Creates an impairment.
    public init(receiveDropRate: Double, seed: UInt64 = 1) {
        self.receiveDropRate = receiveDropRate
        self.seed = seed
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

/// SplitMix64: tiny, fast and fully determined by its seed.
struct ImpairmentRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in [0, 1).
    mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }
}
