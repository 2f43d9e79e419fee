import Foundation
import Signaling

/// The client core of the room protocol: one signalling WebSocket, requests matched to their
/// responses by id, and notifications handed to one handler in arrival order (protocol 2's
/// `participantEvents` batches unpacked into the events they carry).
///
/// Both the SDK's `Room` and the load bots speak the protocol through it. It runs on the shared
/// WebSocket reactor (no thread per client) and keeps nothing per client but the socket and its
/// pending requests, so a load generator can hold thousands.
///
/// Threading: responses and notifications are handed over on the reactor thread, in the order their
/// frames arrived; an owner that hops to its own serial queue from there keeps that order.
// Safe: pending requests are guarded by `lock`; frames are handled on the reactor thread.
public final class RoomProtocolClient: @unchecked Sendable {
    /// Receives one notification on the reactor thread. Notifications this version does not know
    /// are dropped (a newer server may send more).
    public typealias NotificationHandler = @Sendable (_ notification: RoomNotification, _ data: JSONValue) -> Void
    /// Receives the outcome of one request, once.
    public typealias ResponseHandler = @Sendable (Result<JSONValue, RoomError>) -> Void

    /// What a request gets when the socket closes before its answer.
    public static let closedError = RoomError(
        code: -1, name: "CONNECTION_CLOSED", message: "signalling connection closed")
    /// What a request gets when no answer arrives in time.
    public static let timeoutError = RoomError(code: -2, name: "TIMEOUT", message: "no response in time")

    private let connection: WebSocketConnection
    private let lock = NSLock()
    private var pending = RoomRequestTable<ResponseHandler>()
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

    /// Called once when the socket closes (by either side), before the requests still waiting fail
    /// with ``closedError``: an owner that queues both learns of the close first.
    public func setCloseHandler(_ h: (@Sendable () -> Void)?) { lock.withLock { closeHandler = h } }

    /// Sends `method`; `onResponse` runs once, on the reactor thread with the server's answer, or
    /// with ``closedError`` when the socket closes first (at once when it is closed already).
    /// Returns the request's id for ``cancel(_:)``, nil when the socket was closed.
    @discardableResult
    public func send(_ method: RoomMethod, _ data: JSONValue, onResponse: @escaping ResponseHandler) -> Int? {
        let request: (id: Int, text: String)? = lock.withLock {
            isClosed ? nil : pending.add(method, data, waiter: onResponse)
        }
        guard let (id, text) = request else {
            onResponse(.failure(Self.closedError))
            return nil
        }
        connection.send(text: text)
        return id
    }

    /// How many requests wait for their answers.
    public var pendingCount: Int { lock.withLock { pending.count } }

    /// Forgets request `id` (its answer will be ignored); false when it was answered or dropped already.
    @discardableResult
    public func cancel(_ id: Int) -> Bool { lock.withLock { pending.take(id) } != nil }

    /// Sends `method` and waits for its response (or `timeout` seconds, or the socket closing).
    public func request(_ method: RoomMethod, _ data: JSONValue = .object([:]), timeout: Double) async -> Result<
        JSONValue, RoomError
    > {
        await withCheckedContinuation { cont in
            guard let id = send(method, data, onResponse: { cont.resume(returning: $0) }) else { return }
            Task { [weak self] in
                try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9))
                self?.finish(id, .failure(Self.timeoutError))
            }
        }
    }

    /// Closes the socket (`code`, `reason` in the close frame); the close handler runs, then pending
    /// requests fail with ``closedError``.
    public func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "") {
        connection.close(code: code, reason: reason)
        closed()
    }

    private func finish(_ id: Int, _ result: Result<JSONValue, RoomError>) {
        let waiter = lock.withLock { pending.take(id) }
        waiter?(result)
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
    /// leaves and mode changes coalesced by the server) into its events, in order. Names this
    /// version does not know are dropped.
    public static func unpack(_ method: String, _ data: JSONValue, into handler: (RoomNotification, JSONValue) -> Void)
    {
        guard let notification = RoomNotification(rawValue: method) else { return }
        guard notification == .participantEvents else { return handler(notification, data) }
        for event in data["events"]?.arrayValue ?? [] {
            if let m = event["method"]?.stringValue.flatMap(RoomNotification.init(rawValue:)),
                m != .participantEvents, let d = event["data"]
            {
                handler(m, d)
            }
        }
    }

    private func closed() {
        let (waiting, callback): ([ResponseHandler], (@Sendable () -> Void)?) = lock.withLock {
            if isClosed { return ([], nil) }
            isClosed = true
            return (pending.takeAll(), closeHandler)
        }
        callback?()
        for w in waiting { w(.failure(Self.closedError)) }
    }
}
