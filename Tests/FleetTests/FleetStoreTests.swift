import Foundation
import Redis
import Testing

@testable import Fleet

@Suite(.serialized) struct FleetStoreTests {
    @Test func submitListStopAndDuplicateIds() async throws {
        let server = try LocalRedisServer()
        let store = FleetStore(redis: RedisClient(url: try RedisURL(parsing: server.url)))
        let first = job("a", cost: 2, room: "r", submittedAt: 1)
        let second = job("b", cost: 3, room: "s", submittedAt: 2)
        try await store.submit(second)
        try await store.submit(first)
        let listed = try await store.list().jobs
        #expect(listed.map(\.spec.id) == ["a", "b"])  // by submission time
        #expect(listed.allSatisfy { $0.state == .queued && $0.attempts.isEmpty })
        await #expect(throws: RedisError.server("job 'a' already exists")) { try await store.submit(first) }
        #expect(try await store.requestStop("a"))
        #expect(try await !store.requestStop("missing"))
        // The queue holds one entry per submitted job, readable through the workers' group.
        let pending = try await store.redis.command(["XLEN", store.keys.jobStream])
        #expect(pending.int == 2)
        #expect(try await store.workers().isEmpty)
    }

    @Test func aJobWhoseMediaPathIsMissingFailsWithTheReason() async throws {
        let server = try LocalRedisServer()
        let url = try RedisURL(parsing: server.url)
        let store = FleetStore(redis: RedisClient(url: url))
        // The real runner: the path is checked on the worker, and the agent is never built.
        try await store.submit(job("bad", cost: 1, submittedAt: 1, video: "/nonexistent/understudy-missing.ivf"))
        let worker = FleetWorker(
            store: store, blocking: RedisClient(url: url),
            options: .init(id: "t", capacity: 4, outputDirectory: NSTemporaryDirectory()), log: { _ in })
        let done = Flag()
        let run = Task { await worker.run(until: { done.isSet }) }
        var status: FleetJobStatus?
        for _ in 0..<200 {
            status = try await store.status("bad")
            if status?.state == .failed { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        done.set()
        await run.value
        #expect(status?.state == .failed)
        #expect(status?.error?.hasPrefix("bad value for --video:") == true, "\(String(describing: status?.error))")
        #expect(status?.error?.contains("understudy-missing.ivf") == true)
        #expect(status?.attempts.map(\.worker) == ["t"])
        // Failed jobs are acknowledged: nothing is left pending for another worker to retry.
        let pending = try await store.redis.command(["XPENDING", store.keys.jobStream, store.keys.workerGroup])
        #expect(pending.array?.first?.int == 0)
    }

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
}
