import Foundation
import LoadGen
import Redis

/// One load test over every live worker of a fleet (`understudy load --workers redis://…`): the
/// bots are split by the workers' free capacity, every worker starts at the same instant (a
/// barrier in Redis), and the reports are merged into one (``LoadReport/merged(_:lost:)``).
public struct DistributedLoad: Sendable {
    /// The total bots and join rate of the test; each worker gets its share.
    public struct Plan: Sendable, Equatable {
        /// Bots of each kind, over all workers (per room, as ``LoadConfiguration`` counts them).
        public var publishers: Int
        /// Audio-only publishers over all workers.
        public var audioPublishers: Int
        /// Subscribers over all workers.
        public var subscribers: Int
        /// Joins per second over all workers.
        public var joinRate: Double
        /// Seconds of the test.
        public var duration: Double

        /// A plan with these totals.
        public init(publishers: Int, audioPublishers: Int, subscribers: Int, joinRate: Double, duration: Double) {
            self.publishers = publishers
            self.audioPublishers = audioPublishers
            self.subscribers = subscribers
            self.joinRate = joinRate
            self.duration = duration
        }

        /// The totals of `configuration`.
        public init(_ configuration: LoadConfiguration) {
            self.init(
                publishers: configuration.publishers, audioPublishers: configuration.audioPublishers,
                subscribers: configuration.subscribers, joinRate: configuration.joinRate,
                duration: configuration.duration)
        }
    }

    /// One worker's part of a ``Plan``.
    public struct Share: Sendable, Equatable {
        /// The worker id.
        public var worker: String
        /// Its publishers.
        public var publishers: Int
        /// Its audio-only publishers.
        public var audioPublishers: Int
        /// Its subscribers.
        public var subscribers: Int
        /// Its bots, all kinds.
        public var bots: Int { publishers + audioPublishers + subscribers }
    }

    /// The fleet whose workers run the test.
    public let store: FleetStore
    /// Progress lines (shares, reports, lost workers).
    public let log: @Sendable (String) -> Void

    /// A controller for the fleet of `store`.
    public init(store: FleetStore, log: @escaping @Sendable (String) -> Void) {
        self.store = store
        self.log = log
    }

    /// Splits each kind of bot in proportion to the weights (largest remainder, so the parts add up).
    public static func split(_ plan: Plan, weights: [(worker: String, weight: Int)]) -> [Share] {
        func parts(_ total: Int) -> [Int] {
            let sum = weights.reduce(0) { $0 + max(1, $1.weight) }
            var out = weights.map { total * max(1, $0.weight) / sum }
            var rest = total - out.reduce(0, +)
            let order = weights.indices.sorted {
                (total * max(1, weights[$0].weight)) % sum > (total * max(1, weights[$1].weight)) % sum
            }
            var i = 0
            while rest > 0 {
                out[order[i % order.count]] += 1
                rest -= 1
                i += 1
            }
            return out
        }
        let p = parts(plan.publishers)
        let a = parts(plan.audioPublishers)
        let s = parts(plan.subscribers)
        return weights.indices.map {
            Share(worker: weights[$0].worker, publishers: p[$0], audioPublishers: a[$0], subscribers: s[$0])
        }
    }

    /// Runs the test `configuration` describes over the fleet's live load workers: each worker gets
    /// `configuration` with its share of the bots and of the join rate, and an id prefix of its own.
    /// With `threadsPerWorker` nil each worker runs one I/O thread per core of its own.
    public func run(_ configuration: LoadConfiguration, threadsPerWorker: Int? = nil) async throws -> LoadReport {
        try configuration.validate()
        let plan = Plan(configuration)
        let workers = try await store.workers().filter(\.load)
        guard !workers.isEmpty else { throw RedisError.unexpectedReply("no live worker in the fleet") }
        let shares = Self.split(plan, weights: workers.map { ($0.id, $0.capacity - $0.used) }).filter { $0.bots > 0 }
        let totalBots = max(1, shares.reduce(0) { $0 + $1.bots })
        let test = "load-\(UUID().uuidString.prefix(8).lowercased())"
        let keys = store.keys
        for share in shares {
            var part = configuration
            part.publishers = share.publishers
            part.audioPublishers = share.audioPublishers
            part.subscribers = share.subscribers
            part.joinRate = plan.joinRate * Double(share.bots) / Double(totalBots)
            part.idPrefix = String("\(FleetWorker.safeName(share.worker))-".prefix(40))
            let assignment = RedisJSON.encode(
                LoadAssignment(test: test, configuration: part, threads: threadsPerWorker))
            try await store.redis.pipeline([
                ["XADD", keys.workerLoad(share.worker), "MAXLEN", "~", "100", "*", "assignment", assignment],
                ["EXPIRE", keys.workerLoad(share.worker), "3600"],
            ])
            log(
                "\(share.worker): \(share.publishers) publishers, \(share.audioPublishers) audio publishers, \(share.subscribers) subscribers"
            )
        }
        // Phase 1: every worker accepts its share (its arguments are valid there).
        let accepted = keys.loadTest(test) + ":accepted"
        let deadline = Date().addingTimeInterval(30)
        while true {
            let answers = try await store.redis.command(["HGETALL", accepted]).array?.compactMap(\.string) ?? []
            var byWorker: [String: String] = [:]
            var i = 0
            while i + 1 < answers.count {
                byWorker[answers[i]] = answers[i + 1]
                i += 2
            }
            if let refused = byWorker.first(where: { $0.value != "ok" }) {
                try await store.redis.command(["SET", keys.loadTest(test) + ":start", "abort", "EX", "3600"])
                throw RedisError.unexpectedReply("worker \(refused.key) refused its share: \(refused.value)")
            }
            if byWorker.count == shares.count { break }
            if Date() > deadline {
                try await store.redis.command(["SET", keys.loadTest(test) + ":start", "abort", "EX", "3600"])
                let missing = shares.map(\.worker).filter { byWorker[$0] == nil }
                throw RedisError.unexpectedReply("no answer from worker(s) \(missing.joined(separator: ", "))")
            }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        // Phase 2: the barrier. Every worker starts its bots at the same wall-clock instant.
        let startAt = Date().timeIntervalSince1970 + 2
        try await store.redis.command(["SET", keys.loadTest(test) + ":start", String(startAt), "EX", "3600"])
        log("\(shares.count) worker(s) start at the same instant; test \(test)")
        // Phase 3: collect the reports; a worker whose registration expires without one died.
        let reportsKey = keys.loadTest(test) + ":reports"
        var reports: [String: LoadReport] = [:]
        var lost: [(worker: String, bots: Int, status: String)] = []
        let end = Date(timeIntervalSince1970: startAt).addingTimeInterval(plan.duration + 180)
        while reports.count + lost.count < shares.count {
            for share in shares
            where reports[share.worker] == nil && !lost.contains(where: { $0.worker == share.worker }) {
                if let text = try await store.redis.command(["HGET", reportsKey, share.worker]).string {
                    if text.hasPrefix("failed: ") {
                        lost.append((share.worker, share.bots, text))
                        log("\(share.worker): \(text)")
                    } else {
                        reports[share.worker] = try RedisJSON.decode(LoadReport.self, text)
                        log("\(share.worker): report received")
                    }
                } else if try await store.redis.command(["EXISTS", keys.worker(share.worker)]).int == 0 {
                    lost.append((share.worker, share.bots, "died"))
                    log("\(share.worker): died during the test, taking \(share.bots) bots with it")
                }
            }
            if Date() > end {
                for share in shares
                where reports[share.worker] == nil && !lost.contains(where: { $0.worker == share.worker }) {
                    lost.append((share.worker, share.bots, "no report in time"))
                }
                break
            }
            try await Task.sleep(nanoseconds: 500_000_000)
        }
        let parts = shares.compactMap { share in reports[share.worker].map { (worker: share.worker, report: $0) } }
        guard let merged = LoadReport.merged(parts, lost: lost) else {
            throw RedisError.unexpectedReply("no worker reported (all died)")
        }
        return merged
    }
}

/// What the controller sends one worker: the test's id and the worker's share, a whole
/// ``LoadConfiguration``.
struct LoadAssignment: Codable, Sendable, Equatable {
    var test: String
    var configuration: LoadConfiguration
    /// I/O threads the controller asked for (`--threads`); nil: the worker's own default.
    var threads: Int?

    /// Decodes an assignment read from Redis (untrusted input): the test id follows the job id
    /// grammar and the configuration validates.
    static func parse(_ text: String) throws(FleetRecordError) -> LoadAssignment {
        guard text.utf8.count <= 1024 * 1024 else { throw FleetRecordError("load assignment over 1 MiB") }
        let assignment: LoadAssignment
        do { assignment = try JSONDecoder().decode(LoadAssignment.self, from: Data(text.utf8)) } catch {
            throw FleetRecordError("load assignment is not valid: \(error)")
        }
        guard FleetJobID.isValid(assignment.test) else { throw FleetRecordError(FleetJobID.refusal(assignment.test)) }
        var local = assignment
        local.configuration.loopCount =
            assignment.threads
            ?? LoadConfiguration(signalingURL: assignment.configuration.signalingURL, room: "r").loopCount
        return local
    }
}
