import Cluster
import Foundation
import Redis
import RoomProtocol
import RoomServer
import Signaling
import TestSupport
import Testing

/// One real room server as a cluster node over a real `redis-server`: its own, or one that several
/// nodes share (`sharing`; the first node owns it and stops it).
private final class Node {
    let redis: LocalRedisServer
    private let ownsRedis: Bool
    let server: RoomServer
    let node: ClusterNode
    let client: RedisClient
    let lines = LockedLines()

    init(
        _ id: String = "n1", sharing shared: LocalRedisServer? = nil,
        _ tweak: (inout RoomServerConfiguration) -> Void = { _ in }
    ) throws {
        redis = try shared ?? LocalRedisServer()
        ownsRedis = shared == nil
        server = try startTestServer(secret: "cluster-test-secret", tweak)
        let url = try RedisURL(parsing: redis.url)
        node = ClusterNode(
            configuration: ClusterNode.Configuration(
                redis: url, nodeId: id, signalingURL: server.signalingURL,
                httpURL: "http://127.0.0.1:\(server.httpPort)", mediaAddress: "127.0.0.1"),
            log: { [lines] in lines.append($0) })
        try node.attach(to: server)
        client = RedisClient(url: url)
    }

    func stop() {
        node.stop()
        server.stop()
        if ownsRedis { redis.stop() }
    }

    var peer: ClusterPeer {
        ClusterPeer(
            nodeId: node.configuration.nodeId, signalingURL: server.signalingURL, httpURL: node.configuration.httpURL)
    }

    func save(_ room: String, _ message: JSONValue) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            node.saveMessage(roomId: room, message: message, topicLimit: 200) { c.resume() }
        }
    }

    func savePins(_ room: String, _ pins: [JSONValue]) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            node.savePins(roomId: room, pins: pins) { c.resume() }
        }
    }

    /// Bytes of the persisted history Redis holds for `room`.
    func storedBytes(_ room: String) async throws -> Int {
        let key = "understudy:cluster:room:\(NameEscaping.escape(room)):pubsub"
        let items = try await client.command(["LRANGE", key, "0", "-1"]).array ?? []
        return items.compactMap(\.string).reduce(0) { $0 + $1.utf8.count }
    }

    func http(_ path: String, bearer: String) async throws -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Authorization", "Bearer \(bearer)")
        return try await HTTPClient.request(
            "GET", try HTTPURL("http://127.0.0.1:\(server.httpPort)\(path)"), headers: headers, body: [])
    }

    func token(room: String?) -> String {
        RoomToken.sign(
            RoomToken(apikey: "test", permissions: ["allow_join", "allow_mod"], roomId: room, lifetime: 600),
            secret: server.secret)
    }
}

final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    func contains(_ part: String) -> Bool { lock.withLock { lines.contains { $0.contains(part) } } }
}

private func message(_ text: String) -> JSONValue { ["topic": "chat", "message": .string(text)] }

/// Polls `condition` (an async read of the cluster) until it holds, for at most `seconds`.
private func eventually(_ what: String, seconds: Double = 30, _ condition: () async -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while !(await condition()) {
        if Date() > deadline { throw WaitTimeout(what: what) }
        try await Task.sleep(nanoseconds: 50_000_000)
    }
}

/// A loopback port with nothing listening: a Redis URL that cannot be reached.
private func deadRedisURL(password: String? = nil) throws -> RedisURL {
    let redis = try LocalRedisServer()
    redis.stop()
    return RedisURL(host: "127.0.0.1", port: redis.port, password: password)
}

/// A registration for node `id` as a live node writes it.
private func registration(_ id: String, rooms: [String]) -> NodeRecord {
    let now = Date().timeIntervalSince1970
    return NodeRecord(
        id: id, signalingURL: "ws://127.0.0.1:1/v1/rtc", httpURL: "http://127.0.0.1:1", mediaAddress: "127.0.0.1",
        rooms: rooms.count, participants: rooms.count, producers: 0, consumers: 0, cpu: 0.5,
        roomList: rooms.map { .init(roomId: $0, participants: 1, producers: 0, consumers: 0) }, startedAt: now,
        updatedAt: now)
}

@Suite("Cluster node over a real Redis", .serialized)
struct ClusterNodeTests {
    /// A room whose id ends like another room's state key (`v:pubsub`, `v:pins`) keeps state of its
    /// own: ids are escaped in keys, so no id spells another room's key.
    @Test func roomIdsNeverSpellAnotherRoomsKey() async throws {
        let n = try Node()
        defer { n.stop() }
        n.node.roomOpened("v")
        await n.save("v", message("first"))
        await n.savePins("v", [["id": "pin-of-v"]])
        // Rooms whose ids end like v's state keys open and keep their own state.
        #expect(await n.node.locate(roomId: "v:pubsub") == .here)
        #expect(await n.node.locate(roomId: "v:pins") == .here)
        n.node.roomOpened("v:pubsub")
        n.node.roomOpened("v:pins")
        await n.save("v:pubsub", message("other room"))
        await n.savePins("v:pins", [["id": "pin-of-v:pins"]])
        await n.save("v", message("second"))
        let snapshot = try #require(await n.node.restore(roomId: "v"))
        #expect(snapshot.messages.map { $0["message"]?.stringValue } == ["first", "second"])
        #expect(snapshot.pins == [["id": "pin-of-v"]])
        let other = try #require(await n.node.restore(roomId: "v:pins"))
        #expect(other.pins == [["id": "pin-of-v:pins"]])
        // Room v's keys are v's alone: its history is still a list, the other rooms have escaped keys.
        #expect(try await n.client.command(["TYPE", "understudy:cluster:room:v:pubsub"]) == .status("list"))
        #expect(try await n.client.command(["GET", "understudy:cluster:room:v_3Apubsub"]).string == "n1")
        let keys = try await n.client.command(["KEYS", "understudy:cluster:*"]).array?.compactMap(\.string) ?? []
        #expect(keys.contains("understudy:cluster:room:v_3Apins:pins"))
    }

    /// Redis keeps at most the server's per-room history bytes, over all rooms at most the server's
    /// total, and only for minutes after the owner's last refresh: the limits of a single server.
    @Test func persistedHistoryInRedisHasTheServersLimits() async throws {
        let n = try Node {
            $0.maxPubSubHistoryBytesPerRoom = 64 * 1024
            $0.maxPubSubHistoryBytesTotal = 96 * 1024
        }
        defer { n.stop() }
        let big = String(repeating: "x", count: 4000)
        n.node.roomOpened("a")
        n.node.roomOpened("b")
        for i in 0..<40 { await n.save("a", message("\(i) \(big)")) }
        let a = try await n.storedBytes("a")
        #expect(a <= 64 * 1024 && a > 56 * 1024, "room a holds \(a) bytes")
        // The newest survive, the oldest went first.
        let kept = try #require(await n.node.restore(roomId: "a")).messages
        #expect(kept.last?["message"]?.stringValue?.hasPrefix("39 ") == true)
        #expect(kept.first?["message"]?.stringValue?.hasPrefix("0 ") == false)
        for i in 0..<40 { await n.save("b", message("\(i) \(big)")) }
        let b = try await n.storedBytes("b")
        #expect(try await n.storedBytes("a") == a, "room b's writes must not trim room a")
        #expect(a + b <= 96 * 1024 + 4100, "total \(a + b) bytes")
        #expect(n.node.metricsText().contains("understudy_cluster_history_bytes \(a + b)\n"))
        let ttl = try await n.client.command(["TTL", "understudy:cluster:room:a:pubsub"]).int ?? -1
        #expect(ttl > 0 && ttl <= 600)
    }

    /// A registration that does not parse or is implausible is skipped and counted, never chosen,
    /// however few rooms it claims (it would otherwise win every placement).
    @Test func anUndecodableRegistrationIsNeverChosen() async throws {
        let n = try Node()
        defer { n.stop() }
        _ = try await n.client.pipeline([
            ["SADD", "understudy:cluster:nodes", "a-hostile", "a-stale", "a_2"],
            ["SET", "understudy:cluster:node:a-hostile", "{not json", "PX", "60000"],
            [
                "SET", "understudy:cluster:node:a-stale",
                #"{"id":"a-stale","signalingURL":"ws://127.0.0.1:1/v1/rtc","httpURL":"http://127.0.0.1:1","mediaAddress":"127.0.0.1","rooms":0,"participants":0,"producers":0,"consumers":0,"cpu":0,"roomList":[],"startedAt":1,"updatedAt":1}"#,
                "PX", "60000",
            ],
            ["SET", "understudy:cluster:node:a_2", "{}", "PX", "60000"],
        ])
        for room in ["r1", "r2", "r3"] {
            #expect(await n.node.locate(roomId: room) == .here)
        }
        let records = try await n.node.liveRecords()
        #expect(records.map(\.id) == ["n1"])
        let metrics = n.node.metricsText()
        #expect(!metrics.contains("understudy_cluster_invalid_registrations_total 0\n"))
        #expect(n.lines.contains("skipping the registration of node 'a-hostile'"))
    }

    /// `GET /cluster` with a moderator token for one room shows that room only, not the cluster's
    /// other room ids or loads.
    @Test func aRoomScopedTokenSeesOnlyItsRoom() async throws {
        let n = try Node()
        defer { n.stop() }
        let now = Date().timeIntervalSince1970
        let other = NodeRecord(
            id: "n2", signalingURL: "ws://127.0.0.1:1/v1/rtc", httpURL: "http://127.0.0.1:1", mediaAddress: "127.0.0.1",
            rooms: 2, participants: 3, producers: 0, consumers: 0, cpu: 0.5,
            roomList: [
                .init(roomId: "secret-board", participants: 2, producers: 0, consumers: 0),
                .init(roomId: "mine", participants: 1, producers: 0, consumers: 0),
            ], startedAt: now, updatedAt: now)
        _ = try await n.client.pipeline([
            ["SADD", "understudy:cluster:nodes", "n2"],
            ["SET", "understudy:cluster:node:n2", RedisJSON.encode(other), "PX", "60000"],
        ])
        let admin = try await n.http("/cluster", bearer: n.token(room: nil))
        #expect(admin.status == 200)
        #expect(String(decoding: admin.body, as: UTF8.self).contains("secret-board"))
        let scoped = try await n.http("/cluster", bearer: n.token(room: "mine"))
        #expect(scoped.status == 200)
        let body = String(decoding: scoped.body, as: UTF8.self)
        #expect(!body.contains("secret-board"), "\(body)")
        let nodes = try JSONValue.parse(scoped.body)["nodes"]?.arrayValue ?? []
        #expect(nodes.compactMap { $0["id"]?.stringValue } == ["n1", "n2"])
        #expect(nodes.last?["roomIds"] == ["mine"])
        #expect(nodes.last?["participants"] == nil)
    }

    /// A new room goes to the live node with the fewest rooms (ties: the smallest id), and every node
    /// agrees on its owner: the owner answers `.here`, the others name the owner as a peer.
    @Test func aNewRoomGoesToTheLeastLoadedNodeAndEveryNodeAgreesOnItsOwner() async throws {
        let n1 = try Node("n1")
        defer { n1.stop() }
        let n2 = try Node("n2", sharing: n1.redis)
        defer { n2.stop() }
        #expect(await n1.node.locate(roomId: "first") == .here)
        // n1 owns one room now, n2 none: the next room goes to n2 whoever asks.
        #expect(await n1.node.locate(roomId: "second") == .peer(n2.peer))
        #expect(await n2.node.locate(roomId: "second") == .here)
        #expect(await n2.node.locate(roomId: "first") == .peer(n1.peer))
        #expect(await n2.node.owner(of: "first") == n1.peer)
        #expect(await n1.node.owner(of: "first") == nil, "the owner is not a peer of itself")
        #expect(await n1.node.owner(of: "never-placed") == nil)
        #expect(try await n1.node.liveRecords().map(\.id) == ["n1", "n2"])
        #expect(n1.node.metricsText().contains("understudy_cluster_placements_total 1\n"))
    }

    /// `stop()` removes the registration and releases the node's rooms at once, so another node takes
    /// them without waiting for a TTL.
    @Test func aStoppedNodeReleasesItsRoomsAtOnce() async throws {
        let n1 = try Node("n1")
        defer { n1.stop() }
        let n2 = try Node("n2", sharing: n1.redis)
        defer { n2.stop() }
        #expect(await n1.node.locate(roomId: "kept") == .here)
        n1.node.roomOpened("kept")
        #expect(await n2.node.locate(roomId: "kept") == .peer(n1.peer))
        n1.node.stop()
        #expect(try await n2.node.liveRecords().map(\.id) == ["n2"])
        #expect(await n2.node.locate(roomId: "kept") == .here)
        #expect(n1.lines.contains("deregistered"))
    }

    /// A room that closes on its owner gives up its placement and forgets its history and pins, as a
    /// room on a single server does.
    @Test func aClosedRoomIsReleasedAndForgetsItsState() async throws {
        let n = try Node()
        defer { n.stop() }
        #expect(await n.node.locate(roomId: "closing") == .here)
        n.node.roomOpened("closing")
        await n.save("closing", message("kept until the room closes"))
        await n.savePins("closing", [["id": "pin"]])
        #expect(await n.node.restore(roomId: "closing") != nil)
        n.node.roomClosed("closing")
        try await eventually("the closed room's keys are gone") {
            let keys = (try? await n.client.command(["KEYS", "understudy:cluster:room:closing*"]).array) ?? [.null]
            return keys.isEmpty
        }
        #expect(await n.node.restore(roomId: "closing") == nil)
        #expect(n.node.metricsText().contains("understudy_cluster_rooms_owned 0\n"))
    }

    /// `remoteRooms()` lists the rooms other live nodes report, never this node's own, and
    /// `signalingURLs` names this node first, then the other live nodes.
    @Test func remoteRoomsAndSignalingURLsComeFromTheOtherNodesRegistrations() async throws {
        let n = try Node()
        defer { n.stop() }
        _ = try await n.client.pipeline([
            ["SADD", "understudy:cluster:nodes", "n2"],
            [
                "SET", "understudy:cluster:node:n2", RedisJSON.encode(registration("n2", rooms: ["a", "b"])), "PX",
                "60000",
            ],
        ])
        let remote = await n.node.remoteRooms()
        #expect(remote.map(\.roomId).sorted() == ["a", "b"])
        #expect(remote.allSatisfy { $0.nodeId == "n2" && $0.participantCount == 1 })
        try await waitUntil("the other node's URL is known") {
            n.node.signalingURLs == [n.server.signalingURL, "ws://127.0.0.1:1/v1/rtc"]
        }
    }

    /// A member that joined while the node knew only itself hears of a node that registers later
    /// (`clusterNodes` again), so that it can reconnect through it when its own node dies.
    @Test func joinedMembersHearOfANodeThatRegistersLater() async throws {
        let n = try Node()
        defer { n.stop() }
        let client = try await RoomProtocolClient.connect(
            url: n.server.signalingURL + "?token=" + n.token(room: "late"), timeout: 10)
        defer { client.close() }
        let heard = LockedLines()
        client.setNotificationHandler { method, data in
            guard method == .clusterNodes else { return }
            heard.append((data["signalingUrls"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: " "))
        }
        let joined = await client.request(
            .join, ["roomId": "late", "participantId": "m", "mode": "SIGNALLING_ONLY"], timeout: 10)
        guard case .success = joined else {
            Issue.record("join failed: \(joined)")
            return
        }
        try await waitUntil("the list at the join") { heard.contains(n.server.signalingURL) }
        #expect(!heard.contains("ws://127.0.0.1:1/v1/rtc"))
        _ = try await n.client.pipeline([
            ["SADD", "understudy:cluster:nodes", "n2"],
            ["SET", "understudy:cluster:node:n2", RedisJSON.encode(registration("n2", rooms: [])), "PX", "60000"],
        ])
        try await waitUntil("the new node's URL reaches the member") { heard.contains("ws://127.0.0.1:1/v1/rtc") }
    }

    /// While Redis is down a placement is `.unavailable` (the join waits and retries) and counted, the
    /// node says so once in its log and metrics, and placements resume when Redis is back.
    @Test func placementsWaitWhileRedisIsDownAndResumeAfterwards() async throws {
        let n = try Node()
        defer { n.stop() }
        n.redis.stop()
        guard case .unavailable = await n.node.locate(roomId: "waits") else {
            Issue.record("a placement succeeded without Redis")
            return
        }
        let down = n.node.metricsText()
        #expect(down.contains("understudy_cluster_redis_up 0\n"))
        #expect(down.contains("understudy_cluster_placement_waits_total 1\n"))
        #expect(n.lines.contains("Redis unreachable"))
        try n.redis.start()
        // The restarted Redis is empty: the node's next heartbeat registers it again.
        try await eventually("the room is placed once Redis is back") {
            await n.node.locate(roomId: "waits") == .here
        }
        #expect(n.node.metricsText().contains("understudy_cluster_redis_up 1\n"))
        #expect(n.lines.contains("Redis reachable again"))
    }

    /// `attach` throws when Redis cannot be reached at all, and the server is not given a directory.
    @Test func attachingWithoutRedisThrowsAndLeavesTheServerAlone() async throws {
        let server = try startTestServer()
        defer { server.stop() }
        let node = ClusterNode(
            configuration: ClusterNode.Configuration(
                redis: try deadRedisURL(), nodeId: "lonely", signalingURL: server.signalingURL,
                httpURL: "http://127.0.0.1:\(server.httpPort)", mediaAddress: "127.0.0.1"),
            log: { _ in })
        #expect(throws: RedisError.self) { try node.attach(to: server) }
        #expect(server.directory == nil)
    }

    /// The cluster status names its Redis with the password masked.
    @Test func theStatusNeverShowsTheRedisPassword() async throws {
        let node = ClusterNode(
            configuration: ClusterNode.Configuration(
                redis: try deadRedisURL(password: "s3cret"), nodeId: "n1", signalingURL: "ws://127.0.0.1:1/v1/rtc",
                httpURL: "http://127.0.0.1:1", mediaAddress: "127.0.0.1"),
            log: { _ in })
        let status = await node.status(roomScope: nil)
        let redis = try #require(status["redis"]?.stringValue)
        #expect(redis.hasPrefix("redis://:***@127.0.0.1:"))
        #expect(!status.jsonString.contains("s3cret"))
        #expect(status["nodes"] == [])
    }
}
