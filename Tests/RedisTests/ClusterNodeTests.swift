import Cluster
import Foundation
import Redis
import RoomProtocol
import RoomServer
import Signaling
import TestSupport
import Testing

/// One real room server as a cluster node over a real `redis-server` (issue 31, items 3, 10, 12, 13).
private final class Node {
    let redis: LocalRedisServer
    let server: RoomServer
    let node: ClusterNode
    let client: RedisClient
    let lines = LockedLines()

    init(_ tweak: (inout RoomServerConfiguration) -> Void = { _ in }) throws {
        redis = try LocalRedisServer()
        server = try startTestServer(secret: "cluster-test-secret", tweak)
        let url = try RedisURL(parsing: redis.url)
        node = ClusterNode(
            configuration: ClusterNode.Configuration(
                redis: url, nodeId: "n1", signalingURL: server.signalingURL,
                httpURL: "http://127.0.0.1:\(server.httpPort)", mediaAddress: "127.0.0.1"),
            log: { [lines] in lines.append($0) })
        try node.attach(to: server)
        client = RedisClient(url: url)
    }

    func stop() {
        node.stop()
        server.stop()
        redis.stop()
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

@Suite("Cluster node over a real Redis: keys, history limits, registry trust", .serialized)
struct ClusterNodeTests {
    /// Item 3: room `v:pubsub` took room `v`'s history key, and `v:pins` overwrote `v`'s pins.
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

    /// Item 10: Redis kept 2000 messages per room whatever their size (32.8 MB for one room). It now
    /// keeps at most the server's per-room history bytes, over all rooms at most the server's total,
    /// and only for minutes after the owner's last refresh.
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

    /// Item 13: one undecodable registration had the fewest rooms and won every placement, so every
    /// new room's join failed with 3047. It is now skipped and counted.
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

    /// Item 12: a moderator token for one room saw every room id of the cluster in `GET /cluster`.
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
}
