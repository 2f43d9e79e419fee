import Foundation
import RoomProtocol
import RoomServer
import Signaling
import Testing

@Suite("RoomServer join and leave")
struct JoinLeaveTests {
    @Test func existingParticipantsAreAnnouncedBeforeTheJoinResponse() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob")
        let (c, joinData) = try await TestClient.joined(server, participant: "carol")

        let log = c.messages
        guard
            let responseIndex = log.firstIndex(where: { if case .response = $0 { return true } else { return false } })
        else {
            Issue.record("no join response")
            return
        }
        let announced = log[..<responseIndex].compactMap { e -> String? in
            if case .notification("participantJoined", let d) = e { return d["participantId"]?.stringValue }
            return nil
        }
        #expect(announced == ["alice", "bob"])
        #expect(joinData["protocolVersion"]?.intValue == 1)
        #expect(joinData["participant"]?["participantId"]?.stringValue == "carol")
        #expect(joinData["participants"]?.arrayValue?.count == 2)
        // The joiner is not announced to itself; the others hear about it.
        #expect(
            !log.contains {
                if case .notification("participantJoined", let d) = $0 {
                    return d["participantId"] == "carol"
                } else {
                    return false
                }
            })
        try await a.notification("participantJoined") { $0["participantId"] == "carol" }
        try await b.notification("participantJoined") { $0["participantId"] == "carol" }
    }

    @Test func leaveTellsTheOthersAndClosesTheSocket() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob")
        #expect(try await b.expectError("leave", ["reason": 1006]).code == 3073)
        _ = try await b.request("leave").get()
        let left = try await a.notification("participantLeft")
        #expect(left["participantId"] == "bob")
        #expect(left["reason"]?.intValue == 1101)
        #expect(try await b.closed() == 1000)
    }

    /// The server reads and writes leave reasons as the protocol's one type: a client may give
    /// exactly the `isClientReason` codes, and each comes back to the others with its wire name.
    @Test func leaveReasonsAreTheProtocolsLeaveCodes() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (refused, _) = try await TestClient.joined(server, participant: "refused")
        for reason in RoomLeaveCode.allCases where !reason.isClientReason {
            #expect(try await refused.expectError("leave", ["reason": .number(Double(reason.rawValue))]).code == 3073)
        }
        for reason in RoomLeaveCode.allCases where reason.isClientReason {
            let pid = "leaver-\(reason.rawValue)"
            let (b, _) = try await TestClient.joined(server, participant: pid)
            _ = try await b.request("leave", ["reason": .number(Double(reason.rawValue))]).get()
            let left = try await a.notification("participantLeft") { $0["participantId"]?.stringValue == pid }
            #expect(left["reason"]?.intValue == reason.rawValue)
            #expect(left["reasonName"]?.stringValue == reason.name)
        }
        #expect(RoomLeaveCode.allCases.filter(\.isClientReason).map(\.rawValue) == [1101, 1102, 1103])
    }

    @Test func droppedSocketLeavesWithReason1001() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob")
        b.close()
        let left = try await a.notification("participantLeft")
        #expect(left["participantId"] == "bob")
        #expect(left["reason"]?.intValue == 1001)
    }

    @Test func endClosesTheRoomForEveryoneWithReason1006() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(
            server, participant: "bob", permissions: ["allow_join", "allow_mod"])
        _ = try await b.request("end").get()
        for client in [a, b] {
            let closedEvent = try await client.notification("roomClosed")
            #expect(closedEvent["reason"]?.intValue == 1006)
            #expect(closedEvent["reasonName"] == "ROOM_CLOSE")
            #expect(try await client.closed() == 1000)
        }
        // A new join opens a fresh room.
        let (c, data) = try await TestClient.joined(server, participant: "carol")
        #expect(data["participants"]?.arrayValue?.isEmpty == true)
        c.close()
    }

    @Test func duplicateParticipantIdReplacesTheOldConnection() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (watcher, _) = try await TestClient.joined(server, participant: "watcher")
        let (old, _) = try await TestClient.joined(server, participant: "dup")
        let (new, _) = try await TestClient.joined(server, participant: "dup", bound: true)
        let error = try await old.notification("error")
        #expect(error["code"]?.intValue == 4005)
        #expect(error["name"] == "DUPLICATE_PARTICIPANT")
        let roomLeft = try await old.notification("roomLeft")
        #expect(roomLeft["reason"]?.intValue == 1011)
        #expect(try await old.closed() == 4005)
        let left = try await watcher.notification("participantLeft") { $0["participantId"] == "dup" }
        #expect(left["reason"]?.intValue == 1011)
        // The replacement keeps working.
        _ = try await new.request("ping").get()
    }

    @Test func participantIdWithWhitespaceIsRefusedWith4004() async throws {
        let server = try startServer()
        defer { server.stop() }
        let client = try await TestClient.connect(server, token: token(server))
        let error = try await client.expectError("join", ["roomId": "r1", "participantId": "has space"])
        #expect(error.code == 4004)
        #expect(error.name == "INVALID_PARTICIPANT_ID")
        #expect(try await client.closed() == 4004)
    }

    @Test func participantLimitIsEnforcedWith4009() async throws {
        let server = try startServer { $0.maxParticipantsPerRoom = 2 }
        defer { server.stop() }
        _ = try await TestClient.joined(server, participant: "a")
        _ = try await TestClient.joined(server, participant: "b")
        let c = try await TestClient.connect(server, token: token(server))
        let error = try await c.expectError("join", ["roomId": "r1", "participantId": "c"])
        #expect(error.code == 4009)
        #expect(error.name == "MAX_PARTCIPANT_REACHED")
        // Another room is unaffected.
        _ = try await TestClient.joined(server, room: "r2", participant: "c")
    }

    @Test func agentsAreFlaggedForEveryone() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        _ = try await TestClient.joined(server, participant: "bot", extra: ["isAgent": true, "agentId": "agent-7"])
        let joined = try await a.notification("participantJoined") { $0["participantId"] == "bot" }
        #expect(joined["isAgent"] == true)
        #expect(joined["agentId"] == "agent-7")
        let (c, data) = try await TestClient.joined(server, participant: "carol")
        let bot = data["participants"]?.arrayValue?.first { $0["participantId"] == "bot" }
        #expect(bot?["isAgent"] == true)
        c.close()
    }

    @Test func unsupportedProtocolVersionIsRefused() async throws {
        let server = try startServer()
        defer { server.stop() }
        let client = try await TestClient.connect(server, token: token(server))
        let error = try await client.expectError("join", ["roomId": "r1", "participantId": "x", "protocolVersion": 99])
        #expect(error.code == 3073)
    }
}
