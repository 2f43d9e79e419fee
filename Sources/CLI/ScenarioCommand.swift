import Foundation
import RoomServer
import Scenario
import Signaling

/// `understudy scenario FILE.json… [--server URL] [--secret S] [--junit FILE] [--out DIR] [--quiet]`:
/// runs scripted stage tests (docs/scenarios.md). Without `--server` (and without a `server` in the
/// file) the embedded room server runs in this process. Exit code: 0 when every step and expectation
/// held, 1 when one did not, 2 for a malformed file or bad options.
func runScenario(_ args: [String]) async {
    let a: Arguments
    do {
        a = try Arguments(args, help: Help.scenario)
        guard !a.positionals.isEmpty else { throw Arguments.Failure.missingPositional("scenario file (FILE.json)") }
    } catch {
        fail(
            "scenario: \(error)\nusage: understudy scenario FILE.json… [--server URL] [--secret S] [--junit FILE] "
                + "[--out DIR] [--quiet]", code: 2)
    }

    // Every file is checked before anything runs, so a typo in the third file costs no waiting.
    var scenarios: [Scenario] = []
    for path in a.positionals {
        do {
            scenarios.append(try Scenario.load(path: path))
        } catch {
            fail("scenario: \(error)", code: 2)
        }
    }

    // Janus rooms run only the part of a scenario that a VideoRoom has: checked before anything runs too.
    for scenario in scenarios {
        guard let server = a.value("--server") ?? scenario.server, server.hasPrefix("janus://") else { continue }
        do { _ = try JanusRoomURL(server) } catch { fail("scenario: bad value for --server: \(error)", code: 2) }
        if let first = JanusScenarioRunner.unsupported(scenario).first { fail("scenario: \(first)", code: 2) }
    }

    let quiet = a.flag("--quiet")
    let secretOption = a.value("--secret") ?? ProcessInfo.processInfo.environment["UNDERSTUDY_SECRET"]
    var embedded: RoomServer?
    defer { embedded?.stop() }
    var results: [ScenarioResult] = []
    for (i, scenario) in scenarios.enumerated() {
        let url: String
        let secret: String
        if let server = a.value("--server") ?? scenario.server {
            if server.hasPrefix("janus://") {
                results.append(await runJanusScenario(scenario, server: server, index: i, count: scenarios.count, a))
                continue
            }
            guard let secretOption, !secretOption.isEmpty else {
                fail("scenario: a --server needs --secret or UNDERSTUDY_SECRET to sign the bots' tokens", code: 2)
            }
            url = server
            secret = secretOption
        } else {
            if embedded == nil {
                var configuration = RoomServerConfiguration()
                configuration.listenPort = 0
                configuration.udpPortLow = 0
                let server = RoomServer(configuration: configuration)
                do { try server.start() } catch { fail("scenario: cannot start the embedded room server: \(error)") }
                if !quiet { logLine("scenario: embedded room server on \(server.signalingURL)") }
                embedded = server
            }
            guard let server = embedded else { fail("scenario: no room server") }
            url = server.signalingURL
            secret = server.secret
        }
        var out: String?
        if let dir = a.value("--out") {
            out = scenarios.count > 1 ? (dir as NSString).appendingPathComponent("\(i)") : dir
        }
        let environment = ScenarioEnvironment(
            signalingURL: url, secret: secret, outputDirectory: out,
            log: { line in if !quiet { logLine("scenario: \(line)") } })
        if !quiet { logLine("scenario: running '\(scenario.name)' (\(scenario.path))") }
        let result = await ScenarioRunner.run(scenario, environment: environment)
        print(result.summary)
        for (bot, files) in result.recordings.sorted(by: { $0.key < $1.key }) {
            for (peer, path) in files.sorted(by: { $0.key < $1.key }) {
                print("  recording: \(bot) ← \(peer): \(path)")
            }
        }
        results.append(result)
    }

    if let junit = a.value("--junit") {
        do {
            try ScenarioResult.junitXML(results).write(toFile: junit, atomically: true, encoding: .utf8)
        } catch {
            fail("scenario: cannot write \(junit): \(error)", code: 2)
        }
    }
    exit(results.allSatisfy(\.passed) ? 0 : 1)
}

/// One scenario in a Janus VideoRoom (docs/janus.md), already checked by `JanusScenarioRunner.unsupported`.
private func runJanusScenario(_ scenario: Scenario, server: String, index: Int, count: Int, _ a: Arguments) async
    -> ScenarioResult
{
    let room: JanusRoomURL
    do { room = try JanusRoomURL(server) } catch { fail("scenario: bad value for --server: \(error)", code: 2) }
    let quiet = a.flag("--quiet")
    var out: String?
    if let dir = a.value("--out") { out = count > 1 ? (dir as NSString).appendingPathComponent("\(index)") : dir }
    if !quiet { logLine("scenario: running '\(scenario.name)' (\(scenario.path)) in Janus room \(room.room)") }
    let result = await JanusScenarioRunner.run(
        scenario, room: room, outputDirectory: out, log: { line in if !quiet { logLine("scenario: \(line)") } })
    print(result.summary)
    for (bot, files) in result.recordings.sorted(by: { $0.key < $1.key }) {
        for (peer, path) in files.sorted(by: { $0.key < $1.key }) { print("  recording: \(bot) ← \(peer): \(path)") }
    }
    return result
}
