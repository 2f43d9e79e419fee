import Foundation
import Redis
import RoomProtocol
import RoomServer
import Signaling

/// One room server of a cluster (LiveKit's multi-node model over Redis): it registers itself with
/// its URLs and load under a short TTL, places each new room on the least-loaded live node
/// (atomically, in one Lua script, so two nodes never both own a room), keeps the rooms it owns
/// alive in Redis, and releases them when they close. Any node accepts any client: a join for a
/// room held elsewhere is proxied to its owner by the ``RoomServer``.
///
/// Redis is never on the media path nor on the path of a running room's signalling: a Redis
/// outage delays only the placement of new rooms (docs/cluster.md).
// Safe: its mutable state is guarded by `lock`; Redis calls go through RedisClient's own queue.
public final class ClusterNode: RoomDirectory, @unchecked Sendable {
    /// Where the cluster's Redis is and how this node is reached and registered.
    public struct Configuration: Sendable {
        /// The cluster's Redis (`serve --redis`).
        public var redis: RedisURL
        /// This node's id (`serve --node-id`), unique in the cluster.
        public var nodeId: String
        /// Where clients and proxying nodes reach this node: `ws://HOST:PORT/v1/rtc`.
        public var signalingURL: String
        /// The HTTP base for forwarded admin requests: `http://HOST:PORT`.
        public var httpURL: String
        /// The address clients send media to (its ICE candidates), as listed by `GET /cluster`.
        public var mediaAddress: String
        /// Registration refresh period; the registration expires after ``nodeTTL`` without one.
        public var heartbeat: Double = 1
        /// Seconds a registration lives without a refresh: a node silent this long is dead to the others.
        public var nodeTTL: Double = 3
        /// A room key outlives its last refresh by this much (the owner's registration decides first).
        public var roomTTL: Double = 10
        /// The prefix of every key of the cluster (docs/cluster.md, "Redis keys").
        public var keyPrefix = "understudy:cluster"

        /// A configuration with the default timings and prefix.
        public init(redis: RedisURL, nodeId: String, signalingURL: String, httpURL: String, mediaAddress: String) {
            self.redis = redis
            self.nodeId = nodeId
            self.signalingURL = signalingURL
            self.httpURL = httpURL
            self.mediaAddress = mediaAddress
        }
    }

    /// A node's registration (``Cluster/NodeRecord``).
    public typealias NodeRecord = Cluster.NodeRecord
    /// One room's load in a registration.
    public typealias RoomLoad = NodeRecord.RoomLoad

    /// What the node was created with.
    public let configuration: Configuration
    private let redis: RedisClient
    /// The registration thread's own connection, so a slow placement never delays a refresh.
    private let registration: RedisClient
    private let log: @Sendable (String) -> Void
    private let lock = NSLock()
    private var owned: Set<String> = []
    private var summaries: [RoomSummary] = []
    private var stopped = false
    private var redisUp = true
    private var placements = 0
    private var placementWaits = 0
    private var lastCPU: (wall: Double, cpu: Double)?
    private var cpuCores = 0.0
    private weak var server: RoomServer?
    private var summaryTask: Task<Void, Never>?
    private var knownURLs: [String] = []
    /// Each live node's registered media address, as last read (where its pipes may be).
    private var knownMediaAddresses: [String: String] = [:]
    /// Registrations read from Redis that did not parse or were implausible (skipped).
    private var invalidRegistrations = 0
    private var reportedInvalid: Set<String> = []
    /// Bytes of persisted PubSub history in Redis per owned room, as the store script last reported.
    private var historyBytes: [String: Int] = [:]
    private let startedAt = Date().timeIntervalSince1970

    /// A node that registers and places rooms once attached to a server; `log` receives one line per
    /// change of Redis' reachability and per registration skipped.
    public init(configuration: Configuration, log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.log = log
        redis = RedisClient(url: configuration.redis, label: "cluster")
        registration = RedisClient(url: configuration.redis, label: "cluster-registration")
    }

    // MARK: Keys

    // Every name in a key is escaped (``NameEscaping``): the escaping has no `:`, so no room id or
    // node id can spell another's key (`v:pins` is `room:v_3Apins`, never `room:v:pins`). In Redis
    // a node is its escaped id: the members of `…:nodes`, the owner in `…:room:ROOM` and the
    // `…:node-rooms:` sets all hold escaped ids, so the scripts build keys by concatenation alone.

    private var prefix: String { configuration.keyPrefix }
    /// This node as Redis names it.
    private var escapedNodeId: String { NameEscaping.escape(configuration.nodeId) }
    /// The registration key of the node Redis names `escapedId`.
    private func nodeKey(escapedId: String) -> String { "\(prefix):node:\(escapedId)" }
    private func roomKey(_ id: String) -> String { "\(prefix):room:\(NameEscaping.escape(id))" }

    // MARK: Life cycle

    /// Registers this node and becomes `server`'s directory; call before `server.start()` returns
    /// to clients. Throws when Redis cannot be reached at all.
    public func attach(to server: RoomServer) throws(RedisError) {
        self.server = server
        server.nodeId = configuration.nodeId
        try registration.commandSync(["PING"])
        refreshRegistration()
        server.directory = self
        summaryTask = Task { [weak self] in
            while let self, !self.isStopped {
                if let server = self.server {
                    let current = await server.roomSummaries()
                    self.lock.withLock { self.summaries = current }
                }
                if let records = try? await self.liveRecords() {
                    let own = self.configuration.signalingURL
                    let urls = [own] + records.map(\.signalingURL).filter { $0 != own }
                    let media = Dictionary(records.map { ($0.id, $0.mediaAddress) }, uniquingKeysWith: { a, _ in a })
                    let changed: Bool = self.lock.withLock {
                        defer {
                            self.knownURLs = urls
                            self.knownMediaAddresses = media
                        }
                        return Set(urls) != Set(self.knownURLs.isEmpty ? [own] : self.knownURLs)
                    }
                    if changed { self.server?.clusterNodesChanged(urls) }
                }
                try? await Task.sleep(nanoseconds: UInt64(self.configuration.heartbeat * 1e9))
            }
        }
        let thread = Thread { [self] in
            while !isStopped {
                Thread.sleep(forTimeInterval: configuration.heartbeat)
                if !isStopped { refreshRegistration() }
            }
        }
        thread.name = "cluster-registration"
        thread.start()
        log(
            "cluster: node \(configuration.nodeId) registered in \(configuration.redis) as \(configuration.signalingURL)"
        )
    }

    private var isStopped: Bool { lock.withLock { stopped } }

    /// Deregisters (SIGTERM): the registration and this node's room placements are removed at once,
    /// so the rooms' clients are placed again without waiting for a TTL.
    public func stop() {
        let rooms: [String] = lock.withLock {
            stopped = true
            return Array(owned)
        }
        summaryTask?.cancel()
        var commands: [[String]] = [
            ["DEL", nodeKey(escapedId: escapedNodeId)], ["SREM", "\(prefix):nodes", escapedNodeId],
        ]
        for room in rooms { commands.append(releaseCommand(room)) }
        _ = try? registration.pipelineSync(commands)
        log("cluster: node \(configuration.nodeId) deregistered")
    }

    // MARK: Registration

    private func refreshRegistration() {
        let (rooms, current) = lock.withLock { (Array(owned), summaries) }
        var record = NodeRecord(
            id: configuration.nodeId, signalingURL: configuration.signalingURL, httpURL: configuration.httpURL,
            mediaAddress: configuration.mediaAddress, rooms: current.count,
            participants: current.reduce(0) { $0 + $1.participantCount },
            producers: current.reduce(0) { $0 + $1.producerCount },
            consumers: current.reduce(0) { $0 + $1.consumerCount }, cpu: sampleCPU(),
            roomList: current.map {
                RoomLoad(
                    roomId: $0.roomId, participants: $0.participantCount, producers: $0.producerCount,
                    consumers: $0.consumerCount, audience: $0.localAudienceCount)
            }, startedAt: startedAt, updatedAt: Date().timeIntervalSince1970)
        if let edges = server?.edgeAudienceByRoom, !edges.isEmpty {
            record.edgeRooms = edges.sorted { $0.key < $1.key }.map {
                NodeRecord.EdgeLoad(roomId: $0.key, audience: $0.value)
            }
        }
        var commands: [[String]] = [
            [
                "SET", nodeKey(escapedId: escapedNodeId), RedisJSON.encode(record), "PX",
                String(Int(configuration.nodeTTL * 1000)),
            ],
            ["SADD", "\(prefix):nodes", escapedNodeId],
        ]
        for room in rooms {
            commands.append([
                "EVAL", Self.refreshScript, "4", roomKey(room), messagesKey(room), historyBytesKey(room), pinsKey(room),
                prefix, NameEscaping.escape(room), escapedNodeId, String(Int(configuration.roomTTL * 1000)),
                String(Self.stateTTLSeconds * 1000),
            ])
        }
        do {
            try registration.pipelineSync(commands)
            setRedis(up: true, nil)
        } catch {
            setRedis(up: false, error.description)
        }
    }

    private func sampleCPU() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let cpu =
            Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
            + Double(usage.ru_stime.tv_usec) / 1e6
        let wall = Date().timeIntervalSince1970
        return lock.withLock {
            if let last = lastCPU, wall > last.wall { cpuCores = (cpu - last.cpu) / (wall - last.wall) }
            lastCPU = (wall, cpu)
            return (cpuCores * 1000).rounded() / 1000
        }
    }

    private func setRedis(up: Bool, _ why: String?) {
        let changed: Bool = lock.withLock {
            defer { redisUp = up }
            return redisUp != up
        }
        guard changed else { return }
        log(
            up
                ? "cluster: Redis reachable again"
                : "cluster: Redis unreachable (\(why ?? "?")); running rooms go on, new rooms wait for it")
    }

    // MARK: RoomDirectory

    /// Places `roomId`: here, on the live node that holds it (``RoomLocation/peer(_:)``), or on the
    /// least loaded live node (one Lua script, so two nodes never both take a room); unavailable while
    /// Redis cannot be reached or no live node is valid.
    public func locate(roomId: String) async -> RoomLocation {
        do throws(RedisError) {
            // Only nodes whose registration parses and is plausible may be chosen: a record a hostile
            // or broken writer left in Redis is skipped, however few rooms it claims.
            let candidates = try await liveRecords().map { NameEscaping.escape($0.id) }
            let reply = try await redis.command(
                [
                    "EVAL", Self.placeScript, "1", roomKey(roomId), prefix, NameEscaping.escape(roomId),
                    String(Int(configuration.roomTTL * 1000)),
                ] + candidates)
            setRedis(up: true, nil)
            guard let owner = reply.string else { return .unavailable("no live node can take room '\(roomId)'") }
            if owner == escapedNodeId {
                lock.withLock { placements += 1 }
                return .here
            }
            guard let record = try await record(escapedId: owner) else {
                return .unavailable("the node that holds room '\(roomId)' (\(owner)) has no valid registration")
            }
            return .peer(ClusterPeer(nodeId: record.id, signalingURL: record.signalingURL, httpURL: record.httpURL))
        } catch {
            lock.withLock { placementWaits += 1 }
            setRedis(up: false, error.description)
            return .unavailable("rooms cannot be placed: \(error)")
        }
    }

    /// The signalling URLs of the live nodes (this node's alone until the first refresh).
    public var signalingURLs: [String] {
        lock.withLock { knownURLs.isEmpty ? [configuration.signalingURL] : knownURLs }
    }

    /// Counts `roomId` as owned here: its key is refreshed with the registration.
    public func roomOpened(_ roomId: String) {
        lock.withLock { _ = owned.insert(roomId) }
    }

    /// Releases `roomId` (if this node still holds it) and forgets its stored PubSub history and pins.
    public func roomClosed(_ roomId: String) {
        let stillRunning: Bool = lock.withLock {
            owned.remove(roomId)
            historyBytes[roomId] = nil
            return !stopped
        }
        guard stillRunning else { return }
        // A room that closes here (empty or ended) forgets its state, as on a single server.
        let commands = [
            releaseCommand(roomId), ["DEL", messagesKey(roomId), historyBytesKey(roomId), pinsKey(roomId)],
        ]
        Task { [redis] in _ = try? await redis.pipeline(commands) }
    }

    private func releaseCommand(_ roomId: String) -> [String] {
        ["EVAL", Self.releaseScript, "1", roomKey(roomId), prefix, NameEscaping.escape(roomId), escapedNodeId]
    }

    /// The rooms of the other live nodes, from their registrations (empty while Redis is unreachable).
    public func remoteRooms() async -> [RemoteRoomSummary] {
        guard let records = try? await liveRecords() else { return [] }
        return records.filter { $0.id != configuration.nodeId }.flatMap { record in
            record.roomList.map {
                RemoteRoomSummary(
                    roomId: $0.roomId, nodeId: record.id, participantCount: $0.participants,
                    producerCount: $0.producers,
                    consumerCount: $0.consumers)
            }
        }
    }

    /// The other live node that holds `roomId`, nil when it is held here, nowhere, or Redis is unreachable.
    public func owner(of roomId: String) async -> ClusterPeer? {
        guard let owner = try? await redis.command(["GET", roomKey(roomId)]).string, owner != escapedNodeId,
            let record = try? await record(escapedId: owner)
        else { return nil }
        return ClusterPeer(nodeId: record.id, signalingURL: record.signalingURL, httpURL: record.httpURL)
    }

    public func mediaAddress(ofNode nodeId: String) -> String? {
        lock.withLock { knownMediaAddresses[nodeId] }
    }

    public func audiencePlacement(roomId: String, share: Int) async -> AudiencePlacement? {
        guard let records = try? await liveRecords() else { return nil }
        return Self.placeAudience(roomId: roomId, share: share, here: configuration.nodeId, records: records)
    }

    /// Where an audience member of `roomId` who reached node `here` (already at its share) goes:
    /// the node carrying the room (its origin or an edge) with the least audience below `share`
    /// (ties: the smaller id), else the live node with the fewest participants that does not carry
    /// it yet (a new edge), else the origin. `here` is never chosen.
    public static func placeAudience(roomId: String, share: Int, here: String, records: [NodeRecord])
        -> AudiencePlacement
    {
        let others = records.filter { $0.id != here }
        let origin = others.first { r in r.roomList.contains { $0.roomId == roomId } }
        func peer(_ r: NodeRecord) -> ClusterPeer {
            ClusterPeer(nodeId: r.id, signalingURL: r.signalingURL, httpURL: r.httpURL)
        }
        let carriers = others.filter { $0.id == origin?.id || $0.audience(of: roomId) > 0 }
        if let best = carriers.filter({ $0.audience(of: roomId) < share }).min(by: {
            ($0.audience(of: roomId), $0.id) < ($1.audience(of: roomId), $1.id)
        }) {
            return best.id == origin?.id ? .origin : .edge(peer(best))
        }
        let fresh = others.filter { r in !carriers.contains { $0.id == r.id } }
        if let best = fresh.min(by: { ($0.participants, $0.id) < ($1.participants, $1.id) }) {
            return .edge(peer(best))
        }
        return .origin
    }

    /// The body of `GET /cluster`: the live nodes with their load (only `roomScope`'s room for a token
    /// scoped to one room), this node's id and whether Redis answers.
    public func status(roomScope: String?) async -> JSONValue {
        let records = (try? await liveRecords()) ?? []
        let nodes: [JSONValue] = records.map { r in
            var node: [String: JSONValue] = [
                "id": .string(r.id), "signalingURL": .string(r.signalingURL), "httpURL": .string(r.httpURL),
                "mediaAddress": .string(r.mediaAddress), "updatedAt": .number(r.updatedAt),
            ]
            guard let roomScope else {
                node["rooms"] = .number(Double(r.rooms))
                node["participants"] = .number(Double(r.participants))
                node["producers"] = .number(Double(r.producers))
                node["consumers"] = .number(Double(r.consumers))
                node["cpu"] = .number(r.cpu)
                node["roomIds"] = .array(r.roomList.map { .string($0.roomId) })
                return .object(node)
            }
            // A token for one room learns where that room is and nothing about the others.
            node["roomIds"] = .array(r.roomList.filter { $0.roomId == roomScope }.map { .string($0.roomId) })
            return .object(node)
        }
        var answer: [String: JSONValue] = [
            "node": .string(configuration.nodeId), "redisReachable": .bool(lock.withLock { redisUp }),
            "nodes": .array(nodes), "rooms": Self.roomLayout(records, roomScope: roomScope),
        ]
        if let roomScope {
            answer["roomScope"] = .string(roomScope)
        } else {
            answer["redis"] = .string(configuration.redis.description)
        }
        return .object(answer)
    }

    /// Per room: its origin, its participants (all of them, edges' members and the stage included),
    /// its edges and the audience whose media each node serves (`/cluster` "rooms").
    static func roomLayout(_ records: [NodeRecord], roomScope: String?) -> JSONValue {
        var rooms: [String: [String: JSONValue]] = [:]
        for r in records {
            for load in r.roomList where roomScope == nil || load.roomId == roomScope {
                var room = rooms[load.roomId] ?? [:]
                room["origin"] = .string(r.id)
                // Everyone in the room, wherever their media is served: the origin has them all.
                room["participants"] = .number(Double(load.participants))
                var audience = room["audience"]?.objectValue ?? [:]
                audience[r.id] = .number(Double(load.audience ?? 0))
                room["audience"] = .object(audience)
                rooms[load.roomId] = room
            }
            for edge in r.edgeRooms ?? [] where roomScope == nil || edge.roomId == roomScope {
                var room = rooms[edge.roomId] ?? [:]
                room["edges"] = .array((room["edges"]?.arrayValue ?? []) + [.string(r.id)])
                var audience = room["audience"]?.objectValue ?? [:]
                audience[r.id] = .number(Double(edge.audience))
                room["audience"] = .object(audience)
                rooms[edge.roomId] = room
            }
        }
        return .object(
            rooms.mapValues { room in
                var room = room
                if room["edges"] == nil { room["edges"] = [] }
                if room["origin"] == nil { room["origin"] = nil }
                return .object(room)
            })
    }

    /// The node's Prometheus metrics (`understudy_cluster_*`), appended to the server's `/metrics`.
    public func metricsText() -> String {
        let (up, ownedCount, placed, waits, invalid, stored): (Bool, Int, Int, Int, Int, Int) = lock.withLock {
            (redisUp, owned.count, placements, placementWaits, invalidRegistrations, historyBytes.values.reduce(0, +))
        }
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: Int) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        metric(
            "understudy_cluster_redis_up", "gauge", "1 while Redis answers this node, 0 while it does not.", up ? 1 : 0)
        metric("understudy_cluster_rooms_owned", "gauge", "Rooms placed on this node.", ownedCount)
        metric("understudy_cluster_placements_total", "counter", "Rooms placed on this node by its own joins.", placed)
        metric(
            "understudy_cluster_placement_waits_total", "counter",
            "Placement attempts that failed because Redis was unreachable (the join waited and retried).", waits)
        metric(
            "understudy_cluster_invalid_registrations_total", "counter",
            "Node registrations read from Redis that did not parse or were implausible (skipped, never chosen).",
            invalid)
        metric(
            "understudy_cluster_history_bytes", "gauge",
            "Bytes of persisted PubSub history this node's rooms hold in Redis.", stored)
        metric(
            "understudy_cluster_edge_members", "gauge",
            "Audience members of other nodes' rooms whose media this node serves as an edge (--edge-audience).",
            server?.edgeAudienceByRoom.values.reduce(0, +) ?? 0)
        metric(
            "understudy_cluster_edge_members_total", "counter",
            "Audience members ever served as an edge (--edge-audience).", server?.edgeMembersServed ?? 0)
        return out
    }

    // MARK: Room state that outlives a node

    private func messagesKey(_ roomId: String) -> String { "\(roomKey(roomId)):pubsub" }
    private func historyBytesKey(_ roomId: String) -> String { "\(roomKey(roomId)):pubsub-bytes" }
    private func pinsKey(_ roomId: String) -> String { "\(roomKey(roomId)):pins" }

    /// The limits the server applies to its own history, applied again to what Redis keeps.
    private var historyLimits: (perRoom: Int, total: Int) {
        let c = server?.configuration ?? RoomServerConfiguration()
        return (c.maxPubSubHistoryBytesPerRoom, c.maxPubSubHistoryBytesTotal)
    }

    /// Stores a persisted PubSub message of `roomId` in Redis, within the server's history limits,
    /// so that the room's next owner restores it; `stored` runs once Redis answered (or failed).
    public func saveMessage(
        roomId: String, message: JSONValue, topicLimit: Int, stored: @escaping @Sendable () -> Void
    ) {
        // One list per room, oldest first. Redis keeps what the server would: at most the room's
        // byte limit, and over all of this node's rooms at most the server's total (the writing
        // room gives up its oldest messages first, so one room cannot push out another's).
        let limits = historyLimits
        let others = lock.withLock { historyBytes.filter { $0.key != roomId }.values.reduce(0, +) }
        let cap = max(0, min(limits.perRoom, limits.total - others))
        let commands: [[String]] = [
            [
                "EVAL", Self.storeScript, "2", messagesKey(roomId), historyBytesKey(roomId), message.jsonString,
                String(Self.storedMessagesPerRoom), String(cap), String(Self.stateTTLSeconds),
            ]
        ]
        Task { [redis, weak self] in
            if let replies = try? await redis.pipeline(commands), let bytes = replies.first?.int.map({ Int($0) }) {
                self?.lock.withLock { if self?.owned.contains(roomId) == true { self?.historyBytes[roomId] = bytes } }
            }
            stored()
        }
    }

    /// Stores `roomId`'s pins (deletes them when empty); `stored` runs once Redis answered.
    public func savePins(roomId: String, pins: [JSONValue], stored: @escaping @Sendable () -> Void) {
        let command: [String] =
            pins.isEmpty
            ? ["DEL", pinsKey(roomId)]
            : ["SET", pinsKey(roomId), JSONValue.array(pins).jsonString, "EX", String(Self.stateTTLSeconds)]
        Task { [redis] in
            _ = try? await redis.command(command)
            stored()
        }
    }

    /// The PubSub history and pins a previous owner of `roomId` left in Redis, nil when none or
    /// Redis is unreachable.
    public func restore(roomId: String) async -> RoomStateSnapshot? {
        guard
            let replies = try? await redis.pipeline([
                ["LRANGE", messagesKey(roomId), "0", "-1"], ["GET", pinsKey(roomId)],
            ]), replies.count == 2
        else { return nil }
        let texts = (replies[0].array ?? []).compactMap(\.string)
        let bytes = texts.reduce(0) { $0 + $1.utf8.count }
        lock.withLock { if bytes > 0 { historyBytes[roomId] = bytes } }
        let messages = texts.compactMap(RoomStateSnapshot.storedMessage)
        let pins = replies[1].string.flatMap { try? JSONValue.parse(Array($0.utf8)) }?.arrayValue ?? []
        guard !messages.isEmpty || !pins.isEmpty else { return nil }
        log("cluster: room \(roomId) restored here: \(messages.count) PubSub message(s), \(pins.count) pin(s)")
        return RoomStateSnapshot(messages: messages, pins: pins)
    }

    /// Persisted messages kept in Redis per room (the newest), whatever their size.
    static let storedMessagesPerRoom = 2000

    /// A room's state in Redis outlives its owner's last refresh by this much: enough for a failover
    /// (seconds) and for Redis outages of a few minutes; every owner refresh renews it, and a room that
    /// closed normally drops it at once.
    static let stateTTLSeconds = 600

    // MARK: Reading the registry

    /// Registrations of the live nodes, sorted by id. A registration that does not parse or is
    /// implausible (``NodeRecord/parse(_:id:now:)``) is skipped and counted.
    public func liveRecords() async throws(RedisError) -> [NodeRecord] {
        let members = try await redis.command(["SMEMBERS", "\(prefix):nodes"]).array?.compactMap(\.string) ?? []
        let ids = members.sorted()
        guard !ids.isEmpty else { return [] }
        let values = try await redis.command(["MGET"] + ids.map { nodeKey(escapedId: $0) }).array ?? []
        var out: [NodeRecord] = []
        for (id, value) in zip(ids, values) {
            guard let text = value.string else { continue }  // expired: the placement script drops it
            if let record = parseRecord(text, escapedId: id) { out.append(record) }
        }
        return out
    }

    private func record(escapedId id: String) async throws(RedisError) -> NodeRecord? {
        guard let text = try await redis.command(["GET", nodeKey(escapedId: id)]).string else { return nil }
        return parseRecord(text, escapedId: id)
    }

    private func parseRecord(_ text: String, escapedId: String) -> NodeRecord? {
        do throws(NodeRecord.Invalid) {
            guard let id = NameEscaping.unescape(escapedId) else {
                throw NodeRecord.Invalid(description: "node id not in the escaping")
            }
            return try NodeRecord.parse(Array(text.utf8), id: id, now: Date().timeIntervalSince1970)
        } catch {
            let first: Bool = lock.withLock {
                invalidRegistrations += 1
                guard reportedInvalid.count < 100 else { return false }
                return reportedInvalid.insert(escapedId).inserted
            }
            if first { log("cluster: skipping the registration of node '\(escapedId.prefix(64))': \(error)") }
            return nil
        }
    }

    // MARK: Scripts (each runs atomically in Redis)

    /// Returns the room's owner, placing the room first when it has no live owner: on the live
    /// candidate with the fewest rooms (ties: the smallest id). The candidates are the nodes whose
    /// registrations the caller parsed and found plausible; a member of `…:nodes` that is not one is
    /// never chosen. KEYS[1] room key; ARGV prefix, room, TTL (ms), candidates… (escaped ids).
    static let placeScript = """
        local prefix, room, ttl = ARGV[1], ARGV[2], ARGV[3]
        local owner = redis.call('GET', KEYS[1])
        if owner then
          if redis.call('EXISTS', prefix .. ':node:' .. owner) == 1 then return owner end
          redis.call('SREM', prefix .. ':node-rooms:' .. owner, room)
        end
        local candidate = {}
        for i = 4, #ARGV do candidate[ARGV[i]] = true end
        local nodes = redis.call('SMEMBERS', prefix .. ':nodes')
        table.sort(nodes)
        local best, fewest = nil, nil
        for _, node in ipairs(nodes) do
          if redis.call('EXISTS', prefix .. ':node:' .. node) == 1 then
            if candidate[node] then
              local count = redis.call('SCARD', prefix .. ':node-rooms:' .. node)
              if best == nil or count < fewest then best, fewest = node, count end
            end
          else
            redis.call('SREM', prefix .. ':nodes', node)
            redis.call('DEL', prefix .. ':node-rooms:' .. node)
          end
        end
        if best == nil then return false end
        redis.call('SET', KEYS[1], best, 'PX', ttl)
        redis.call('SADD', prefix .. ':node-rooms:' .. best, room)
        return best
        """

    /// Keeps a room owned by this node alive, and its state (KEYS[2–4]: history, its byte count,
    /// pins) for ARGV[5] ms more; claims it when nobody owns it (a room opened here without a
    /// placement). Returns 0 when another node owns it. ARGV prefix, room, node, TTL (ms), state TTL (ms).
    static let refreshScript = """
        local prefix, room, node, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
        local owner = redis.call('GET', KEYS[1])
        if owner == node then
          redis.call('PEXPIRE', KEYS[1], ttl)
          for i = 2, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[5]) end
          return 1
        end
        if not owner then
          redis.call('SET', KEYS[1], node, 'PX', ttl)
          redis.call('SADD', prefix .. ':node-rooms:' .. node, room)
          return 1
        end
        return 0
        """

    /// Appends a persisted message to a room's history and trims the oldest until at most ARGV[2]
    /// messages and ARGV[3] bytes remain (the newest message always stays: the server refused any
    /// larger than its room limit). KEYS[1] the list, KEYS[2] its byte count; ARGV message, messages,
    /// bytes, TTL (s). Returns the bytes kept.
    static let storeScript = """
        local n = redis.call('RPUSH', KEYS[1], ARGV[1])
        local bytes
        if n == 1 then
          bytes = #ARGV[1]
          redis.call('SET', KEYS[2], bytes)
        else
          bytes = redis.call('INCRBY', KEYS[2], #ARGV[1])
        end
        local most, cap = tonumber(ARGV[2]), tonumber(ARGV[3])
        while n > 1 and (n > most or bytes > cap) do
          local old = redis.call('LPOP', KEYS[1])
          bytes = redis.call('DECRBY', KEYS[2], #old)
          n = n - 1
        end
        redis.call('EXPIRE', KEYS[1], ARGV[4])
        redis.call('EXPIRE', KEYS[2], ARGV[4])
        return bytes
        """

    /// Releases a room this node owns. ARGV prefix, room, node.
    static let releaseScript = """
        local prefix, room, node = ARGV[1], ARGV[2], ARGV[3]
        if redis.call('GET', KEYS[1]) == node then redis.call('DEL', KEYS[1]) end
        redis.call('SREM', prefix .. ':node-rooms:' .. node, room)
        return 1
        """
}
