import Agent
import Foundation
import Redis
import RoomProtocol
import RoomServer
import Signaling

extension FleetJobSpec {
    /// The job `id` (nil: a new `job-XXXXXXXX`) that runs an agent with `agent`, as `jobs submit`
    /// and `POST /admin/jobs` queue it: the id is checked (``FleetJobID``) and the options' grammar
    /// too (``AgentJobOptions/validate()``; media paths are the worker's to check, with a deadline).
    /// Without an `--id` the agent joins as `rec-ID`; without a `cost` a job is expected to receive
    /// its `--max-video` participants, or two.
    public static func submission(id: String?, agent: AgentJobOptions, cost: Int?) throws(AgentJobOptions.Invalid)
        -> FleetJobSpec
    {
        let id = id ?? "job-\(UUID().uuidString.prefix(8).lowercased())"
        guard FleetJobID.isValid(id) else { throw AgentJobOptions.Invalid("--job-id", FleetJobID.refusal(id)) }
        if let cost, cost <= 0 { throw AgentJobOptions.Invalid("--cost", "must be a positive whole number") }
        var agent = agent
        if agent.id == nil { agent.id = "rec-\(id)" }
        try agent.validate()
        try checkCompositeNames(agent.composite ?? [])
        let streams = max(2, agent.maxVideo ?? 2)
        return FleetJobSpec(
            id: id, agent: agent, cost: cost ?? (agent.composite == nil ? streams : compositeCost + streams),
            submittedAt: Date().timeIntervalSince1970)
    }

    /// The stream units a composite job adds to its received streams when no `--cost` is given: the
    /// composite benchmark's 720p/30 H.264 composite of four streams took about a third of a core
    /// (``FleetWorker/unitsPerCore`` is 60 units a core).
    public static let compositeCost = 20

    /// A composite job writes its files into its attempt's directory (a worker never writes outside its
    /// `--out`, and a re-claimed job's next attempt gets new files): each `--composite` file output is a
    /// plain file name (`room.mp4`, `live.m3u8`); `rtmp://` URLs are pushed to as they are.
    static func checkCompositeNames(_ outputs: [String]) throws(AgentJobOptions.Invalid) {
        for output in outputs where !output.lowercased().hasPrefix("rtmp://") {
            guard !output.contains("/"), !output.hasPrefix("."),
                !output.unicodeScalars.contains(where: { $0.value < 0x20 })
            else {
                throw AgentJobOptions.Invalid(
                    "--composite",
                    "'\(AgentJobOptions.shown(output))': a job's composite file is a plain name (such as room.mp4), "
                        + "written in the job's directory on its worker")
            }
        }
    }

    /// `agent`'s options as a worker runs them in `directory`: each composite file name becomes a path
    /// in it. Names that are not plain (a record not made by ``submission(id:agent:cost:)``) are refused.
    public func agentOptions(in directory: String) throws(AgentJobOptions.Invalid) -> AgentJobOptions {
        var options = agent
        guard let outputs = agent.composite else { return options }
        try Self.checkCompositeNames(outputs)
        options.composite = outputs.map {
            $0.lowercased().hasPrefix("rtmp://") ? $0 : (directory as NSString).appendingPathComponent($0)
        }
        return options
    }

    /// A token for a job's agent in `roomId`: `allow_join`, bound to no participant, valid for a day.
    /// Under the room's rule for such tokens the job takes only a free id (4005 otherwise), so
    /// whatever `--id` it was given it never replaces a participant (docs/fleet.md, "Jobs never
    /// impersonate").
    public static func token(roomId: String, secret: String) -> String {
        RoomToken.sign(
            RoomToken(apikey: "understudy", permissions: ["allow_join"], roomId: roomId, lifetime: 24 * 3600),
            secret: secret)
    }
}

/// `serve --jobs redis://…`: `POST /admin/jobs` queues jobs for the server's own rooms on a fleet
/// (``RoomServer/RoomServer/jobService``). Each job joins through this server with tokens the
/// server signs for it.
public final class FleetJobService: RoomJobService, @unchecked Sendable {
    private let store: FleetStore
    private let serverURL: String
    private let secret: String

    /// Jobs on the fleet of `store`, joining the server at `serverURL` (`http://HOST:PORT`, as other
    /// machines reach it) with tokens signed with `secret`.
    public init(store: FleetStore, serverURL: String, secret: String) {
        self.store = store
        self.serverURL = serverURL
        self.secret = secret
    }

    /// The options a request may not give: the server and the worker choose them.
    public static let reservedOptions: Set<String> = [
        "--server", "--room", "--token", "--secret", "--record", "--metrics",
    ]

    /// Queues a job for `roomId` with these `understudy join` options (``AgentJobOptions/init(arguments:)``;
    /// not ``reservedOptions``): 3073 with the reason for bad options, id or cost, 3047 when the
    /// fleet's Redis is unreachable. Returns `{jobId, roomId, state: "queued"}`.
    public func submit(roomId: String, options: [String], jobId: String?, cost: Int?) async throws(RoomError)
        -> JSONValue
    {
        for option in options {
            let name = option.split(separator: "=", maxSplits: 1).first.map(String.init) ?? option
            if Self.reservedOptions.contains(name) {
                throw RoomError(3073, "option \(name) is chosen by the server or the worker")
            }
        }
        let spec: FleetJobSpec
        do throws(AgentJobOptions.Invalid) {
            var agent = try AgentJobOptions(arguments: options)
            agent.server = serverURL
            agent.room = roomId
            agent.token = FleetJobSpec.token(roomId: roomId, secret: secret)
            if let relayRoom = agent.relayRoom, !relayRoom.isEmpty {
                agent.relayRoomToken = FleetJobSpec.token(roomId: relayRoom, secret: secret)
            }
            // Syntax only: nothing from a request touches the file system here, so no request can
            // block a server thread.
            spec = try FleetJobSpec.submission(id: jobId, agent: agent, cost: cost)
        } catch {
            if error.option == "--job-id" || error.option == "--cost" { throw RoomError(3073, error.reason) }
            throw RoomError(3073, "bad job options: \(error)", cause: error)
        }
        do {
            try await store.submit(spec)
        } catch {
            if case .server(let message) = error { throw RoomError(3073, message) }
            throw RoomError(3047, "the job fleet is unreachable: \(error)", cause: error)
        }
        return ["jobId": .string(spec.id), "roomId": .string(roomId), "state": .string("queued")]
    }

    /// `{jobs: [status…], skipped: N}` (only `roomId`'s jobs when given), secrets redacted;
    /// `skippedJobs` lists the records that are not valid for a listing of every room.
    public func list(roomId: String?) async throws(RoomError) -> JSONValue {
        let listing: FleetStore.Listing
        do { listing = try await store.list() } catch {
            throw RoomError(3047, "the job fleet is unreachable: \(error)", cause: error)
        }
        let shown = listing.jobs.filter { roomId == nil || $0.spec.room == roomId }
        // Secrets redacted; records that are not valid skipped and counted (their room is unknown,
        // so a room-scoped token sees only how many).
        let encoded = FleetStore.encodeForDisplay(shown)
        var body: [String: JSONValue] = [
            "jobs": (try? JSONValue.parse(encoded)) ?? .array([]), "skipped": .number(Double(listing.skipped.count)),
        ]
        if roomId == nil {
            body["skippedJobs"] = .array(
                listing.skipped.map { ["jobId": .string($0.jobId), "reason": .string($0.reason)] })
        }
        return .object(body)
    }

    /// Asks job `jobId` to stop: 4003 when there is no such job (or it is another room's), 3073 for
    /// an id outside the job id grammar.
    public func stop(jobId: String, roomId: String?) async throws(RoomError) -> JSONValue {
        guard FleetJobID.isValid(jobId) else { throw RoomError(3073, FleetJobID.refusal(jobId)) }
        do {
            guard let status = try await store.status(jobId), roomId == nil || status.spec.room == roomId else {
                throw RoomError(4003, "no job '\(jobId)'")
            }
            _ = try await store.requestStop(jobId)
        } catch let error as RoomError {
            throw error
        } catch {
            throw RoomError(3047, "the job fleet is unreachable: \(error)", cause: error)
        }
        return ["jobId": .string(jobId), "stopping": .bool(true)]
    }

    /// Claims job `jobId`'s webhook event `key` with `SET … NX` on a key that lives a day (longer than
    /// any server polls the same record); true when this call set it or Redis did not answer.
    public func claimEvent(jobId: String, key: String) async -> Bool {
        do {
            let reply = try await store.redis.command([
                "SET", store.keys.jobEvent(jobId, key), "1", "NX", "EX", "86400",
            ])
            return reply.string == "OK"
        } catch {
            return true
        }
    }
}
