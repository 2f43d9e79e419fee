import Signaling

/// One PubSub message as the room protocol carries it (docs/protocol.md): a `pubsubMessage`
/// notification's `data`, an element of a history batch's `messages`, and the text the cluster
/// stores per persisted message. The server builds it, stores it and sends it; the SDK reads it and
/// hands it to its listeners (the SDK's spec names, ``payloadJSON`` and `payload`, are views over
/// ``rawPayload``).
public struct PubSubMessage: Sendable, Hashable {
    /// The server's id of the message.
    public var id: String
    /// The topic it was published on.
    public var topic: String
    /// The text published.
    public var message: String
    /// Who published it.
    public var senderId: String
    /// The publisher's display name.
    public var senderName: String
    /// Milliseconds since 1970.
    public var timestamp: Int
    /// The publisher's payload exactly as it wrote it (key order and number spelling kept), never
    /// interpreted; nil when none was sent.
    public var rawPayload: RawJSON?
    /// The participant ids it was addressed to (empty: everyone subscribed).
    public var sendOnly: [String]
    /// Set by the server: whether the sender held `allow_mod` when it published (an Understudy
    /// server extension; false from servers that do not send it). Lets a client judge stage invites.
    public var senderIsModerator: Bool

    /// A message from its fields.
    public init(
        id: String, topic: String, message: String, senderId: String, senderName: String, timestamp: Int,
        rawPayload: RawJSON?, sendOnly: [String], senderIsModerator: Bool = false
    ) {
        self.id = id
        self.topic = topic
        self.message = message
        self.senderId = senderId
        self.senderName = senderName
        self.timestamp = timestamp
        self.rawPayload = rawPayload
        self.sendOnly = sendOnly
        self.senderIsModerator = senderIsModerator
    }

    /// Reads the wire object. Only `topic` is required: a missing string is empty, a missing
    /// timestamp 0, a `null` payload none. Parse with ``JSONRawPaths/pubsubPayloads`` (or keep the
    /// payload raw otherwise) so that ``rawPayload`` is the publisher's exact text.
    public init?(json: JSONValue) {
        guard let topic = json["topic"]?.stringValue else { return nil }
        self.init(
            id: json["id"]?.stringValue ?? "", topic: topic, message: json["message"]?.stringValue ?? "",
            senderId: json["senderId"]?.stringValue ?? "", senderName: json["senderName"]?.stringValue ?? "",
            timestamp: json["timestamp"]?.intValue ?? 0,
            rawPayload: json["payload"].flatMap { $0.isNull ? nil : RawJSON($0) },
            sendOnly: (json["sendOnly"]?.arrayValue ?? []).compactMap(\.stringValue),
            senderIsModerator: json["senderIsModerator"]?.boolValue ?? false)
    }

    /// The wire object; the payload is written back as it came (absent when there is none).
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "id": .string(id), "topic": .string(topic), "message": .string(message), "senderId": .string(senderId),
            "senderName": .string(senderName), "timestamp": .number(Double(timestamp)),
            "sendOnly": .array(sendOnly.map(JSONValue.string)), "senderIsModerator": .bool(senderIsModerator),
        ]
        if let rawPayload { o["payload"] = .raw(rawPayload) }
        return .object(o)
    }
}
