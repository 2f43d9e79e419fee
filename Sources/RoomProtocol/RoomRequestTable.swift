import Signaling

/// The requests of one client that wait for their responses, by id: the bookkeeping every
/// room-protocol client needs (``RoomProtocolClient`` keeps one under its lock; the SDK's `Room`
/// keeps one on its event queue). Not thread-safe: its owner confines it.
public struct RoomRequestTable<Waiter> {
    private var nextID = 1
    private var waiting: [Int: Waiter] = [:]

    public init() {}

    /// The id the next ``add(_:_:waiter:)`` will use.
    public var nextRequestID: Int { nextID }

    /// Registers `waiter` under a fresh id and returns that id with the request's text frame.
    public mutating func add(_ method: RoomMethod, _ data: JSONValue, waiter: Waiter) -> (id: Int, text: String) {
        let id = nextID
        nextID += 1
        waiting[id] = waiter
        return (id, SignalEnvelope.request(id: .number(Double(id)), method: method.rawValue, data: data).text)
    }

    /// How many requests wait.
    public var count: Int { waiting.count }

    /// Whether request `id` still waits.
    public func isWaiting(_ id: Int) -> Bool { waiting[id] != nil }

    /// Removes and returns the waiter of request `id` (nil when it was answered or dropped already).
    public mutating func take(_ id: Int) -> Waiter? { waiting.removeValue(forKey: id) }

    /// Removes and returns every waiter (the connection is gone).
    public mutating func takeAll() -> [Waiter] {
        defer { waiting.removeAll() }
        return Array(waiting.values)
    }
}

/// One message from the server as a client sees it.
public enum RoomIncoming: Sendable {
    /// The response to the client's request `id`.
    case response(id: Int, result: Result<JSONValue, RoomError>)
    /// A notification (``RoomNotification`` names the known ones).
    case notification(method: String, data: JSONValue)

    /// Decodes one text frame; nil for what a client ignores (not an envelope, a request, a
    /// response with a non-integer id). PubSub payloads stay as written (``JSONValue/raw(_:)``).
    public static func decode(_ text: String) -> RoomIncoming? {
        guard let envelope = try? SignalEnvelope.parse(text, keepingRaw: .pubsubPayloads) else { return nil }
        switch envelope {
        case .response(let id, let result):
            return id.intValue.map { .response(id: $0, result: result) }
        case .notification(let method, let data):
            return .notification(method: method, data: data)
        case .request:
            return nil
        }
    }
}
