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
