import Dispatch
import Foundation
import Signaling

/// The WebSocket that `--transcribe ws://HOST:PORT/PATH` pushes per-speaker PCM to (the Signaling
/// module's client). It reconnects when the server drops or cannot be reached, with pauses growing
/// from 0.5 s to 10 s, for as long as the agent runs; while it is down, frames are dropped and
/// counted, and the recording goes on. After each connect, ``onOpen`` runs on `queue` before any
/// frame is sent there, so the server hears the `start` and `join` events first.
// Safe: the connection, flags and counters are guarded by `lock`; sends run on the egress queue.
final class TranscribeSocket: @unchecked Sendable {
    let url: String
    private let queue: DispatchQueue
    private let log: @Sendable (String) -> Void
    private let onOpen: @Sendable () -> Void
    private let lock = NSLock()
    private var connection: WebSocketConnection?
    private var closed = false
    private var delay = 0.5
    private var failuresLogged = 0
    private var framesSent = 0
    private var framesDropped = 0
    private var connects = 0
    /// Binary frames handed to the socket, frames dropped while it was down, connections opened.
    var counts: (sent: Int, dropped: Int, connects: Int) {
        lock.withLock { (framesSent, framesDropped, connects) }
    }

    /// - Parameters:
    ///   - queue: where ``onOpen`` runs and where the sends are made (the egress queue).
    ///   - onOpen: sends what a new connection needs first (the start event, who is present).
    init(
        url: String, queue: DispatchQueue, log: @escaping @Sendable (String) -> Void,
        onOpen: @escaping @Sendable () -> Void
    ) {
        self.url = url
        self.queue = queue
        self.log = log
        self.onOpen = onOpen
    }

    /// Starts connecting (in the background).
    func start() { connect(after: 0) }

    /// Whether a connection is open (for the egress queue: skip work nobody reads).
    var isConnected: Bool { lock.withLock { connection?.isOpen ?? false } }

    /// Egress queue: sends one binary frame, or drops it while disconnected.
    func send(binary: [UInt8]) {
        guard let c = lock.withLock({ connection }), c.isOpen else {
            lock.withLock { framesDropped += 1 }
            return
        }
        c.send(binary: binary)
        lock.withLock { framesSent += 1 }
    }

    /// Egress queue: counts a frame not sent (and not encoded) while disconnected.
    func dropFrame() { lock.withLock { framesDropped += 1 } }

    /// Egress queue: sends one JSON event (dropped while disconnected: a new connection gets the
    /// state again from ``onOpen``).
    func send(event: [String: Any]) {
        guard let c = lock.withLock({ connection }), c.isOpen,
            let data = try? JSONSerialization.data(withJSONObject: event, options: [.sortedKeys])
        else { return }
        c.send(text: String(decoding: data, as: UTF8.self))
    }

    /// Closes the connection (after what was queued) and stops reconnecting.
    func close() {
        let c = lock.withLock { () -> WebSocketConnection? in
            closed = true
            defer { connection = nil }
            return connection
        }
        c?.close(code: WebSocketCloseCode.normal, reason: "recording ended")
    }

    private func connect(after seconds: Double) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak self] in
            guard let self else { return }
            Task { await self.attempt() }
        }
    }

    private func attempt() async {
        guard !lock.withLock({ closed }) else { return }
        do {
            let c = try await WebSocketConnection.connect(url: url, timeout: 5)
            c.onClose = { [weak self, weak c] code, reason in
                guard let self, let c else { return }
                self.dropped(c, code: code, reason: reason)
            }
            c.start()
            queue.async { [self] in
                let keep = lock.withLock { () -> Bool in
                    guard !closed else { return false }
                    connection = c
                    delay = 0.5
                    failuresLogged = 0
                    connects += 1
                    return true
                }
                guard keep else { return c.close() }
                log("transcription socket connected to \(url)")
                onOpen()
            }
        } catch {
            let (pause, quiet) = lock.withLock { () -> (Double, Bool) in
                defer {
                    delay = min(delay * 2, 10)
                    failuresLogged += 1
                }
                return (delay, failuresLogged >= 3)
            }
            // A server down for long is logged three times, not every 10 s.
            if !quiet { log("transcription socket \(url): \(error); retrying in \(pause) s") }
            connect(after: pause)
        }
    }

    private func dropped(_ c: WebSocketConnection, code: UInt16, reason: String) {
        let retry = lock.withLock { () -> Bool in
            guard connection === c else { return false }
            connection = nil
            return !closed
        }
        guard retry else { return }
        log("transcription socket closed (\(code) \(reason)); reconnecting")
        connect(after: 0.5)
    }
}
