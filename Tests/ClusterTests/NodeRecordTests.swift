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

/// Placement of an audience member who reached a node already at its share (`--edge-audience`).
@Suite struct AudiencePlacementTests {
    private func node(_ id: String, participants: Int = 0, origin: Int? = nil, edge: Int? = nil) -> NodeRecord {
        var r = NodeRecord(
            id: id, signalingURL: "ws://\(id):7880/v1/rtc", httpURL: "http://\(id):7880", mediaAddress: "10.0.0.1",
            rooms: 0, participants: participants, producers: 0, consumers: 0, cpu: 0,
            roomList: origin.map { [.init(roomId: "stage", participants: 1, producers: 2, consumers: 0, audience: $0)] }
                ?? [], startedAt: 0, updatedAt: 0)
        if let edge { r.edgeRooms = [.init(roomId: "stage", audience: edge)] }
        return r
    }

    private func place(_ records: [NodeRecord], here: String = "n1", share: Int = 8) -> String {
        switch ClusterNode.placeAudience(roomId: "stage", share: share, here: here, records: records) {
        case .here: return "here"
        case .origin: return "origin"
        case .edge(let peer): return peer.nodeId
        }
    }

    @Test func theLeastLoadedCarrierBelowItsShareThenANewEdgeThenTheOrigin() {
        // The origin below its share and with the least audience of the carriers.
        #expect(place([node("n0", origin: 3), node("n1", edge: 8), node("n2", edge: 5)]) == "origin")
        // An edge with less audience than the origin.
        #expect(place([node("n0", origin: 6), node("n1", edge: 8), node("n2", edge: 5)]) == "n2")
        // Every carrier full: the node not carrying the room with the fewest participants.
        #expect(
            place([
                node("n0", origin: 8), node("n1", edge: 8), node("n2", participants: 40), node("n3", participants: 9),
            ])
                == "n3")
        // Nothing free: the origin takes it over its share.
        #expect(place([node("n0", origin: 8), node("n1", edge: 8), node("n2", edge: 9)]) == "origin")
        // Ties: the smaller id; the node asking is never chosen.
        #expect(place([node("n0", origin: 8), node("n3", edge: 2), node("n2", edge: 2), node("n1", edge: 0)]) == "n2")
        // A room nobody registered yet (the origin's registration is a second old): a fresh node, else the origin.
        #expect(place([node("n1")]) == "origin")
        #expect(place([node("n1"), node("n2")]) == "n2")
    }

    @Test func edgeLoadsAreCheckedAndOlderRecordsStillRead() throws {
        var r = node("n1", origin: 4, edge: nil)
        r.updatedAt = 1_000_000
        r.startedAt = 1_000_000 - 60
        r.edgeRooms = [.init(roomId: "other", audience: 3)]
        let read = try NodeRecord.parse(Array(try JSONEncoder().encode(r)), id: "n1", now: 1_000_000)
        #expect(read == r && read.audience(of: "stage") == 4 && read.audience(of: "other") == 3)
        for bad in [NodeRecord.EdgeLoad(roomId: "", audience: 1), .init(roomId: "x", audience: -1)] {
            var b = r
            b.edgeRooms = [bad]
            #expect(throws: NodeRecord.Invalid.self) {
                try NodeRecord.parse(Array(try JSONEncoder().encode(b)), id: "n1", now: 1_000_000)
            }
        }
        // A record without the edge fields (a node that predates edges) reads with none.
        let old = Array(
            #"{"id":"n1","signalingURL":"ws://a/v1/rtc","httpURL":"http://a","mediaAddress":"10.0.0.1","rooms":0,"participants":0,"producers":0,"consumers":0,"cpu":0,"roomList":[{"roomId":"stage","participants":1,"producers":0,"consumers":0}],"startedAt":1,"updatedAt":1000000}"#
                .utf8)
        let parsedOld = try NodeRecord.parse(old, id: "n1", now: 1_000_000)
        #expect(parsedOld.edgeRooms == nil && parsedOld.audience(of: "stage") == 0)
    }
}
