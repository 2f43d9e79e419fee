import RoomProtocol
import Signaling

/// What a room keeps in its cluster's shared store so that it outlives the node that holds it:
/// the persisted PubSub messages and the pins. Everything else is rebuilt by the clients when they
/// rejoin (docs/cluster.md, "What a node failure loses").
public struct RoomStateSnapshot: Sendable {
    /// Persisted messages, oldest first, in their `pubsubMessage` JSON form.
    public var messages: [JSONValue]
    /// The room's pins: `[{participantId, pinState: {cam, share}}]`.
    public var pins: [JSONValue]

    public init(messages: [JSONValue], pins: [JSONValue]) {
        self.messages = messages
        self.pins = pins
    }
}

extension Room {
    /// Tells the cluster (if any) the room's pins after a change; `stored` runs on the room's queue
    /// once the cluster's store has them (at once without a cluster).
    func pinsChanged(stored: (@Sendable () -> Void)? = nil) {
        guard let directory = server.directory else {
            stored?()
            return
        }
        let list: [JSONValue] = pins.keys.sorted().map { id in
            let state = pins[id] ?? (false, false)
            return ["participantId": .string(id), "pinState": ["cam": .bool(state.cam), "share": .bool(state.share)]]
        }
        directory.savePins(roomId: self.id, pins: list) { [self] in
            if let stored { enqueue(stored) }
        }
    }

    /// Loads the state a previous holder of this room left in the cluster; runs on the room's
    /// queue before the first join is admitted. Malformed entries are skipped.
    func restore(_ snapshot: RoomStateSnapshot) {
        let server = self.server
        for json in snapshot.messages {
            guard var message = StoredPubSubMessage(stored: json) else { continue }
            message.sequence = server.nextPubSubSequence()
            message.measure()
            try? history.store(
                message, configuration: configuration, reserve: { server.reserveHistoryBytes($0) },
                release: { server.releaseHistoryBytes($0) })
        }
        for json in snapshot.pins {
            guard let participant = json["participantId"]?.stringValue, let state = json["pinState"] else { continue }
            let cam = state["cam"]?.boolValue ?? false
            let share = state["share"]?.boolValue ?? false
            if cam || share { pins[participant] = (cam, share) }
        }
    }
}

extension RoomStateSnapshot {
    /// Parses one persisted message as the cluster's store holds it (the text of a `pubsubMessage`
    /// object), keeping its payload as written; nil when it is not JSON. The store is untrusted
    /// input: the same parser as the signalling messages reads it (fuzzed by `Fuzz/Targets/signal`).
    public static func storedMessage(_ text: String) -> JSONValue? {
        try? JSONValue.parse(text, keepingRaw: storedPayload)
    }

    /// Where a stored message keeps its payload.
    static let storedPayload = JSONRawPaths([.key("payload")])
}

extension StoredPubSubMessage {
    /// The message of a persisted `pubsubMessage` object (as stored by ``json``); nil when malformed:
    /// stricter than the wire reading, `id`, `message` and `senderId` must be there. A missing
    /// `senderName` is the sender's id; a payload that is not an object is dropped.
    init?(stored json: JSONValue) {
        guard json["id"]?.stringValue != nil, json["message"]?.stringValue != nil,
            json["senderId"]?.stringValue != nil, var message = PubSubMessage(json: json)
        else { return nil }
        if json["senderName"]?.stringValue == nil { message.senderName = message.senderId }
        if let payload = message.rawPayload, !payload.isObject { message.rawPayload = nil }
        self.init(message: message)
    }
}
