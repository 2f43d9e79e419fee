// library: Fleet
import Agent
import Foundation

@testable import Fleet

/// libFuzzer entry for the fleet's records read back from Redis (docs/fleet.md, "Redis keys"): the
/// input's first line is a job id, the rest a job status record (the `status` field of `…:job:ID`),
/// and the whole input split at NUL bytes is also a job stream entry's field/value list.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  let fields = bytes.split(separator: 0, omittingEmptySubsequences: false).map {
    Optional(String(decoding: $0, as: UTF8.self))
  }
  if let id = FleetRecords.jobId(entryFields: fields) { checkContained(id) }
  let text = String(decoding: bytes, as: UTF8.self)
  let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
  let jobId = parts.count == 2 ? String(parts[0]) : "job"
  let record = parts.count == 2 ? String(parts[1]) : text
  guard let status = try? FleetRecords.status(record, jobId: jobId) else { return 0 }
  precondition(status.spec.id == jobId && FleetJobID.isValid(jobId), "a record of another or a bad id accepted")
  precondition(status.spec.cost > 0 && status.attempts.count <= FleetRecords.maxAttempts)
  checkContained(jobId)
  // What the worker saves back must read back the same.
  let encoder = JSONEncoder()
  encoder.outputFormatting = [.sortedKeys]
  guard let saved = try? encoder.encode(status) else { preconditionFailure("an accepted status does not encode") }
  guard let again = try? FleetRecords.status(String(decoding: saved, as: UTF8.self), jobId: jobId) else {
    preconditionFailure("a saved status does not parse")
  }
  precondition((try? encoder.encode(again)) == saved, "a saved status reads back differently")
  // An accepted record's options passed validation, and what is shown carries none of its secrets.
  do { try status.spec.agent.validate() } catch { preconditionFailure("accepted options do not validate: \(error)") }
  let shown = status.redacted.spec.agent
  precondition(shown.token == "[redacted]", "a token is shown")
  precondition(shown.iceServers == nil || shown.iceServers == "[redacted]", "TURN credentials are shown")
  precondition(shown.relayRoomToken == nil || shown.relayRoomToken == "[redacted]", "a relay room token is shown")
  return 0
}

/// A valid job id names exactly one directory right under the worker's --out.
func checkContained(_ id: String) {
  precondition(FleetJobID.isValid(id))
  let out = URL(fileURLWithPath: "/out")
  let dir = out.appendingPathComponent(id).appendingPathComponent("attempt-1").standardizedFileURL
  precondition(dir.deletingLastPathComponent().deletingLastPathComponent().path == "/out", "\(id) escapes --out")
}
