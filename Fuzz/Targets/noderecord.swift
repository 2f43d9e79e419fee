// library: Cluster
import Foundation

@testable import Cluster

/// libFuzzer entry for cluster node registrations read from Redis (issue 31: records in Redis are
/// untrusted). Input `KEY\nJSON`: KEY is the escaped node id of the registration's key (through
/// `NameEscaping.unescape`, as `ClusterNode` reads the `…:nodes` set), JSON the stored record
/// through `NodeRecord.parse`. Without a newline the whole input is the record under the key `n1`.
/// An accepted record must satisfy what the parser promises and survive a round trip.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  let parts = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false)
  let key = parts.count == 2 ? String(decoding: parts[0], as: UTF8.self) : "n1"
  let json = parts.count == 2 ? Array(parts[1]) : bytes
  // The escaping: whatever it decodes escapes back to the same text, and any text round-trips.
  let anyText = String(decoding: bytes, as: UTF8.self)
  precondition(NameEscaping.unescape(NameEscaping.escape(anyText)) == anyText, "escaping does not round-trip")
  precondition(NameEscaping.fileName(anyText).utf8.count <= NameEscaping.maxFileStemBytes)
  guard let id = NameEscaping.unescape(key) else { return 0 }
  precondition(NameEscaping.escape(id) == key, "two spellings of one escaped name")
  let now = 1_700_000_000.0
  guard let record = try? NodeRecord.parse(json, id: id, now: now) else { return 0 }
  precondition(record.id == id && NodeRecord.isNodeId(record.id))
  precondition([record.rooms, record.participants, record.producers, record.consumers].allSatisfy { $0 >= 0 })
  precondition(record.cpu.isFinite && abs(record.updatedAt - now) <= NodeRecord.maxClockSkew)
  // Edge loads (origin and edges, `--edge-audience`): counted, never negative, room ids in bounds.
  precondition(record.roomList.allSatisfy { ($0.audience ?? 0) >= 0 })
  precondition((record.edgeRooms ?? []).allSatisfy { $0.audience >= 0 && !$0.roomId.isEmpty })
  // What a node writes for an accepted record reads back as the same record.
  guard let encoded = try? JSONEncoder().encode(record) else { fatalError("an accepted record does not encode") }
  guard let again = try? NodeRecord.parse(Array(encoded), id: id, now: now) else {
    fatalError("an accepted record does not re-parse")
  }
  precondition(again == record, "record changed in a round trip")
  return 0
}
