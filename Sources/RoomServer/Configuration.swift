import Foundation
import SFU
import Signaling

/// Settings of a ``RoomServer``. Every field has a default, so `Configuration()` runs a dev server
/// on 127.0.0.1:7880 with a generated secret.
public struct RoomServerConfiguration: Sendable, Codable, Equatable {
    /// Address the HTTP/WebSocket listener binds to.
    public var listenHost: String = "127.0.0.1"
    /// TCP port of the listener; 0 picks an ephemeral port (read ``RoomServer/httpPort``).
    public var listenPort: UInt16 = 7880
    /// IP the SFU binds its media sockets to and announces in ICE candidates (nil: the listen host).
    public var mediaAddress: String?
    /// UDP ports the SFU may bind (inclusive). The default is one port shared by every WebRTC
    /// connection (demultiplexed by ICE ufrag), so connections are not limited by ports. A wider
    /// range gives each connection its own port (each participant has up to two: publish and
    /// subscribe), so the range bounds the connections; `udpPortLow = 0` means ephemeral ports.
    public var udpPortLow: UInt16 = 7882
    public var udpPortHigh: UInt16 = 7882
    /// HS256 secret for room tokens. Nil makes ``RoomServer`` generate a dev secret at start.
    public var secret: String?
    /// Joined participants per room; a further join gets 4009 `MAX_PARTCIPANT_REACHED`. The default
    /// admits a live stream (a stage and a thousand in the audience, see docs/benchmarks.md).
    public var maxParticipantsPerRoom: Int = 2000
    /// Protocol-2 clients get joins and leaves coalesced over this window (`participantEvents`).
    public var participantEventWindowMilliseconds: Int = 100
    /// Largest signalling message (UTF-8 bytes) the server interprets; larger ones get 3073.
    public var maxMessageBytes: Int = 64 * 1024
    /// Largest PubSub `message` plus `payload` (bytes of their JSON); larger publishes get 4087.
    public var maxPubSubMessageBytes: Int = 16 * 1024
    /// Persisted messages kept per topic; the oldest are dropped first.
    public var pubsubHistoryLimit: Int = 200
    /// Messages per `pubsubHistory` notification when history is replayed.
    public var pubsubHistoryBatchSize: Int = 50
    /// Topics with stored history per room; a persisted publish to a further topic gets 4087.
    public var maxPersistedTopicsPerRoom: Int = 1000
    /// Topics one participant may subscribe to at once; more get 4088.
    public var maxTopicsPerParticipant: Int = 256
    /// Sustained requests per second per connection (token bucket rate).
    public var rateLimitPerSecond: Double = 50
    /// Burst size of the per-connection token bucket.
    public var rateLimitBurst: Double = 100
    /// Invalid or refused-for-abuse messages tolerated within ``abuseWindowSeconds`` before the
    /// connection is closed with 1008.
    public var abuseThreshold: Int = 20
    public var abuseWindowSeconds: Double = 10
    /// A connection that has not sent `join` by then is closed.
    public var joinTimeoutSeconds: Double = 30
    /// Cluster mode: how long a join waits for its room to be placed (Redis unreachable, owner
    /// node gone and not yet expired) before it is refused with 3047.
    public var clusterPlacementTimeoutSeconds: Double = 15

    // MARK: Hardening limits (docs/protocol.md, "Limits")

    /// When false (the default) `end` needs `allow_mod` (else 4024); true lets every participant end
    /// the room, as the hosted SDK does (`serve --anyone-may-end`).
    public var anyoneMayEnd: Bool = false
    /// Longest accepted token lifetime, `exp` minus `iat` (or minus now without `iat`); longer → 4002.
    public var maxTokenLifetimeSeconds: Double = 24 * 3600
    /// Live rooms; a join that would open a further room gets 4009.
    public var maxRooms: Int = 1000
    /// Stored PubSub history per room, counting every stored byte; the oldest messages of the room
    /// are dropped to make space.
    public var maxPubSubHistoryBytesPerRoom: Int = 512 * 1024
    /// Stored PubSub history over all rooms; a persisted publish beyond it gets 4087.
    public var maxPubSubHistoryBytesTotal: Int = 64 * 1024 * 1024
    /// Unsent output per signalling connection; a client that does not read past it is closed
    /// with WebSocket code 1013.
    public var maxQueuedOutputBytes: Int = 1024 * 1024
    /// Seconds a lobby entry waits for `respondEntry`; then its join fails with 3047.
    public var lobbyTimeoutSeconds: Double = 300
    /// SSRCs a publisher may create receive state for (per connection); packets of further SSRCs
    /// are dropped.
    public var maxSSRCsPerPublisher: Int = 32
    /// Shortest interval between key-frame requests (PLI) the SFU sends a publisher, per simulcast
    /// layer, however many consumers ask. 300 ms: libwebrtc's encoder ignores requests closer
    /// together than that, and a longer interval only makes joiners wait (on average half of it).
    public var keyframeRequestIntervalMilliseconds: Int = 300
    /// Media (SRTP, SRTCP) that waited longer than this in the shared UDP port's receive queue is
    /// dropped unread (0: never). A starved SFU then catches up within this time instead of working
    /// through seconds of stale media while the full buffer drops new connectivity checks and DTLS
    /// handshakes. STUN and DTLS are never dropped this way.
    public var staleMediaMilliseconds: Int = 1000

    // MARK: WHIP and WHEP (docs/protocol.md, "WHIP and WHEP endpoints")

    /// A WHIP/WHEP session whose media connection is not connected this long after its POST (ICE
    /// never completed), or stays disconnected or failed this long later, is removed from its room.
    public var httpSessionICETimeoutSeconds: Double = 30
    /// Live WHIP plus WHEP sessions on the server; a further POST gets 503.
    public var maxHTTPSessions: Int = 1000
    /// Live WHIP plus WHEP sessions in one room; a further POST for that room gets 503 (4009), so
    /// one room cannot take every session of the server.
    public var maxHTTPSessionsPerRoom: Int = 250
    /// Live WHIP plus WHEP sessions opened with one token (the same signed JWT); a further POST with
    /// it gets 429 (4009), so one token cannot take every session of a room or of the server.
    public var maxHTTPSessionsPerToken: Int = 20

    // MARK: Cluster and fleet (read by `understudy serve`; the flags of the same names win)

    /// Cluster mode: the Redis of the cluster (`--redis`), `redis://HOST:PORT[/DB]`.
    public var redis: String?
    /// Cluster mode: this node's id (`--node-id`).
    public var nodeId: String?
    /// Cluster mode: where clients and other nodes reach this node, `HOST:PORT` (`--advertise`).
    public var advertise: String?
    /// Cluster mode: how many audience members (`RECV_ONLY` joins) this node serves as an edge of a
    /// room that lives on another node before placement prefers another node (`--edge-audience`,
    /// docs/cluster.md "Origin and edges"); 0 (the default) proxies every member's media to the
    /// room's node, as before.
    public var edgeAudience: Int = 0
    /// The job fleet's Redis for `POST /admin/jobs` (`--jobs`).
    public var jobs: String?

    // MARK: Recording-job lifecycle (docs/protocol.md, "Webhooks" and "Auto-record")

    /// Receivers of the signed job and room events (`--webhook`, repeatable): `http://` URLs.
    public var webhooks: [String] = []
    /// The HMAC-SHA256 key of the events (`--webhook-secret`, `UNDERSTUDY_WEBHOOK_SECRET`);
    /// required with ``webhooks``.
    public var webhookSecret: String?
    /// `understudy join` options of a job submitted when a room is created, that is when its first
    /// member who is neither an agent nor a job's agent joins (`--auto-record`); nil: none. Needs ``jobs``.
    public var autoRecord: [String]?
    /// An auto-started job stops once its room has held nobody but job agents for this long
    /// (`--auto-stop-empty`); nil: never.
    public var autoStopEmptySeconds: Double? = 5
    /// An auto-started job stops once its room has held only agents (`isAgent`) and job agents for
    /// this long (`--auto-stop-agents-only`); nil: never.
    public var autoStopAgentsOnlySeconds: Double?
    /// An auto-started job stops once nobody but job agents has published a track for this long
    /// (`--auto-stop-no-media`); nil: never.
    public var autoStopNoMediaSeconds: Double?

    // MARK: TURN hand-out

    /// TURN servers handed to every client in the join response (`iceServers`), in the shape of
    /// WebRTC's `RTCIceServer`; `understudy serve --ice-servers` sets them too.
    public var iceServers: [ICEServerDescription] = []
    /// ICE-TCP passive candidates (RFC 6544) on the media port's number, for clients whose network
    /// drops UDP (`understudy serve --ice-tcp`); single shared-port mode only.
    public var iceTCP: Bool = false

    public init() {}

    /// Reads a JSON configuration file; absent keys keep their defaults.
    public static func load(path: String) throws -> RoomServerConfiguration {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return try JSONDecoder().decode(RoomServerConfiguration.self, from: data)
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = RoomServerConfiguration()
        listenHost = try c.decodeIfPresent(String.self, forKey: .listenHost) ?? d.listenHost
        listenPort = try c.decodeIfPresent(UInt16.self, forKey: .listenPort) ?? d.listenPort
        mediaAddress = try c.decodeIfPresent(String.self, forKey: .mediaAddress)
        udpPortLow = try c.decodeIfPresent(UInt16.self, forKey: .udpPortLow) ?? d.udpPortLow
        udpPortHigh =
            try c.decodeIfPresent(UInt16.self, forKey: .udpPortHigh)
            ?? (c.contains(.udpPortLow) ? udpPortLow : d.udpPortHigh)
        secret = try c.decodeIfPresent(String.self, forKey: .secret)
        maxParticipantsPerRoom =
            try c.decodeIfPresent(Int.self, forKey: .maxParticipantsPerRoom) ?? d.maxParticipantsPerRoom
        participantEventWindowMilliseconds =
            try c.decodeIfPresent(Int.self, forKey: .participantEventWindowMilliseconds)
            ?? d.participantEventWindowMilliseconds
        maxMessageBytes = try c.decodeIfPresent(Int.self, forKey: .maxMessageBytes) ?? d.maxMessageBytes
        maxPubSubMessageBytes =
            try c.decodeIfPresent(Int.self, forKey: .maxPubSubMessageBytes) ?? d.maxPubSubMessageBytes
        pubsubHistoryLimit = try c.decodeIfPresent(Int.self, forKey: .pubsubHistoryLimit) ?? d.pubsubHistoryLimit
        pubsubHistoryBatchSize =
            try c.decodeIfPresent(Int.self, forKey: .pubsubHistoryBatchSize) ?? d.pubsubHistoryBatchSize
        maxPersistedTopicsPerRoom =
            try c.decodeIfPresent(Int.self, forKey: .maxPersistedTopicsPerRoom) ?? d.maxPersistedTopicsPerRoom
        maxTopicsPerParticipant =
            try c.decodeIfPresent(Int.self, forKey: .maxTopicsPerParticipant) ?? d.maxTopicsPerParticipant
        rateLimitPerSecond = try c.decodeIfPresent(Double.self, forKey: .rateLimitPerSecond) ?? d.rateLimitPerSecond
        rateLimitBurst = try c.decodeIfPresent(Double.self, forKey: .rateLimitBurst) ?? d.rateLimitBurst
        abuseThreshold = try c.decodeIfPresent(Int.self, forKey: .abuseThreshold) ?? d.abuseThreshold
        abuseWindowSeconds = try c.decodeIfPresent(Double.self, forKey: .abuseWindowSeconds) ?? d.abuseWindowSeconds
        joinTimeoutSeconds = try c.decodeIfPresent(Double.self, forKey: .joinTimeoutSeconds) ?? d.joinTimeoutSeconds
        clusterPlacementTimeoutSeconds =
            try c.decodeIfPresent(Double.self, forKey: .clusterPlacementTimeoutSeconds)
            ?? d.clusterPlacementTimeoutSeconds
        anyoneMayEnd = try c.decodeIfPresent(Bool.self, forKey: .anyoneMayEnd) ?? d.anyoneMayEnd
        maxTokenLifetimeSeconds =
            try c.decodeIfPresent(Double.self, forKey: .maxTokenLifetimeSeconds) ?? d.maxTokenLifetimeSeconds
        maxRooms = try c.decodeIfPresent(Int.self, forKey: .maxRooms) ?? d.maxRooms
        maxPubSubHistoryBytesPerRoom =
            try c.decodeIfPresent(Int.self, forKey: .maxPubSubHistoryBytesPerRoom) ?? d.maxPubSubHistoryBytesPerRoom
        maxPubSubHistoryBytesTotal =
            try c.decodeIfPresent(Int.self, forKey: .maxPubSubHistoryBytesTotal) ?? d.maxPubSubHistoryBytesTotal
        maxQueuedOutputBytes = try c.decodeIfPresent(Int.self, forKey: .maxQueuedOutputBytes) ?? d.maxQueuedOutputBytes
        lobbyTimeoutSeconds = try c.decodeIfPresent(Double.self, forKey: .lobbyTimeoutSeconds) ?? d.lobbyTimeoutSeconds
        maxSSRCsPerPublisher = try c.decodeIfPresent(Int.self, forKey: .maxSSRCsPerPublisher) ?? d.maxSSRCsPerPublisher
        keyframeRequestIntervalMilliseconds =
            try c.decodeIfPresent(Int.self, forKey: .keyframeRequestIntervalMilliseconds)
            ?? d.keyframeRequestIntervalMilliseconds
        staleMediaMilliseconds =
            try c.decodeIfPresent(Int.self, forKey: .staleMediaMilliseconds) ?? d.staleMediaMilliseconds
        httpSessionICETimeoutSeconds =
            try c.decodeIfPresent(Double.self, forKey: .httpSessionICETimeoutSeconds) ?? d.httpSessionICETimeoutSeconds
        maxHTTPSessions = try c.decodeIfPresent(Int.self, forKey: .maxHTTPSessions) ?? d.maxHTTPSessions
        maxHTTPSessionsPerRoom =
            try c.decodeIfPresent(Int.self, forKey: .maxHTTPSessionsPerRoom) ?? d.maxHTTPSessionsPerRoom
        maxHTTPSessionsPerToken =
            try c.decodeIfPresent(Int.self, forKey: .maxHTTPSessionsPerToken) ?? d.maxHTTPSessionsPerToken
        redis = try c.decodeIfPresent(String.self, forKey: .redis)
        nodeId = try c.decodeIfPresent(String.self, forKey: .nodeId)
        edgeAudience = try c.decodeIfPresent(Int.self, forKey: .edgeAudience) ?? d.edgeAudience
        advertise = try c.decodeIfPresent(String.self, forKey: .advertise)
        iceServers = try c.decodeIfPresent([ICEServerDescription].self, forKey: .iceServers) ?? []
        iceTCP = try c.decodeIfPresent(Bool.self, forKey: .iceTCP) ?? d.iceTCP
        jobs = try c.decodeIfPresent(String.self, forKey: .jobs)
        webhooks = try c.decodeIfPresent([String].self, forKey: .webhooks) ?? []
        webhookSecret = try c.decodeIfPresent(String.self, forKey: .webhookSecret)
        autoRecord = try c.decodeIfPresent([String].self, forKey: .autoRecord)
        autoStopEmptySeconds =
            c.contains(.autoStopEmptySeconds)
            ? try c.decodeIfPresent(Double.self, forKey: .autoStopEmptySeconds) : d.autoStopEmptySeconds
        autoStopAgentsOnlySeconds = try c.decodeIfPresent(Double.self, forKey: .autoStopAgentsOnlySeconds)
        autoStopNoMediaSeconds = try c.decodeIfPresent(Double.self, forKey: .autoStopNoMediaSeconds)
    }

    /// Checks ranges; returns a description of the first problem, or nil.
    public func validationProblem() -> String? {
        if udpPortLow > udpPortHigh { return "UDP port range \(udpPortLow)-\(udpPortHigh) is empty" }
        if maxParticipantsPerRoom < 1 { return "maxParticipantsPerRoom must be at least 1" }
        if !(0...5000).contains(participantEventWindowMilliseconds) {
            return "participantEventWindowMilliseconds must be 0…5000"
        }
        if maxMessageBytes < 1024 { return "maxMessageBytes must be at least 1024" }
        if maxPubSubMessageBytes < 1 || pubsubHistoryLimit < 0 || pubsubHistoryBatchSize < 1 {
            return "bad PubSub limits"
        }
        if maxTopicsPerParticipant < 1 || maxPersistedTopicsPerRoom < 1 {
            return "maxTopicsPerParticipant must be at least 1"
        }
        if !(rateLimitPerSecond > 0) || !(rateLimitBurst >= 1) { return "rate limits must be positive" }
        if abuseThreshold < 1 || !(abuseWindowSeconds > 0) || !(joinTimeoutSeconds > 0) {
            return "bad abuse/join limits"
        }
        if let secret, secret.isEmpty { return "secret must not be empty" }
        if let problem = WebhookSender.problem(urls: webhooks, secret: webhookSecret) { return problem }
        for (name, value) in [
            ("autoStopEmptySeconds", autoStopEmptySeconds), ("autoStopAgentsOnlySeconds", autoStopAgentsOnlySeconds),
            ("autoStopNoMediaSeconds", autoStopNoMediaSeconds),
        ] {
            if let value, !(value >= 0 && value <= 86_400) { return "\(name) must be 0…86400 seconds (or null: never)" }
        }
        if !(50...10_000).contains(keyframeRequestIntervalMilliseconds) {
            return "keyframeRequestIntervalMilliseconds must be between 50 and 10000"
        }
        if !(0...60_000).contains(staleMediaMilliseconds) { return "staleMediaMilliseconds must be 0…60000" }
        if !(httpSessionICETimeoutSeconds > 0) || maxHTTPSessions < 0 || maxHTTPSessionsPerRoom < 0
            || maxHTTPSessionsPerToken < 0
        {
            return
                "httpSessionICETimeoutSeconds must be positive and maxHTTPSessions, maxHTTPSessionsPerRoom and maxHTTPSessionsPerToken at least 0"
        }
        if !(maxTokenLifetimeSeconds > 0) || maxRooms < 1 || maxPubSubHistoryBytesPerRoom < 0
            || maxPubSubHistoryBytesTotal < 0 || maxQueuedOutputBytes < 16 * 1024 || !(lobbyTimeoutSeconds > 0)
            || maxSSRCsPerPublisher < 1 || !(0...1_000_000).contains(edgeAudience)
        {
            return
                "bad hardening limits (token lifetime, rooms, history bytes, output queue >= 16 KiB, lobby, SSRCs, edgeAudience 0...1000000)"
        }
        return nil
    }
}
