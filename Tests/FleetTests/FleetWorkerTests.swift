import Agent
import Foundation
import Redis
import Testing

@testable import Fleet

// Issue 31: a job's options never block a worker or escape its --out.

@Suite(.serialized) struct FleetWorkerTests {
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
