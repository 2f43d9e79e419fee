import Foundation
import Signaling

/// One bot's signalling: requests with responses matched by id, and notifications handed to one
/// handler in arrival order. Runs on the shared WebSocket reactor; no thread per bot.
final class SignalChannel: @unchecked Sendable {
    typealias NotificationHandler = @Sendable (_ method: String, _ data: JSONValue) -> Void

    static let closedError = SignalError(code: -1, name: "CONNECTION_CLOSED", message: "signalling connection closed")
    static let timeoutError = SignalError(code: -2, name: "TIMEOUT", message: "no response in time")

    private let connection: WebSocketConnection
    private let lock = NSLock()
    private var nextID = 1
    private var pending: [Int: CheckedContinuation<Result<JSONValue, SignalError>, Never>] = [:]
    private var isClosed = false
    private var handler: NotificationHandler?
    /// Called once when the socket closes (by either side).
    var onClose: (@Sendable () -> Void)?

    private init(connection: WebSocketConnection) { self.connection = connection }

    /// Connects to `url` (which carries the token) and starts receiving.
    static func connect(url: String, timeout: Double) async throws(WebSocketError) -> SignalChannel {
        let connection = try await WebSocketConnection.connect(url: url, timeout: timeout)
        let channel = SignalChannel(connection: connection)
        connection.onText = { [weak channel] text in channel?.received(text) }
        connection.onClose = { [weak channel] _, _ in channel?.closed() }
        connection.start()
        return channel
    }

    /// Sets who receives notifications (nil drops them).
    func setNotificationHandler(_ h: NotificationHandler?) { lock.withLock { handler = h } }

    /// Sends a request and waits for its response (or a timeout, or the connection closing).
    func request(_ method: String, _ data: JSONValue = .object([:]), timeout: Double) async -> Result<
        JSONValue, SignalError
    > {
        let id: Int = lock.withLock {
            defer { nextID += 1 }
            return nextID
        }
        let text = SignalEnvelope.request(id: .number(Double(id)), method: method, data: data).text
        return await withCheckedContinuation { cont in
            let accepted: Bool = lock.withLock {
                if isClosed { return false }
                pending[id] = cont
                return true
            }
            guard accepted else {
                cont.resume(returning: .failure(Self.closedError))
                return
            }
            connection.send(text: text)
            Task { [weak self] in
                try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9))
                self?.finish(id, .failure(Self.timeoutError))
            }
        }
    }

    func close() {
        connection.close()
        closed()
    }

    private func finish(_ id: Int, _ result: Result<JSONValue, SignalError>) {
        let cont = lock.withLock { pending.removeValue(forKey: id) }
        cont?.resume(returning: result)
    }

    private func received(_ text: String) {
        guard let envelope = try? SignalEnvelope.parse(text) else { return }
        switch envelope {
        case .response(let id, let result):
            if let n = id.intValue { finish(n, result) }
        case .notification(let method, let data):
            let h = lock.withLock { handler }
            if method == "participantEvents" {
                // Protocol 2: joins, leaves and mode changes coalesced by the server, in order.
                for event in data["events"]?.arrayValue ?? [] {
                    if let m = event["method"]?.stringValue, let d = event["data"] { h?(m, d) }
                }
            } else {
                h?(method, data)
            }
        case .request:
            break
        }
    }

    private func closed() {
        let (waiting, callback):
            ([CheckedContinuation<Result<JSONValue, SignalError>, Never>], (@Sendable () -> Void)?) =
                lock.withLock {
                    if isClosed { return ([], nil) }
                    isClosed = true
                    let w = Array(pending.values)
                    pending.removeAll()
                    return (w, onClose)
                }
        for c in waiting { c.resume(returning: .failure(Self.closedError)) }
        callback?()
    }
}
