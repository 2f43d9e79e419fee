import Foundation
import Signaling

/// The client core of the room protocol: one signalling WebSocket, requests matched to their
/// responses by id, and notifications handed to one handler in arrival order (protocol 2's
/// `participantEvents` batches unpacked into the events they carry).
///
/// It runs on the shared WebSocket reactor (no thread per client) and keeps nothing per client but
/// the socket and its pending requests, so a load generator can hold thousands.
public final class RoomProtocolClient: @unchecked Sendable {
    /// Receives one notification (`method`, `data`) on the reactor thread.
    public typealias NotificationHandler = @Sendable (_ method: String, _ data: JSONValue) -> Void

    /// What a request gets when the socket closes before its answer.
    public static let closedError = RoomWireError(
        code: -1, name: "CONNECTION_CLOSED", message: "signalling connection closed")
    /// What a request gets when no answer arrives in time.
    public static let timeoutError = RoomWireError(code: -2, name: "TIMEOUT", message: "no response in time")

    private let connection: WebSocketConnection
    private let lock = NSLock()
    private var pending = RoomRequestTable<CheckedContinuation<Result<JSONValue, RoomWireError>, Never>>()
    private var isClosed = false
    private var handler: NotificationHandler?
    private var closeHandler: (@Sendable () -> Void)?

    private init(connection: WebSocketConnection) { self.connection = connection }

    /// Connects to `url` (a `ws://…/v1/rtc?token=…` URL) and starts receiving.
    public static func connect(url: String, timeout: Double) async throws(WebSocketError) -> RoomProtocolClient {
        let connection = try await WebSocketConnection.connect(url: url, timeout: timeout)
        let client = RoomProtocolClient(connection: connection)
        connection.onText = { [weak client] text in client?.received(text) }
        connection.onClose = { [weak client] _, _ in client?.closed() }
        connection.start()
        return client
    }

    /// Sets who receives notifications (nil drops them).
    public func setNotificationHandler(_ h: NotificationHandler?) { lock.withLock { handler = h } }

    /// Called once when the socket closes (by either side).
    public func setCloseHandler(_ h: (@Sendable () -> Void)?) { lock.withLock { closeHandler = h } }

    /// Sends `method` and waits for its response (or `timeout` seconds, or the socket closing).
    public func request(_ method: RoomMethod, _ data: JSONValue = .object([:]), timeout: Double) async -> Result<
        JSONValue, RoomWireError
    > {
        await withCheckedContinuation { cont in
            let request: (id: Int, text: String)? = lock.withLock {
                isClosed ? nil : pending.add(method, data, waiter: cont)
            }
            guard let (id, text) = request else {
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

    /// Closes the socket; pending requests fail with ``closedError``.
    public func close() {
        connection.close()
        closed()
    }

    private func finish(_ id: Int, _ result: Result<JSONValue, RoomWireError>) {
        let cont = lock.withLock { pending.take(id) }
        cont?.resume(returning: result)
    }

    private func received(_ text: String) {
        switch RoomIncoming.decode(text) {
        case .response(let id, let result)?:
            finish(id, result)
        case .notification(let method, let data)?:
            guard let h = lock.withLock({ handler }) else { return }
            Self.unpack(method, data, into: h)
        case nil:
            break
        }
    }

    /// Hands a notification to `handler`, unpacking a protocol-2 `participantEvents` batch (joins,
    /// leaves and mode changes coalesced by the server) into its events, in order.
    public static func unpack(_ method: String, _ data: JSONValue, into handler: (String, JSONValue) -> Void) {
        guard method == RoomNotification.participantEvents.rawValue else { return handler(method, data) }
        for event in data["events"]?.arrayValue ?? [] {
            if let m = event["method"]?.stringValue, let d = event["data"] { handler(m, d) }
        }
    }

    private func closed() {
        let (waiting, callback):
            ([CheckedContinuation<Result<JSONValue, RoomWireError>, Never>], (@Sendable () -> Void)?) =
                lock.withLock {
                    if isClosed { return ([], nil) }
                    isClosed = true
                    return (pending.takeAll(), closeHandler)
                }
        for c in waiting { c.resume(returning: .failure(Self.closedError)) }
        callback?()
    }
}
