import Foundation
import RoomProtocol
import Signaling
import Testing

@testable import RoomServer

/// `RoomServer`: token policy, admin scoping, the room cap, start and stop. The suite is `ServerTests`:
/// a type named like the test module would shadow it.
@Suite("RoomServer")
struct ServerTests {
    @Test func notBeforeAndMaximumLifetimeAreEnforced() async throws {
        let server = try startServer { $0.maxTokenLifetimeSeconds = 2 * 3600 }
        defer { server.stop() }
        let now = Int64(Date().timeIntervalSince1970)
        func joinError(_ claims: RoomToken) async throws -> RoomError {
            let client = try await TestClient.connect(server, token: RoomToken.sign(claims, secret: server.secret))
            return try await client.expectError("join", ["roomId": "r1", "participantId": "x"])
        }
        let early = RoomToken(apikey: "t", permissions: ["allow_join"], exp: now + 3600, iat: now, nbf: now + 600)
        let earlyError = try await joinError(early)
        #expect(earlyError.code == 4002 && earlyError.message.contains("nbf"))
        let long = RoomToken(apikey: "t", permissions: ["allow_join"], exp: now + 3 * 3600, iat: now)
        let longError = try await joinError(long)
        #expect(longError.code == 4002 && longError.message.contains("lifetime"))
        let noIat = RoomToken(apikey: "t", permissions: ["allow_join"], exp: now + 3 * 3600)
        #expect(try await joinError(noIat).code == 4002)
        // Within the limits, with nbf in the past: admitted.
        let fine = RoomToken(apikey: "t", permissions: ["allow_join"], exp: now + 3600, iat: now, nbf: now - 5)
        let client = try await TestClient.connect(server, token: RoomToken.sign(fine, secret: server.secret))
        _ = try await client.request("join", ["roomId": "r1", "participantId": "x"]).get()
        // The admin API applies the same policy.
        let longMod = RoomToken(apikey: "t", permissions: ["allow_mod"], exp: now + 3 * 3600, iat: now)
        let listing = try await http(server, "GET", "/v1/rooms", bearer: RoomToken.sign(longMod, secret: server.secret))
        #expect(listing.status == 401)
    }

    @Test func aRoomScopedModeratorListsOnlyItsRoom() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, room: "mine", participant: "a")
        let (b, _) = try await TestClient.joined(server, room: "theirs", participant: "b")
        let scoped = try await http(
            server, "GET", "/v1/rooms", bearer: token(server, room: "mine", permissions: ["allow_mod"]))
        #expect(scoped.status == 200)
        let ids = (try JSONValue.parse(scoped.body)["rooms"]?.arrayValue ?? []).compactMap { $0["roomId"]?.stringValue }
        #expect(ids == ["mine"])
        let all = try await http(server, "GET", "/v1/rooms", bearer: token(server, permissions: ["allow_mod"]))
        let allIds = (try JSONValue.parse(all.body)["rooms"]?.arrayValue ?? []).compactMap { $0["roomId"]?.stringValue }
        #expect(allIds == ["mine", "theirs"])
        // The end route answers for any room id without a per-room table: JSON 404 for unknown rooms.
        let ghost = try await http(
            server, "POST", "/v1/rooms/ghost/end", bearer: token(server, permissions: ["allow_mod"]))
        #expect(ghost.status == 404)
        #expect(try JSONValue.parse(ghost.body)["error"]?["code"]?.intValue == 4003)
        let ended = try await http(
            server, "POST", "/v1/rooms/theirs/end", bearer: token(server, permissions: ["allow_mod"]))
        #expect(ended.status == 200)
        #expect(try await b.notification("roomClosed")["reason"]?.intValue == 1006)
        _ = try await a.request("ping").get()
    }

    @Test func theNumberOfRoomsIsCapped() async throws {
        let server = try startServer { $0.maxRooms = 2 }
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, room: "one", participant: "a")
        _ = try await TestClient.joined(server, room: "two", participant: "b")
        let third = try await TestClient.connect(server, token: token(server, room: "three"))
        let error = try await third.expectError("join", ["roomId": "three", "participantId": "c"])
        #expect(error.code == 4009)
        #expect(try await third.closed() == 4009)
        // An existing room still takes joins, and a freed slot opens a new room.
        _ = try await TestClient.joined(server, room: "two", participant: "b2")
        _ = try await a.request("leave").get()
        let deadline = Date().addingTimeInterval(5)
        while true {
            let c = try await TestClient.connect(server, token: token(server, room: "three"))
            if case .success = try await c.request("join", ["roomId": "three", "participantId": "c"]) { break }
            guard Date() < deadline else { throw Timeout(what: "a free room slot") }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    @Test func stopClosesEveryRoom() async throws {
        let server = try startServer()
        let (a, _) = try await TestClient.joined(server, room: "one", participant: "alice")
        let (b, _) = try await TestClient.joined(server, room: "two", participant: "bob")
        server.stop()
        for client in [a, b] {
            #expect(try await client.notification("roomClosed")["reason"]?.intValue == 1006)
            _ = try await client.closed()
        }
        #expect(await server.roomSummaries().isEmpty)
    }

    /// A port already taken is refused with the listener's own error kept as the cause.
    @Test func aTakenPortKeepsTheListenerErrorAsTheCause() throws {
        let first = try startServer()
        defer { first.stop() }
        var configuration = RoomServerConfiguration()
        configuration.listenPort = first.httpPort
        configuration.secret = "test-secret"
        let second = RoomServer(configuration: configuration)
        defer { second.stop() }
        do {
            try second.start()
            Issue.record("two servers listened on port \(first.httpPort)")
        } catch {
            guard case .listenFailed(_, let port, _) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(port == first.httpPort)
        }
    }

    @Test func generatedDevSecretSignsUsableTokens() async throws {
        var configuration = RoomServerConfiguration()
        configuration.listenPort = 0
        let server = RoomServer(configuration: configuration)
        #expect(server.secretWasGenerated)
        try server.start()
        defer { server.stop() }
        #expect(server.httpPort != 0)
        _ = try await TestClient.joined(server, participant: "alice")
    }
}
