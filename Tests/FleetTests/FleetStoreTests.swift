import Fleet
import Foundation
import Redis
import Testing

@Suite struct DistributedLoadSplitTests {
    @Test func sharesAddUpAndFollowTheWeights() {
        let plan = DistributedLoad.Plan(publishers: 3, audioPublishers: 1, subscribers: 101, joinRate: 50, duration: 10)
        let shares = DistributedLoad.split(plan, weights: [("a", 100), ("b", 300)])
        #expect(shares.map(\.worker) == ["a", "b"])
        #expect(shares.reduce(0) { $0 + $1.publishers } == 3)
        #expect(shares.reduce(0) { $0 + $1.audioPublishers } == 1)
        #expect(shares.reduce(0) { $0 + $1.subscribers } == 101)
        // 101 × 1/4 = 25.25 and 101 × 3/4 = 75.75: the remainder goes to the larger fraction.
        #expect(shares[0].subscribers == 25 && shares[1].subscribers == 76)
    }

    @Test func aFullWorkerStillGetsTheSmallestShareInsteadOfDividingByZero() {
        let plan = DistributedLoad.Plan(publishers: 0, audioPublishers: 0, subscribers: 10, joinRate: 5, duration: 1)
        let shares = DistributedLoad.split(plan, weights: [("full", 0), ("free", -3)])
        #expect(shares.map(\.subscribers) == [5, 5])
    }
}

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
}

final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
