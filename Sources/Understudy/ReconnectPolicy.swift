import Foundation

/// How a room rides out a lost signalling connection (docs/spec/room-api.md §2): it stays `RECONNECTING`
/// (every action but `leave()` refused with 3065) and rejoins with exponential backoff and jitter
/// until a rejoin succeeds or `window` seconds have passed since the connection dropped; then it
/// goes `FAILED` and leaves with `WEBSOCKET_CONNECTION_ATTEMPTS_EXHAUSTED` (1102).
public struct ReconnectPolicy: Sendable, Hashable {
    /// How long to keep trying, in seconds (0 disables reconnection).
    public var window: Double
    /// The pause before the first attempt, in seconds; each later pause doubles, up to `maxDelay`.
    public var initialDelay: Double
    /// The longest pause between two attempts, in seconds.
    public var maxDelay: Double
    /// Each pause is scaled by a random factor in `1 ± jitter`, so that many clients cut off by one
    /// server restart do not all come back in the same instant.
    public var jitter: Double
    /// An optional cap on the number of attempts (nil: as many as fit in `window`).
    public var maxAttempts: Int?

    /// A policy; see the properties for what each value means.
    public init(
        window: Double, initialDelay: Double = 0.5, maxDelay: Double = 5, jitter: Double = 0.2,
        maxAttempts: Int? = nil
    ) {
        self.window = max(0, window)
        self.initialDelay = max(0, initialDelay)
        self.maxDelay = max(self.initialDelay, maxDelay)
        self.jitter = min(max(0, jitter), 1)
        self.maxAttempts = maxAttempts
    }

    /// The SDK's default: 30 seconds, enough for a server restart or a short network outage.
    public static let `default` = ReconnectPolicy(window: 30)
    /// No reconnection: a lost connection ends the room with `WEBSOCKET_DISCONNECTED` (1001).
    public static let disabled = ReconnectPolicy(window: 0)

    /// The pause before attempt `attempt` (0-based), jitter applied.
    func delay(beforeAttempt attempt: Int) -> Double {
        let base = min(maxDelay, initialDelay * pow(2, Double(min(attempt, 30))))
        return base * Double.random(in: (1 - jitter)...(1 + jitter))
    }
}
