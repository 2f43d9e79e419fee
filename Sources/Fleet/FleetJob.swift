import Agent
import Foundation

/// What a job makes of its room.
public enum FleetJobKind: String, Codable, Sendable {
    /// Each consumed participant's own files (and the manifest), as `understudy join --record` writes them.
    case recording
    /// One composite of the room (`--composite` outputs: files in the attempt's directory, or an `rtmp://`
    /// push), and the manifest; no per-participant files. A re-claimed job's next attempt writes new files
    /// (or a new HLS segment sequence) in its own directory, and the job's record lists each attempt's.
    case composite
}

/// What an agent job asks for: a ``RoomAgent`` with these options, run by a worker,
/// with the cost it is expected to have.
///
/// In Redis (and in `jobs list --json`) a spec is JSON such as
/// `{"id": "rec-1", "room": "standup", "cost": 2, "submittedAt": 1796324405.1,
/// "agent": {"server": "ws://10.0.0.5:7880", "room": "standup", "token": "…", "consume": "stage"}}`.
public struct FleetJobSpec: Codable, Sendable, Equatable {
    /// The job id (``FleetJobID``): it names the job's directory and its Redis key.
    public var id: String
    /// The agent's options, without a record directory: the worker chooses it
    /// (`OUT/JOB/attempt-N`). ``AgentJobOptions/duration`` bounds the job.
    public var agent: AgentJobOptions
    /// Expected cost in stream units (one unit: one received 1 Mbit/s VP8 + Opus participant).
    public var cost: Int
    /// The room the agent joins (``AgentJobOptions/room``), for listings by room.
    public var room: String
    /// When the job was submitted (seconds since 1970).
    public var submittedAt: Double
    /// What the job makes: ``FleetJobKind/composite`` when its agent has `--composite` outputs, else
    /// ``FleetJobKind/recording`` (also for a record stored without this field).
    public var kind: FleetJobKind { agent.composite == nil ? .recording : .composite }

    /// A job `id` that runs an agent with `agent`, in the agent's room.
    public init(id: String, agent: AgentJobOptions, cost: Int, submittedAt: Double) {
        self.id = id
        self.agent = agent
        self.cost = cost
        self.room = agent.room
        self.submittedAt = submittedAt
    }

    private enum CodingKeys: String, CodingKey { case id, agent, cost, room, submittedAt, kind }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        agent = try c.decode(AgentJobOptions.self, forKey: .agent)
        cost = try c.decode(Int.self, forKey: .cost)
        room = try c.decode(String.self, forKey: .room)
        submittedAt = try c.decode(Double.self, forKey: .submittedAt)
        // `kind` is written for readers of the record; the options decide it, so a record cannot disagree.
        _ = try c.decodeIfPresent(FleetJobKind.self, forKey: .kind)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(agent, forKey: .agent)
        try c.encode(cost, forKey: .cost)
        try c.encode(room, forKey: .room)
        try c.encode(submittedAt, forKey: .submittedAt)
        try c.encode(kind, forKey: .kind)
    }
}

/// One run of a job on one worker; a job that outlives its worker gets a further attempt elsewhere.
public struct FleetJobAttempt: Codable, Sendable, Equatable {
    /// 1 for the first attempt.
    public var attempt: Int
    /// The worker that ran it.
    public var worker: String
    /// Where it wrote, on its worker (`OUT/JOB/attempt-N`).
    public var directory: String
    /// Every file written so far (recordings and the agent's manifest), absolute paths on the worker.
    public var files: [String]
    /// When it started and ended (seconds since 1970); no end while it runs.
    public var startedAt: Double
    /// When it ended (nil while it runs).
    public var endedAt: Double?
    /// `done`, `stopped`, `failed: …`, `handed back` (worker stopped) or `lost` (worker died).
    public var end: String?
    /// The agent's manifest (participants, stage, mode changes, files) as last written, so it
    /// survives a worker whose disk is gone.
    public var manifest: String?
}

/// The state of a job, as `jobs list` shows it.
public enum FleetJobState: String, Codable, Sendable {
    /// Waiting for a worker with room for it (also after a hand-back).
    case queued
    /// An attempt runs on ``FleetJobStatus/worker``.
    case running
    /// Its duration passed, or the agent left the room normally.
    case done
    /// Stopped on request (`jobs stop`, `POST /admin/jobs/ID/stop`).
    case stopped
    /// Refused (bad options, media paths) or gave up after its attempts; see ``FleetJobStatus/error``.
    case failed
}

/// A job as stored in Redis.
public struct FleetJobStatus: Codable, Sendable, Equatable {
    /// What the job asks for.
    public var spec: FleetJobSpec
    /// Where the job stands.
    public var state: FleetJobState
    /// The worker running it (nil unless ``state`` is running).
    public var worker: String?
    /// Every attempt, oldest first.
    public var attempts: [FleetJobAttempt]
    /// Why it failed.
    public var error: String?
    /// When the record was last written (seconds since 1970).
    public var updatedAt: Double

    /// A status record; ``FleetStore/submit(_:)`` makes the first, workers the later ones.
    public init(
        spec: FleetJobSpec, state: FleetJobState, worker: String?, attempts: [FleetJobAttempt], error: String?,
        updatedAt: Double
    ) {
        self.spec = spec
        self.state = state
        self.worker = worker
        self.attempts = attempts
        self.error = error
        self.updatedAt = updatedAt
    }

    /// Every file of every attempt, in the order they were written.
    public var files: [String] { attempts.flatMap(\.files) }
}

/// A worker's registration, refreshed every second.
public struct FleetWorkerInfo: Codable, Sendable, Equatable {
    /// The worker id (`worker --id`).
    public var id: String
    /// Stream units it may run at once, and those in use.
    public var capacity: Int
    /// Stream units its running jobs take.
    public var used: Int
    /// Ids of the jobs it runs.
    public var jobs: [String]
    /// Its host name.
    public var host: String
    /// When it started and last refreshed this registration (seconds since 1970).
    public var startedAt: Double
    /// When it last refreshed this registration.
    public var updatedAt: Double
    /// Whether the worker takes distributed load assignments.
    public var load: Bool
}
