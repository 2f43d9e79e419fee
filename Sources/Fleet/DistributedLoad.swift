import Foundation
import LoadGen
import Redis

/// How a worker runs its share of a distributed load test; the CLI owns the `understudy load`
/// grammar, the fleet only moves argument lists.
public struct FleetLoadRunner: Sendable {
    /// Throws when the arguments are not a valid `understudy load` command line.
    public var validate: @Sendable ([String]) throws -> Void
    public var run: @Sendable ([String]) async throws -> LoadReport

    public init(
        validate: @escaping @Sendable ([String]) throws -> Void,
        run: @escaping @Sendable ([String]) async throws -> LoadReport
    ) {
        self.validate = validate
        self.run = run
    }
}

/// One load test over every live worker of a fleet (`understudy load --workers redis://…`): the
/// bots are split by the workers' free capacity, every worker starts at the same instant (a
/// barrier in Redis), and the reports are merged into one (``LoadReport/merged(_:lost:)``).
public struct DistributedLoad: Sendable {
    /// The total bots and join rate of the test; each worker gets its share.
    public struct Plan: Sendable, Equatable {
        public var publishers: Int
        public var audioPublishers: Int
        public var subscribers: Int
        public var joinRate: Double
        public var duration: Double

        public init(publishers: Int, audioPublishers: Int, subscribers: Int, joinRate: Double, duration: Double) {
            self.publishers = publishers
            self.audioPublishers = audioPublishers
            self.subscribers = subscribers
            self.joinRate = joinRate
            self.duration = duration
        }
    }

    /// One worker's part of a ``Plan``.
    public struct Share: Sendable, Equatable {
        public var worker: String
        public var publishers: Int
        public var audioPublishers: Int
        public var subscribers: Int
        public var bots: Int { publishers + audioPublishers + subscribers }
    }

    public let store: FleetStore
    public let log: @Sendable (String) -> Void

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

    /// Runs the test: `baseArguments` is the `understudy load` command line without the counts.
    public func run(baseArguments: [String], plan: Plan) async throws -> LoadReport {
        let workers = try await store.workers().filter(\.load)
        guard !workers.isEmpty else { throw RedisError.unexpectedReply("no live worker in the fleet") }
        let shares = Self.split(plan, weights: workers.map { ($0.id, $0.capacity - $0.used) }).filter { $0.bots > 0 }
        let totalBots = max(1, shares.reduce(0) { $0 + $1.bots })
        let test = "load-\(UUID().uuidString.prefix(8).lowercased())"
        let keys = store.keys
        for share in shares {
            let args =
                baseArguments + [
                    "--publishers", String(share.publishers), "--audio-publishers", String(share.audioPublishers),
                    "--subscribers", String(share.subscribers),
                    "--join-rate", String(plan.joinRate * Double(share.bots) / Double(totalBots)),
                    "--id-prefix", "\(FleetWorker.safeName(share.worker))-",
                ]
            let assignment = RedisJSON.encode(LoadAssignment(test: test, arguments: args))
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

/// What the controller sends one worker.
struct LoadAssignment: Codable, Sendable {
    var test: String
    var arguments: [String]
}
