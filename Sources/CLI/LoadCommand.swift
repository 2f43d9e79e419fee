import Fleet
import Foundation
import LoadGen
import Media
import RTC
import Redis

// `understudy load`: many lightweight bots in this process against a room server (docs/load-testing.md).

let loadUsage = """
    usage: understudy load --server URL --room ROOM [--rooms N] [--token T | --secret S]
                           [--publishers N] [--audio-publishers N] [--subscribers N]
                           [--duration 60s] [--join-rate 10/s] [--layout speaker|3x3|4x4|5x5] [--no-simulcast]
                           [--invite-every 30s] [--request-timeout 15s] [--threads N] [--json FILE] [--quiet]
                           [--reconnect 30s] [--expect-participants N] [--stay SECONDS]
                           [--workers redis://HOST:PORT[/DB]]   (run over every worker of a fleet: docs/fleet.md)
    """

/// A count option: a whole number ≥ 0.
private func count(_ a: Arguments, _ name: String, default def: Int) throws(Arguments.Failure) -> Int {
    guard let v = a.value(name) else { return def }
    guard let n = Int(v), n >= 0, n <= 100_000 else { throw .badValue(name, "'\(v)' is not a count") }
    return n
}

/// `--join-rate`: `10`, `10/s` or `600/m` joins per second.
private func joinRate(_ a: Arguments) throws(Arguments.Failure) -> Double {
    guard let v = a.value("--join-rate") else { return 10 }
    var text = Substring(v)
    var scale = 1.0
    if text.hasSuffix("/s") {
        text = text.dropLast(2)
    } else if text.hasSuffix("/m") {
        text = text.dropLast(2)
        scale = 1.0 / 60
    }
    guard let r = Double(text), r > 0, r.isFinite, r * scale <= 10_000 else {
        throw .badValue("--join-rate", "'\(v)' is not a rate like 10/s")
    }
    return r * scale
}

/// `--threads N`: the load run's event loops, 1 to 64 (nil when not given).
func loopCountOption(_ a: Arguments) throws(Arguments.Failure) -> Int? {
    guard let t = a.value("--threads") else { return nil }
    guard let n = Int(t), (1...64).contains(n) else { throw .badValue("--threads", "'\(t)' is not 1…64") }
    return n
}

/// `--id-prefix`: what the bots' participant ids start with, 1-40 letters, digits, `-`, `_` or `.`
/// (nil when not given).
func idPrefixOption(_ a: Arguments) throws(Arguments.Failure) -> String? {
    guard let prefix = a.value("--id-prefix") else { return nil }
    guard !prefix.isEmpty, prefix.count <= 40,
        prefix.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) })
    else { throw .badValue("--id-prefix", "'\(prefix)' must be 1-40 letters, digits, '-', '_' or '.'") }
    return prefix
}

func parseLoadConfiguration(_ args: [String]) throws(Arguments.Failure) -> (
    LoadConfiguration, json: String?, quiet: Bool
) {
    let a = try Arguments(
        args, help: Help.load.subset(Help.load.valueOptions.union(Help.load.switches).subtracting(["--workers"])))
    if let extra = a.positionals.first { throw .unexpected(extra) }
    let url = try signalingURL(try required(a, "--server"))
    guard url.hasPrefix("ws://") else { throw .badValue("--server", "wss:// is not supported; use http:// or ws://") }
    var c = LoadConfiguration(signalingURL: url, room: try required(a, "--room"))
    c.rooms = try count(a, "--rooms", default: 1)
    guard c.rooms >= 1 else { throw .badValue("--rooms", "need at least 1") }
    c.token = a.value("--token")
    if c.token == nil {
        guard let secret = a.value("--secret") ?? ProcessInfo.processInfo.environment["UNDERSTUDY_SECRET"],
            !secret.isEmpty
        else { throw .missingValue("--token or --secret") }
        c.secret = secret
    }
    c.publishers = try count(a, "--publishers", default: 1)
    c.audioPublishers = try count(a, "--audio-publishers", default: 0)
    c.subscribers = try count(a, "--subscribers", default: 10)
    c.duration = try a.seconds("--duration", default: 60)
    c.joinRate = try joinRate(a)
    if let l = a.value("--layout") {
        guard let layout = LoadLayout(l) else { throw .badValue("--layout", "'\(l)' is not speaker, 3x3, 4x4 or 5x5") }
        c.layout = layout
    }
    c.simulcast = !a.flag("--no-simulcast")
    do { c.videoCodec = try LocalSources.videoCodecChoice(a.value("--video-codec")) } catch {
        throw .badValue("--video-codec", error.explanation)
    }
    if a.value("--invite-every") != nil { c.inviteEvery = try a.seconds("--invite-every", default: 30) }
    if a.value("--wait-for-media") != nil {
        let limit = try a.seconds("--wait-for-media", default: c.maxDuration)
        guard limit >= c.duration else { throw .badValue("--wait-for-media", "must be at least --duration") }
        c.waitForMediaUntil = limit
    }
    if a.value("--request-timeout") != nil {
        c.requestTimeout = try a.seconds("--request-timeout", default: c.requestTimeout)
        guard c.requestTimeout > 0 else { throw .badValue("--request-timeout", "must be more than 0 s") }
    }
    if let n = try loopCountOption(a) { c.loopCount = n }
    if let prefix = try idPrefixOption(a) { c.idPrefix = prefix }
    c.impair = a.value("--impair")
    if let share = a.value("--impair-share") {
        guard let value = Double(share), value >= 0, value <= 1 else {
            throw .badValue("--impair-share", "'\(share)' is not a share in [0, 1]")
        }
        c.impairShare = value
    }
    if let impair = c.impair {
        do { _ = try Impairment.parse(impair) } catch { throw .badValue("--impair", error.description) }
    }
    switch a.value("--quality-metrics") {
    case nil, "on": c.qualityMetrics = true
    case "off": c.qualityMetrics = false
    case let other?: throw .badValue("--quality-metrics", "'\(other.prefix(40))' is not on or off")
    }
    if a.value("--reconnect") != nil {
        let window = try a.seconds("--reconnect", default: 30)
        guard window > 0, window <= 86400 else {
            throw .badValue("--reconnect", "the window must be more than 0 s and at most a day")
        }
        c.reconnectWindow = window
    }
    if let n = a.value("--expect-participants") {
        guard let total = Int(n), (1...1_000_000).contains(total) else {
            throw .badValue("--expect-participants", "'\(n.prefix(40))' is not a count of 1…1000000")
        }
        c.expectParticipants = total
    }
    if a.value("--stay") != nil {
        c.staySeconds = try a.seconds("--stay", default: 0)
        guard c.staySeconds <= 3600 else { throw .badValue("--stay", "at most 3600 s") }
    }
    do { try c.validate() } catch { throw .badValue("options", error.description) }
    c.iceServers = try iceServers(a) ?? []
    return (c, a.value("--json"), a.flag("--quiet"))
}

func runLoad(_ args: [String]) async {
    if argumentsNameJanusServer(args) { return await runJanusLoad(args) }
    if let i = args.firstIndex(where: { $0 == "--workers" || $0.hasPrefix("--workers=") }) {
        await runDistributedLoad(args, workersAt: i)
        return
    }
    let configuration: LoadConfiguration
    let jsonPath: String?
    let quiet: Bool
    do { (configuration, jsonPath, quiet) = try parseLoadConfiguration(args) } catch {
        fail(
            args.isEmpty ? "load: \(error)\n\(loadUsage)" : "load: \(error) (see understudy load without options)",
            code: 2)
    }
    var progress: (@Sendable (LoadProgress) -> Void)?
    if !quiet { progress = { (p: LoadProgress) in logLine(p.line) } }
    let report: LoadReport
    do { report = try await LoadGen.run(configuration, progress: progress) } catch {
        loadFailed(error)
    }
    print(report.table(), terminator: "")
    if let jsonPath {
        do { try report.json().write(toFile: jsonPath, atomically: true, encoding: .utf8) } catch {
            fail("load: cannot write \(jsonPath): \(error)", code: 1)
        }
    }
    // Every bot failed to join, or nothing was received although publishers and subscribers ran.
    if report.joinedParticipants == 0 { fail("load: no participant could join", code: 1) }
}

/// `understudy load --workers redis://…`: the same test, split over every worker of a fleet.
private func runDistributedLoad(_ args: [String], workersAt index: Int) async {
    var rest = args
    let url: String
    if args[index].hasPrefix("--workers=") {
        url = String(args[index].dropFirst("--workers=".count))
        rest.remove(at: index)
    } else {
        guard index + 1 < args.count else { fail("load: option --workers needs a value", code: 2) }
        url = args[index + 1]
        rest.removeSubrange(index...(index + 1))
    }
    let configuration: LoadConfiguration
    let jsonPath: String?
    let quiet: Bool
    let redis: RedisURL
    do {
        (configuration, jsonPath, quiet) = try parseLoadConfiguration(rest)
        do { redis = try RedisURL(parsing: url) } catch {
            throw Arguments.Failure.badValue("--workers", error.description)
        }
        if rest.contains(where: { $0.hasPrefix("--id-prefix") }) {
            throw Arguments.Failure.badValue("--id-prefix", "each worker gets its own with --workers")
        }
    } catch {
        fail("load: \(error)", code: 2)
    }
    let log: @Sendable (String) -> Void = { message in if !quiet { logLine(message) } }
    let report: LoadReport
    do {
        report = try await DistributedLoad(store: FleetStore(redis: RedisClient(url: redis)), log: log).run(
            configuration,
            // Without --threads each worker uses one I/O thread per core of its own.
            threadsPerWorker: rest.contains { $0 == "--threads" || $0.hasPrefix("--threads=") }
                ? configuration.loopCount : nil)
    } catch {
        fail("load: \(error)", code: 3)
    }
    print(report.table() + report.workerTable(), terminator: "")
    if let jsonPath {
        do { try report.json().write(toFile: jsonPath, atomically: true, encoding: .utf8) } catch {
            fail("load: cannot write \(jsonPath): \(error)", code: 1)
        }
    }
    if report.joinedParticipants == 0 { fail("load: no participant could join", code: 1) }
}

/// Ends a load run that failed, with its exit status: 2 a bad configuration, 3 no server answered,
/// 4 the server refused, 1 anything else (`understudy load`, against a room server or `janus://`).
func loadFailed(_ error: LoadError) -> Never {
    switch error {
    case .invalidConfiguration(let m): fail("load: \(m)", code: 2)
    case .unreachable: fail("load: \(error)", code: 3)
    case .refused: fail("load: \(error)", code: 4)
    case .failed: fail("load: \(error)", code: 1)
    }
}
