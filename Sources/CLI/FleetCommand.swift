import Agent
import Fleet
import Foundation
import Redis
import RoomProtocol

// `understudy worker` and `understudy jobs`: agent jobs run by a fleet over Redis
// (docs/fleet.md).

func redisURL(_ a: Arguments) throws(Arguments.Failure) -> RedisURL {
    let text = try required(a, "--redis")
    do { return try RedisURL(parsing: text) } catch { throw .badValue("--redis", error.description) }
}

func positiveInt(_ a: Arguments, _ name: String) throws(Arguments.Failure) -> Int? {
    guard let text = a.value(name) else { return nil }
    guard let n = Int(text), n > 0 else { throw .badValue(name, "'\(text)' is not a positive whole number") }
    return n
}

func runWorker(_ args: [String]) async {
    await runCommand("worker") {
        let a = try Arguments(args, help: Help.worker)
        if let extra = a.positionals.first { throw Arguments.Failure.unexpected(extra) }
        let url = try redisURL(a)
        let capacity = try positiveInt(a, "--capacity") ?? FleetWorker.defaultCapacity
        let out = a.value("--out") ?? "jobs"
        let id = a.value("--id") ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())"
        guard !id.isEmpty, id.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
            throw Arguments.Failure.badValue("--id", "'\(id)' must be letters, digits, '-', '_' or '.'")
        }
        let format = a.value("--log-format") ?? "text"
        guard format == "text" || format == "json" else {
            throw Arguments.Failure.badValue("--log-format", "'\(format)' is not text or json")
        }
        var options = FleetWorker.Options(id: id, capacity: capacity, outputDirectory: out)
        options.claimTimeout = try a.seconds("--claim-timeout", default: options.claimTimeout)
        do {
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        } catch {
            throw Arguments.Failure.badValue("--out", "cannot create '\(out)': \(error.localizedDescription)")
        }
        let log = jsonLogger(format == "json", fields: ["worker": id])
        let redis = RedisClient(url: url, label: "fleet")
        do { try await redis.command(["PING"]) } catch { fail("worker: \(error)") }
        ShutdownSignal.shared.install()
        let worker = FleetWorker(
            store: FleetStore(redis: redis), blocking: RedisClient(url: url, timeout: 3, label: "fleet-read"),
            options: options, recording: .roomAgent, loadRunner: .loadGen, log: log)
        await worker.run(until: { ShutdownSignal.shared.isRequested })
    }
}

func runJobs(_ args: [String]) async {
    guard let action = args.first else { fail("jobs: missing submit|list|stop", code: 2) }
    let rest = Array(args.dropFirst())
    do {
        switch action {
        case "submit": try await submitJob(rest)
        case "list": try await listJobs(rest)
        case "stop": try await stopJob(rest)
        case "workers": try await listWorkers(rest)
        default: throw Arguments.Failure.badValue("jobs", "'\(action)' is not submit, list, stop or workers")
        }
    } catch let e as Arguments.Failure {
        fail("jobs: \(e)", code: 2)
    } catch {
        fail("jobs \(action): \(error)")
    }
}

/// `jobs submit --redis URL [--job-id ID] [--cost N] <understudy join options>`: the join options are
/// checked here with the same rules as `understudy join` (``AgentJobOptions``), and stored with a
/// token so that any worker can run them.
private func submitJob(_ args: [String]) async throws {
    var joinArgs: [String] = []
    var fleetArgs: [String] = []
    var i = 0
    while i < args.count {
        let name = args[i].split(separator: "=", maxSplits: 1).first.map(String.init) ?? args[i]
        let isFleet = ["--redis", "--job-id", "--cost"].contains(name)
        let takesValue = !args[i].contains("=") && !joinSwitches.contains(name)
        let count = takesValue && i + 1 < args.count ? 2 : 1
        if isFleet { fleetArgs += args[i..<(i + count)] } else { joinArgs += args[i..<(i + count)] }
        i += count
    }
    let f = try Arguments(fleetArgs, help: Help.jobs.subset(["--redis", "--job-id", "--cost"]))
    let url = try redisURL(f)
    // By name, not prefix: `--record-format` is a job option.
    let names = joinArgs.map { $0.split(separator: "=", maxSplits: 1).first.map(String.init) ?? $0 }
    for forbidden in ["--record", "--metrics"] where names.contains(forbidden) {
        throw Arguments.Failure.badValue(forbidden, "a worker chooses it (jobs write under the worker's --out)")
    }
    let parsed = try Arguments(joinArgs, valueOptions: joinValueOptions, switches: joinSwitches)
    if let extra = parsed.positionals.first { throw Arguments.Failure.unexpected(extra) }
    _ = try required(parsed, "--server")
    let room = try required(parsed, "--room")
    let spec: FleetJobSpec
    do {
        let repeated = Dictionary(
            uniqueKeysWithValues: AgentJobOptions.repeatableFlags.map { ($0, parsed.values($0)) })
        var agent = try AgentJobOptions(flags: parsed.options, repeated: repeated)
        // Store a token, never the secret: a worker needs nothing but Redis to run the job. A token
        // signed here is bound to no participant, so the job only takes a free id and never replaces
        // anyone (docs/fleet.md, "Jobs never impersonate").
        if agent.token.isEmpty {
            agent.token = try roomToken(parsed, room: room, participant: nil)
            if let relayRoom = agent.relayRoom, !relayRoom.isEmpty, relayRoom != room {
                agent.relayRoomToken = try roomToken(parsed, room: relayRoom, participant: nil)
            }
        }
        // Media paths are on the worker's disk: the worker checks them, with a deadline.
        spec = try FleetJobSpec.submission(id: f.value("--job-id"), agent: agent, cost: try positiveInt(f, "--cost"))
    } catch let error as AgentJobOptions.Invalid {
        throw Arguments.Failure.badValue(error.option, error.reason)
    }
    let redis = RedisClient(url: url)
    try await FleetStore(redis: redis).submit(spec)
    print(spec.id)
}

private func listJobs(_ args: [String]) async throws {
    let a = try Arguments(args, help: Help.jobs.subset(["--redis", "--json"]))
    if let extra = a.positionals.first { throw Arguments.Failure.unexpected(extra) }
    let store = FleetStore(redis: RedisClient(url: try redisURL(a)))
    let listing = try await store.list()
    // A record that is not valid is reported and skipped; the others are listed (and exit 0).
    for bad in listing.skipped { logLine("jobs list: skipped job '\(bad.jobId)': \(bad.reason)") }
    let jobs = listing.jobs.map(\.redacted)
    if a.flag("--json") {
        try printJSON(jobs)
        return
    }
    print("JOB\tROOM\tSTATE\tWORKER\tATTEMPTS\tFILES")
    for job in jobs {
        print(
            "\(job.spec.id)\t\(job.spec.room)\t\(job.state.rawValue)\t\(job.worker ?? "-")\t\(job.attempts.count)\t\(job.files.count)"
        )
    }
}

private func listWorkers(_ args: [String]) async throws {
    let a = try Arguments(args, help: Help.jobs.subset(["--redis", "--json"]))
    if let extra = a.positionals.first { throw Arguments.Failure.unexpected(extra) }
    let workers = try await FleetStore(redis: RedisClient(url: try redisURL(a))).workers()
    if a.flag("--json") {
        try printJSON(workers)
        return
    }
    print("WORKER\tHOST\tCAPACITY\tUSED\tJOBS")
    for w in workers { print("\(w.id)\t\(w.host)\t\(w.capacity)\t\(w.used)\t\(w.jobs.joined(separator: ","))") }
}

private func stopJob(_ args: [String]) async throws {
    let a = try Arguments(args, help: Help.jobs.subset(["--redis"]))
    guard let id = a.positionals.first else { throw Arguments.Failure.missingPositional("job id") }
    if a.positionals.count > 1 { throw Arguments.Failure.unexpected(a.positionals[1]) }
    guard FleetJobID.isValid(id) else { throw Arguments.Failure.badValue("job id", FleetJobID.refusal(id)) }
    let store = FleetStore(redis: RedisClient(url: try redisURL(a)))
    guard try await store.requestStop(id) else { fail("jobs stop: no job '\(id)'") }
    logLine("asked job \(id) to stop")
}
