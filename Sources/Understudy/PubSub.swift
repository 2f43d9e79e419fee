import Foundation
import RoomProtocol
import Signaling

/// Topic-based messaging through the room server (docs/spec/room-api.md §5).
// Safe: its subscriptions are guarded by `lock`.
public final class PubSub: @unchecked Sendable {
    weak var room: Room?
    private let lock = NSLock()
    private var listeners: [String: [PubSubMessageListener]] = [:]

    init() {}

    private func requireRoom(_ api: String) throws -> Room {
        guard let room else { throw UnderstudyError(code: 3035, message: "\(api) called without a room") }
        return room
    }

    /// Publishes `message` on `topic`. `options`: `persist` (Bool), `sendOnly` ([participantId]).
    /// `payload` (the spec's `[String: Any]?`) is passed on untouched; a value JSON cannot hold
    /// throws 3073 and `4087` comes from the server for anything it refuses.
    public func publish(
        topic: String, message: String, options: [String: Any] = [:], payload: [String: Any]? = nil
    ) async throws {
        var json: JSONValue?
        if let payload {
            guard let value = JSONValue(any: payload) else {
                throw UnderstudyError(code: 3073, message: "publish: payload holds a value JSON cannot carry")
            }
            json = value
        }
        try await publish(topic: topic, message: message, options: options, payloadJSON: json)
    }

    /// Publishes with `payloadText`, the text of a JSON object, sent exactly as written: key order,
    /// number spelling (`1.50`, `1e2`, `-0.0`, integers beyond 2^53) and escapes reach every
    /// subscriber unchanged (``PubSubMessage/payloadJSON``). Text that is not one JSON object throws
    /// 3073.
    public func publish(topic: String, message: String, options: [String: Any] = [:], payloadText: String)
        async throws
    {
        let raw: RawJSON
        do {
            raw = try RawJSON(validating: payloadText)
        } catch {
            throw UnderstudyError(code: 3073, message: "publish: payloadText is not JSON (\(error))")
        }
        guard raw.isObject else {
            throw UnderstudyError(code: 3073, message: "publish: payloadText is not a JSON object")
        }
        try await publish(topic: topic, message: message, options: options, payloadJSON: .raw(raw))
    }

    /// ``publish(topic:message:options:payload:)`` with the payload as a `JSONValue` object
    /// (``JSONValue/raw(_:)`` is sent as written).
    public func publish(topic: String, message: String, options: [String: Any] = [:], payloadJSON: JSONValue?)
        async throws
    {
        let room = try requireRoom("publish")
        var data: [String: JSONValue] = ["topic": .string(topic), "message": .string(message)]
        if let persist = options["persist"] as? Bool { data["persist"] = .bool(persist) }
        if let only = options["sendOnly"] as? [String] { data["sendOnly"] = .array(only.map { .string($0) }) }
        if let payloadJSON { data["payload"] = payloadJSON }
        _ = try await room.gatedCall("publish", .publish, .object(data))
    }

    /// Subscribes `listener` to `topic`; the server subscription is made for the first listener.
    /// Throws 3035 before the room is joined. History follows as `onOldMessagesReceived` batches.
    public func subscribe(topic: String, listener: PubSubMessageListener) async throws {
        let room = try requireRoom("subscribe")
        try room.gate("subscribe")
        let first: Bool = lock.withLock {
            var list = listeners[topic] ?? []
            let wasEmpty = list.isEmpty
            if !list.contains(where: { $0 === listener }) { list.append(listener) }
            listeners[topic] = list
            return wasEmpty
        }
        guard first else { return }
        do {
            _ = try await room.call(.subscribe, ["topic": .string(topic)])
        } catch {
            lock.withLock { listeners[topic] = nil }
            throw error
        }
    }

    /// Removes `listener`; the server subscription ends with the topic's last listener.
    public func unsubscribe(topic: String, listener: PubSubMessageListener) async throws {
        let room = try requireRoom("unsubscribe")
        try room.gate("unsubscribe")
        let last: Bool = lock.withLock {
            guard var list = listeners[topic] else { return false }
            list.removeAll { $0 === listener }
            listeners[topic] = list.isEmpty ? nil : list
            return list.isEmpty
        }
        if last { _ = try await room.call(.unsubscribe, ["topic": .string(topic)]) }
    }

    /// Topics with at least one listener (resubscribed after a rejoin).
    var topics: [String] { lock.withLock { Array(listeners.keys) } }

    private func current(_ topic: String) -> [PubSubMessageListener] { lock.withLock { listeners[topic] ?? [] } }

    func deliver(_ data: JSONValue) {
        guard let m = PubSubMessage(json: data) else { return }
        for l in current(m.topic) { l.onMessageReceived(m) }
    }

    func deliverHistory(_ data: JSONValue) {
        guard let topic = data["topic"]?.stringValue else { return }
        let messages = (data["messages"]?.arrayValue ?? []).compactMap { PubSubMessage(json: $0) }
        let isLast = data["isLast"]?.boolValue ?? true
        for l in current(topic) { l.onOldMessagesReceived(messages, isLast: isLast) }
    }
}

extension PubSubMessage {
    /// The publisher's payload, the exact text it published (key order and number spelling kept;
    /// nil when none was sent): the SDK's name for ``RoomProtocol/PubSubMessage/rawPayload``.
    /// Setting text that is not one JSON value sets nil. ``payload`` gives it as a dictionary.
    public var payloadJSON: String? {
        get { rawPayload?.text }
        set { rawPayload = newValue.flatMap { try? RawJSON(validating: $0) } }
    }

    /// The publisher's payload as the spec shapes it (`[String: Any]?`), parsed from ``payloadJSON``.
    public var payload: [String: Any]? {
        guard let payloadJSON, let data = payloadJSON.data(using: .utf8) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    /// A message with its payload as text (``payloadJSON``).
    public init(
        id: String, topic: String, message: String, senderId: String, senderName: String, timestamp: Int,
        payloadJSON: String?, sendOnly: [String], senderIsModerator: Bool = false
    ) {
        self.init(
            id: id, topic: topic, message: message, senderId: senderId, senderName: senderName,
            timestamp: timestamp, rawPayload: payloadJSON.flatMap { try? RawJSON(validating: $0) },
            sendOnly: sendOnly, senderIsModerator: senderIsModerator)
    }
}
