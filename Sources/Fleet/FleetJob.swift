import Foundation

/// What a recording or relay job asks for: an `understudy join` command line that a worker runs as a
/// `RoomAgent`, with the cost it is expected to have.
public struct FleetJobSpec: Codable, Sendable, Equatable {
    public var id: String
    /// The `understudy join` options (`--server`, `--room`, `--token`, `--consume`, `--record-format`, …),
    /// without `--record`: the worker chooses the directory.
    public var joinArguments: [String]
    /// Expected cost in stream units (one unit: one received 1 Mbit/s VP8 + Opus participant).
    public var cost: Int
    public var room: String
    public var submittedAt: Double

    public init(id: String, joinArguments: [String], cost: Int, room: String, submittedAt: Double) {
        self.id = id
        self.joinArguments = joinArguments
        self.cost = cost
        self.room = room
        self.submittedAt = submittedAt
    }
}

/// One run of a job on one worker; a job that outlives its worker gets a further attempt elsewhere.
public struct FleetJobAttempt: Codable, Sendable, Equatable {
    public var attempt: Int
    public var worker: String
    public var directory: String
    /// Every file written so far (recordings and the agent's manifest), absolute paths on the worker.
    public var files: [String]
    public var startedAt: Double
    public var endedAt: Double?
    /// `done`, `stopped`, `failed: …`, `handed back` (worker stopped) or `lost` (worker died).
    public var end: String?
    /// The agent's manifest (participants, stage, mode changes, files) as last written, so it
    /// survives a worker whose disk is gone.
    public var manifest: String?
}

/// The state of a job, as `jobs list` shows it.
public enum FleetJobState: String, Codable, Sendable {
    case queued, running, done, stopped, failed
}

/// A job as stored in Redis.
public struct FleetJobStatus: Codable, Sendable, Equatable {
    public var spec: FleetJobSpec
    public var state: FleetJobState
    public var worker: String?
    public var attempts: [FleetJobAttempt]
    public var error: String?
    public var updatedAt: Double

    /// Every file of every attempt, in the order they were written.
    public var files: [String] { attempts.flatMap(\.files) }
}

/// A worker's registration, refreshed every second.
public struct FleetWorkerInfo: Codable, Sendable, Equatable {
    public var id: String
    public var capacity: Int
    public var used: Int
    public var jobs: [String]
    public var host: String
    public var startedAt: Double
    public var updatedAt: Double
    /// Whether the worker takes distributed load assignments.
    public var load: Bool
}
