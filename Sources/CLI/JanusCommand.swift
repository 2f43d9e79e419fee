import Agent
import Foundation
import Janus
import LoadGen
import Media
import RTCWire
import RoomProtocol
import Signaling

// `--server janus://HOST:PORT/ROOM_NUMBER`: `join` and `load` against a Janus VideoRoom.
// Flags for room features that Janus does not have are refused (exit 2), never ignored.

/// Whether `--server` names a Janus VideoRoom.
func isJanusServer(_ a: Arguments) -> Bool { a.value("--server")?.hasPrefix("janus://") == true }

/// The Janus room of `--server`, or a usage error.
func janusRoomURL(_ a: Arguments) throws(Arguments.Failure) -> JanusRoomURL {
    let server = try required(a, "--server")
    do { return try JanusRoomURL(server) } catch { throw .badValue("--server", error.description) }
}

/// Refuses each of `options` that is present, naming why Janus has no counterpart.
func refuseForJanus(_ a: Arguments, _ options: [(name: String, why: String)]) throws(Arguments.Failure) {
    for (name, why) in options where a.value(name) != nil {
        throw .badValue(name, "not available with a janus:// server: \(why)")
    }
}

/// The join options that a Janus room has no counterpart for, and why (docs/janus.md lists them too).
let janusRefusedJoinOptions: [(name: String, why: String)] = [
    ("--room", "the room number is the last part of janus://HOST:PORT/ROOM_NUMBER"),
    ("--token", "Janus rooms take no understudy token"),
    ("--secret", "Janus rooms take no understudy token"),
    ("--id", "Janus assigns the feed id"),
    ("--agent", "a VideoRoom has no agent role"),
    ("--accept-invites", "stage invites travel over PubSub, which Janus does not have"),
    ("--relay-room", "republishing into another room needs our room server"),
    ("--reconnect-for", "reconnection is not implemented for Janus"),
    ("--lobby-wait", "a Janus VideoRoom has no lobby"),
    ("--metrics", "metrics are not implemented for Janus"),
    ("--mix-audio", "the audio mix is implemented for our room server only"),
    ("--transcribe", "per-speaker PCM is implemented for our room server only"),
    ("--transcribe-rate", "per-speaker PCM is implemented for our room server only"),
    ("--video-codec", "the Janus agent publishes VP8 (H.264 publishing is for our rooms and load bots)"),
    ("--snapshot-every", "snapshots are not implemented for Janus"),
]

/// The Janus agent's options and duration from an `understudy join --server janus://…` command line.
func janusJoinOptions(_ a: Arguments) throws(Arguments.Failure) -> (options: JanusAgent.Options, duration: Double?) {
    if let extra = a.positionals.first { throw Arguments.Failure.unexpected(extra) }
    let url = try janusRoomURL(a)
    try refuseForJanus(a, janusRefusedJoinOptions)
    var options = JanusAgent.Options(url: url)
    options.display = a.value("--name") ?? "understudy"
    let modeName = a.value("--mode") ?? ParticipantMode.recvOnly.rawValue
    switch ParticipantMode(wireName: modeName.uppercased()) {
    case .recvOnly: options.publish = false
    case .sendAndRecv: options.publish = true
    case .signallingOnly, nil:
        throw Arguments.Failure.badValue(
            "--mode",
            "'\(modeName)' is not available with a janus:// server (only RECV_ONLY or SEND_AND_RECV, which publishes)")
    }
    (options.consume, options.kinds) = try consumeOptions(a)
    options.maxVideo = try maxVideoOption(a)
    if a.value("--quality") != nil {
        throw Arguments.Failure.badValue("--quality", "not available with a janus:// server")
    }
    options.recordDirectory = a.value("--record")
    if let format = a.value("--record-format") {
        guard let f = RoomAgent.RecordFormat(rawValue: format) else {
            throw Arguments.Failure.badValue("--record-format", "'\(format)' is not webm, mp4 or ogg+ivf")
        }
        options.recordFormat = f
    }
    if !options.publish, a.value("--video") != nil || a.value("--audio") != nil {
        throw Arguments.Failure.badValue(
            a.value("--video") != nil ? "--video" : "--audio", "only used with --mode SEND_AND_RECV (publishing)")
    }
    (options.video, options.audio) = try localSourceOptions(a)
    options.rtpOutputURL = try rtpOutputURLOption(a)
    let duration: Double? = a.value("--duration") == nil ? nil : try a.seconds("--duration", default: 0)
    return (options, duration)
}

/// `understudy join --server janus://HOST:PORT/ROOM_NUMBER …`.
func runJanusJoin(_ a: Arguments) async {
    await runCommand("join") {
        let (options, duration) = try janusJoinOptions(a)
        let format = a.value("--log-format") ?? "text"
        guard format == "text" || format == "json" else {
            throw Arguments.Failure.badValue("--log-format", "'\(format)' is not text or json")
        }
        ShutdownSignal.shared.install()
        let log = jsonLogger(format == "json", fields: ["room": String(options.url.room), "backend": "janus"])
        let agent = JanusAgent(options: options, log: log)
        do {
            try await agent.start()
        } catch {
            await agent.stop()
            fail("join: \(error)")
        }
        await agent.run(duration: duration, until: { await ShutdownSignal.shared.wait() })
        if let failure = agent.failure { fail("join: \(failure)") }
    }
}

/// Whether a raw command line's `--server` is a `janus://` URL (before any command-specific parsing).
func argumentsNameJanusServer(_ args: [String]) -> Bool {
    for (i, arg) in args.enumerated() {
        if arg.hasPrefix("--server=") { return arg.dropFirst("--server=".count).hasPrefix("janus://") }
        if arg == "--server", i + 1 < args.count { return args[i + 1].hasPrefix("janus://") }
    }
    return false
}

/// The load options that a Janus room has no counterpart for, and why.
let janusRefusedLoadOptions: [(name: String, why: String)] = [
    ("--room", "the room number is the last part of janus://HOST:PORT/ROOM_NUMBER"),
    ("--rooms", "a janus:// URL names one room"),
    ("--token", "Janus rooms take no understudy token"),
    ("--secret", "Janus rooms take no understudy token"),
    ("--layout", "Janus subscribers receive every publisher (no layouts)"),
    ("--invite-every", "stage invites travel over PubSub, which Janus does not have"),
    ("--workers", "fleets run against our room servers only"),
]

/// `understudy load --server janus://HOST:PORT/ROOM_NUMBER …`.
func runJanusLoad(_ args: [String]) async {
    let configuration: LoadConfiguration
    let room: JanusRoomURL
    let a: Arguments
    do {
        a = try Arguments(args, help: Help.load)
        if let extra = a.positionals.first { throw Arguments.Failure.unexpected(extra) }
        room = try janusRoomURL(a)
        try refuseForJanus(a, janusRefusedLoadOptions)
        var c = LoadConfiguration(signalingURL: "ws://unused", room: String(room.room))
        // Janus publishers send one layer; `--no-simulcast` is accepted since that is what happens.
        c.simulcast = false
        c.secret = "unused"
        c.publishers = try loadCount(a, "--publishers", default: 1)
        c.audioPublishers = try loadCount(a, "--audio-publishers", default: 0)
        c.subscribers = try loadCount(a, "--subscribers", default: 10)
        c.duration = try a.seconds("--duration", default: 60)
        if let rate = a.value("--join-rate") {
            let text = rate.hasSuffix("/s") ? String(rate.dropLast(2)) : rate
            guard let r = Double(text), r > 0, r <= 1000 else {
                throw Arguments.Failure.badValue("--join-rate", "'\(rate)' is not a rate like 10/s")
            }
            c.joinRate = r
        }
        if let n = try loopCountOption(a) { c.loopCount = n }
        if let prefix = try idPrefixOption(a) { c.idPrefix = prefix }
        do { c.videoCodec = .fixed(try LocalSources.videoCodec(a.value("--video-codec"))) } catch {
            throw Arguments.Failure.badValue("--video-codec", error.explanation)
        }
        guard c.publishers + c.audioPublishers + c.subscribers > 0 else {
            throw Arguments.Failure.badValue("--publishers/--subscribers", "nothing to do: no bots")
        }
        configuration = c
    } catch let e as Arguments.Failure {
        fail("load: \(e)", code: 2)
    } catch {
        fail("load: \(error)", code: 2)
    }
    ShutdownSignal.shared.install()
    let run = JanusLoadRun(configuration: configuration, room: room)
    if !a.flag("--quiet") { run.onProgress = { (p: LoadProgress) in logLine(p.line) } }
    let report: LoadReport
    do { report = try await run.run(until: { ShutdownSignal.shared.isRequested }) } catch {
        loadFailed(error)
    }
    print(report.table(), terminator: "")
    if let jsonPath = a.value("--json") {
        do { try report.json().write(toFile: jsonPath, atomically: true, encoding: .utf8) } catch {
            fail("load: cannot write \(jsonPath): \(error)", code: 1)
        }
    }
    if report.joinedParticipants == 0 { fail("load: no participant could join", code: 1) }
}

private func loadCount(_ a: Arguments, _ name: String, default def: Int) throws(Arguments.Failure) -> Int {
    guard let v = a.value(name) else { return def }
    guard let n = Int(v), n >= 0, n <= 10_000 else { throw .badValue(name, "'\(v)' is not a count") }
    return n
}
