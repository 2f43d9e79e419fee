import Agent
import Foundation

// What the fleet reads back from Redis (job stream entries and job status records) is untrusted
// input, like a network request: anyone who can write to the fleet's Redis can put anything there.
// These parsers are the only way in, and they are fuzzed (`Fuzz/Targets/fleetrecords.swift`); this
// file needs nothing but Foundation and Agent's AgentJobOptions.swift, so that the fuzz build
// compiles them alone.

/// The grammar of a job id, enforced wherever an id comes in: the HTTP API, the CLI and Redis.
///
/// A job id is 1–64 characters of `A–Z a–z 0–9 . _ -`, and neither `.` nor `..`. It names the
/// job's directory under a worker's `--out` and its Redis key, so it never contains a `/` and can
/// never name a parent directory.
public enum FleetJobID {
    /// The longest job id.
    public static let maxLength = 64

    /// Whether `id` follows the grammar.
    public static func isValid(_ id: String) -> Bool {
        let bytes = id.utf8
        guard !bytes.isEmpty, bytes.count <= maxLength, id != ".", id != ".." else { return false }
        return bytes.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E
                || b == 0x5F || b == 0x2D
        }
    }

    /// The reason a bad id is refused, for error messages (the id itself is cut short and escaped).
    public static func refusal(_ id: String) -> String {
        "job id '\(shown(id))' must be 1-\(maxLength) of A-Z a-z 0-9 . _ - (and not '.' or '..')"
    }

    /// `id` as it may appear in a message or a log line: at most 64 characters, non-printable ones escaped.
    public static func shown(_ id: String) -> String {
        String(
            id.unicodeScalars.prefix(maxLength).map {
                $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "?"
            })
    }
}

/// Why a record read from Redis was not used.
public struct FleetRecordError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The reason, one line.
    public var description: String
    /// An error with this reason.
    public init(_ description: String) { self.description = description }
}

/// Parsers for the records the fleet keeps in Redis (docs/fleet.md, "Redis keys").
public enum FleetRecords {
    /// The largest job status record read (a status holds its attempts, their files and the last
    /// manifest, capped at 256 KiB each by the worker).
    public static let maxStatusBytes = 4 * 1024 * 1024
    /// The most attempts a status record may list.
    public static let maxAttempts = 1000

    /// The job id of one job stream entry (its field/value list, `job ID`), or nil when the entry
    /// names none or an id outside the grammar.
    public static func jobId(entryFields fields: [String?]) -> String? {
        var i = 0
        while i + 1 < fields.count {
            if fields[i] == "job", let id = fields[i + 1] { return FleetJobID.isValid(id) ? id : nil }
            i += 2
        }
        return nil
    }

    /// Parses the `status` field of job `jobId`'s hash: JSON of a ``FleetJobStatus`` whose spec names
    /// the same, valid id, with a positive cost, valid agent options (``AgentJobOptions/validate()``)
    /// and a bounded list of attempts.
    public static func status(_ text: String, jobId: String) throws(FleetRecordError) -> FleetJobStatus {
        guard text.utf8.count <= maxStatusBytes else {
            throw FleetRecordError("job status record is \(text.utf8.count) bytes (at most \(maxStatusBytes))")
        }
        let status: FleetJobStatus
        do { status = try JSONDecoder().decode(FleetJobStatus.self, from: Data(text.utf8)) } catch {
            throw FleetRecordError("job status record is not valid JSON of a job status: \(error)")
        }
        try check(status, jobId: jobId)
        return status
    }

    /// The checks ``status(_:jobId:)`` makes on a decoded record.
    public static func check(_ status: FleetJobStatus, jobId: String) throws(FleetRecordError) {
        guard FleetJobID.isValid(status.spec.id) else { throw FleetRecordError(FleetJobID.refusal(status.spec.id)) }
        guard status.spec.id == jobId else {
            throw FleetRecordError("job status record names job '\(FleetJobID.shown(status.spec.id))', not '\(jobId)'")
        }
        guard status.spec.cost > 0 else { throw FleetRecordError("job cost \(status.spec.cost) is not positive") }
        // The agent's options are checked as a submission checks them: a record that would not have
        // been accepted is not run either.
        do throws(AgentJobOptions.Invalid) { try status.spec.agent.validate() } catch {
            throw FleetRecordError("job options: \(error)")
        }
        guard status.spec.room == status.spec.agent.room else {
            throw FleetRecordError(
                "job status record names room '\(FleetJobID.shown(status.spec.room))', its agent another")
        }
        guard status.attempts.count <= maxAttempts else {
            throw FleetRecordError("job status lists \(status.attempts.count) attempts (at most \(maxAttempts))")
        }
        guard status.spec.submittedAt.isFinite, status.updatedAt.isFinite else {
            throw FleetRecordError("job status has a time that is not a number")
        }
    }
}

extension FleetJobSpec {
    /// The spec with the agent's secrets (token, TURN credentials) replaced by `[redacted]`
    /// (``AgentJobOptions/redacted``): they are stored for the worker but never shown by
    /// `jobs list` or `GET /admin/jobs`.
    public var redacted: FleetJobSpec {
        var copy = self
        copy.agent = agent.redacted
        return copy
    }
}

extension FleetJobStatus {
    /// The status as it may be shown: the spec's secrets redacted (see ``FleetJobSpec/redacted``).
    public var redacted: FleetJobStatus {
        var copy = self
        copy.spec = spec.redacted
        return copy
    }
}
