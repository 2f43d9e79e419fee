import Foundation
import Redis
import RoomServer
import Signaling

/// One room server of a cluster (LiveKit's multi-node model over Redis): it registers itself with
/// its URLs and load under a short TTL, places each new room on the least-loaded live node
/// (atomically, in one Lua script, so two nodes never both own a room), keeps the rooms it owns
/// alive in Redis, and releases them when they close. Any node accepts any client: a join for a
/// room held elsewhere is relayed to its owner by the ``RoomServer``.
///
/// Redis is never on the media path nor on the path of a running room's signalling: a Redis
/// outage delays only the placement of new rooms (docs/cluster.md).
public final class ClusterNode: RoomDirectory, @unchecked Sendable {
    public struct Configuration: Sendable {
        public var redis: RedisURL
        public var nodeId: String
        /// Where clients and relaying nodes reach this node: `ws://HOST:PORT/v1/rtc`.
        public var signalingURL: String
        /// The HTTP base for forwarded admin requests: `http://HOST:PORT`.
        public var httpURL: String
        public var mediaAddress: String
        /// Registration refresh period; the registration expires after ``nodeTTL`` without one.
        public var heartbeat: Double = 1
        public var nodeTTL: Double = 3
        /// A room key outlives its last refresh by this much (the owner's registration decides first).
        public var roomTTL: Double = 10
        public var keyPrefix = "understudy:cluster"

        public init(redis: RedisURL, nodeId: String, signalingURL: String, httpURL: String, mediaAddress: String) {
            self.redis = redis
            self.nodeId = nodeId
            self.signalingURL = signalingURL
            self.httpURL = httpURL
            self.mediaAddress = mediaAddress
        }
    }

    /// A node's registration, as stored in Redis and listed by `GET /cluster`.
    public struct NodeRecord: Codable, Sendable, Equatable {
        public var id: String
        public var signalingURL: String
        public var httpURL: String
        public var mediaAddress: String
        public var rooms: Int
        public var participants: Int
        public var producers: Int
        public var consumers: Int
        /// Process CPU over the last refresh period, in cores.
        public var cpu: Double
        public var roomList: [RoomLoad]
        public var startedAt: Double
        public var updatedAt: Double
    }

    public struct RoomLoad: Codable, Sendable, Equatable {
        public var roomId: String
        public var participants: Int
        public var producers: Int
        public var consumers: Int
    }

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
    private let startedAt = Date().timeIntervalSince1970

    public init(configuration: Configuration, log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.log = log
        redis = RedisClient(url: configuration.redis, label: "cluster")
        registration = RedisClient(url: configuration.redis, label: "cluster-registration")
    }

    // MARK: Keys

    private var prefix: String { configuration.keyPrefix }
    private func nodeKey(_ id: String) -> String { "\(prefix):node:\(id)" }
    private func roomKey(_ id: String) -> String { "\(prefix):room:\(id)" }

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
                    self.lock.withLock { self.knownURLs = urls }
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
            ["DEL", nodeKey(configuration.nodeId)], ["SREM", "\(prefix):nodes", configuration.nodeId],
        ]
        for room in rooms { commands.append(releaseCommand(room)) }
        _ = try? registration.pipelineSync(commands)
        log("cluster: node \(configuration.nodeId) deregistered")
    }

    // MARK: Registration

    private func refreshRegistration() {
        let (rooms, current) = lock.withLock { (Array(owned), summaries) }
        let record = NodeRecord(
            id: configuration.nodeId, signalingURL: configuration.signalingURL, httpURL: configuration.httpURL,
            mediaAddress: configuration.mediaAddress, rooms: current.count,
            participants: current.reduce(0) { $0 + $1.participantCount },
            producers: current.reduce(0) { $0 + $1.producerCount },
            consumers: current.reduce(0) { $0 + $1.consumerCount }, cpu: sampleCPU(),
            roomList: current.map {
                RoomLoad(
                    roomId: $0.roomId, participants: $0.participantCount, producers: $0.producerCount,
                    consumers: $0.consumerCount)
            }, startedAt: startedAt, updatedAt: Date().timeIntervalSince1970)
        var commands: [[String]] = [
            [
                "SET", nodeKey(configuration.nodeId), RedisJSON.encode(record), "PX",
                String(Int(configuration.nodeTTL * 1000)),
            ],
            ["SADD", "\(prefix):nodes", configuration.nodeId],
        ]
        for room in rooms {
            commands.append([
                "EVAL", Self.refreshScript, "1", roomKey(room), prefix, room, configuration.nodeId,
                String(Int(configuration.roomTTL * 1000)),
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

    public func locate(roomId: String) async -> RoomLocation {
        do throws(RedisError) {
            let reply = try await redis.command([
                "EVAL", Self.placeScript, "1", roomKey(roomId), prefix, roomId,
                String(Int(configuration.roomTTL * 1000)),
            ])
            setRedis(up: true, nil)
            guard let owner = reply.string else { return .unavailable("no live node can take room '\(roomId)'") }
            if owner == configuration.nodeId {
                lock.withLock { placements += 1 }
                return .here
            }
            guard let record = try await record(of: owner) else {
                return .unavailable("the node that holds room '\(roomId)' (\(owner)) has no registration")
            }
            return .peer(ClusterPeer(nodeId: owner, signalingURL: record.signalingURL, httpURL: record.httpURL))
        } catch {
            lock.withLock { placementWaits += 1 }
            setRedis(up: false, error.description)
            return .unavailable("rooms cannot be placed: \(error)")
        }
    }

    public var signalingURLs: [String] {
        lock.withLock { knownURLs.isEmpty ? [configuration.signalingURL] : knownURLs }
    }

    public func roomOpened(_ roomId: String) {
        lock.withLock { _ = owned.insert(roomId) }
    }

    public func roomClosed(_ roomId: String) {
        let stillRunning: Bool = lock.withLock {
            owned.remove(roomId)
            return !stopped
        }
        guard stillRunning else { return }
        // A room that closes here (empty or ended) forgets its state, as on a single server.
        let commands = [releaseCommand(roomId), ["DEL", messagesKey(roomId), pinsKey(roomId)]]
        Task { [redis] in _ = try? await redis.pipeline(commands) }
    }

    private func releaseCommand(_ roomId: String) -> [String] {
        ["EVAL", Self.releaseScript, "1", roomKey(roomId), prefix, roomId, configuration.nodeId]
    }

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

    public func owner(of roomId: String) async -> ClusterPeer? {
        guard let owner = try? await redis.command(["GET", roomKey(roomId)]).string, owner != configuration.nodeId,
            let record = try? await record(of: owner)
        else { return nil }
        return ClusterPeer(nodeId: owner, signalingURL: record.signalingURL, httpURL: record.httpURL)
    }

    public func status() async -> JSONValue {
        let records = (try? await liveRecords()) ?? []
        let nodes: [JSONValue] = records.map { r in
            [
                "id": .string(r.id), "signalingURL": .string(r.signalingURL), "httpURL": .string(r.httpURL),
                "mediaAddress": .string(r.mediaAddress), "rooms": .number(Double(r.rooms)),
                "participants": .number(Double(r.participants)), "producers": .number(Double(r.producers)),
                "consumers": .number(Double(r.consumers)), "cpu": .number(r.cpu),
                "roomIds": .array(r.roomList.map { .string($0.roomId) }), "updatedAt": .number(r.updatedAt),
            ]
        }
        return [
            "node": .string(configuration.nodeId), "redis": .string(configuration.redis.description),
            "redisReachable": .bool(lock.withLock { redisUp }), "nodes": .array(nodes),
        ]
    }

    public func metricsText() -> String {
        let (up, ownedCount, placed, waits): (Bool, Int, Int, Int) = lock.withLock {
            (redisUp, owned.count, placements, placementWaits)
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
        return out
    }

    // MARK: Room state that outlives a node

    private func messagesKey(_ roomId: String) -> String { "\(prefix):room:\(roomId):pubsub" }
    private func pinsKey(_ roomId: String) -> String { "\(prefix):room:\(roomId):pins" }

    public func saveMessage(
        roomId: String, message: JSONValue, topicLimit: Int, stored: @escaping @Sendable () -> Void
    ) {
        // One list per room, oldest first, trimmed; the room that restores it applies its own
        // limits (messages per topic, bytes per room) again.
        let cap = Self.storedMessagesPerRoom
        let commands: [[String]] = [
            ["RPUSH", messagesKey(roomId), message.jsonString], ["LTRIM", messagesKey(roomId), String(-cap), "-1"],
            ["EXPIRE", messagesKey(roomId), String(Self.stateTTLSeconds)],
        ]
        Task { [redis] in
            _ = try? await redis.pipeline(commands)
            stored()
        }
    }

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

    public func restore(roomId: String) async -> RoomStateSnapshot? {
        guard
            let replies = try? await redis.pipeline([
                ["LRANGE", messagesKey(roomId), "0", "-1"], ["GET", pinsKey(roomId)],
            ]), replies.count == 2
        else { return nil }
        let messages = (replies[0].array ?? []).compactMap {
            $0.string.flatMap(RoomStateSnapshot.storedMessage)
        }
        let pins = replies[1].string.flatMap { try? JSONValue.parse(Array($0.utf8)) }?.arrayValue ?? []
        guard !messages.isEmpty || !pins.isEmpty else { return nil }
        log("cluster: room \(roomId) restored here: \(messages.count) PubSub message(s), \(pins.count) pin(s)")
        return RoomStateSnapshot(messages: messages, pins: pins)
    }

    /// Persisted messages kept in Redis per room (the newest).
    static let storedMessagesPerRoom = 2000

    /// Kept while the room lives (every write renews it); a room that closed normally drops it.
    static let stateTTLSeconds = 24 * 3600

    // MARK: Reading the registry

    /// Registrations of the live nodes, sorted by id.
    public func liveRecords() async throws(RedisError) -> [NodeRecord] {
        let ids = try await redis.command(["SMEMBERS", "\(prefix):nodes"]).array?.compactMap(\.string) ?? []
        var out: [NodeRecord] = []
        for id in ids.sorted() {
            if let record = try await record(of: id) { out.append(record) }
        }
        return out
    }

    private func record(of id: String) async throws(RedisError) -> NodeRecord? {
        guard let text = try await redis.command(["GET", nodeKey(id)]).string else { return nil }
        return try? JSONDecoder().decode(NodeRecord.self, from: Data(text.utf8))
    }

    // MARK: Scripts (each runs atomically in Redis)

    /// Returns the room's owner, placing the room first when it has no live owner: on the live node
    /// with the fewest rooms (ties: the smallest id). KEYS[1] room key; ARGV prefix, room, TTL (ms).
    static let placeScript = """
        local prefix, room, ttl = ARGV[1], ARGV[2], ARGV[3]
        local owner = redis.call('GET', KEYS[1])
        if owner then
          if redis.call('EXISTS', prefix .. ':node:' .. owner) == 1 then return owner end
          redis.call('SREM', prefix .. ':node-rooms:' .. owner, room)
        end
        local nodes = redis.call('SMEMBERS', prefix .. ':nodes')
        table.sort(nodes)
        local best, fewest = nil, nil
        for _, node in ipairs(nodes) do
          if redis.call('EXISTS', prefix .. ':node:' .. node) == 1 then
            local count = redis.call('SCARD', prefix .. ':node-rooms:' .. node)
            if best == nil or count < fewest then best, fewest = node, count end
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

    /// Keeps a room owned by this node alive; claims it when nobody owns it (a room opened here
    /// without a placement). Returns 0 when another node owns it. ARGV prefix, room, node, TTL (ms).
    static let refreshScript = """
        local prefix, room, node, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
        local owner = redis.call('GET', KEYS[1])
        if owner == node then redis.call('PEXPIRE', KEYS[1], ttl) return 1 end
        if not owner then
          redis.call('SET', KEYS[1], node, 'PX', ttl)
          redis.call('SADD', prefix .. ':node-rooms:' .. node, room)
          return 1
        end
        return 0
        """

    /// Releases a room this node owns. ARGV prefix, room, node.
    static let releaseScript = """
        local prefix, room, node = ARGV[1], ARGV[2], ARGV[3]
        if redis.call('GET', KEYS[1]) == node then redis.call('DEL', KEYS[1]) end
        redis.call('SREM', prefix .. ':node-rooms:' .. node, room)
        return 1
        """
}
