import Agent
import Foundation
import LoadGen
import Redis
import Understudy

/// A long-running process that takes agent jobs from the fleet's Redis Stream
/// through its consumer group and runs each as a ``RoomAgent`` (the model is LiveKit's Egress
/// workers). It claims a job only while it has room for it, keeps its claims fresh while the
/// jobs run, re-claims the jobs of workers that died (`XAUTOCLAIM`), and hands its jobs back when
/// it is stopped. Every attempt writes into a directory of its own, so no file is ever overwritten.
// Safe: its running jobs and state are guarded by `lock`.
public final class FleetWorker: @unchecked Sendable {
    /// How the worker runs: its id, capacity, output directory and timeouts.
    public struct Options: Sendable {
        /// The worker id (registration, consumer name, bot id prefix).
        public var id: String
        /// Stream units this worker may run at once (see ``FleetWorker/defaultCapacity``).
        public var capacity: Int
        /// Jobs write under `outputDirectory/JOB/attempt-N`.
        public var outputDirectory: String
        /// A job whose worker has not refreshed its claim for this long is taken over.
        public var claimTimeout: Double = 5
        /// How often the registration, the claims and the job statuses are refreshed.
        public var heartbeat: Double = 1
        /// How long preparing a job may take: parsing its options and checking its media paths
        /// (`--video`/`--audio` files are read, an ALSA device is opened). It runs on a thread of its
        /// own; a job whose preparation takes longer (a path that blocks on read, such as a device
        /// or a FIFO) fails, and the worker goes on with other jobs.
        public var prepareTimeout: Double = 10
        /// Attempts a job gets before it fails for good: attempts that end because the worker died
        /// or hung count, hand-backs (a stopped worker) do not. So a job that kills or hangs every
        /// worker that takes it cannot go round the fleet forever.
        public var maxAttempts: Int = 3

        /// Options for worker `id` with `capacity` stream units, writing under `outputDirectory`;
        /// the timeouts keep their defaults.
        public init(id: String, capacity: Int, outputDirectory: String) {
            self.id = id
            self.capacity = capacity
            self.outputDirectory = outputDirectory
        }
    }

    /// Stream units per core: the recording benchmark measured 0.74 % of a core per received
    /// 1 Mbit/s VP8 + Opus participant (about 135 per core); a worker keeps more than half of each
    /// core for the SDK, signalling and disk, so 60 per core.
    public static let unitsPerCore = 60
    /// ``unitsPerCore`` times the cores of this machine.
    public static var defaultCapacity: Int {
        unitsPerCore * max(1, ProcessInfo.processInfo.activeProcessorCount)
    }

    // Safe: its state is guarded by `lock`.
    private final class RunningJob: @unchecked Sendable {
        let entryId: String
        var status: FleetJobStatus
        /// Nil while the job is being prepared (see ``Options/prepareTimeout``).
        var agent: RoomAgent?
        /// When the job ends: its duration counts from its first attempt, so a job taken over
        /// records for what is left of it, not for its whole duration again.
        var deadline: Date?
        var stopRequested = false
        /// Set when the worker itself is stopping: the job goes back to the queue, not to "stopped".
        var handBack = false
        var finished = false
        init(entryId: String, status: FleetJobStatus) {
            self.entryId = entryId
            self.status = status
        }
    }

    /// The options it was started with.
    public let options: Options
    private let store: FleetStore
    /// A second connection for the blocking `XREADGROUP`, so heartbeats never wait behind it.
    private let blocking: RedisClient
    private let recording: RecordingJobRunner
    private let loadRunner: LoadShareRunner?
    /// The last load assignment seen on this worker's load stream.
    private var lastLoadEntry: String?
    private let log: @Sendable (String) -> Void
    private let lock = NSLock()
    private var running: [String: RunningJob] = [:]
    private var tasks: [String: Task<Void, Never>] = [:]
    private let startedAt = Date().timeIntervalSince1970
    private var redisDown = false
    private var skipped = 0
    private var deregistered = false
    /// The registration thread's own connection.
    private let registration: RedisClient

    /// A worker on the fleet of `store`; `blocking` is a second connection to the same Redis for the
    /// blocking reads. Recording jobs run through `recording`; with a `loadRunner` the worker also
    /// takes shares of distributed load tests (`load --workers`).
    public init(
        store: FleetStore, blocking: RedisClient, options: Options, recording: RecordingJobRunner = .roomAgent,
        loadRunner: LoadShareRunner? = nil, log: @escaping @Sendable (String) -> Void
    ) {
        self.loadRunner = loadRunner
        self.registration = RedisClient(url: store.redis.url, label: "fleet-registration")
        self.store = store
        self.blocking = blocking
        self.options = options
        self.recording = recording
        self.log = log
    }

    /// Ids of the jobs running here.
    public var runningJobs: [String] { lock.withLock { running.keys.sorted() } }

    /// Stream units in use: each job counts what it was expected to cost or what it consumes now,
    /// whichever is more.
    public var used: Int {
        lock.withLock { running.values.filter { !$0.finished }.reduce(0) { $0 + cost(of: $1) } }
    }

    private func cost(of job: RunningJob) -> Int { max(job.status.spec.cost, job.agent?.consumedIds.count ?? 0) }

    /// Stream entries and job records read from Redis that were not valid and were skipped.
    public var skippedRecords: Int { lock.withLock { skipped } }

    /// Takes and runs jobs until `shouldStop` says so; then stops every job, hands the jobs back and
    /// deregisters.
    public func run(until shouldStop: @escaping @Sendable () -> Bool) async {
        log("worker \(options.id): capacity \(options.capacity) units, jobs under \(options.outputDirectory)")
        refreshRegistration()
        _ = startRegistration(until: shouldStop)
        var lastBeat = Date.distantPast
        while !shouldStop() {
            if Date().timeIntervalSince(lastBeat) >= options.heartbeat {
                lastBeat = Date()
                await heartbeat()
            }
            let free = options.capacity - used
            if free <= 0 {
                try? await Task.sleep(nanoseconds: 200_000_000)
                continue
            }
            do throws(RedisError) {
                try await store.ensureGroup()
                var entry = try await claimAbandoned()
                if entry == nil { entry = try await readNew() }
                if let entry {
                    if let job = entry.job {
                        await take(entryId: entry.id, jobId: job)
                    } else {
                        // Acknowledged, so that it is not claimed again and again.
                        try await ack(entry.id)
                        lock.withLock { skipped += 1 }
                        log("worker \(options.id): skipped stream entry \(entry.id): it names no valid job id")
                    }
                }
                setRedis(up: true, nil)
            } catch {
                setRedis(up: false, error.description)
                try? await Task.sleep(nanoseconds: 500_000_000)
            }
        }
        await handBackAll()
        lock.withLock { deregistered = true }
        _ = try? await store.redis.pipeline([
            ["DEL", store.keys.worker(options.id)], ["SREM", store.keys.workerSet, options.id],
        ])
        log("worker \(options.id): stopped")
    }

    // MARK: - Claiming

    private func readNew() async throws(RedisError) -> (id: String, job: String?)? {
        let reply = try await blocking.command([
            "XREADGROUP", "GROUP", store.keys.workerGroup, options.id, "COUNT", "1", "BLOCK", "500", "STREAMS",
            store.keys.jobStream, ">",
        ])
        guard let streams = reply.array, let first = streams.first?.array, first.count == 2,
            let entries = first[1].array
        else { return nil }
        return entries.lazy.compactMap(Self.entry).first
    }

    /// A job whose worker stopped refreshing its claim (it died).
    private func claimAbandoned() async throws(RedisError) -> (id: String, job: String?)? {
        let reply = try await store.redis.command([
            "XAUTOCLAIM", store.keys.jobStream, store.keys.workerGroup, options.id,
            String(Int(options.claimTimeout * 1000)), "0-0", "COUNT", "1",
        ])
        guard let parts = reply.array, parts.count >= 2, let entries = parts[1].array else { return nil }
        return entries.lazy.compactMap(Self.entry).first
    }

    /// A stream entry's id and its job id (nil when the entry names no valid job id,
    /// ``FleetRecords/jobId(entryFields:)``).
    private static func entry(_ value: RedisValue) -> (id: String, job: String?)? {
        guard let pair = value.array, pair.count == 2, let id = pair[0].string else { return nil }
        return (id, FleetRecords.jobId(entryFields: pair[1].array?.map(\.string) ?? []))
    }

    private func take(entryId: String, jobId: String) async {
        do {
            guard let record = try await store.record(jobId) else {
                try await ack(entryId)
                return
            }
            guard case .success(var status) = record else {
                // Untrusted input: a record that is not valid is skipped (and never retried), not fatal.
                if case .failure(let error) = record {
                    log("job \(jobId): skipped, its status record is not valid: \(error)")
                }
                lock.withLock { skipped += 1 }
                try await ack(entryId)
                return
            }
            if [.done, .stopped, .failed].contains(status.state) {
                try await ack(entryId)
                return
            }
            if let owner = status.worker, owner != options.id, status.state == .running,
                try await store.redis.command(["EXISTS", store.keys.worker(owner)]).int == 1
            {
                // Its worker is alive (it was only slow to refresh): it takes the claim back itself.
                return
            }
            if try await store.stopRequested(jobId) {
                status.state = .stopped
                status.updatedAt = Date().timeIntervalSince1970
                try await store.save(status)
                try await ack(entryId)
                log("job \(jobId): stopped before it started")
                return
            }
            if status.spec.cost > options.capacity - used {
                // Not enough room here: queue it again for a worker that has it.
                try await requeue(entryId: entryId, jobId: jobId)
                try? await Task.sleep(nanoseconds: 300_000_000)
                return
            }
            if var last = status.attempts.last, last.end == nil {
                last.end = "lost (worker \(last.worker) stopped refreshing its claim)"
                last.endedAt = Date().timeIntervalSince1970
                status.attempts[status.attempts.count - 1] = last
                log("job \(jobId): taking over from worker \(last.worker)")
            }
            let counted = status.attempts.filter { $0.end != "handed back" }
            if counted.count >= options.maxAttempts {
                status.state = .failed
                status.worker = nil
                status.error =
                    "gave up after \(counted.count) attempts (the last ended: \(counted.last?.end ?? "?"))"
                status.updatedAt = Date().timeIntervalSince1970
                try await store.save(status)
                try await ack(entryId)
                log("job \(jobId): failed: \(status.error ?? "")")
                return
            }
            try await start(&status, entryId: entryId)
        } catch {
            setRedis(up: false, error.description)
        }
    }

    /// Records the attempt (before anything else, so that a worker that dies or hangs while
    /// preparing still counts it), then prepares and runs the job in a task of its own.
    private func start(_ status: inout FleetJobStatus, entryId: String) async throws(RedisError) {
        let jobId = status.spec.id
        let number = status.attempts.count + 1
        var attempt = FleetJobAttempt(
            attempt: number, worker: options.id, directory: "", files: [],
            startedAt: Date().timeIntervalSince1970, endedAt: nil, end: nil)
        guard let directory = uniqueDirectory(jobId: jobId, attempt: number) else {
            // Unreachable for ids that passed FleetJobID; kept so that no id can ever write elsewhere.
            attempt.end = "failed: job id '\(FleetJobID.shown(jobId))' does not name a directory under --out"
            attempt.endedAt = attempt.startedAt
            status.attempts.append(attempt)
            status.state = .failed
            status.error = String(attempt.end?.dropFirst("failed: ".count) ?? "")
            status.updatedAt = Date().timeIntervalSince1970
            try await store.save(status)
            try await ack(entryId)
            log("job \(jobId): refused: \(status.error ?? "")")
            return
        }
        attempt.directory = directory
        status.attempts.append(attempt)
        status.state = .running
        status.worker = options.id
        status.error = nil
        status.updatedAt = Date().timeIntervalSince1970
        try await store.save(status)
        let job = RunningJob(entryId: entryId, status: status)
        let task = Task { [weak self] in
            guard let self else { return }
            await self.prepareAndDrive(job, directory: directory)
        }
        lock.withLock {
            running[jobId] = job
            tasks[jobId] = task
        }
        log("job \(jobId): attempt \(number) on \(options.id), recording to \(directory)")
    }

    /// What preparing a job on its own thread gave, within ``Options/prepareTimeout``.
    private enum Prepared: Sendable {
        case ready(RoomAgent, duration: Double?)
        case failed(String)
        case timedOut
    }

    /// Builds the job's agent on a thread of its own: the runner checks media paths, which may
    /// block on read (a device, a FIFO, a hung mount). The worker waits at most
    /// ``Options/prepareTimeout``; a thread still blocked after that is left to itself.
    private func prepare(_ job: RunningJob, directory: String) async -> Prepared {
        let jobId = job.status.spec.id
        let spec = job.status.spec
        let outcome = OnceContinuation<Prepared>()
        return await withCheckedContinuation { continuation in
            outcome.set(continuation)
            let thread = Thread { [recording, log] in
                do {
                    let agent = try recording.makeAgent(spec, directory) { log("job \(jobId): \($0)") }
                    outcome.resume(.ready(agent, duration: spec.agent.duration))
                } catch {
                    outcome.resume(.failed("\(error)"))
                }
            }
            thread.name = "fleet-prepare"
            thread.start()
            DispatchQueue.global().asyncAfter(deadline: .now() + options.prepareTimeout) {
                outcome.resume(.timedOut)
            }
        }
    }

    private func prepareAndDrive(_ job: RunningJob, directory: String) async {
        let jobId = job.status.spec.id
        switch await prepare(job, directory: directory) {
        case .failed(let reason):
            log("job \(jobId): refused: \(reason)")
            await finish(job, end: "failed: \(reason)")
        case .timedOut:
            let reason =
                "checking the job's options and media paths took longer than \(Self.seconds(options.prepareTimeout))"
                + " (a --video or --audio path that blocks on read?)"
            log("job \(jobId): refused: \(reason)")
            await finish(job, end: "failed: \(reason)")
        case .ready(let agent, let duration):
            lock.withLock {
                job.agent = agent
                let firstStart = job.status.attempts.first?.startedAt ?? Date().timeIntervalSince1970
                job.deadline = duration.map { Date(timeIntervalSince1970: firstStart + $0) }
            }
            await drive(job, agent: agent)
        }
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    /// `OUT/JOB/attempt-N` (a further suffix if that exists), or nil when it would not be a
    /// directory two levels under `OUT`: whatever the id, a worker never writes outside `--out`.
    private func uniqueDirectory(jobId: String, attempt: Int) -> String? {
        guard FleetJobID.isValid(jobId) else { return nil }
        let out = URL(fileURLWithPath: options.outputDirectory).standardizedFileURL
        let base = out.appendingPathComponent(jobId, isDirectory: true)
        var candidate = base.appendingPathComponent("attempt-\(attempt)", isDirectory: true)
        var n = 2
        // Never reuse a directory: an earlier run (or another worker sharing the disk) may own it.
        while FileManager.default.fileExists(atPath: candidate.path) {
            candidate = base.appendingPathComponent("attempt-\(attempt)-\(n)", isDirectory: true)
            n += 1
        }
        let standardized = candidate.standardizedFileURL
        guard standardized.deletingLastPathComponent().deletingLastPathComponent().path == out.path else {
            return nil
        }
        return (options.outputDirectory as NSString).appendingPathComponent(
            "\(jobId)/\(standardized.lastPathComponent)")
    }

    /// A worker id as a bot id prefix: everything but letters, digits, `-`, `_` and `.` becomes `_`.
    static func safeName(_ id: String) -> String {
        String(id.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" })
    }

    // MARK: - Running

    /// Joins, then waits for the end: the duration, the room left, or a stop request.
    private func drive(_ job: RunningJob, agent: RoomAgent) async {
        let jobId = job.status.spec.id
        var end = "done"
        if lock.withLock({ job.handBack }) {
            // The worker began to stop while the job was being prepared.
            await finish(job, end: "handed back")
            log("job \(jobId): handed back")
            return
        }
        do {
            try await agent.start()
            while true {
                let (stop, handBack) = lock.withLock { (job.stopRequested, job.handBack) }
                if stop {
                    end = handBack ? "handed back" : "stopped"
                    break
                }
                if let failure = agent.failure {
                    // A job does not go on without its files (a full disk): it fails with the reason.
                    end = "failed: \(failure)"
                    break
                }
                if let reason = agent.leaveReason {
                    end = reason == .MANUAL_LEAVE_CALLED ? "done" : "left room: \(reason.name) (\(reason.rawValue))"
                    break
                }
                if let deadline = lock.withLock({ job.deadline }), Date() >= deadline { break }
                try? await Task.sleep(nanoseconds: 100_000_000)
            }
        } catch {
            end = "failed: \(error)"
        }
        await agent.stop()
        await finish(job, end: end)
        log("job \(jobId): \(end)")
    }

    private func files(of job: RunningJob) -> [String] {
        guard let agent = job.agent else { return [] }
        var files = agent.outputFiles.filter { FileManager.default.fileExists(atPath: $0) }
        if let manifest = agent.manifestPath, FileManager.default.fileExists(atPath: manifest) {
            files.append(manifest)
        }
        return files
    }

    private func manifest(of job: RunningJob) -> String? {
        guard let path = job.agent?.manifestPath, let data = FileManager.default.contents(atPath: path),
            data.count <= 256 * 1024
        else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    private func finish(_ job: RunningJob, end: String) async {
        let jobId = job.status.spec.id
        let status: FleetJobStatus = lock.withLock {
            job.finished = true
            var s = job.status
            var attempt = s.attempts[s.attempts.count - 1]
            attempt.files = files(of: job)
            attempt.manifest = manifest(of: job)
            attempt.end = end
            attempt.endedAt = Date().timeIntervalSince1970
            s.attempts[s.attempts.count - 1] = attempt
            switch end {
            case "done": s.state = .done
            case "stopped": s.state = .stopped
            case "handed back": s.state = .queued
            default:
                s.state = .failed
                s.error = end.hasPrefix("failed: ") ? String(end.dropFirst("failed: ".count)) : end
            }
            if s.state == .queued { s.worker = nil }
            s.updatedAt = Date().timeIntervalSince1970
            job.status = s
            return s
        }
        // The final status must reach Redis: retry through a short outage.
        for delay in [0.0, 0.5, 1, 2, 4] {
            if delay > 0 { try? await Task.sleep(nanoseconds: UInt64(delay * 1e9)) }
            do {
                try await store.save(status)
                if end == "handed back" {
                    try await requeue(entryId: job.entryId, jobId: jobId)
                } else {
                    try await ack(job.entryId)
                }
                break
            } catch {
                setRedis(up: false, error.description)
            }
        }
        lock.withLock {
            running[jobId] = nil
            tasks[jobId] = nil
        }
    }

    /// Stops every job (their files are finished) and queues them again for other workers.
    private func handBackAll() async {
        let tasks: [Task<Void, Never>] = lock.withLock {
            for job in running.values {
                job.handBack = true
                job.stopRequested = true
            }
            return Array(self.tasks.values)
        }
        for task in tasks { await task.value }
        if !tasks.isEmpty { log("worker \(options.id): handed back \(tasks.count) job(s)") }
    }

    // MARK: - Heartbeat

    /// Job statuses (with the files written so far), stop requests and load assignments.
    private func heartbeat() async {
        let jobs: [RunningJob] = lock.withLock { running.values.filter { !$0.finished } }
        do {
            for job in jobs {
                if try await store.stopRequested(job.status.spec.id) { lock.withLock { job.stopRequested = true } }
                let status: FleetJobStatus? = lock.withLock {
                    guard !job.finished else { return nil }
                    job.status.attempts[job.status.attempts.count - 1].files = files(of: job)
                    job.status.attempts[job.status.attempts.count - 1].manifest = manifest(of: job)
                    job.status.updatedAt = Date().timeIntervalSince1970
                    return job.status
                }
                if let status { try await store.save(status) }
            }
            try await pollLoadAssignments()
            setRedis(up: true, nil)
        } catch {
            setRedis(up: false, error.description)
        }
    }

    /// The registration and the claims are refreshed from a thread of their own: a worker whose
    /// task pool is busy (a load test's bots joining) must never look dead to the fleet.
    private func startRegistration(until shouldStop: @escaping @Sendable () -> Bool) -> Thread {
        let thread = Thread { [self] in
            while !shouldStop() && !lock.withLock({ deregistered }) {
                refreshRegistration()
                Thread.sleep(forTimeInterval: options.heartbeat)
            }
        }
        thread.name = "fleet-registration"
        thread.start()
        return thread
    }

    private func refreshRegistration() {
        let jobs: [RunningJob] = lock.withLock { running.values.filter { !$0.finished } }
        let info = FleetWorkerInfo(
            id: options.id, capacity: options.capacity, used: used, jobs: jobs.map(\.status.spec.id).sorted(),
            host: ProcessInfo.processInfo.hostName, startedAt: startedAt, updatedAt: Date().timeIntervalSince1970,
            load: loadRunner != nil)
        let ttl = String(Int(max(options.claimTimeout, options.heartbeat * 3) * 1000))
        var commands: [[String]] = [
            ["SET", store.keys.worker(options.id), RedisJSON.encode(info), "PX", ttl],
            ["SADD", store.keys.workerSet, options.id],
        ]
        // Refreshing the claims resets their idle time, so nobody takes over a live job.
        for job in jobs {
            commands.append([
                "XCLAIM", store.keys.jobStream, store.keys.workerGroup, options.id, "0", job.entryId, "JUSTID",
            ])
        }
        do {
            try registration.pipelineSync(commands)
        } catch {
            setRedis(up: false, error.description)
        }
    }

    // MARK: - Distributed load

    private func pollLoadAssignments() async throws(RedisError) {
        guard let loadRunner else { return }
        let stream = store.keys.workerLoad(options.id)
        guard let last = lastLoadEntry else {
            // Start after whatever was assigned before this worker existed.
            let newest = try await store.redis.command(["XREVRANGE", stream, "+", "-", "COUNT", "1"])
            lastLoadEntry = newest.array?.first?.array?.first?.string ?? "0-0"
            return
        }
        let reply = try await store.redis.command(["XREAD", "COUNT", "1", "STREAMS", stream, last])
        guard let entries = reply.array?.first?.array?.last?.array, let entry = entries.first?.array, entry.count == 2,
            let id = entry[0].string, let fields = entry[1].array, fields.count == 2, let text = fields[1].string
        else { return }
        lastLoadEntry = id
        // Untrusted input: an assignment that does not decode (or names no valid test) is skipped.
        let assignment: LoadAssignment
        do { assignment = try LoadAssignment.parse(text) } catch {
            lock.withLock { skipped += 1 }
            log("worker \(options.id): skipped load assignment \(id): \(error)")
            return
        }
        Task { [self] in await runLoad(assignment, runner: loadRunner) }
    }

    private func runLoad(_ assignment: LoadAssignment, runner: LoadShareRunner) async {
        let keys = store.keys
        let prefix = keys.loadTest(assignment.test)
        do {
            do throws(LoadError) {
                try assignment.configuration.validate()
            } catch {
                try await store.redis.command(["HSET", prefix + ":accepted", options.id, "\(error)"])
                return
            }
            try await store.redis.pipeline([
                ["HSET", prefix + ":accepted", options.id, "ok"], ["EXPIRE", prefix + ":accepted", "3600"],
            ])
            log("load test \(assignment.test): accepted; waiting for the start")
            var startAt: Double?
            let deadline = Date().addingTimeInterval(120)
            while startAt == nil && Date() < deadline {
                if let text = try await store.redis.command(["GET", prefix + ":start"]).string {
                    if text == "abort" {
                        log("load test \(assignment.test): aborted by the controller")
                        return
                    }
                    startAt = Double(text)
                }
                try? await Task.sleep(nanoseconds: 50_000_000)
            }
            guard let startAt else { return }
            let wait = startAt - Date().timeIntervalSince1970
            if wait > 0 { try? await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
            let result: String
            do {
                let report = try await runner.run(assignment.configuration)
                result = RedisJSON.encode(report)
                log("load test \(assignment.test): done, \(report.joinedParticipants) joined")
            } catch {
                result = "failed: \(error)"
                log("load test \(assignment.test): \(result)")
            }
            try await store.redis.pipeline([
                ["HSET", prefix + ":reports", options.id, result], ["EXPIRE", prefix + ":reports", "3600"],
            ])
        } catch {
            setRedis(up: false, "\(error)")
        }
    }

    private func ack(_ entryId: String) async throws(RedisError) {
        try await store.redis.command(["XACK", store.keys.jobStream, store.keys.workerGroup, entryId])
    }

    private func requeue(entryId: String, jobId: String) async throws(RedisError) {
        _ = try await store.redis.pipeline([
            ["XACK", store.keys.jobStream, store.keys.workerGroup, entryId],
            ["XADD", store.keys.jobStream, "*", "job", jobId],
        ])
    }

    private func setRedis(up: Bool, _ why: String?) {
        let changed: Bool = lock.withLock {
            let was = !redisDown
            redisDown = !up
            return was != up
        }
        guard changed else { return }
        log(
            up
                ? "worker \(options.id): Redis reachable again"
                : "worker \(options.id): Redis unreachable: \(why ?? "?")")
    }
}

/// A continuation resumed once, by whichever of several racing events comes first.
// Safe: the continuation is guarded by `lock`, so exactly one racer resumes it.
private final class OnceContinuation<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, Never>?

    func set(_ continuation: CheckedContinuation<T, Never>) {
        lock.withLock { self.continuation = continuation }
    }

    func resume(_ value: T) {
        let waiting: CheckedContinuation<T, Never>? = lock.withLock {
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(returning: value)
    }
}
