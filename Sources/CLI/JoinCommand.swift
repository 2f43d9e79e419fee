import Agent
import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol
import Signaling
import Understudy

// `understudy join|invite|pubsub`: a headless participant and one-shot room actions.

/// The signalling URL for `--server` (`http://` and `https://` become `ws://`/`wss://`), by the
/// grammar of ``AgentJobOptions/signalingURL()``.
func signalingURL(_ server: String) throws(Arguments.Failure) -> String {
    do { return try AgentJobOptions(server: server, room: "", token: "").signalingURL() } catch {
        throw .badValue(error.option, error.reason)
    }
}

/// `--token T`, or a token signed here from `--secret S` for `room`.
func roomToken(
    _ a: Arguments, room: String, participant: String?, permissions: [String] = ["allow_join"]
) throws(Arguments.Failure) -> String {
    if let t = a.value("--token") { return t }
    guard let secret = a.value("--secret") ?? ProcessInfo.processInfo.environment["UNDERSTUDY_SECRET"], !secret.isEmpty
    else { throw .missingValue("--token or --secret") }
    return RoomToken.sign(
        RoomToken(
            apikey: "understudy", permissions: permissions, roomId: room, participantId: participant,
            lifetime: 6 * 3600),
        secret: secret)
}

func parseMode(_ text: String?, default def: Mode, option: String) throws(Arguments.Failure) -> Mode {
    guard let text else { return def }
    guard let m = Mode(rawValue: text.uppercased()) else {
        throw .badValue(option, "'\(text)' is not SEND_AND_RECV, RECV_ONLY or SIGNALLING_ONLY")
    }
    return m
}

/// `--consume` and `--consume-kinds`, which the room agent and the Janus agent read the same way
/// (the grammar is ``AgentJobOptions``').
func consumeOptions(_ a: Arguments) throws(Arguments.Failure) -> (RoomAgent.ConsumePolicy, Set<MediaKind>) {
    do {
        let consume = try AgentJobOptions.consumePolicy(parsing: a.value("--consume") ?? "all")
        guard let kinds = a.value("--consume-kinds") else { return (consume, [.audio, .video]) }
        return (consume, try AgentJobOptions.kinds(parsing: kinds))
    } catch {
        throw Arguments.Failure.badValue(error.option, error.reason)
    }
}

/// `--max-video N`: at most N video streams consumed at once (nil: no limit).
func maxVideoOption(_ a: Arguments) throws(Arguments.Failure) -> Int? {
    guard let max = a.value("--max-video") else { return nil }
    guard let n = Int(max), n >= 0 else {
        throw Arguments.Failure.badValue("--max-video", "'\(max)' is not a count (0 or more)")
    }
    return n
}

func required(_ a: Arguments, _ name: String) throws(Arguments.Failure) -> String {
    guard let v = a.value(name), !v.isEmpty else { throw .missingValue(name) }
    return v
}

/// Text lines (`understudy: …`) or one JSON object per line: time, level, msg plus `fields` (room, participant).
func jsonLogger(_ json: Bool, fields: [String: String] = [:]) -> @Sendable (String) -> Void {
    if !json { return logLine }
    return { message in
        var object: [String: Any] = fields
        object["time"] = ISO8601Timestamp.string(milliseconds: true)
        object["msg"] = message
        let problem = ["failed", "refused", "cannot", "error", "timed out"].contains { message.contains($0) }
        object["level"] = problem ? "warn" : "info"
        if let data = try? JSONSerialization.data(
            withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        {
            FileHandle.standardError.write(data + Data("\n".utf8))
        }
    }
}

/// The options `understudy join` takes (also the grammar of a fleet job, `understudy jobs submit`).
let joinValueOptions: Set<String> = Help.join.valueOptions
let joinSwitches: Set<String> = Help.join.switches

/// The agent options of an `understudy join` command line as data (the form a fleet job carries):
/// the flags are mapped by ``AgentJobOptions/init(flags:)``, which owns their grammar; a token is
/// signed here from `--secret` when none is given.
func joinAgentJobOptions(_ a: Arguments) throws(Arguments.Failure) -> AgentJobOptions {
    if let extra = a.positionals.first { throw Arguments.Failure.unexpected(extra) }
    _ = try required(a, "--server")
    let roomId = try required(a, "--room")
    var job: AgentJobOptions
    do {
        let repeated = Dictionary(uniqueKeysWithValues: AgentJobOptions.repeatableFlags.map { ($0, a.values($0)) })
        job = try AgentJobOptions(flags: a.options, repeated: repeated)
    } catch {
        throw Arguments.Failure.badValue(error.option, error.reason)
    }
    if job.token.isEmpty {
        // A token signed here is bound to the participant id (one is made up when --id is absent),
        // so that a rejoin after a dropped connection may replace the stale participant.
        if job.id == nil { job.id = "understudy-" + String(UInt32.random(in: 0...UInt32.max), radix: 36) }
        job.token = try roomToken(a, room: roomId, participant: job.id)
        // A token signed here is bound to its room; a given --token is used for both rooms.
        if let relayRoom = job.relayRoom, !relayRoom.isEmpty, relayRoom != roomId {
            job.relayRoomToken = try roomToken(a, room: relayRoom, participant: nil)
        }
    }
    return job
}

/// The agent options and the duration of an `understudy join` command line, media paths checked.
func joinAgentOptions(_ a: Arguments) throws(Arguments.Failure) -> (options: RoomAgent.Options, duration: Double?) {
    let job = try joinAgentJobOptions(a)
    if job.analyze == true, a.value("--record") == nil {
        throw Arguments.Failure.badValue("--analyze", "needs --record DIR (the results go in its manifest)")
    }
    if job.snapshotEvery != nil, a.value("--record") == nil {
        throw Arguments.Failure.badValue("--snapshot-every", "needs --record DIR (the pictures are written there)")
    }
    do {
        return (try job.roomAgentOptions(recordDirectory: a.value("--record"), checkMedia: true), job.duration)
    } catch {
        throw Arguments.Failure.badValue(error.option, error.reason)
    }
}

/// `--ice-servers`: nil when absent (the room server's then apply).
/// `--video` and `--audio` as given (nil when absent), checked: a file must be one the agents can send.
func localSourceOptions(_ a: Arguments) throws(Arguments.Failure) -> (video: String?, audio: String?) {
    do {
        try LocalSources.validate(video: a.value("--video"), audio: a.value("--audio"))
    } catch {
        if case .badOption(let option, _, _) = error { throw Arguments.Failure.badValue(option, error.explanation) }
        throw Arguments.Failure.badValue("--video/--audio", error.description)
    }
    return (a.value("--video"), a.value("--audio"))
}

/// `--relay rtp://HOST:PORT` as given (nil when absent), checked by ``RTPOutput/parseURL(_:)``.
func rtpOutputURLOption(_ a: Arguments) throws(Arguments.Failure) -> String? {
    guard let relay = a.value("--relay") else { return nil }
    do { _ = try RTPOutput.parseURL(relay) } catch { throw Arguments.Failure.badValue("--relay", "\(error)") }
    return relay
}

func iceServers(_ a: Arguments) throws(Arguments.Failure) -> [ICEServer]? {
    guard let text = a.value("--ice-servers") else { return nil }
    do { return try ICEServer.parseList(text) } catch {
        throw Arguments.Failure.badValue("--ice-servers", error.description)
    }
}

func runJoin(_ args: [String]) async {
    await runCommand("join") {
        let a = try Arguments(args, valueOptions: joinValueOptions, switches: joinSwitches)
        if isJanusServer(a) { return await runJanusJoin(a) }
        let (options, duration) = try joinAgentOptions(a)
        let roomId = options.roomId
        var metricsAddress: (host: String, port: UInt16)?
        if let metrics = a.value("--metrics") {
            do { metricsAddress = try RoomAgentMetricsServer.parseAddress(metrics) } catch {
                throw Arguments.Failure.badValue("--metrics", "\(error)")
            }
        }
        let format = a.value("--log-format") ?? "text"
        guard format == "text" || format == "json" else {
            throw Arguments.Failure.badValue("--log-format", "'\(format)' is not text or json")
        }
        ShutdownSignal.shared.install()
        var logFields = ["room": roomId]
        if let id = options.participantId { logFields["participant"] = id }
        let log = jsonLogger(format == "json", fields: logFields)
        let agent = try RoomAgent(options: options, log: log)
        var metricsServer: RoomAgentMetricsServer?
        if let metricsAddress {
            do {
                metricsServer = try RoomAgentMetricsServer(
                    host: metricsAddress.host, port: metricsAddress.port, render: { [agent] in agent.metricsText() })
            } catch {
                fail("join: \(error)")
            }
            let shown = metricsAddress.host.contains(":") ? "[\(metricsAddress.host)]" : metricsAddress.host
            log("metrics on http://\(shown):\(metricsServer?.port ?? 0)/metrics")
        }
        // SIGINT/SIGTERM while the join still waits (a lobby waits as long as the server's lobby)
        // leaves at once: the agent's stop withdraws the entry request, and that is a clean end.
        let joining = JoinPhase()
        let earlyStop = Task {
            await ShutdownSignal.shared.wait()
            guard !Task.isCancelled, joining.claimStop() else { return }
            await agent.stop()
        }
        do {
            try await agent.start()
        } catch {
            if joining.stoppedEarly {
                await earlyStop.value
                metricsServer?.stop()
                return
            }
            earlyStop.cancel()
            await agent.stop()
            metricsServer?.stop()
            fail("join: \(error)")
        }
        guard joining.finishStart() else {
            // The signal came as the join finished: the early stop leaves the room.
            await earlyStop.value
            metricsServer?.stop()
            return
        }
        earlyStop.cancel()
        await agent.run(duration: duration, until: { await ShutdownSignal.shared.wait() })
        metricsServer?.stop()
        if let reason = agent.leaveReason, reason != .MANUAL_LEAVE_CALLED {
            fail("join: the room was left: \(reason.name) (\(reason.rawValue))")
        }
    }
}

func runInvite(_ args: [String]) async {
    await runCommand("invite") {
        let a = try Arguments(args, help: Help.invite)
        if let extra = a.positionals.first { throw Arguments.Failure.unexpected(extra) }
        let url = try signalingURL(try required(a, "--server"))
        let roomId = try required(a, "--room")
        let target = try required(a, "--participant")
        let mode = try parseMode(a.value("--mode"), default: .SEND_AND_RECV, option: "--mode")
        // Whoever holds the secret is the operator: its invite is a moderator's (allow_mod), which
        // agents with the default `--accept-invites trusted` follow.
        let token = try roomToken(a, room: roomId, participant: nil, permissions: ["allow_join", "allow_mod"])
        try await RoomAgentTools.invite(
            roomId: roomId, token: token, signalingURL: url, participantId: target, mode: mode)
        logLine("invited \(target) to \(mode.rawValue)")
    }
}

func runPubSub(_ args: [String]) async {
    await runCommand("pubsub") {
        let a = try Arguments(args, help: Help.pubsub)
        guard let action = a.positionals.first else { throw Arguments.Failure.missingPositional("publish|subscribe") }
        if a.positionals.count > 1 { throw Arguments.Failure.unexpected(a.positionals[1]) }
        let url = try signalingURL(try required(a, "--server"))
        let roomId = try required(a, "--room")
        let topic = try required(a, "--topic")
        let token = try roomToken(a, room: roomId, participant: nil)
        switch action {
        case "publish":
            let message = try required(a, "--message")
            try await RoomAgentTools.publish(
                roomId: roomId, token: token, signalingURL: url, topic: topic, message: message,
                persist: a.flag("--persist"))
        case "subscribe":
            let duration: Double? = a.value("--duration") == nil ? nil : try a.seconds("--duration", default: 0)
            ShutdownSignal.shared.install()
            try await RoomAgentTools.subscribe(
                roomId: roomId, token: token, signalingURL: url, topic: topic, duration: duration,
                until: { await ShutdownSignal.shared.wait() },
                output: { m in
                    print("\(m.senderId)\t\(m.topic)\t\(m.message)")
                    fflush(nil)  // one line per message, also into a pipe
                })
        default: throw Arguments.Failure.badValue("pubsub", "'\(action)' is not publish or subscribe")
        }
    }
}

/// Whether `understudy join` is still joining, or a signal stopped it first (one claims the other).
// Safe: the phase is guarded by `lock`.
final class JoinPhase: @unchecked Sendable {
    private let lock = NSLock()
    private enum State { case joining, stoppedWhileJoining, joined }
    private var state = State.joining

    private func leaveJoining(for next: State) -> Bool {
        lock.withLock {
            guard state == .joining else { return false }
            state = next
            return true
        }
    }
    /// A signal arrived: true when the join had not finished (the caller stops the agent).
    func claimStop() -> Bool { leaveJoining(for: .stoppedWhileJoining) }
    /// The join finished: false when a signal claimed the stop first.
    func finishStart() -> Bool { leaveJoining(for: .joined) }
    /// Whether a signal stopped the agent while it was joining.
    var stoppedEarly: Bool { lock.withLock { state == .stoppedWhileJoining } }
}
