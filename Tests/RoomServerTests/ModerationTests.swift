import Foundation
import RoomServer
import Signaling
import Testing

@Suite("RoomServer moderation, pins and lobby")
struct ModerationTests {
    @Test func moderationNeedsAllowMod() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        _ = try await TestClient.joined(server, participant: "bob")
        let cases: [(String, Int, String)] = [
            ("requestMic", 4067, "ENABLE_PARTICIPANT_MIC_FAILED"),
            ("disableMic", 4068, "DISABLE_PARTICIPANT_MIC_FAILED"),
            ("requestCam", 4069, "ENABLE_PARTICIPANT_WEBCAM_FAILED"),
            ("disableCam", 4070, "DISABLE_PARTICIPANT_WEBCAM_FAILED"),
            ("remove", 4066, "REMOVE_PARTICIPANT_FAILED"),
        ]
        for (method, code, name) in cases {
            let error = try await a.expectError(method, ["participantId": "bob"])
            #expect(error.code == code, "\(method)")
            #expect(error.name == name)
        }
    }

    @Test func requestsReachTheTargetAndDisablesActAtOnce() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (mod, _) = try await TestClient.joined(
            server, participant: "mod", permissions: ["allow_join", "allow_mod"])
        let (bob, _) = try await TestClient.joined(server, participant: "bob")
        let (carol, _) = try await TestClient.joined(server, participant: "carol", extra: ["mode": "SIGNALLING_ONLY"])
        _ = try await bob.request("produce", ["kind": "mic"]).get()

        _ = try await mod.request("requestMic", ["participantId": "bob"]).get()
        #expect(try await bob.notification("micRequested")["participantId"] == "mod")
        _ = try await mod.request("requestCam", ["participantId": "bob"]).get()
        #expect(try await bob.notification("webcamRequested")["participantId"] == "mod")

        _ = try await mod.request("disableMic", ["participantId": "bob"]).get()
        #expect(try await bob.notification("micDisabled")["participantId"] == "mod")
        try await bob.notification("producerClosed") { $0["kind"] == "mic" }
        for client in [mod, bob, carol] {
            let status = try await client.notification("mediaStatusChanged")
            #expect(status["participantId"] == "bob")
            #expect(status["enabled"] == false)
        }
        let notStage = try await mod.expectError("requestMic", ["participantId": "carol"])
        #expect(notStage.code == 3066)
        let missing = try await mod.expectError("disableCam", ["participantId": "nobody"])
        #expect(missing.code == 4070)
    }

    @Test func removeSendsReason1002() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (mod, _) = try await TestClient.joined(
            server, participant: "mod", permissions: ["allow_join", "allow_mod"])
        let (bob, _) = try await TestClient.joined(server, participant: "bob")
        let (carol, _) = try await TestClient.joined(server, participant: "carol")
        _ = try await mod.request("remove", ["participantId": "bob"]).get()
        let roomLeft = try await bob.notification("roomLeft")
        #expect(roomLeft["reason"]?.intValue == 1002)
        #expect(roomLeft["reasonName"] == "REMOVE_PEER")
        _ = try await bob.closed()
        for client in [mod, carol] {
            let left = try await client.notification("participantLeft")
            #expect(left["participantId"] == "bob")
            #expect(left["reason"]?.intValue == 1002)
        }
    }

    @Test func agentsRefuseMediaModeration() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (mod, _) = try await TestClient.joined(
            server, participant: "mod", permissions: ["allow_join", "allow_mod"])
        _ = try await TestClient.joined(server, participant: "bot", extra: ["isAgent": true, "agentId": "a1"])
        let error = try await mod.expectError("disableMic", ["participantId": "bot"])
        #expect(error.code == 3068)
        #expect(error.name == "ERROR_ACTION_NOT_SUPPORTED")
        _ = try await mod.request("pin", ["participantId": "bot"]).get()
    }

    @Test func pinStateIsSharedWithTheWholeRoom() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob")
        _ = try await a.request("pin", ["participantId": "bob", "pinType": "CAM"]).get()
        for client in [a, b] {
            let event = try await client.notification("pinStateChanged")
            #expect(event["participantId"] == "bob")
            #expect(event["pinState"] == ["cam": true, "share": false])
            #expect(event["pinnedBy"] == "alice")
        }
        _ = try await b.request("pin", ["participantId": "bob", "pinType": "SHARE"]).get()
        _ = try await a.request("unpin", ["participantId": "bob", "pinType": "CAM"]).get()
        let last = try await b.notification("pinStateChanged") { $0["pinState"] == ["cam": false, "share": true] }
        #expect(last["pinnedBy"] == "alice")
        let (c, data) = try await TestClient.joined(server, participant: "carol")
        #expect(data["pinStates"] == [["participantId": "bob", "pinState": ["cam": false, "share": true]]])
        let bad = try await c.expectError("pin", ["participantId": "bob", "pinType": "FACE"])
        #expect(bad.code == 3073)
        let missing = try await c.expectError("unpin", ["participantId": "ghost"])
        #expect(missing.code == 4072)
    }

    @Test func askJoinWaitsInTheLobbyUntilAllowed() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let guest = try await TestClient.connect(server, token: token(server, room: "r1", permissions: ["ask_join"]))
        let joinId = guest.sendRequest("join", ["roomId": "r1", "participantId": "guest", "name": "Guest"])
        let requested = try await host.notification("entryRequested")
        #expect(requested["participantId"] == "guest")
        #expect(requested["name"] == "Guest")
        let early = try await guest.expectError("ping")
        #expect(early.code == 3035)
        _ = try await host.request("respondEntry", ["participantId": "guest", "decision": "allowed"]).get()
        let responded = try await guest.notification("entryResponded")
        #expect(responded["decision"] == "allowed")
        let join = try await guest.response(id: .number(Double(joinId))).get()
        #expect(join["participant"]?["participantId"] == "guest")
        try await host.notification("participantJoined") { $0["participantId"] == "guest" }
        // A lobby participant cannot answer entry requests.
        let refused = try await guest.expectError("respondEntry", ["participantId": "x", "decision": "allowed"])
        #expect(refused.code == 4024)
    }

    @Test func leavingTheLobbyWithdrawsTheRequest() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let guest = try await TestClient.connect(server, token: token(server, room: "r1", permissions: ["ask_join"]))
        _ = guest.sendRequest("join", ["roomId": "r1", "participantId": "guest"])
        try await host.notification("entryRequested")
        _ = try await guest.request("leave").get()
        #expect(try await host.notification("entryResponded")["decision"] == "withdrawn")
        #expect(try await guest.closed() == 1000)
        let late = try await host.expectError("respondEntry", ["participantId": "guest", "decision": "allowed"])
        #expect(late.code == 3073)
    }

    /// Issue 32: the requester learns it waits and for how long (`entryPending`), and a requester whose
    /// socket closes in the lobby is withdrawn, so moderators are told.
    @Test func aLobbyRequesterIsToldItsWaitAndADroppedOneIsWithdrawn() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let guest = try await TestClient.connect(server, token: token(server, room: "r1", permissions: ["ask_join"]))
        _ = guest.sendRequest("join", ["roomId": "r1", "participantId": "guest"])
        let pending = try await guest.notification("entryPending")
        #expect(pending["participantId"] == "guest")
        #expect(pending["timeoutSeconds"]?.doubleValue == server.configuration.lobbyTimeoutSeconds)
        try await host.notification("entryRequested")
        guest.close()
        let withdrawn = try await host.notification("entryResponded")
        #expect(withdrawn["participantId"] == "guest" && withdrawn["decision"] == "withdrawn")
        let late = try await host.expectError("respondEntry", ["participantId": "guest", "decision": "allowed"])
        #expect(late.code == 3073)
    }

    @Test func deniedEntryFailsTheJoin() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let guest = try await TestClient.connect(server, token: token(server, room: "r1", permissions: ["ask_join"]))
        let joinId = guest.sendRequest("join", ["roomId": "r1", "participantId": "guest"])
        try await host.notification("entryRequested")
        _ = try await host.request("respondEntry", ["participantId": "guest", "decision": "denied"]).get()
        #expect(try await guest.notification("entryResponded")["decision"] == "denied")
        switch try await guest.response(id: .number(Double(joinId))) {
        case .success: Issue.record("denied join succeeded")
        case .failure(let e): #expect(e.code == 3047)
        }
        #expect(try await guest.closed() == 3047)
    }
}
