import Agent
import LoadGen

/// How a ``FleetWorker`` turns an agent job into a running ``RoomAgent``.
///
/// ``roomAgent`` is the real one, for both kinds of job (``FleetJobKind``). The worker calls ``makeAgent`` on a thread of its own, with a
/// deadline (``FleetWorker/Options/prepareTimeout``): it reads the job's media paths, which may block.
public struct RecordingJobRunner: Sendable {
    /// Builds the agent of `job`, recording into `directory` and logging through `log`; throws when
    /// the job cannot run here (its options, a media path).
    public var makeAgent:
        @Sendable (_ job: FleetJobSpec, _ directory: String, _ log: @escaping @Sendable (String) -> Void) throws ->
            RoomAgent

    /// A runner that builds agents with `makeAgent`.
    public init(
        makeAgent: @escaping @Sendable (FleetJobSpec, String, @escaping @Sendable (String) -> Void) throws -> RoomAgent
    ) {
        self.makeAgent = makeAgent
    }

    /// A ``RoomAgent`` with the job's options (``AgentJobOptions/roomAgentOptions(recordDirectory:checkMedia:)``),
    /// its media paths checked.
    /// A composite job (``FleetJobKind/composite``) writes its composite files in `directory` and records no
    /// per-participant files.
    public static let roomAgent = RecordingJobRunner { job, directory, log in
        var options = try job.agentOptions(in: directory).roomAgentOptions(recordDirectory: directory, checkMedia: true)
        options.recordTracks = job.kind == .recording
        return try RoomAgent(options: options, log: log)
    }
}

/// How a ``FleetWorker`` runs its share of a distributed load test (``DistributedLoad``).
///
/// ``loadGen`` is the real one; the share arrives validated (``LoadConfiguration/validate()``).
public struct LoadShareRunner: Sendable {
    /// Runs the share and returns its report.
    public var run: @Sendable (_ share: LoadConfiguration) async throws -> LoadReport

    /// A runner that runs shares with `run`.
    public init(run: @escaping @Sendable (LoadConfiguration) async throws -> LoadReport) {
        self.run = run
    }

    /// The share's bots in this process (``LoadGen/run(_:progress:)``).
    public static let loadGen = LoadShareRunner { share in try await LoadGen.run(share) }
}
