import Foundation
import RTCWire
import RoomProtocol
import SFU
import Signaling

extension ParticipantMode {
    var consumes: Bool { self != .signallingOnly }
}

extension TrackKind {
    /// Screen shares are always consumed; mic and webcam only by policy (`autoConsume`, `consume`).
    var alwaysConsumed: Bool { self == .screen || self == .screenAudio }
}

/// One published track (a producer in SFU terms). The SFU attaches media to `producerId`.
public struct RoomProducer: Sendable, Equatable {
    public var producerId: String
    public var participantId: String
    public var kind: TrackKind
    public var paused: Bool
    /// Whatever else the client sent with `produce` (e.g. RTP parameters later); passed to the SFU.
    public var appData: JSONValue
    /// The m-line (`mid`) of the publisher's publish connection carrying this track; nil for a
    /// control-plane-only producer (`produce` without `sdp`), which has no media in the SFU.
    public var mid: String? = nil

    /// True when the SFU receives this track (the producer was created by an SDP-carrying `produce`).
    var hasMedia: Bool { mid != nil }

    var json: JSONValue {
        var o: [String: JSONValue] = [
            "producerId": .string(producerId), "participantId": .string(participantId), "kind": .string(kind.rawValue),
            "paused": .bool(paused),
        ]
        if let mid { o["mid"] = .string(mid) }
        return .object(o)
    }
}

/// What one subscriber receives of one producer. The SFU forwards media per `consumerId`.
public struct RoomConsumer: Sendable, Equatable {
    public var consumerId: String
    public var producerId: String
    /// The participant whose track this is.
    public var producerParticipantId: String
    public var subscriberId: String
    public var kind: TrackKind
    /// `low`, `medium` or `high` (nil: the server picks).
    public var preferredQuality: String?
    /// Viewport in pixels from `setViewPort` (nil: unknown).
    public var viewportWidth: Int?
    public var viewportHeight: Int?
    /// The m-line (`mid`) of the subscriber's subscribe connection carrying this track; nil when the
    /// SFU forwards nothing for it (control-plane-only producer, or the SFU refused).
    public var mid: String? = nil

    var hasMedia: Bool { mid != nil }

    var json: JSONValue {
        var o: [String: JSONValue] = [
            "consumerId": .string(consumerId), "producerId": .string(producerId),
            "participantId": .string(producerParticipantId), "kind": .string(kind.rawValue),
        ]
        if let mid { o["mid"] = .string(mid) }
        if let preferredQuality { o["quality"] = .string(preferredQuality) }
        if let viewportWidth, let viewportHeight {
            o["viewPort"] = ["width": .number(Double(viewportWidth)), "height": .number(Double(viewportHeight))]
        }
        return .object(o)
    }
}

/// Hooks the SFU implements to attach media to the room's control-plane state. They are called on
/// the room's serial queue, in the order the state changes, and must return quickly.
public protocol RoomMediaHooks: AnyObject, Sendable {
    func producerCreated(roomId: String, producer: RoomProducer)
    func producerClosed(roomId: String, producer: RoomProducer)
    func consumerCreated(roomId: String, consumer: RoomConsumer)
    func consumerClosed(roomId: String, consumer: RoomConsumer)
    /// `setQuality`/`setViewPort` changed a consumer's preferences.
    func consumerPreferencesChanged(roomId: String, consumer: RoomConsumer)
}

/// The broker's copy of a PubSub message: the wire message (``RoomProtocol/PubSubMessage``, whose
/// `payload` is never interpreted: its exact text is kept, passed on and stored as the publisher wrote
/// it) and what the server keeps beside it for history and visibility.
struct StoredPubSubMessage {
    var message: PubSubMessage
    /// Publication order within the server (history eviction picks the smallest).
    var sequence: UInt64 = 0
    /// For a `sendOnly` message: the join (``ParticipantState/joinSerial``) of the sender and of each
    /// listed participant that was in the room when it was published. Kept on this node only.
    var joins: [String: UInt64] = [:]
    /// Bytes this message holds while stored: every string and the payload, plus fixed overhead.
    var storedBytes = 0

    /// Fixed per-message cost added to the strings (struct, array slots, timestamp, sequence).
    static let overheadBytes = 96

    mutating func measure() {
        let m = message
        storedBytes =
            Self.overheadBytes + m.id.utf8.count + m.topic.utf8.count + m.message.utf8.count
            + m.senderId.utf8.count + m.senderName.utf8.count + (m.rawPayload?.byteCount ?? 0)
            + m.sendOnly.reduce(0) { $0 + $1.utf8.count + 16 } + joins.count * 24
    }

    /// The wire object (``RoomProtocol/PubSubMessage/json``).
    var json: JSONValue { message.json }

    /// Whether `p` may receive the message (issue 31 item 11). A broadcast: everyone. A `sendOnly`
    /// message: its sender and the listed ids, but only as the same participants: the join that
    /// was present when it was published, or a join whose token is bound to the id (`participantId`
    /// claim). Whoever takes a listed id later with an unbound token does not get it replayed.
    func isVisible(to p: ParticipantState) -> Bool {
        guard !message.sendOnly.isEmpty else { return true }
        guard message.senderId == p.id || message.sendOnly.contains(p.id) else { return false }
        return p.idBoundByToken || joins[p.id] == p.joinSerial
    }
}

/// A joined participant, owned by its room's queue.
final class ParticipantState {
    let id: String
    let session: any ParticipantSignaling
    // Fields of `json`: a change drops the cached encoding.
    var name: String { didSet { cachedJSONText = nil } }
    var mode: ParticipantMode { didSet { cachedJSONText = nil } }
    var metaData: JSONValue { didSet { cachedJSONText = nil } }
    var isAgent: Bool { didSet { cachedJSONText = nil } }
    var agentId: String? { didSet { cachedJSONText = nil } }
    var micEnabled: Bool { didSet { cachedJSONText = nil } }
    var camEnabled: Bool { didSet { cachedJSONText = nil } }
    var autoConsume: Bool
    var permissions: Set<String>
    var producers: [String: RoomProducer] = [:] { didSet { cachedJSONText = nil } }
    /// Unique in the server for each join: tells this participant from a later holder of its id.
    var joinSerial: UInt64 = 0
    /// Whether the token it joined with is bound to its id (`participantId` claim).
    var idBoundByToken = false
    /// The video codecs it receives, as its join declared them (see ``RoomVideoCodecs``).
    var videoCodecs: [MediaCodec] = [.vp8]
    /// Its PubSub history replays (created at the first replay; see ``PubSubReplay``).
    var replay: PubSubReplay?
    /// Signalling protocol version of this participant's client (1 or 2; see docs/protocol.md).
    var protocolVersion = 1
    /// Sequence number of the last participant event this participant does not need (it joined
    /// after it); see ``ParticipantEventFanout``.
    var eventMark: UInt64 = 0
    private var cachedJSONText: String?

    /// `json` encoded, cached until a field of it changes (a join sends every participant's
    /// description to the joiner, so a live-stream ramp would otherwise encode N² of them).
    var jsonText: String {
        if let cachedJSONText { return cachedJSONText }
        let text = json.jsonString
        cachedJSONText = text
        return text
    }
    /// Consumers keyed by consumerId.
    var consumers: [String: RoomConsumer] = [:]
    /// With `autoConsume` off: the (participant, kind) pairs this subscriber asked to receive.
    var wanted: Set<String> = []
    var topics: Set<String> = []
    /// Offer/answer state of the SFU subscribe connection.
    var subscribe = SubscribeNegotiation()
    /// True once this node's SFU knows this participant (published or consumed media here).
    var inSFU = false
    /// Cluster mode: the edge node that serves this audience member's subscribe connection (nil:
    /// this node's SFU does), docs/cluster.md "Origin and edges".
    var edge: EdgeMediaLink?
    /// `requestMic`/`requestCam` asks waiting for this participant to turn the device on: the asker's
    /// session and request id. Answered when it does; a refusal is silent (the asker times out).
    var pendingAsks: [(kind: TrackKind, session: any ParticipantSignaling, requestId: JSONValue)] = []
    let joinedAt: Int64

    init(
        id: String, session: any ParticipantSignaling, name: String, mode: ParticipantMode, metaData: JSONValue,
        isAgent: Bool,
        agentId: String?, micEnabled: Bool, camEnabled: Bool, autoConsume: Bool, permissions: Set<String>
    ) {
        self.id = id
        self.session = session
        self.name = name
        self.mode = mode
        self.metaData = metaData
        self.isAgent = isAgent
        self.agentId = agentId
        self.micEnabled = micEnabled
        self.camEnabled = camEnabled
        self.autoConsume = autoConsume
        self.permissions = permissions
        self.joinedAt = Int64(Date().timeIntervalSince1970 * 1000)
    }

    static func wantKey(_ peer: String, _ kind: TrackKind) -> String { kind.rawValue + "\u{0}" + peer }

    /// True when this participant already has a consumer of `producer`.
    func consumes(_ producer: RoomProducer) -> Bool {
        consumers.values.contains { $0.producerId == producer.producerId }
    }

    func wants(_ producer: RoomProducer) -> Bool {
        guard mode.consumes, producer.participantId != id else { return false }
        return producer.kind.alwaysConsumed || autoConsume
            || wanted.contains(Self.wantKey(producer.participantId, producer.kind))
    }

    var json: JSONValue {
        var o: [String: JSONValue] = [
            "participantId": .string(id), "name": .string(name), "mode": .string(mode.rawValue),
            "metaData": metaData, "isAgent": .bool(isAgent), "micEnabled": .bool(micEnabled),
            "camEnabled": .bool(camEnabled),
            "producers": .array(producers.values.sorted { $0.producerId < $1.producerId }.map(\.json)),
        ]
        if let agentId { o["agentId"] = .string(agentId) }
        return .object(o)
    }
}

func makeId(_ prefix: String) -> String {
    prefix + "-" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
}

func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

/// Room and participant ids: 1–128 bytes, no whitespace or control characters, no `/`.
func isValidIdentifier(_ s: String) -> Bool {
    guard !s.isEmpty, s.utf8.count <= 128 else { return false }
    for scalar in s.unicodeScalars {
        if scalar.properties.isWhitespace || scalar.value < 0x20 || scalar.value == 0x7F || scalar == "/" {
            return false
        }
    }
    return true
}
