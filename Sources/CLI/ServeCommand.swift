import Agent
import Cluster
import Fleet
import Foundation
import RTC
import Redis
import RoomServer
import Signaling

// `understudy serve`: run the room server until SIGINT/SIGTERM.

/// Parses `HOST:PORT` (IPv6 as `[::1]:7880`).
func parseListenAddress(_ text: String) -> (host: String, port: UInt16)? {
    if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
        let host = String(text[text.index(after: text.startIndex)..<close])
        let rest = text[text.index(after: close)...]
        guard rest.hasPrefix(":"), let port = UInt16(rest.dropFirst()) else { return nil }
        return (host, port)
    }
    guard let colon = text.lastIndex(of: ":") else { return nil }
    let host = String(text[..<colon])
    guard !host.isEmpty, let port = UInt16(text[text.index(after: colon)...]) else { return nil }
    return (host, port)
}

/// The webhook, auto-record and auto-stop flags (the flags win over the configuration file);
/// bad values are refused with the option's name.
func lifecycleSettings(_ a: Arguments, into configuration: inout RoomServerConfiguration) throws(Arguments.Failure) {
    let urls = a.values("--webhook")
    if !urls.isEmpty { configuration.webhooks = urls }
    if let secret = a.value("--webhook-secret") ?? ProcessInfo.processInfo.environment["UNDERSTUDY_WEBHOOK_SECRET"] {
        configuration.webhookSecret = secret
    }
    if let problem = WebhookSender.problem(urls: configuration.webhooks, secret: configuration.webhookSecret) {
        throw .badValue(problem.hasPrefix("webhook URL") ? "--webhook" : "--webhook-secret", problem)
    }
    if let text = a.value("--auto-record") {
        let options = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        do throws(AgentJobOptions.Invalid) { _ = try AgentJobOptions(arguments: options) } catch {
            throw .badValue("--auto-record", "\(error)")
        }
        configuration.autoRecord = options
    }
    if configuration.autoRecord != nil, configuration.jobs == nil {
        throw .badValue("--auto-record", "needs a job fleet (--jobs redis://…)")
    }
    for (name, path) in [
        ("--auto-stop-empty", \RoomServerConfiguration.autoStopEmptySeconds),
        ("--auto-stop-agents-only", \RoomServerConfiguration.autoStopAgentsOnlySeconds),
        ("--auto-stop-no-media", \RoomServerConfiguration.autoStopNoMediaSeconds),
    ] {
        guard let text = a.value(name) else { continue }
        if text == "off" {
            configuration[keyPath: path] = nil
        } else if text == "0" {
            configuration[keyPath: path] = 0
        } else {
            configuration[keyPath: path] = try a.seconds(name, default: 0)
        }
    }
}

func runServe(_ args: [String]) async {
    // Before the server's threads start: they then share one malloc arena per core (MemoryTrim.swift).
    MemoryTrim.limitArenas()
    await runCommand("serve") {
        let a = try Arguments(args, help: Help.serve)
        if let extra = a.positionals.first { throw Arguments.Failure.unexpected(extra) }
        var configuration = RoomServerConfiguration()
        if let path = a.value("--config") {
            do {
                configuration = try RoomServerConfiguration.load(path: path)
            } catch {
                throw Arguments.Failure.badValue("--config", "cannot read \(path): \(error)")
            }
        }
        if let listen = a.value("--listen") {
            guard let (host, port) = parseListenAddress(listen) else {
                throw Arguments.Failure.badValue("--listen", "expected HOST:PORT")
            }
            configuration.listenHost = host
            configuration.listenPort = port
        }
        if let media = a.value("--media-address") { configuration.mediaAddress = media }
        if let port = a.value("--udp-port") {
            guard let p = UInt16(port), p > 0 else {
                throw Arguments.Failure.badValue("--udp-port", "expected a port number")
            }
            configuration.udpPortLow = p
            configuration.udpPortHigh = p
        }
        if let text = a.value("--stale-media") {
            guard let ms = Int(text), (0...60_000).contains(ms) else {
                throw Arguments.Failure.badValue("--stale-media", "expected milliseconds, 0…60000")
            }
            configuration.staleMediaMilliseconds = ms
        }
        if let range = a.value("--udp-ports") {
            let parts = range.split(separator: "-")
            guard parts.count == 2, let low = UInt16(parts[0]), let high = UInt16(parts[1]), low > 0, low <= high else {
                throw Arguments.Failure.badValue("--udp-ports", "expected A-B with A <= B")
            }
            configuration.udpPortLow = low
            configuration.udpPortHigh = high
        }
        if let secret = a.value("--secret") ?? ProcessInfo.processInfo.environment["UNDERSTUDY_SECRET"] {
            guard !secret.isEmpty else { throw Arguments.Failure.badValue("--secret", "must not be empty") }
            configuration.secret = secret
        }
        // Deviation from the hosted SDK: `end` needs allow_mod unless this switch opens it to all.
        if a.flag("--anyone-may-end") { configuration.anyoneMayEnd = true }
        // Cluster and fleet: the flags win over the configuration file.
        if let v = a.value("--redis") { configuration.redis = v }
        if let v = a.value("--node-id") { configuration.nodeId = v }
        if let v = a.value("--advertise") { configuration.advertise = v }
        if let v = a.value("--edge-audience") {
            guard let n = Int(v), (0...1_000_000).contains(n) else {
                throw Arguments.Failure.badValue("--edge-audience", "expected 0...1000000 audience members per room")
            }
            configuration.edgeAudience = n
        }
        if let v = a.value("--jobs") { configuration.jobs = v }
        try lifecycleSettings(a, into: &configuration)
        if a.flag("--ice-tcp") {
            guard configuration.udpPortLow != 0, configuration.udpPortLow == configuration.udpPortHigh else {
                throw Arguments.Failure.badValue("--ice-tcp", "needs one shared UDP port (--udp-port), not a range")
            }
            configuration.iceTCP = true
        }
        if let servers = try iceServers(a) {
            configuration.iceServers = servers.map {
                ICEServerDescription(urls: [$0.url], username: $0.username, credential: $0.credential)
            }
        }
        var clusterRedis: RedisURL?
        if let text = configuration.redis {
            do { clusterRedis = try RedisURL(parsing: text) } catch {
                throw Arguments.Failure.badValue("--redis", "\(error)")
            }
        }
        if clusterRedis == nil,
            configuration.nodeId != nil || configuration.advertise != nil || configuration.edgeAudience > 0
        {
            throw Arguments.Failure.badValue(
                "--node-id/--advertise/--edge-audience", "only with --redis (cluster mode)")
        }
        let nodeId = configuration.nodeId ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())"
        guard NodeRecord.isNodeId(nodeId) else {
            throw Arguments.Failure.badValue("--node-id", "'\(nodeId)' must be 1-64 letters, digits, '-', '_' or '.'")
        }
        if let advertise = configuration.advertise, parseListenAddress(advertise) == nil {
            throw Arguments.Failure.badValue(
                "--advertise", "expected HOST:PORT (where other nodes and clients reach this one)")
        }
        var jobsRedis: RedisURL?
        if let text = configuration.jobs {
            do { jobsRedis = try RedisURL(parsing: text) } catch {
                throw Arguments.Failure.badValue("--jobs", "\(error)")
            }
        }
        let server = RoomServer(configuration: configuration)
        try server.start()
        // Where clients and other nodes reach this server (the listen address unless --advertise).
        let reach = configuration.advertise ?? "\(configuration.listenHost):\(server.httpPort)"
        if let jobsRedis {
            server.jobService = FleetJobService(
                store: FleetStore(redis: RedisClient(url: jobsRedis, label: "jobs")), serverURL: "http://\(reach)",
                secret: server.secret)
            logLine("serve: POST /admin/jobs queues recording jobs on the fleet at \(jobsRedis)")
        }
        if !configuration.webhooks.isEmpty, let secret = configuration.webhookSecret {
            // Checked by lifecycleSettings and the configuration's validation: cannot throw here.
            server.webhooks = try? WebhookSender(urls: configuration.webhooks, secret: secret, log: logLine)
            logLine("serve: webhook events go to \(configuration.webhooks.joined(separator: ", "))")
        }
        server.lifecycleLog = { logLine("serve: \($0)") }
        var cluster: ClusterNode?
        if let clusterRedis {
            // Other nodes reach this one at --advertise, by default the listen address.
            let node = ClusterNode(
                configuration: ClusterNode.Configuration(
                    redis: clusterRedis, nodeId: nodeId, signalingURL: "ws://\(reach)/v1/rtc",
                    httpURL: "http://\(reach)",
                    mediaAddress: configuration.mediaAddress ?? configuration.listenHost),
                log: logLine)
            do { try node.attach(to: server) } catch {
                server.stop()
                fail("serve: cannot join the cluster: \(error)")
            }
            cluster = node
        }
        logLine(
            "serve: listening on http://\(configuration.listenHost):\(server.httpPort) (signalling \(server.signalingURL)?token=JWT)"
        )
        // A live-stream room holds thousands of signalling sockets; Debian's default soft limit is 1024.
        if let warning = OpenFileLimit.raise().warning { logLine("serve: warning: \(warning)") }
        // Guests who leave a live stream's stage free their tracks' buffers; give the pages back.
        let memoryTrim = MemoryTrim()
        let pageURL = "http://\(configuration.listenHost):\(server.httpPort)/room/ROOM"
        if server.secretWasGenerated {
            logLine("serve: room page at \(pageURL) (development mode: the page gets its tokens from /dev/token)")
            logLine("serve: no --secret or UNDERSTUDY_SECRET given; using a dev secret for this run: \(server.secret)")
            logLine(
                "serve: make a token with: understudy token --secret \(server.secret) --room ROOM [--participant ID] [--permissions allow_join,allow_mod]"
            )
        } else {
            logLine("serve: room page at \(pageURL)?token=JWT (a token made with the configured secret)")
        }
        ShutdownSignal.shared.install()
        await ShutdownSignal.shared.wait()
        logLine("serve: shutting down")
        // Deregister first, so that clients leaving this node are placed on another at once.
        cluster?.stop()
        server.stop()
        memoryTrim.cancel()
    }
}
