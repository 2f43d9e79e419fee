/// The Redis keys of a fleet (docs/fleet.md lists them with their lifetimes). Every key starts
/// with a prefix so that several fleets, or a fleet and a cluster, can share one Redis.
public struct FleetKeys: Sendable, Equatable {
    /// The prefix of every key (default `understudy:fleet`).
    public var prefix: String

    /// The keys of the fleet under `prefix`.
    public init(prefix: String = "understudy:fleet") { self.prefix = prefix }

    /// The job stream (Redis Stream); its entries carry a job id.
    public var jobStream: String { "\(prefix):jobs" }
    /// The consumer group every worker reads the job stream through.
    public var workerGroup: String { "workers" }
    /// Job ids by submission time (sorted set), for `jobs list`.
    public var jobIndex: String { "\(prefix):jobs:index" }
    /// One hash per job: spec, state, attempts, files.
    public func job(_ id: String) -> String { "\(prefix):job:\(id)" }
    /// Set once when a server claims job `id`'s webhook event `key` (a day's TTL), so a cluster sends it once.
    public func jobEvent(_ id: String, _ key: String) -> String { "\(prefix):job:\(id):event:\(key)" }
    /// Worker ids ever seen (set); the live ones also have ``worker(_:)``.
    public var workerSet: String { "\(prefix):workers" }
    /// A worker's registration (JSON), refreshed every second with a short TTL.
    public func worker(_ id: String) -> String { "\(prefix):worker:\(id)" }
    /// The prefix of a distributed load test's keys (`…:accepted`, `…:start`, `…:reports`).
    public func loadTest(_ id: String) -> String { "\(prefix):load:\(id)" }
    /// A worker's stream of load-test assignments.
    public func workerLoad(_ worker: String) -> String { "\(prefix):worker:\(worker):load" }
}
