import Foundation
import RoomProtocol
import Signaling

/// The events a change in a job's record means (docs/protocol.md, "Webhooks"). Works on the job
/// records as `GET /admin/jobs` lists them (`spec`, `state`, `attempts`, `error`), so every job
/// kind the job service runs gets the same lifecycle.
public enum JobLifecycle {
    /// One event: its type and the reason of a failure.
    public struct Event: Equatable, Sendable {
        /// `job_started`, `job_updated`, `job_ended` or `job_failed`.
        public var type: String
        /// Why the job failed (`job_failed` only).
        public var reason: String?
        /// Names the change this event reports, the same on every node that sees it (the attempt, and for
        /// `job_updated` a digest of the files and manifest), so that in a cluster one node sends it.
        public var key: String

        /// An event of `type`, with a failure's `reason`.
        public init(type: String, reason: String? = nil, key: String? = nil) {
            self.type = type
            self.reason = reason
            self.key = key ?? type
        }
    }

    /// What changed from `previous` (nil: a job not seen before) to `current`.
    ///
    /// - `job_started`: an attempt began (the state became `running`, or a new attempt runs);
    /// - `job_updated`: the running attempt's files or manifest changed, or the job was handed back;
    /// - `job_ended`: the state became `done` or `stopped`;
    /// - `job_failed`: the state became `failed`, with the record's `error` as the reason.
    public static func events(previous: JSONValue?, current: JSONValue) -> [Event] {
        let state = current["state"]?.stringValue ?? ""
        let before = previous?["state"]?.stringValue
        let attempts = current["attempts"]?.arrayValue ?? []
        let attemptsBefore = previous?["attempts"]?.arrayValue ?? []
        let attempt = "attempt-\(attempts.count)"
        switch state {
        case "running":
            if before != "running" || attempts.count > attemptsBefore.count {
                return [Event(type: "job_started", key: "job_started:\(attempt)")]
            }
            let last = attempts.last
            let lastBefore = attemptsBefore.last
            if last?["files"] != lastBefore?["files"] || last?["manifest"] != lastBefore?["manifest"] {
                let content = JSONValue.array([last?["files"] ?? .null, last?["manifest"] ?? .null]).jsonString
                return [Event(type: "job_updated", key: "job_updated:\(attempt):\(digest(content))")]
            }
        case "queued":
            if before == "running" { return [Event(type: "job_updated", key: "job_updated:\(attempt):handed-back")] }
        case "done", "stopped":
            if before != "done" && before != "stopped" { return [Event(type: "job_ended", key: "job_ended")] }
        case "failed":
            if before != "failed" {
                return [
                    Event(type: "job_failed", reason: current["error"]?.stringValue ?? "unknown", key: "job_failed")
                ]
            }
        default: break
        }
        return []
    }

    /// FNV-1a (64 bits) of `text` in hex: a short name for a record's content that is the same in every
    /// process (not a security measure; the key only deduplicates).
    static func digest(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return String(hash, radix: 16)
    }

    /// Whether a job in this state has ended for good.
    static func isFinal(_ state: String?) -> Bool { state == "done" || state == "stopped" || state == "failed" }
}

/// Who is in a room, as auto-stop judges it.
struct RoomOccupant: Sendable {
    var id: String
    var isAgent: Bool
    var publishing: Bool
}

/// An auto-started job the server watches (auto-stop).
struct AutoJob {
    var roomId: String
    var agentId: String
    var emptySince: Double?
    var agentsOnlySince: Double?
    var noMediaSince: Double?
    var stopRequested = false
}

extension RoomServer {
    /// The agent id of a job run with `options`: its `--id`, else `rec-JOB` (``FleetJobService``'s rule).
    static func jobAgentId(options: [String], jobId: String) -> String {
        var i = 0
        while i < options.count {
            if options[i] == "--id", i + 1 < options.count { return options[i + 1] }
            if options[i].hasPrefix("--id=") { return String(options[i].dropFirst("--id=".count)) }
            i += 1
        }
        return "rec-\(jobId)"
    }

    /// A member joined room `roomId` (on the room's queue; must not block). The first who is neither
    /// an agent nor a job's agent starts the room's auto-record job (`autoRecord`).
    func memberJoined(roomId: String, participantId: String, isAgent: Bool) {
        guard let options = configuration.autoRecord, !isAgent else { return }
        let claimed: Bool = lifecycleLocked {
            guard !autoRooms.contains(roomId), !autoJobs.values.contains(where: { $0.agentId == participantId })
            else { return false }
            autoRooms.insert(roomId)
            return true
        }
        guard claimed, let jobs = jobService else {
            if claimed { _ = lifecycleLocked { autoRooms.remove(roomId) } }
            return
        }
        Task {
            do throws(RoomError) {
                let created = try await jobs.submit(roomId: roomId, options: options, jobId: nil, cost: nil)
                guard let jobId = created["jobId"]?.stringValue else { return }
                let agentId = Self.jobAgentId(options: options, jobId: jobId)
                lifecycleLocked { autoJobs[jobId] = AutoJob(roomId: roomId, agentId: agentId) }
                lifecycleLog("auto-record: job \(jobId) for room \(roomId)")
            } catch {
                _ = lifecycleLocked { autoRooms.remove(roomId) }
                lifecycleLog("auto-record: room \(roomId): cannot submit the job: \(error)")
            }
        }
    }

    /// Watches the jobs every second: sends their webhook events and stops auto-started jobs
    /// (auto-stop). Runs while the server runs; nothing to do without webhooks or a job service.
    func runLifecycle() async {
        var known: [String: JSONValue]?
        let startedAt = Date().timeIntervalSince1970
        while !isStopping {
            if let jobs = jobService {
                if let listing = try? await jobs.list(roomId: nil), let records = listing["jobs"]?.arrayValue {
                    var current: [String: JSONValue] = [:]
                    for record in records {
                        guard let id = record["spec"]?["id"]?.stringValue else { continue }
                        current[id] = record
                        // Jobs submitted before this loop started are the baseline: their past is not news.
                        let isNew = (record["spec"]?["submittedAt"]?.doubleValue ?? 0) >= startedAt
                        if known != nil || isNew {
                            for event in JobLifecycle.events(previous: known?[id], current: record) {
                                var fields: [String: JSONValue] = [
                                    "jobId": .string(id), "roomId": record["spec"]?["room"] ?? .null, "job": record,
                                ]
                                if let reason = event.reason { fields["reason"] = .string(reason) }
                                // Every node of a cluster reads the same records: the first to claim sends.
                                guard let webhooks else { continue }
                                guard await jobs.claimEvent(jobId: id, key: event.key) else {
                                    webhooks.noteSentElsewhere()
                                    continue
                                }
                                webhooks.post(event.type, fields: fields)
                            }
                        }
                        if JobLifecycle.isFinal(record["state"]?.stringValue) {
                            lifecycleLocked {
                                if let auto = autoJobs.removeValue(forKey: id) { autoRooms.remove(auto.roomId) }
                            }
                        }
                    }
                    known = current
                }
                await autoStop(jobs)
            }
            try? await Task.sleep(nanoseconds: 1_000_000_000)
        }
    }

    /// Stops each auto-started job whose room has been empty, held only agents, or had no media for
    /// its setting's time.
    private func autoStop(_ jobs: RoomJobService) async {
        let watched = lifecycleLocked { autoJobs }
        let now = Date().timeIntervalSince1970
        for (jobId, var auto) in watched where !auto.stopRequested {
            let occupants = await existingRoom(auto.roomId)?.occupancy() ?? []
            let jobAgents = Set(watched.values.map(\.agentId))
            let others = occupants.filter { !jobAgents.contains($0.id) }
            func since(_ holds: Bool, _ start: Double?) -> Double? { holds ? (start ?? now) : nil }
            auto.emptySince = since(others.isEmpty, auto.emptySince)
            auto.agentsOnlySince = since(others.allSatisfy(\.isAgent), auto.agentsOnlySince)
            auto.noMediaSince = since(!others.contains(where: \.publishing), auto.noMediaSince)
            var reason: String?
            for (name, start, limit) in [
                ("empty", auto.emptySince, configuration.autoStopEmptySeconds),
                ("holds only agents", auto.agentsOnlySince, configuration.autoStopAgentsOnlySeconds),
                ("had no media", auto.noMediaSince, configuration.autoStopNoMediaSeconds),
            ] {
                if let start, let limit, now - start >= limit {
                    reason = name
                    break
                }
            }
            if let reason {
                auto.stopRequested = true
                lifecycleLog("auto-stop: job \(jobId): room \(auto.roomId) \(reason)")
                _ = try? await jobs.stop(jobId: jobId, roomId: nil)
            }
            lifecycleLocked {
                if autoJobs[jobId] != nil { autoJobs[jobId] = auto }
            }
        }
    }
}
