/// Decides when a live encoder follows a moving bandwidth estimate (issue 33, item 3): at most
/// once per ``minimumInterval`` and only for a change of more than ``minimumChange`` (10 %), so a
/// jittery estimate does not reconfigure the encoder every feedback message. Decreases larger
/// than ``urgentDecrease`` (30 %) go through at once: a link that collapsed must not wait.
public struct EncoderRateThrottle: Sendable {
    public static let minimumInterval: UInt64 = 500_000_000
    public static let minimumChange = 0.10
    public static let urgentDecrease = 0.30

    /// The rate last handed to the encoder, bits per second.
    public private(set) var applied: Int
    private var lastChange: UInt64?
    /// Bounds of what the encoder is given, bits per second.
    public let minBitrate: Int
    public let maxBitrate: Int

    public init(initial: Int, minBitrate: Int = 50_000, maxBitrate: Int = 2_500_000) {
        self.minBitrate = minBitrate
        self.maxBitrate = max(minBitrate, maxBitrate)
        applied = min(max(initial, minBitrate), self.maxBitrate)
    }

    /// The rate to reconfigure the encoder to for `estimate` (bits/s, what the video may use) at
    /// `now` (ns), or nil to leave it.
    public mutating func next(estimate: Int, now: UInt64) -> Int? {
        let wanted = min(max(estimate, minBitrate), maxBitrate)
        let change = Double(wanted - applied) / Double(applied)
        guard abs(change) > Self.minimumChange else { return nil }
        let urgent = change < -Self.urgentDecrease
        if !urgent, let lastChange, now &- lastChange < Self.minimumInterval { return nil }
        lastChange = now
        applied = wanted
        return wanted
    }
}
