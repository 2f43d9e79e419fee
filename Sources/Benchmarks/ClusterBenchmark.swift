import Cluster
import Foundation
import LoadGen
import RTC
import Redis
import RoomProtocol
import RoomServer
import SFU
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
        let cluster = try LocalCluster(count: 3, nodePrefix: "bench-")
        defer { cluster.stop() }
        let (servers, nodes) = (cluster.servers, cluster.nodes)
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

// MARK: - Origin and edge over a pipe

extension ClusterBenchmark {
    /// One SFU's share of a run: packets in and out and its loop thread's CPU.
    public struct LoopShare: Sendable {
        public var packetsIn: UInt64
        public var packetsOut: UInt64
        public var cpuSeconds: Double
        /// Over the whole run (warm-up included): packets the origin sent on its pipe, and the
        /// datagrams the edge read from it (0 without a pipe).
        public var pipePacketsSent: UInt64 = 0
        public var pipePacketsRead: UInt64 = 0
        /// Loop-thread CPU per packet sent, microseconds.
        public var microsecondsPerPacketOut: Double { packetsOut > 0 ? cpuSeconds * 1e6 / Double(packetsOut) : 0 }
        /// Packets sent per packet received: the fan-out.
        public var fanOut: Double { packetsIn > 0 ? Double(packetsOut) / Double(packetsIn) : 0 }
    }

    public struct PipeResult: Sendable {
        public var viewers: Int
        /// Publisher → one SFU → every viewer.
        public var single: LoopShare
        /// Publisher → origin → pipe → edge → every viewer.
        public var origin: LoopShare
        public var edge: LoopShare
        public var method: String
    }

    /// The origin's fan-out and the server CPU per delivered packet with the audience on an edge,
    /// against the same audience on one SFU: publisher → SFU → `viewers` subscribers, then
    /// publisher → origin → pipe → edge → `viewers` subscribers, each over loopback UDP with
    /// DTLS-SRTP, the publisher sending `packetsPerSecond` VP8 packets.
    public static func pipe(viewers: Int, seconds: Double, packetsPerSecond: Int) async throws -> PipeResult {
        let count = max(1, viewers)
        let single = try await measureFanOut(
            viewers: count, seconds: seconds, packetsPerSecond: packetsPerSecond, piped: false)
        let piped = try await measureFanOut(
            viewers: count, seconds: seconds, packetsPerSecond: packetsPerSecond, piped: true)
        var method = "publisher -> SFU -> \(count) subscribers vs publisher -> origin SFU -> pipe (plain RTP over "
        method += "loopback UDP) -> edge SFU -> \(count) subscribers; VP8 at \(packetsPerSecond) packets/s, "
        method += "DTLS-SRTP GCM to the clients; \(seconds) s measured after a 1.5 s warm-up; each SFU's loop-thread "
        method += "CPU (CLOCK_THREAD_CPUTIME_ID) per packet it sent"
        return PipeResult(viewers: count, single: single[0], origin: piped[0], edge: piped[1], method: method)
    }

    /// The shares of the SFU the publisher sends to (and of the edge when `piped`).
    static func measureFanOut(viewers: Int, seconds: Double, packetsPerSecond: Int, piped: Bool) async throws
        -> [LoopShare]
    {
        let first = SFU(configuration: SFUConfiguration(loopName: piped ? "bench-origin" : "bench-single"))
        let edge = piped ? SFU(configuration: SFUConfiguration(loopName: "bench-edge")) : nil
        let publisherLoop = EventLoop(name: "bench-pipe-pub")
        let viewerLoop = EventLoop(name: "bench-pipe-viewers")
        let publisher = try PeerConnection(loop: publisherLoop)
        var connections: [PeerConnection] = []
        defer {
            publisherLoop.shutdown()
            viewerLoop.shutdown()
        }
        let (video, producer) = try await SFUBenchmark.publishVideo(publisher, to: first, as: "host")
        let audience = edge ?? first
        if let edge {
            let originAddress = try await first.onLoop { try $0.openPipeOnLoop(id: "edge") }
            let edgeAddress = try await edge.onLoop { try $0.openPipeOnLoop(id: "origin") }
            try await first.onLoop { try $0.connectPipeOnLoop(id: "edge", remote: edgeAddress) }
            try await edge.onLoop { try $0.connectPipeOnLoop(id: "origin", remote: originAddress) }
            let description = try await first.onLoop {
                try $0.pipeProducerOnLoop(pipeID: "edge", producerID: producer.id)
            }
            _ = try await edge.onLoop { try $0.addPipedProducerOnLoop(pipeID: "origin", description) }
        }
        for i in 0..<viewers {
            let id = "viewer-\(i)"
            let pc = try PeerConnection(loop: viewerLoop)
            connections.append(pc)
            try await SFUBenchmark.subscribe(pc, as: id, to: producer, on: audience)
        }
        let source = BenchFrameSource(connection: publisher, transceiver: video, packetsPerSecond: packetsPerSecond)
        await publisherLoop.submit { publisherLoop.addTicker(source) }
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let sfus = [first] + (edge.map { [$0] } ?? [])
        func sample() async -> [(UInt64, UInt64, UInt64)] {
            var out: [(UInt64, UInt64, UInt64)] = []
            for sfu in sfus {
                out.append(
                    await sfu.loop.submit {
                        (SFUBenchmark.threadCPU(), sfu.counters.packetsIn, sfu.counters.packetsOut)
                    })
            }
            return out
        }
        let start = await sample()
        try await Task.sleep(nanoseconds: UInt64(max(0.5, seconds) * 1e9))
        let end = await sample()
        await publisherLoop.submit { publisherLoop.removeTicker(source) }
        for pc in connections { await viewerLoop.submit { pc.close() } }
        await publisherLoop.submit { publisher.close() }
        // What crossed the pipe, read before the SFUs close: a pipe has no congestion control, so
        // an edge that falls behind shows as packets sent but not yet read.
        let pipeSent = await first.stats().pipes.first?.counters.packetsSent ?? 0
        let pipeRead = await edge?.stats().pipes.first?.counters.packetsReceived ?? 0
        for sfu in sfus.reversed() { await sfu.shutdown() }
        var shares = zip(start, end).map { a, b in
            LoopShare(packetsIn: b.1 &- a.1, packetsOut: b.2 &- a.2, cpuSeconds: Double(b.0 &- a.0) / 1e9)
        }
        if edge != nil {
            shares[0].pipePacketsSent = pipeSent
            shares[1].pipePacketsRead = pipeRead
        }
        guard shares.allSatisfy({ $0.packetsOut > 0 }) else {
            throw Failure(description: "pipe benchmark: nothing was forwarded")
        }
        return shares
    }
}

// MARK: - Origin and edges in the room layer (`--edge-audience`)

extension ClusterBenchmark {
    /// One phase of ``edges(audience:seconds:progress:)``: the SFUs' shares over the measured window.
    public struct EdgePhase: Sendable {
        /// The SFU the publisher sends to (the origin; in the one-node phase, also the audience's).
        public var origin: LoopShare
        /// The SFU that serves the audience (the origin itself in the one-node phase).
        public var audience: LoopShare
        /// Packets the origin sent over pipes in the window.
        public var pipePacketsSent: UInt64
        public var members: Int
        public var seconds: Double
        /// The audience SFU's loop CPU per member, in milliseconds per second (per cent of a core × 10).
        public var cpuMillisecondsPerMemberSecond: Double {
            members > 0 && seconds > 0 ? audience.cpuSeconds * 1e3 / Double(members) / seconds : 0
        }
    }

    public struct EdgesResult: Sendable {
        /// Publisher and audience on one node.
        public var single: EdgePhase
        /// Publisher on the origin, the audience on an edge (every member joined through it).
        public var edge: EdgePhase
        public var method: String
    }

    /// The room layer's origin and edge against one node, in process: three room servers in cluster
    /// mode with `--edge-audience` = `audience` on one throw-away Redis, and a load run of one
    /// simulcast publisher and `audience` RECV_ONLY bots. First every bot joins through the node the
    /// room is placed on (one node); then, in a new room, through another node, which becomes its
    /// edge (the publisher's join is proxied to the origin). Measured per phase over `seconds`
    /// after the ramp: packets in and out of each SFU, and its loop thread's CPU.
    public static func edges(audience: Int, seconds: Double, progress: @escaping @Sendable (String) -> Void)
        async throws -> EdgesResult
    {
        let cluster = try LocalCluster(count: 2, nodePrefix: "edge-bench-") { $0.edgeAudience = audience }
        defer { cluster.stop() }
        let servers = cluster.servers
        // Each node must see the other's registration (its media address) before an edge is accepted.
        try await Task.sleep(nanoseconds: 2_500_000_000)

        func phase(room: String, via entry: RoomServer) async throws -> EdgePhase {
            var config = LoadConfiguration(signalingURL: "ws://127.0.0.1:\(entry.httpPort)/v1/rtc", room: room)
            config.secret = "bench-secret"
            config.publishers = 1
            config.subscribers = audience
            config.layout = .grid(3)
            config.joinRate = 50
            config.qualityMetrics = false
            let ramp = Double(1 + audience) / config.joinRate + 3
            config.duration = ramp + seconds + 1
            let run = try LoadRun(configuration: config)
            let running = Task { try await run.run() }
            try await Task.sleep(nanoseconds: UInt64(ramp * 1e9))
            // The origin is the node the room was placed on; the audience's SFU is the entry node.
            var origin = entry
            for server in servers where await server.roomSummaries().contains(where: { $0.roomId == room }) {
                origin = server
            }
            let sfus = [origin.sfu, entry.sfu].compactMap { $0 }
            guard sfus.count == 2 else { throw Failure(description: "edge benchmark: no SFU running") }
            func sample() async -> [(UInt64, UInt64, UInt64, UInt64)] {
                var out: [(UInt64, UInt64, UInt64, UInt64)] = []
                for sfu in sfus {
                    let (cpu, packetsIn, packetsOut) = await sfu.loop.submit {
                        (SFUBenchmark.threadCPU(), sfu.counters.packetsIn, sfu.counters.packetsOut)
                    }
                    let piped = await sfu.stats().pipes.reduce(0) { $0 + $1.counters.packetsSent }
                    out.append((cpu, packetsIn, packetsOut, piped))
                }
                return out
            }
            let start = await sample()
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            let end = await sample()
            let report = try await running.value
            guard report.joinedParticipants == 1 + audience else {
                throw Failure(description: "edge benchmark: \(report.joinedParticipants) of \(1 + audience) joined")
            }
            let shares = zip(start, end).map { a, b in
                LoopShare(packetsIn: b.1 &- a.1, packetsOut: b.2 &- a.2, cpuSeconds: Double(b.0 &- a.0) / 1e9)
            }
            return EdgePhase(
                origin: shares[0], audience: shares[1], pipePacketsSent: end[0].3 &- start[0].3, members: audience,
                seconds: seconds)
        }
        progress("bench:   one node: a publisher and \(audience) members through the room's node")
        let single = try await phase(room: "edge-bench-single", via: servers[0])
        progress("bench:   origin and edge: the same through the other node")
        // The room is placed on the node with the fewest rooms (ties: the smaller id), so on node 0;
        // every join reaches node 1, which serves the audience as the edge.
        let edge = try await phase(room: "edge-bench-edges", via: servers[1])
        guard edge.pipePacketsSent > 0 else { throw Failure(description: "edge benchmark: nothing crossed a pipe") }
        var method = "two in-process room servers in cluster mode (`--edge-audience \(audience)`) on one throw-away "
        method += "`redis-server`; an in-process load run of 1 simulcast VP8 + Opus publisher and \(audience) "
        method += "RECV_ONLY bots (3x3 layout), all joining through one node: first the room's own node (one node), "
        method += "then, in a new room, the other node, which serves the audience as its edge while the publisher's "
        method += "join is proxied to the origin; \(seconds) s measured after the ramp; each SFU's loop-thread CPU "
        method += "(CLOCK_THREAD_CPUTIME_ID) and packet counters"
        return EdgesResult(single: single, edge: edge, method: method)
    }
}

extension ClusterBenchmark {
    /// The report's rows and section for ``edges(audience:seconds:progress:)``.
    static func edgesSection(
        audience: Int, seconds: Double, summary: inout [BenchmarkReport.SummaryRow],
        progress: @escaping @Sendable (String) -> Void
    ) async throws -> String {
        progress("bench: cluster: a live stream's audience on an edge (room layer) vs on one node")
        let r = try await edges(audience: audience, seconds: seconds, progress: progress)
        let ratio = r.edge.cpuMillisecondsPerMemberSecond / max(r.single.cpuMillisecondsPerMemberSecond, 1e-9)
        summary.append(
            BenchmarkReport.SummaryRow(
                metric: "cluster: origin packets out per packet in, \(audience) members on an edge (room layer)",
                target: "1 per edge",
                measured: String(
                    format: "%.2f (%.1f with them on the origin)", r.edge.origin.fanOut, r.single.origin.fanOut),
                verdict: r.edge.origin.fanOut < 1.5 ? "meets the target" : "misses the target"))
        summary.append(
            BenchmarkReport.SummaryRow(
                metric: "cluster: server CPU per audience member on an edge vs one node (room layer)",
                target: "within 20 %",
                measured: String(
                    format: "%.2f vs %.2f ms/s (%+.0f %%)", r.edge.cpuMillisecondsPerMemberSecond,
                    r.single.cpuMillisecondsPerMemberSecond, (ratio - 1) * 100),
                verdict: ratio <= 1.2
                    ? "meets the target" : String(format: "misses the target by %.0f %%", (ratio - 1.2) * 100)))
        var body = "## Cluster: a live stream's audience on an edge (`--edge-audience`)\n\n"
        body += "| phase | SFU | packets in | packets out | out per in | loop CPU per member |\n"
        body += "|---|---|---|---|---|---|\n"
        body += String(
            format: "| one node | the room's node | %llu | %llu | %.2f | %.2f ms/s |\n", r.single.audience.packetsIn,
            r.single.audience.packetsOut, r.single.audience.fanOut, r.single.cpuMillisecondsPerMemberSecond)
        body += String(
            format: "| origin and edge | origin | %llu | %llu | %.2f | — |\n", r.edge.origin.packetsIn,
            r.edge.origin.packetsOut, r.edge.origin.fanOut)
        body += String(
            format: "| origin and edge | edge | %llu | %llu | %.2f | %.2f ms/s |\n\n", r.edge.audience.packetsIn,
            r.edge.audience.packetsOut, r.edge.audience.fanOut, r.edge.cpuMillisecondsPerMemberSecond)
        body += "The origin sent \(r.edge.pipePacketsSent) packets over its pipe in the window. "
        body += "Method: \(r.method).\n\n"
        return body
    }
}

/// Room servers in cluster mode on one throw-away Redis, in process: ports chosen by the kernel,
/// secret `bench-secret`, node ids `nodePrefix` + 0, 1, …. ``stop()`` ends nodes, servers and Redis.
final class LocalCluster {
    let redis: LocalRedisServer
    private(set) var servers: [RoomServer] = []
    private(set) var nodes: [ClusterNode] = []

    init(count: Int, nodePrefix: String, configure: (inout RoomServerConfiguration) -> Void = { _ in }) throws {
        redis = try LocalRedisServer()
        do {
            let redisURL = try RedisURL(parsing: redis.url)
            for i in 0..<count {
                var configuration = RoomServerConfiguration()
                configuration.listenPort = 0
                configuration.udpPortLow = 0
                configuration.udpPortHigh = 0
                configuration.secret = "bench-secret"
                configure(&configuration)
                let server = RoomServer(configuration: configuration)
                try server.start()
                servers.append(server)
                let reach = "127.0.0.1:\(server.httpPort)"
                let node = ClusterNode(
                    configuration: .init(
                        redis: redisURL, nodeId: "\(nodePrefix)\(i)", signalingURL: "ws://\(reach)/v1/rtc",
                        httpURL: "http://\(reach)", mediaAddress: "127.0.0.1"), log: { _ in })
                try node.attach(to: server)
                nodes.append(node)
            }
        } catch {
            stop()
            throw error
        }
    }

    func stop() {
        for node in nodes { node.stop() }
        for server in servers { server.stop() }
        redis.stop()
    }
}
