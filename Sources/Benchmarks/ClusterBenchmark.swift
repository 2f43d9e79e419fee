import Cluster
import Foundation
import Redis
import RoomProtocol
import RoomServer
import Signaling
import Understudy

/// Cluster rows: `join()` → `onRoomJoined` through the node that owns the room (the anchor) and
/// through another node (the join is proxied there), and how evenly new rooms spread over the nodes.
/// Three in-process room servers share one throw-away `redis-server`.
public enum ClusterBenchmark {
    public struct Result: Sendable {
        public var ownerJoins: [Double]
        public var proxiedJoins: [Double]
        /// Rooms per node after the placements, by node id.
        public var roomsPerNode: [String: Int]
        public var roomsCreated: Int
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    public static func run(joins: Int, rooms: Int, progress: @escaping @Sendable (String) -> Void) async throws
        -> Result
    {
        let redis = try LocalRedisServer()
        defer { redis.stop() }
        let redisURL = try RedisURL(parsing: redis.url)
        var servers: [RoomServer] = []
        var nodes: [ClusterNode] = []
        defer {
            for node in nodes { node.stop() }
            for server in servers { server.stop() }
        }
        for i in 0..<3 {
            var configuration = RoomServerConfiguration()
            configuration.listenPort = 0
            configuration.udpPortLow = 0
            configuration.udpPortHigh = 0
            configuration.secret = "bench-secret"
            let server = RoomServer(configuration: configuration)
            try server.start()
            let reach = "127.0.0.1:\(server.httpPort)"
            let node = ClusterNode(
                configuration: .init(
                    redis: redisURL, nodeId: "bench-\(i)", signalingURL: "ws://\(reach)/v1/rtc",
                    httpURL: "http://\(reach)", mediaAddress: "127.0.0.1"), log: { _ in })
            try node.attach(to: server)
            servers.append(server)
            nodes.append(node)
        }
        func token(_ room: String) -> String {
            RoomToken.sign(
                RoomToken(
                    apikey: "bench", permissions: ["allow_join"], roomId: room, participantId: nil, lifetime: 3600),
                secret: "bench-secret")
        }
        func base(_ server: RoomServer) -> String { "ws://127.0.0.1:\(server.httpPort)" }

        /// Joins and returns the milliseconds to `onRoomJoined` (the room is left again by the caller).
        func join(_ room: String, via server: RoomServer, id: String) async throws -> (Double, Room) {
            let client = try Understudy.createRoom(
                roomId: room, token: token(room), participantName: id, participantId: id, micEnabled: false,
                camEnabled: false, mode: .RECV_ONLY, multiStream: false, autoConsume: false,
                signalingBaseUrl: base(server))
            let watch = JoinLatencyBenchmark.JoinWatch()
            client.addEventListener(watch)
            let start = DispatchTime.now().uptimeNanoseconds
            await client.join()
            let deadline = Date().addingTimeInterval(15)
            while true {
                let state = watch.state
                if let at = state.joinedAt { return (Double(at - start) / 1e6, client) }
                if state.left || Date() > deadline { throw Failure(description: "join of \(id) to \(room) failed") }
                try await Task.sleep(nanoseconds: 200_000)
            }
        }

        // The room lives on bench-0 (the first placement goes to the smallest id); a member stays so
        // that it is not closed between samples.
        let (_, keeper) = try await join("bench-cluster", via: servers[0], id: "keeper")
        var result = Result(ownerJoins: [], proxiedJoins: [], roomsPerNode: [:], roomsCreated: rooms)
        for i in -1..<joins {
            // Interleaved, so both see the same machine; one warm-up of each is dropped.
            let (owner, a) = try await join("bench-cluster", via: servers[0], id: "owner-\(i + 1)")
            await a.leave()
            let (proxied, b) = try await join("bench-cluster", via: servers[1 + (i + 1) % 2], id: "proxied-\(i + 1)")
            await b.leave()
            if i >= 0 {
                result.ownerJoins.append(owner)
                result.proxiedJoins.append(proxied)
            }
        }
        await keeper.leave()
        progress(
            String(
                format: "bench:   joins through the owner p50 %.2f ms, through another node p50 %.2f ms",
                JoinLatencyBenchmark.percentile(result.ownerJoins, 0.5),
                JoinLatencyBenchmark.percentile(result.proxiedJoins, 0.5)))

        // Balance: rooms created one after another through a random node stay within ±1 per node.
        var members: [Room] = []
        for r in 0..<rooms {
            let (_, member) = try await join("balance-\(r)", via: servers[Int.random(in: 0..<3)], id: "m\(r)")
            members.append(member)
        }
        for node in nodes { result.roomsPerNode[node.configuration.nodeId] = 0 }
        // Counted from the servers themselves (the records lag by up to a second).
        for (i, server) in servers.enumerated() {
            let here = await server.roomSummaries().filter { $0.roomId.hasPrefix("balance-") }.count
            result.roomsPerNode[nodes[i].configuration.nodeId] = here
        }
        for member in members { await member.leave() }
        return result
    }
}
