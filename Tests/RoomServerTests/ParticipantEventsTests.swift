import Foundation
import RoomServer
import Signaling
import Testing

/// Protocol 2: the roster before the join response and the coalesced `participantEvents`
/// notification (docs/protocol.md, "Protocol 2"), next to protocol-1 clients in the same room.
@Suite("RoomServer participant events (protocol 2)")
struct ParticipantEventsTests {
    /// (method, participantId, mode) of every participant event a client received, unwrapping batches.
    static func events(_ client: TestClient) -> [String] {
        var out: [String] = []
        for message in client.messages {
            guard case .notification(let method, let data) = message else { continue }
            let inner: [(String, JSONValue)]
            if method == "participantEvents" {
                inner = (data["events"]?.arrayValue ?? []).map {
                    ($0["method"]?.stringValue ?? "?", $0["data"] ?? .null)
                }
            } else {
                inner = [(method, data)]
            }
            for (m, d) in inner
            where ["participantJoined", "participantLeft", "participantModeChanged"].contains(m) {
                let who = d["participantId"]?.stringValue ?? "?"
                out.append(
                    m == "participantModeChanged" ? "\(m) \(who) \(d["mode"]?.stringValue ?? "?")" : "\(m) \(who)")
            }
        }
        return out
    }

    static func join2(_ server: RoomServer, _ participant: String, mode: String = "SEND_AND_RECV") async throws -> (
        TestClient, JSONValue
    ) {
        try await TestClient.joined(
            server, participant: participant, extra: ["protocolVersion": 2, "mode": .string(mode)])
    }

    @Test func theRosterComesAsParticipantEventsBeforeABoundedResponse() async throws {
        let server = try startServer()
        defer { server.stop() }
        _ = try await TestClient.joined(server, participant: "alice")
        _ = try await Self.join2(server, "bob")
        let (carol, response) = try await Self.join2(server, "carol", mode: "RECV_ONLY")

        #expect(response["protocolVersion"]?.intValue == 2)
        #expect(response["participants"] == nil, "protocol 2 keeps the roster out of the response")
        #expect(response["participantCount"]?.intValue == 2)
        let log = carol.messages
        let responseIndex = log.firstIndex { if case .response = $0 { true } else { false } }
        let before = log[..<(responseIndex ?? log.count)]
        #expect(before.allSatisfy { $0.method == "participantEvents" }, "\(before)")
        #expect(Self.events(carol).prefix(2) == ["participantJoined alice", "participantJoined bob"])
    }

    @Test func joinsLeavesAndModeChangesArriveBatchedInOrderExactlyOnce() async throws {
        let server = try startServer { $0.participantEventWindowMilliseconds = 300 }
        defer { server.stop() }
        let (watcher, _) = try await Self.join2(server, "watcher", mode: "RECV_ONLY")
        let (old, _) = try await TestClient.joined(server, participant: "old-client")  // protocol 1
        var others: [TestClient] = []
        for i in 1...4 { others.append(try await Self.join2(server, "p\(i)", mode: "RECV_ONLY").0) }
        _ = try await others[0].request("changeMode", ["mode": "SEND_AND_RECV"]).get()
        _ = try await others[1].request("leave").get()

        let expected = [
            "participantJoined old-client", "participantJoined p1", "participantJoined p2", "participantJoined p3",
            "participantJoined p4", "participantModeChanged p1 SEND_AND_RECV", "participantLeft p2",
        ]
        let deadline = Date().addingTimeInterval(10)
        while Self.events(watcher).count < expected.count && Date() < deadline {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        #expect(Self.events(watcher) == expected)
        // Protocol 2 never gets them one by one; protocol 1 never gets a batch.
        #expect(watcher.notifications("participantJoined").isEmpty)
        #expect(!watcher.notifications("participantEvents").isEmpty)
        try await old.notification("participantLeft", seconds: 10) { $0["participantId"] == "p2" }
        #expect(old.notifications("participantEvents").isEmpty)
        // Its roster (one notification per participant), then each event on its own.
        #expect(Self.events(old) == ["participantJoined watcher"] + expected.dropFirst())
        // The caller of changeMode hears of its own change too; a joiner not of its own join.
        let p1 = Self.events(others[0])
        #expect(p1.contains("participantModeChanged p1 SEND_AND_RECV"))
        #expect(!p1.contains("participantJoined p1"))
    }

    @Test func aLeavingParticipantGetsThePendingJoinsBeforeItsLeaveResponse() async throws {
        let server = try startServer { $0.participantEventWindowMilliseconds = 5000 }
        defer { server.stop() }
        let (watcher, _) = try await Self.join2(server, "watcher", mode: "RECV_ONLY")
        _ = try await Self.join2(server, "host")
        let id = watcher.sendRequest("leave")
        _ = try await watcher.response(id: .number(Double(id)))
        #expect(Self.events(watcher) == ["participantJoined host"])
    }

    @Test func aLeaveIsNotHeldForTheWindow() async throws {
        let server = try startServer { $0.participantEventWindowMilliseconds = 5000 }
        defer { server.stop() }
        let (watcher, _) = try await Self.join2(server, "watcher", mode: "RECV_ONLY")
        let (host, _) = try await Self.join2(server, "host")
        _ = try await host.request("leave").get()
        // The room handled the leave before this ping; what it sent the watcher then precedes the answer.
        _ = try await watcher.request("ping").get()
        #expect(Self.events(watcher) == ["participantJoined host", "participantLeft host"])
    }

    @Test func aProducerIsNeverAnnouncedBeforeItsParticipant() async throws {
        // A broadcast flushes the pending participant events first.
        let server = try startServer { $0.participantEventWindowMilliseconds = 5000 }
        defer { server.stop() }
        let (watcher, _) = try await Self.join2(server, "watcher", mode: "RECV_ONLY")
        let (host, _) = try await Self.join2(server, "host")
        _ = try await host.request("produce", ["kind": "mic"]).get()
        let added = try await watcher.notification("producerAdded", seconds: 10)
        #expect(added["participantId"] == "host")
        let log = watcher.messages
        let addedIndex = log.firstIndex { $0.method == "producerAdded" } ?? 0
        let joinIndex = log.firstIndex { $0.method == "participantEvents" } ?? Int.max
        #expect(joinIndex < addedIndex)
    }
}
