import Agent
import Fleet
import Foundation
import Redis
import RoomServer
import Signaling

// `understudy worker` and `understudy jobs`: recording and relay jobs run by a fleet over Redis
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
    do {
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
            options: options,
            makeAgent: { joinArguments, directory in
                let parsed = try Arguments(joinArguments, valueOptions: joinValueOptions, switches: joinSwitches)
                var (agentOptions, duration) = try joinAgentOptions(parsed)
                agentOptions.recordDirectory = directory
                return (agentOptions, duration)
            }, loadRunner: fleetLoadRunner, log: log)
        await worker.run(until: { ShutdownSignal.shared.isRequested })
    } catch let e as Arguments.Failure {
        fail("worker: \(e)", code: 2)
    } catch {
        fail("worker: \(error)")
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
/// checked here with the same rules as `understudy join`, and stored with a token so that any worker
/// can run them.
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
    let id = f.value("--job-id") ?? "job-\(UUID().uuidString.prefix(8).lowercased())"
    guard FleetJobID.isValid(id) else { throw Arguments.Failure.badValue("--job-id", FleetJobID.refusal(id)) }
    let parsed = try Arguments(joinArgs, valueOptions: joinValueOptions, switches: joinSwitches)
    // Media paths are on the worker's disk: the worker checks them, with a deadline.
    let (options, _) = try joinAgentOptions(parsed, checkMedia: false)
    // Store a token, never the secret: a worker needs nothing but Redis to run the job. A token
    // signed here is bound to no participant, so the job only takes a free id and never replaces
    // anyone (docs/fleet.md, "Jobs never impersonate").
    var stored = removing(["--secret"], from: joinArgs)
    if parsed.value("--token") == nil {
        stored += ["--token", try roomToken(parsed, room: options.roomId, participant: nil)]
    }
    if parsed.value("--id") == nil { stored += ["--id", "rec-\(id)"] }
    // Without a measured figure, a job is expected to receive its --max-video participants or two.
    let cost = try positiveInt(f, "--cost") ?? max(2, options.maxVideo ?? 2)
    let spec = FleetJobSpec(
        id: id, joinArguments: stored, cost: cost, room: options.roomId, submittedAt: Date().timeIntervalSince1970)
    let redis = RedisClient(url: url)
    try await FleetStore(redis: redis).submit(spec)
    print(id)
}

private func removing(_ names: Set<String>, from args: [String]) -> [String] {
    var out: [String] = []
    var i = 0
    while i < args.count {
        let name = args[i].split(separator: "=", maxSplits: 1).first.map(String.init) ?? args[i]
        if names.contains(name) {
            i += args[i].contains("=") ? 1 : 2
            continue
        }
        out.append(args[i])
        i += 1
    }
    return out
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
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        print(String(decoding: try encoder.encode(jobs), as: UTF8.self))
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
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        print(String(decoding: try encoder.encode(workers), as: UTF8.self))
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

/// `serve --jobs redis://…`: `POST /admin/jobs` queues jobs for the server's own rooms on a fleet.
/// Each job joins through this server with a token the server signs for it.
final class ServeJobService: RoomJobService, Sendable {
    private let store: FleetStore
    private let serverURL: String
    private let secret: String

    init(store: FleetStore, serverURL: String, secret: String) {
        self.store = store
        self.serverURL = serverURL
        self.secret = secret
    }

    func submit(roomId: String, options: [String], jobId: String?, cost: Int?) async throws(RoomError) -> JSONValue {
        let id = jobId ?? "job-\(UUID().uuidString.prefix(8).lowercased())"
        guard FleetJobID.isValid(id) else { throw RoomError(3073, FleetJobID.refusal(id)) }
        if let cost, cost <= 0 { throw RoomError(3073, "cost must be a positive whole number") }
        for option in options {
            let name = option.split(separator: "=", maxSplits: 1).first.map(String.init) ?? option
            if ["--server", "--room", "--token", "--secret", "--record", "--metrics"].contains(name) {
                throw RoomError(3073, "option \(name) is chosen by the server or the worker")
            }
        }
        // The token is bound to no participant: under the room's rule for such tokens the job takes
        // only a free id (4005 otherwise), so whatever `--id` a moderator gives it, it never
        // replaces a participant (docs/fleet.md, "Jobs never impersonate").
        let token = RoomToken.sign(
            RoomToken(apikey: "understudy", permissions: ["allow_join"], roomId: roomId, lifetime: 24 * 3600),
            secret: secret)
        var args = ["--server", serverURL, "--room", roomId, "--token", token] + options
        let parsed: RoomAgent.Options
        do {
            let a = try Arguments(args, valueOptions: joinValueOptions, switches: joinSwitches)
            if a.value("--id") == nil { args += ["--id", "rec-\(id)"] }
            // Syntax only: nothing from a request touches the file system here, so no request can
            // block a server thread. The worker checks media paths, with a deadline.
            parsed = try joinAgentOptions(a, checkMedia: false).options
        } catch {
            throw RoomError(3073, "bad job options: \(error)", cause: error)
        }
        let spec = FleetJobSpec(
            id: id, joinArguments: args, cost: cost ?? max(2, parsed.maxVideo ?? 2), room: roomId,
            submittedAt: Date().timeIntervalSince1970)
        do {
            try await store.submit(spec)
        } catch {
            if case .server(let message) = error { throw RoomError(3073, message) }
            throw RoomError(3047, "the job fleet is unreachable: \(error)", cause: error)
        }
        return ["jobId": .string(id), "roomId": .string(roomId), "state": .string("queued")]
    }

    func list(roomId: String?) async throws(RoomError) -> JSONValue {
        let listing: FleetStore.Listing
        do { listing = try await store.list() } catch {
            throw RoomError(3047, "the job fleet is unreachable: \(error)", cause: error)
        }
        let shown = listing.jobs.filter { roomId == nil || $0.spec.room == roomId }
        // Secrets redacted; records that are not valid skipped and counted (their room is unknown,
        // so a room-scoped token sees only how many).
        let encoded = FleetStore.encodeForDisplay(shown)
        var body: [String: JSONValue] = [
            "jobs": (try? JSONValue.parse(encoded)) ?? .array([]), "skipped": .number(Double(listing.skipped.count)),
        ]
        if roomId == nil {
            body["skippedJobs"] = .array(
                listing.skipped.map { ["jobId": .string($0.jobId), "reason": .string($0.reason)] })
        }
        return .object(body)
    }

    func stop(jobId: String, roomId: String?) async throws(RoomError) -> JSONValue {
        guard FleetJobID.isValid(jobId) else { throw RoomError(3073, FleetJobID.refusal(jobId)) }
        do {
            guard let status = try await store.status(jobId), roomId == nil || status.spec.room == roomId else {
                throw RoomError(4003, "no job '\(jobId)'")
            }
            _ = try await store.requestStop(jobId)
        } catch let error as RoomError {
            throw error
        } catch {
            throw RoomError(3047, "the job fleet is unreachable: \(error)", cause: error)
        }
        return ["jobId": .string(jobId), "stopping": .bool(true)]
    }
}
