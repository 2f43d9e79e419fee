import Foundation
import RoomProtocol
import Signaling
import Testing

@testable import RoomServer

/// `Room`: identity on join, `end`, the lobby wait, producer rules and many joins, each against a real
/// in-process server.
@Suite("Room")
struct RoomTests {
    @Test func aFreeIdTokenCannotReplaceAParticipant() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let intruder = try await TestClient.connect(server, token: token(server, room: "r1"))
        let error = try await intruder.expectError("join", ["roomId": "r1", "participantId": "host"])
        #expect(error.code == 4005)
        #expect(error.name == "DUPLICATE_PARTICIPANT")
        #expect(try await intruder.closed() == 4005)
        // The host was not touched.
        _ = try await host.request("ping").get()
        #expect(host.notifications("roomLeft").isEmpty)
        // A token bound to the id may replace it (a reconnect).
        let (again, _) = try await TestClient.joined(server, participant: "host", bound: true)
        #expect(try await host.notification("roomLeft")["reason"]?.intValue == 1011)
        _ = try await again.request("ping").get()
    }

    @Test func aFreeIdTokenCannotTakeALobbyEntrysId() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let guest = try await TestClient.connect(server, token: token(server, room: "r1", permissions: ["ask_join"]))
        _ = guest.sendRequest("join", ["roomId": "r1", "participantId": "guest"])
        try await host.notification("entryRequested")
        let copy = try await TestClient.connect(server, token: token(server, room: "r1", permissions: ["ask_join"]))
        let error = try await copy.expectError("join", ["roomId": "r1", "participantId": "guest"])
        #expect(error.code == 4005)
        #expect(!guest.isClosed)
    }

    @Test func endNeedsAllowModUnlessTheServerOpensIt() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (plain, _) = try await TestClient.joined(server, participant: "plain")
        let (mod, _) = try await TestClient.joined(
            server, participant: "mod", permissions: ["allow_join", "allow_mod"])
        let error = try await plain.expectError("end")
        #expect(error.code == 4024)
        _ = try await mod.request("ping").get()
        _ = try await mod.request("end").get()
        #expect(try await plain.notification("roomClosed")["reason"]?.intValue == 1006)

        let open = try startServer { $0.anyoneMayEnd = true }
        defer { open.stop() }
        let (a, _) = try await TestClient.joined(open, participant: "a")
        let (b, _) = try await TestClient.joined(open, participant: "b")
        _ = try await a.request("end").get()
        #expect(try await b.notification("roomClosed")["reason"]?.intValue == 1006)
    }

    @Test func anUnansweredLobbyEntryExpires() async throws {
        let server = try startServer { $0.lobbyTimeoutSeconds = 1 }
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let guest = try await TestClient.connect(server, token: token(server, room: "r1", permissions: ["ask_join"]))
        let id = guest.sendRequest("join", ["roomId": "r1", "participantId": "guest"])
        try await host.notification("entryRequested")
        let result = try await guest.response(id: .number(Double(id)))
        guard case .failure(let error) = result else {
            Issue.record("lobby join succeeded")
            return
        }
        #expect(error.code == 3047)
        #expect(try await guest.closed() == 3047)
        let event = try await host.notification("entryResponded")
        #expect(event["decision"] == "timeout")
    }

    @Test func producerRules() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob", extra: ["mode": "RECV_ONLY"])
        let mic = try await a.request("produce", ["kind": "mic"]).get()
        #expect(try await a.expectError("produce", ["kind": "audio"]).code == 3058)
        _ = try await a.request("produce", ["kind": "screen"]).get()
        #expect(try await a.expectError("produce", ["kind": "share"]).code == 3061)
        #expect(try await a.expectError("produce", ["kind": "hologram"]).code == 3073)
        #expect(try await a.expectError("closeProducer", ["producerId": "pr-unknown"]).code == 3073)
        #expect(try await b.expectError("closeProducer", ["producerId": mic["producerId"] ?? nil]).code == 3066)
        // Another participant cannot share while alice presents.
        _ = try await b.request("changeMode", ["mode": "SEND_AND_RECV"]).get()
        #expect(try await b.expectError("produce", ["kind": "screen"]).code == 3061)
        // Leaving SEND_AND_RECV ends alice's presentation for everyone.
        _ = try await a.request("changeMode", ["mode": "SIGNALLING_ONLY"]).get()
        try await b.notification("presenterChanged") { $0["participantId"]?.isNull == true }
        _ = try await b.request("produce", ["kind": "screen"]).get()
        try await a.notification("presenterChanged") { $0["participantId"] == "bob" }
    }

    @Test func sixtyConcurrentJoinsAllSeeEachOther() async throws {
        let server = try startServer()
        defer { server.stop() }
        let count = 60
        let clients = try await withThrowingTaskGroup(of: TestClient.self) { group in
            for i in 0..<count {
                group.addTask { try await TestClient.joined(server, participant: "p\(i)").0 }
            }
            var all: [TestClient] = []
            for try await c in group { all.append(c) }
            return all
        }
        #expect(await server.roomSummaries().first?.participantCount == count)
        // Everyone learns about everyone else exactly once: before its join answer or after it.
        for client in clients {
            let deadline = Date().addingTimeInterval(10)
            while client.notifications("participantJoined").count < count - 1 && Date() < deadline {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            let ids = client.notifications("participantJoined").compactMap { $0["participantId"]?.stringValue }
            #expect(ids.count == count - 1)
            #expect(Set(ids).count == count - 1)
        }
    }
}
