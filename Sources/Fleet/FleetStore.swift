import Foundation
import Redis

/// Jobs and workers in Redis: what `understudy jobs`, the room server's admin API and the workers
/// share. Every call is one short Redis round trip (or a few), never a blocking read.
public struct FleetStore: Sendable {
    public let redis: RedisClient
    public let keys: FleetKeys

    public init(redis: RedisClient, keys: FleetKeys = FleetKeys()) {
        self.redis = redis
        self.keys = keys
    }

    /// Creates the job stream and its consumer group if missing (from the stream's start, so jobs
    /// submitted before any worker existed are taken too).
    public func ensureGroup() async throws(RedisError) {
        do {
            try await redis.command(["XGROUP", "CREATE", keys.jobStream, keys.workerGroup, "0", "MKSTREAM"])
        } catch {
            if case .server(let message) = error, message.hasPrefix("BUSYGROUP") { return }
            throw error
        }
    }

    /// Stores the job and queues it; returns its id.
    @discardableResult
    public func submit(_ spec: FleetJobSpec) async throws(RedisError) -> String {
        try await ensureGroup()
        let status = FleetJobStatus(
            spec: spec, state: .queued, worker: nil, attempts: [], error: nil, updatedAt: Date().timeIntervalSince1970)
        let created = try await redis.command(["HSETNX", keys.job(spec.id), "status", RedisJSON.encode(status)])
        guard created.int == 1 else { throw .server("job '\(spec.id)' already exists") }
        _ = try await redis.pipeline([
            ["ZADD", keys.jobIndex, String(spec.submittedAt), spec.id],
            ["XADD", keys.jobStream, "*", "job", spec.id],
        ])
        return spec.id
    }

    public func status(_ id: String) async throws(RedisError) -> FleetJobStatus? {
        let value = try await redis.command(["HGET", keys.job(id), "status"])
        guard let text = value.string else { return nil }
        return try RedisJSON.decode(FleetJobStatus.self, text)
    }

    /// Every job, oldest first.
    public func list() async throws(RedisError) -> [FleetJobStatus] {
        let ids = try await redis.command(["ZRANGE", keys.jobIndex, "0", "-1"]).array?.compactMap(\.string) ?? []
        var jobs: [FleetJobStatus] = []
        for id in ids { if let job = try await status(id) { jobs.append(job) } }
        return jobs
    }

    /// Asks whoever runs the job to stop it (it finishes its files); a queued job is stopped when taken.
    /// False when there is no such job.
    public func requestStop(_ id: String) async throws(RedisError) -> Bool {
        guard try await status(id) != nil else { return false }
        try await redis.command(["HSET", keys.job(id), "desired", "stop"])
        return true
    }

    func stopRequested(_ id: String) async throws(RedisError) -> Bool {
        try await redis.command(["HGET", keys.job(id), "desired"]).string == "stop"
    }

    func save(_ status: FleetJobStatus) async throws(RedisError) {
        try await redis.command(["HSET", keys.job(status.spec.id), "status", RedisJSON.encode(status)])
    }

    /// Live workers (those whose registration has not expired).
    public func workers() async throws(RedisError) -> [FleetWorkerInfo] {
        let ids = try await redis.command(["SMEMBERS", keys.workerSet]).array?.compactMap(\.string) ?? []
        var live: [FleetWorkerInfo] = []
        for id in ids.sorted() {
            guard let text = try await redis.command(["GET", keys.worker(id)]).string else { continue }
            live.append(try RedisJSON.decode(FleetWorkerInfo.self, text))
        }
        return live
    }

    /// Job statuses as JSON text (what `jobs list --json` and `GET /admin/jobs` show).
    public static func encodeForDisplay(_ jobs: [FleetJobStatus]) -> String { RedisJSON.encode(jobs) }
}
