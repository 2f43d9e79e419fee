import Agent
import Foundation
import Redis
import Testing

@testable import Fleet

// Issue 31: what a worker and `jobs list` read from Redis is untrusted input, and a job's options
// never block a worker or escape its --out.

@Suite struct FleetJobIDTests {
    @Test func theGrammarIsLettersDigitsDotUnderscoreDashUpTo64() {
        for good in ["a", "rec-1", "standup.rec_2", String(repeating: "x", count: 64), "...", ".a"] {
            #expect(FleetJobID.isValid(good), "\(good)")
        }
        for bad in ["", ".", "..", "a/b", "../x", "/abs", "ü", "a b", "a\u{0}", String(repeating: "x", count: 65)] {
            #expect(!FleetJobID.isValid(bad), "\(bad)")
        }
    }

    @Test func aStreamEntryNamesAJobOnlyWithAValidId() {
        #expect(FleetRecords.jobId(entryFields: ["job", "rec-1"]) == "rec-1")
        #expect(FleetRecords.jobId(entryFields: ["job", ".."]) == nil)
        #expect(FleetRecords.jobId(entryFields: ["job", nil]) == nil)
        #expect(FleetRecords.jobId(entryFields: ["other", "x"]) == nil)
        #expect(FleetRecords.jobId(entryFields: ["job"]) == nil)
    }

    @Test func aStatusRecordMustNameItsOwnValidJob() throws {
        let spec = job("a", cost: 2, submittedAt: 1)
        let status = FleetJobStatus(spec: spec, state: .queued, worker: nil, attempts: [], error: nil, updatedAt: 1)
        let text = RedisJSON.encode(status)
        #expect(try FleetRecords.status(text, jobId: "a") == status)
        #expect(throws: FleetRecordError.self) { try FleetRecords.status(text, jobId: "b") }
        #expect(throws: FleetRecordError.self) { try FleetRecords.status("{", jobId: "a") }
        var escaping = status
        escaping.spec.id = ".."
        #expect(throws: FleetRecordError.self) { try FleetRecords.status(RedisJSON.encode(escaping), jobId: "..") }
        var free = status
        free.spec.cost = 0
        #expect(throws: FleetRecordError.self) { try FleetRecords.status(RedisJSON.encode(free), jobId: "a") }
    }

    @Test func shownStatusesCarryNoSecrets() {
        var agent = AgentJobOptions(server: "http://h:1", room: "r", token: "SECRET-TOKEN")
        agent.iceServers = "turn:u:TURN-PASSWORD@h:3478"
        agent.relayRoom = "other"
        agent.relayRoomToken = "RELAY-TOKEN"
        agent.consume = "all"
        let status = FleetJobStatus(
            spec: FleetJobSpec(id: "a", agent: agent, cost: 2, submittedAt: 1), state: .queued, worker: nil,
            attempts: [], error: nil, updatedAt: 1)
        let shown = FleetStore.encodeForDisplay([status])
        for secret in ["SECRET-TOKEN", "TURN-PASSWORD", "RELAY-TOKEN"] { #expect(!shown.contains(secret)) }
        #expect(status.redacted.spec.agent.consume == "all")
        #expect(status.redacted.spec.agent.token == "[redacted]")
        #expect(status.redacted.spec.agent.iceServers == "[redacted]")
    }

    @Test func aStatusRecordWhoseAgentOptionsAreNotValidIsRefused() throws {
        let good = FleetJobStatus(
            spec: job("a", cost: 2, submittedAt: 1), state: .queued, worker: nil, attempts: [], error: nil,
            updatedAt: 1)
        #expect(try FleetRecords.status(RedisJSON.encode(good), jobId: "a") == good)
        var bad: [FleetJobStatus] = []
        for change in [
            { (o: inout AgentJobOptions) in o.server = "ftp://h" }, { $0.consume = "," }, { $0.mode = "LOUD" },
            { $0.token = "" }, { $0.duration = -1 }, { $0.relayRoom = "r" }, { $0.recordFormat = "mp4" },
            { $0.consumeKinds = "smell" }, { $0.maxVideo = -2 },
        ] as [(inout AgentJobOptions) -> Void] {
            var status = good
            change(&status.spec.agent)
            bad.append(status)
        }
        var otherRoom = good
        otherRoom.spec.room = "elsewhere"
        bad.append(otherRoom)
        for status in bad {
            #expect(throws: FleetRecordError.self, "\(status.spec.agent)") {
                try FleetRecords.status(RedisJSON.encode(status), jobId: "a")
            }
        }
        // The record shape before typed jobs (join arguments) is refused with a clear reason.
        let old =
            #"{"attempts":[],"spec":{"cost":2,"id":"a","joinArguments":["--room","r"],"room":"r","submittedAt":1},"state":"queued","updatedAt":1}"#
        #expect(throws: FleetRecordError.self) { try FleetRecords.status(old, jobId: "a") }
    }
}

@Suite(.serialized) struct FleetHostileInputTests {
    @Test func oneBadStatusRecordIsSkippedAndTheOthersListed() async throws {
        let server = try LocalRedisServer()
        let store = FleetStore(redis: RedisClient(url: try RedisURL(parsing: server.url)))
        try await store.submit(job("a", cost: 2, submittedAt: 1))
        try await store.submit(job("b", cost: 2, submittedAt: 2))
        try await store.submit(job("c", cost: 2, submittedAt: 3))
        try await store.redis.command(["HSET", store.keys.job("b"), "status", "{\"spec\": 1}"])
        try await store.redis.command(["ZADD", store.keys.jobIndex, "4", "../x"])
        let listing = try await store.list()
        #expect(listing.jobs.map(\.spec.id) == ["a", "c"])
        #expect(listing.skipped.map(\.jobId) == ["b", "../x"])
    }

    @Test func aJobIdThatNamesTheParentIsNeverWrittenOutsideOut() async throws {
        let server = try LocalRedisServer()
        let url = try RedisURL(parsing: server.url)
        let store = FleetStore(redis: RedisClient(url: url))
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-out-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(at: out.deletingLastPathComponent().appendingPathComponent("attempt-1"))
        }
        // Written into Redis by hand, as a hostile writer would: `submit` refuses the id.
        let spec = job("..", cost: 1, submittedAt: 1)
        let status = FleetJobStatus(spec: spec, state: .queued, worker: nil, attempts: [], error: nil, updatedAt: 1)
        try await store.ensureGroup()
        _ = try await store.redis.pipeline([
            ["HSET", store.keys.job(".."), "status", RedisJSON.encode(status)],
            ["ZADD", store.keys.jobIndex, "1", ".."], ["XADD", store.keys.jobStream, "*", "job", ".."],
        ])
        await #expect(throws: RedisError.self) {
            try await store.submit(job("..", cost: 1, submittedAt: 1))
        }
        try await store.submit(job("fine", cost: 1, submittedAt: 2))
        let directories = Recorder()
        struct Refused: Error, CustomStringConvertible { var description: String { "refused in the test" } }
        let worker = FleetWorker(
            store: store, blocking: RedisClient(url: url),
            options: .init(id: "t", capacity: 4, outputDirectory: out.path),
            recording: RecordingJobRunner { _, directory, _ in
                directories.append(directory)
                throw Refused()
            }, log: { _ in })
        let done = Flag()
        let run = Task { await worker.run(until: { done.isSet }) }
        let finished = await waitFor(seconds: 60) { await state(store, "fine") == .failed }
        done.set()
        await run.value
        #expect(finished)
        let base = out.standardizedFileURL.path + "/"
        #expect(!directories.values.isEmpty)
        for directory in directories.values {
            #expect(URL(fileURLWithPath: directory).standardizedFileURL.path.hasPrefix(base), "\(directory)")
        }
        #expect(worker.skippedRecords >= 1)
        // The bad entry is acknowledged: nothing is left for the next worker to take again.
        let pending = try await store.redis.command(["XPENDING", store.keys.jobStream, store.keys.workerGroup])
        #expect(pending.array?.first?.int == 0)
    }

    @Test func aJobWhoseMediaPathBlocksFailsAndTheNextJobStillRuns() async throws {
        let server = try LocalRedisServer()
        let url = try RedisURL(parsing: server.url)
        let store = FleetStore(redis: RedisClient(url: url))
        // A FIFO without a writer: opening it for reading blocks, like /dev/ptmx blocks on read.
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-fifo-\(UUID().uuidString)").path
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        try await store.submit(
            job("blocks", cost: 1, submittedAt: 1, video: fifo))
        try await store.submit(job("next", cost: 1, submittedAt: 2))
        struct Refused: Error, CustomStringConvertible { var description: String { "next was prepared" } }
        var options = FleetWorker.Options(id: "t", capacity: 4, outputDirectory: NSTemporaryDirectory())
        options.prepareTimeout = 1
        let worker = FleetWorker(
            store: store, blocking: RedisClient(url: url), options: options,
            recording: RecordingJobRunner { job, _, _ in
                if let video = job.agent.video { _ = FileHandle(forReadingAtPath: video)?.readDataToEndOfFile() }
                throw Refused()
            }, log: { _ in })
        let done = Flag()
        let run = Task { await worker.run(until: { done.isSet }) }
        let bothEnded = await waitFor(seconds: 60) {
            let states = [await state(store, "blocks"), await state(store, "next")]
            return states == [.failed, .failed]
        }
        // Let the blocked open go (a writer arrives), so the test leaves no thread behind.
        let writer = open(fifo, O_WRONLY | O_NONBLOCK)
        if writer >= 0 { close(writer) }
        done.set()
        await run.value
        #expect(bothEnded)
        let blocked = try await store.status("blocks")
        #expect(blocked?.error?.contains("took longer than 1 s") == true, "\(String(describing: blocked?.error))")
        #expect(try await store.status("next")?.error == "next was prepared")
        let pending = try await store.redis.command(["XPENDING", store.keys.jobStream, store.keys.workerGroup])
        #expect(pending.array?.first?.int == 0)
    }

    @Test func aJobThatLostItsWorkerTooOftenFailsInsteadOfGoingRoundAgain() async throws {
        let server = try LocalRedisServer()
        let url = try RedisURL(parsing: server.url)
        let store = FleetStore(redis: RedisClient(url: url))
        let spec = job("killer", cost: 1, submittedAt: 1)
        let lost = (1...3).map { n in
            FleetJobAttempt(
                attempt: n, worker: "w\(n)", directory: "/x/\(n)", files: [], startedAt: Double(n),
                endedAt: Double(n) + 0.5, end: n == 3 ? nil : "lost (worker w\(n) stopped refreshing its claim)")
        }
        let handedBack = FleetJobAttempt(
            attempt: 0, worker: "w0", directory: "/x/0", files: [], startedAt: 0, endedAt: 0.5, end: "handed back")
        let status = FleetJobStatus(
            spec: spec, state: .running, worker: "w3", attempts: [handedBack] + lost, error: nil, updatedAt: 4)
        try await store.ensureGroup()
        _ = try await store.redis.pipeline([
            ["HSET", store.keys.job("killer"), "status", RedisJSON.encode(status)],
            ["ZADD", store.keys.jobIndex, "1", "killer"], ["XADD", store.keys.jobStream, "*", "job", "killer"],
        ])
        let prepared = Recorder()
        struct Refused: Error {}
        var options = FleetWorker.Options(id: "t", capacity: 4, outputDirectory: NSTemporaryDirectory())
        options.maxAttempts = 3
        let worker = FleetWorker(
            store: store, blocking: RedisClient(url: url), options: options,
            recording: RecordingJobRunner { _, directory, _ in
                prepared.append(directory)
                throw Refused()
            }, log: { _ in })
        let done = Flag()
        let run = Task { await worker.run(until: { done.isSet }) }
        let failed = await waitFor(seconds: 60) { await state(store, "killer") == .failed }
        done.set()
        await run.value
        #expect(failed)
        let final = try await store.status("killer")
        #expect(final?.error?.hasPrefix("gave up after 3 attempts") == true, "\(String(describing: final?.error))")
        #expect(final?.attempts.count == 4)
        #expect(final?.attempts.last?.end?.hasPrefix("lost") == true)
        #expect(prepared.values.isEmpty)
    }
}

/// A valid job of `id` in `room` (a server that is never reached: workers in these tests fail or
/// refuse jobs before joining).
func job(_ id: String, cost: Int, room: String = "r", submittedAt: Double, video: String? = nil) -> FleetJobSpec {
    var agent = AgentJobOptions(server: "http://127.0.0.1:9", room: room, token: "token")
    agent.video = video
    return FleetJobSpec(id: id, agent: agent, cost: cost, submittedAt: submittedAt)
}

/// A job's state, nil when it has none or Redis cannot be read.
func state(_ store: FleetStore, _ id: String) async -> FleetJobState? {
    (try? await store.status(id))?.state
}

/// Polls `condition` every 50 ms until it holds or `seconds` pass (a generous deadline, for a busy machine).
func waitFor(seconds: Double, _ condition: () async -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if await condition() { return true }
        try? await Task.sleep(nanoseconds: 50_000_000)
    }
    return await condition()
}

final class Recorder: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func append(_ value: String) { lock.withLock { list.append(value) } }
    var values: [String] { lock.withLock { list } }
}
