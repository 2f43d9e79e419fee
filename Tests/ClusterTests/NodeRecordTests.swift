import Cluster
import Foundation
import Testing

/// A plausible registration of node `n1`, written at `now`.
private func record(now: Double = 1_000_000) -> NodeRecord {
    NodeRecord(
        id: "n1", signalingURL: "ws://10.0.0.1:7880/v1/rtc", httpURL: "http://10.0.0.1:7880", mediaAddress: "10.0.0.1",
        rooms: 1, participants: 2, producers: 1, consumers: 1, cpu: 0.25,
        roomList: [.init(roomId: "board", participants: 2, producers: 1, consumers: 1)], startedAt: now - 60,
        updatedAt: now)
}

private func bytes(_ r: NodeRecord) throws -> [UInt8] { Array(try JSONEncoder().encode(r)) }

/// What `NodeRecord.parse` makes of `r` read under the key of `key` at `now`.
private func parsed(_ r: NodeRecord, key: String = "n1", now: Double = 1_000_000) throws(NodeRecord.Invalid)
    -> NodeRecord
{
    let encoded = (try? bytes(r)) ?? []
    return try NodeRecord.parse(encoded, id: key, now: now)
}

@Suite struct NodeRecordTests {
    @Test func aPlausibleRegistrationReadsBackAsWritten() throws {
        #expect(try parsed(record()) == record())
        // Clock skew between hosts within the limit is accepted both ways.
        #expect(throws: Never.self) { try parsed(record(), now: 1_000_000 + NodeRecord.maxClockSkew) }
        #expect(throws: Never.self) { try parsed(record(), now: 1_000_000 - NodeRecord.maxClockSkew) }
    }

    /// Each field a writer to Redis controls is checked; one bad field refuses the whole record.
    @Test(arguments: [
        "key", "id", "signaling scheme", "http scheme", "URL whitespace", "bare scheme", "media address", "count",
        "room count", "cpu NaN", "cpu", "room id", "long room id", "stale", "future",
    ])
    func anImplausibleRegistrationIsRefused(_ flaw: String) {
        var r = record()
        var key = "n1"
        switch flaw {
        case "key": key = "n2"
        case "id":
            r.id = "n 1"
            key = "n 1"
        case "signaling scheme": r.signalingURL = "http://10.0.0.1:7880/v1/rtc"
        case "http scheme": r.httpURL = "ftp://10.0.0.1"
        case "URL whitespace": r.signalingURL = "ws://10.0.0.1:7880/v1/rtc x"
        case "bare scheme": r.httpURL = "http://"
        case "media address": r.mediaAddress = ""
        case "count": r.participants = -1
        case "room count": r.roomList[0].consumers = NodeRecord.maxCount + 1
        case "cpu NaN": r.cpu = .nan
        case "cpu": r.cpu = 5000
        case "room id": r.roomList[0].roomId = ""
        case "long room id": r.roomList[0].roomId = String(repeating: "r", count: 129)
        case "stale": r.updatedAt = 1_000_000 - NodeRecord.maxClockSkew - 1
        case "future": r.updatedAt = 1_000_000 + NodeRecord.maxClockSkew + 1
        default: Issue.record("unknown flaw \(flaw)")
        }
        #expect(throws: NodeRecord.Invalid.self) { try parsed(r, key: key) }
    }

    @Test func whatIsNotARegistrationIsRefused() {
        for text in ["", "{not json", "{}", "[]", #"{"id":"n1"}"#] {
            #expect(throws: NodeRecord.Invalid.self, "\(text)") {
                try NodeRecord.parse(Array(text.utf8), id: "n1", now: 1_000_000)
            }
        }
        let oversized = [UInt8](repeating: UInt8(ascii: " "), count: NodeRecord.maxBytes + 1)
        #expect(throws: NodeRecord.Invalid.self) { try NodeRecord.parse(oversized, id: "n1", now: 1_000_000) }
    }

    @Test func nodeIdsAreOneTo64LettersDigitsDashUnderscoreOrDot() {
        for id in ["n1", "node-2", "eu_west.3", String(repeating: "a", count: 64)] {
            #expect(NodeRecord.isNodeId(id), "\(id)")
        }
        for id in ["", "a b", "a:b", "a/b", String(repeating: "a", count: 65)] {
            #expect(!NodeRecord.isNodeId(id), "\(id)")
        }
    }
}
