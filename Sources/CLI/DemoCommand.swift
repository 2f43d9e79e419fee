import Agent
import Foundation
import Media
import RoomProtocol
import RoomServer
import Scenario
import Signaling
import Understudy

/// `understudy demo [--duration 20] [--out DIR]`: the main job, in one process, on the embedded
/// room server — an agent in the audience records a synthetic host, is invited on stage, calls its
/// own changeMode and publishes, and the host records it back. Exits 0 only when all of it happened.
func runDemo(_ args: [String]) async {
    let a: Arguments
    let duration: Double
    do {
        a = try Arguments(args, help: Help.demo)
        duration = try a.seconds("--duration", default: 20)
        guard duration >= 8 else { throw Arguments.Failure.badValue("--duration", "at least 8 seconds") }
    } catch {
        fail("demo: \(error)", code: 2)
    }
    let out = a.value("--out") ?? "demo-out"
    let events = EventLines { logLine("demo: \($0)") }
    do {
        try FileManager.default.createDirectory(atPath: out + "/host", withIntermediateDirectories: true)
    } catch {
        fail("demo: cannot create \(out): \(error)")
    }

    var configuration = RoomServerConfiguration()
    configuration.listenPort = 0
    configuration.udpPortLow = 0
    let server = RoomServer(configuration: configuration)
    do { try server.start() } catch { fail("demo: cannot start the room server: \(error)") }
    defer { server.stop() }
    events.add("room server on \(server.signalingURL)")
    let token = RoomToken.sign(
        RoomToken(apikey: "demo", permissions: ["allow_join", "allow_mod"], roomId: "demo", lifetime: 3600),
        secret: server.secret)

    do {
        // The host: on stage, publishing the synthetic test pattern and tone, consuming everyone.
        let host = try Understudy.createRoom(
            roomId: "demo", token: token, participantName: "Synthetic host", participantId: "host",
            micEnabled: true, camEnabled: true, mode: .SEND_AND_RECV, multiStream: false, autoConsume: true,
            signalingBaseUrl: server.signalingURL)
        let hostListener = DemoHostListener(events)
        host.addEventListener(hostListener)
        let hostRecording = try Recording(path: out + "/host/agent.webm")
        host.onFrame = { id, _, frame, arrival in if id == "agent" { hostRecording.write(frame, arrival: arrival) } }
        await host.join()
        guard host.state == .CONNECTED else { throw DemoFailure("the host could not join") }

        // The agent: audience, autoConsume off, consumes the stage, records, accepts invites.
        var options = RoomAgent.Options(roomId: "demo", token: token, signalingURL: server.signalingURL)
        options.participantId = "agent"
        options.participantName = "Understudy agent"
        options.consume = .stage
        options.recordDirectory = out + "/agent"
        let agent = try RoomAgent(options: options) { events.add("agent: \($0)") }
        try await agent.start()
        events.add("agent joined as RECV_ONLY with autoConsume off")

        let half = (duration - 2) / 2
        try await waitFor("the agent records the host", seconds: 15) { agent.recordingPaths["host"] != nil }
        try await Task.sleep(nanoseconds: UInt64(half * 1e9))
        try await waitFor("the agent listens for invites", seconds: 10) { agent.isListeningForInvites }
        events.add("host invites the agent on stage (REQUEST_TO_JOIN_AS_HOST_agent)")
        try await host.pubSub.publish(
            topic: "REQUEST_TO_JOIN_AS_HOST_agent", message: ParticipantMode.sendAndRecv.rawValue)
        try await waitFor("the agent is on stage", seconds: 15) { hostListener.agentOnStage }
        try await waitFor("the host receives the agent", seconds: 15) { hostRecording.videoFrames > 0 }
        try await Task.sleep(nanoseconds: UInt64(half * 1e9))

        host.onFrame = nil
        await agent.stop()
        await host.leave()
        try hostRecording.close()
        events.add("everyone left")

        // Summary, judged from the files themselves.
        var ok = true
        print("\nEvents:")
        for line in events.all { print("  \(line)") }
        print("\nFiles:")
        let files = [
            ("agent's recording of the host", agent.recordingPaths["host"] ?? ""),
            ("host's recording of the agent", out + "/host/agent.webm"),
        ]
        for (what, path) in files {
            guard !path.isEmpty, let reader = try? WebMReader(path: path) else {
                print("  \(what): missing or unreadable (\(path))")
                ok = false
                continue
            }
            let video = reader.frames.filter { $0.kind == .video }.count
            let audio = reader.frames.filter { $0.kind == .audio }.count
            var line = "  \(what): \(path): \(video) VP8 frames, \(audio) Opus frames"
            if let sync = try? SyncMarkerAnalyzer.analyze(reader: reader), let offset = sync.offsetMilliseconds {
                line += String(format: ", A/V offset %+.1f ms over %d flash/beep pairs", offset, sync.pairs)
            } else {
                line += ", A/V offset: no flash/beep pair found"
                ok = false
            }
            print(line)
            if video == 0 || audio == 0 { ok = false }
        }
        if let manifest = agent.manifestPath { print("  agent manifest: \(manifest)") }
        if !hostListener.agentOnStage { ok = false }
        print(ok ? "\ndemo: ok" : "\ndemo: FAILED")
        if !ok { exit(1) }
    } catch {
        fail("demo: \(error)")
    }
}

struct DemoFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

func waitFor(_ what: String, seconds: Double, _ condition: @escaping () -> Bool) async throws {
    let end = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > end { throw DemoFailure("timed out waiting: \(what)") }
        try await Task.sleep(nanoseconds: 50_000_000)
    }
}

// Safe: its state is guarded by `lock`.
final class DemoHostListener: RoomEventListener, @unchecked Sendable {
    let events: EventLines
    private let lock = NSLock()
    private var onStage = false
    init(_ events: EventLines) { self.events = events }
    var agentOnStage: Bool { lock.withLock { onStage } }
    func onRoomJoined() { events.add("host joined (SEND_AND_RECV, publishing test pattern + tone)") }
    func onParticipantJoined(_ participant: Participant) { events.add("host sees \(participant.id) join") }
    func onParticipantModeChanged(participantId: String, mode: Mode) {
        events.add("participantModeChanged: \(participantId) → \(mode)")
        if participantId == "agent" && mode == .SEND_AND_RECV { lock.withLock { onStage = true } }
    }
    func onParticipantLeft(_ participant: Participant, reason: LeaveReason) {
        events.add("host sees \(participant.id) leave (\(reason))")
    }
}
