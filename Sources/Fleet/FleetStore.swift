import Foundation
import Redis

/// Jobs and workers in Redis: what `understudy jobs`, the room server's admin API and the workers
/// share. Every call is one short Redis round trip (or a few), never a blocking read.
public struct FleetStore: Sendable {
    /// The fleet's Redis.
    public let redis: RedisClient
    /// Its keys.
    public let keys: FleetKeys

    /// The jobs and workers of the fleet at `redis`, under `keys`.
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
        guard FleetJobID.isValid(spec.id) else { throw .server(FleetJobID.refusal(spec.id)) }
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

    /// Job `id`'s status record as read: nil when there is none, a ``FleetRecordError`` when what
    /// Redis holds is not a valid record of that job (data in Redis is untrusted input).
    public func record(_ id: String) async throws(RedisError) -> Result<FleetJobStatus, FleetRecordError>? {
        guard FleetJobID.isValid(id) else { return .failure(FleetRecordError(FleetJobID.refusal(id))) }
        let value = try await redis.command(["HGET", keys.job(id), "status"])
        guard let text = value.string else { return nil }
        do throws(FleetRecordError) { return .success(try FleetRecords.status(text, jobId: id)) } catch {
            return .failure(error)
        }
    }

    /// Job `id`'s status; nil when there is none. A record that is not valid throws
    /// ``RedisError/unexpectedReply(_:)`` with the reason.
    public func status(_ id: String) async throws(RedisError) -> FleetJobStatus? {
        switch try await record(id) {
        case nil: return nil
        case .success(let status): return status
        case .failure(let error): throw .unexpectedReply("job '\(FleetJobID.shown(id))': \(error)")
        }
    }

    /// What ``list()`` read: the valid jobs, oldest first, and the records it skipped with the reason.
    public struct Listing: Sendable {
        /// The valid jobs, oldest first.
        public var jobs: [FleetJobStatus]
        /// Job ids (as shown by ``FleetJobID/shown(_:)``) whose record is not valid, with the reason.
        public var skipped: [(jobId: String, reason: String)]
    }

    /// Every job, oldest first. A record that is not valid is skipped and reported in
    /// ``Listing/skipped``, so one bad record never hides the others.
    public func list() async throws(RedisError) -> Listing {
        let ids = try await redis.command(["ZRANGE", keys.jobIndex, "0", "-1"]).array?.map(\.string) ?? []
        var listing = Listing(jobs: [], skipped: [])
        for id in ids {
            guard let id else {
                listing.skipped.append(("?", "the job index holds a member that is not text"))
                continue
            }
            switch try await record(id) {
            case nil: continue
            case .success(let job): listing.jobs.append(job)
            case .failure(let error): listing.skipped.append((FleetJobID.shown(id), error.description))
            }
        }
        return listing
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

    /// Live workers (those whose registration has not expired); a registration that does not decode
    /// is skipped.
    public func workers() async throws(RedisError) -> [FleetWorkerInfo] {
        let ids = try await redis.command(["SMEMBERS", keys.workerSet]).array?.compactMap(\.string) ?? []
        var live: [FleetWorkerInfo] = []
        for id in ids.sorted() {
            guard let text = try await redis.command(["GET", keys.worker(id)]).string else { continue }
            guard let info = try? RedisJSON.decode(FleetWorkerInfo.self, text), info.id == id else { continue }
            live.append(info)
        }
        return live
    }

    /// Job statuses as JSON text (what `jobs list --json` and `GET /admin/jobs` show), with their
    /// secrets redacted (``FleetJobStatus/redacted``): an API never returns a token.
    public static func encodeForDisplay(_ jobs: [FleetJobStatus]) -> String { RedisJSON.encode(jobs.map(\.redacted)) }
}
