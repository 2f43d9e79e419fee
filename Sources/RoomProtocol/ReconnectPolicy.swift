import Dispatch
import Foundation
import Signaling

/// How a client rides out a lost signalling connection: it rejoins with exponential backoff and
/// jitter until a rejoin succeeds or `window` seconds have passed since the connection dropped
/// (``retry(_:)``), each attempt through the first reachable node of a cluster
/// (``RoomProtocolClient/connect(urls:timeout:)``). The SDK's room (docs/spec/room-api.md §2: it
/// stays `RECONNECTING`, then goes `FAILED` and leaves with `WEBSOCKET_CONNECTION_ATTEMPTS_EXHAUSTED`,
/// 1102) and `understudy load --reconnect` bots share it.
public struct ReconnectPolicy: Sendable, Hashable {
    /// How long to keep trying, in seconds (0 disables reconnection).
    public var window: Double
    /// The longest pause before the first attempt (drawn from `0...initialDelay`), in seconds; the
    /// pause before attempt `n` is `initialDelay × 2ⁿ` (jitter applied), up to `maxDelay`.
    public var initialDelay: Double
    /// The longest pause between two attempts, in seconds.
    public var maxDelay: Double
    /// Each pause is scaled by a random factor in `1 ± jitter`, so that many clients cut off by one
    /// server restart do not all come back in the same instant.
    public var jitter: Double
    /// An optional cap on the number of attempts (nil: as many as fit in `window`).
    public var maxAttempts: Int?
    /// Whether the first pause is drawn from the whole of `0...initialDelay` (the default, see
    /// ``delay(beforeAttempt:)``); when false it is `initialDelay` with jitter, like the others, for a
    /// caller that needs the room to stay reconnecting for a known time.
    public var spreadsFirstPause = true

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

    /// The pause before attempt `attempt` (0-based), jitter applied. The first pause is drawn from
    /// the whole of `0...initialDelay` instead: the clients of one dead node rejoin at once through
    /// the others (docs/cluster.md, "Failure"), so that pause only spreads them, and spread evenly it
    /// halves the mean wait and their burst on the surviving nodes alike.
    public func delay(beforeAttempt attempt: Int) -> Double {
        if attempt == 0 && spreadsFirstPause { return initialDelay * Double.random(in: 0...1) }
        let base = min(maxDelay, initialDelay * pow(2, Double(min(attempt, 30))))
        return base * Double.random(in: (1 - jitter)...(1 + jitter))
    }

    /// Runs `attempt` after each pause (``delay(beforeAttempt:)``) until it returns true, `stop`
    /// returns true, `maxAttempts` were made or the window (counted from this call) ran out; the
    /// last attempt starts no later than the end of the window, and the first is always made.
    /// Returns whether an attempt succeeded.
    public func retry(stop: @Sendable () -> Bool = { false }, _ attempt: @Sendable () async -> Bool) async -> Bool {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(window * 1e9)
        var made = 0
        while made < (maxAttempts ?? Int.max) {
            let pause = delay(beforeAttempt: made)
            made += 1
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline || made == 1 else { break }
            let wait = min(pause, Double(deadline &- min(deadline, now)) / 1e9)
            try? await Task.sleep(nanoseconds: UInt64(wait * 1e9))
            if stop() { return false }
            if await attempt() { return true }
        }
        return false
    }
}

extension ReconnectPolicy {
    /// The nodes a rejoin tries, in order: the client's own node `own` first (a dropped socket may be a
    /// short outage of a node that still serves the room), then the other nodes of `cluster` in a random
    /// order, so that the clients of a node that died spread over the survivors rather than all
    /// landing on the first one listed (docs/cluster.md, "Failure"). Duplicates of `own` are dropped.
    public static func nodeOrder(own: String, cluster: [String]) -> [String] {
        var seen: Set<String> = [own]
        return [own] + cluster.filter { seen.insert($0).inserted }.shuffled()
    }
}

extension RoomProtocolClient {
    /// Connects to the first of `urls` that accepts a WebSocket, in order (a client's own node,
    /// then the other nodes of its cluster from `clusterNodes`), each within `timeout`. Throws the
    /// last failure when none does (or `WebSocketError.invalidURL` for an empty list).
    public static func connect(urls: [String], timeout: Double) async throws(WebSocketError) -> RoomProtocolClient {
        var last = WebSocketError.invalidURL("no address")
        for url in urls {
            do { return try await connect(url: url, timeout: timeout) } catch { last = error }
        }
        throw last
    }
}
