import Foundation
import Signaling
import Testing

@testable import RoomProtocol
@testable import RoomServer

/// `ClientSession`: one join per connection, and a client that does not read.
@Suite("ClientSession")
struct ClientSessionTests {
    @Test func connectionWithoutJoinIsClosed() async throws {
        let server = try startServer { $0.joinTimeoutSeconds = 0.2 }
        defer { server.stop() }
        let idle = try await TestClient.connect(server, token: token(server))
        #expect(try await idle.closed() == 1008)
    }

    @Test func secondJoinOnOneConnectionIsRefusedAndTheConnectionStays() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let error = try await a.expectError("join", ["roomId": "r1", "participantId": "alice2"])
        #expect(error.code == 3054)
        _ = try await a.request("ping").get()
    }

    @Test func aClientThatDoesNotReadIsClosedWith1013() async throws {
        let server = try startServer {
            $0.maxQueuedOutputBytes = 64 * 1024
            $0.rateLimitPerSecond = 10_000
            $0.rateLimitBurst = 10_000
        }
        defer { server.stop() }
        let (publisher, _) = try await TestClient.joined(server, participant: "pub")
        let stuck = try RawWebSocket(port: server.httpPort, path: "/v1/rtc?token=" + token(server, room: "r1"))
        stuck.sendText(#"{"id":1,"method":"join","data":{"roomId":"r1","participantId":"stuck"}}"#)
        stuck.sendText(#"{"id":2,"method":"subscribe","data":{"topic":"flood"}}"#)
        try await publisher.notification("participantJoined") { $0["participantId"] == "stuck" }
        // 15 KiB messages until the server gives up on the non-reader (the socket buffers are tiny).
        let big = JSONValue.string(String(repeating: "z", count: 15 * 1024))
        var sent = 0
        while publisher.notifications("participantLeft").isEmpty {
            _ = try await publisher.request("publish", ["topic": "flood", "message": big]).get()
            sent += 1
            // Kernel socket buffers hold a few MB on loopback; past 40 MB the cap clearly failed.
            #expect(sent < 2700, "the server kept buffering for a client that does not read")
            if sent >= 2700 { return }
        }
        let left = try await publisher.notification("participantLeft") { $0["participantId"] == "stuck" }
        #expect(left["reason"]?.intValue == 1001)
        let metrics = try await http(server, "GET", "/metrics").text
        #expect(metrics.contains("understudy_signaling_slow_reader_closures_total 1"))
        // Reading now: what the kernel still held, then the end (the close frame only reaches a
        // client that resumes reading within the 2 s drain; this one did not).
        let end = stuck.readUntilCloseCode()
        #expect(end == nil || end == 1013)
    }
}

@Suite("RoomServer tokens, bad messages and abuse")
struct ClientSessionAdmissionTests {
    /// Joins with `jwt` and returns the refusal.
    private func refusal(_ server: RoomServer, _ jwt: String?, participant: String = "p1") async throws -> (
        RoomError, UInt16
    ) {
        let client = try await TestClient.connect(server, token: jwt)
        let error = try await client.expectError("join", ["roomId": "r1", "participantId": .string(participant)])
        return (error, try await client.closed())
    }

    @Test func tokenRefusalsCarryTheirCodes() async throws {
        let server = try startServer()
        defer { server.stop() }
        let missing = try await refusal(server, nil)
        #expect(missing.0.code == 4002)
        #expect(missing.0.name == "INVALID_TOKEN")
        #expect(missing.1 == 4002)
        let expired = RoomToken.sign(
            RoomToken(apikey: "k", permissions: ["allow_join"], exp: Int64(Date().timeIntervalSince1970) - 10),
            secret: server.secret)
        #expect(try await refusal(server, expired).0.code == 4002)
        #expect(try await refusal(server, token(server, secret: "wrong-secret")).0.code == 4002)
        #expect(try await refusal(server, "not.a.jwt").0.code == 4002)
        // Issue 32 item 7: correctly signed, but without the `version` claim the room API requires.
        let unversioned = try await refusal(server, unversionedToken(server))
        #expect(unversioned.0.code == 4002)
        #expect(unversioned.0.message.contains("version"))
        #expect(unversioned.1 == 4002)
        let otherRoom = try await refusal(server, token(server, room: "elsewhere"))
        #expect(otherRoom.0.code == 4022)
        #expect(otherRoom.0.name == "UNAUTHORIZED_MEETING_ID")
        let otherParticipant = try await refusal(server, token(server, participant: "someone-else"))
        #expect(otherParticipant.0.code == 4023)
        #expect(otherParticipant.0.name == "UNAUTHORIZED_PARTCIPANT_ID")
        let mixed = try await refusal(server, token(server, permissions: ["ask_join", "allow_mod"]))
        #expect(mixed.0.code == 4008)
        #expect(mixed.0.name == "INVALID_PERMISSIONS")
        // The token's participantId is used when the join names none.
        let client = try await TestClient.connect(server, token: token(server, room: "r1", participant: "from-token"))
        let joined = try await client.request("join", ["roomId": "r1"]).get()
        #expect(joined["participant"]?["participantId"] == "from-token")
    }

    /// A token signed with the server's secret whose claims lack `version`.
    private func unversionedToken(_ server: RoomServer) -> String {
        let claims = #"{"apikey":"k","permissions":["allow_join"],"exp":\#(Int(Date().timeIntervalSince1970) + 600)}"#
        let input =
            Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        return input + "."
            + Base64URL.encode(HMACSHA256.mac(key: Array(server.secret.utf8), message: Array(input.utf8)))
    }

    @Test func badMessagesGetErrorsAndTheConnectionStaysUp() async throws {
        let server = try startServer { $0.maxMessageBytes = 2048 }
        defer { server.stop() }
        let early = try await TestClient.connect(server, token: token(server))
        let before = try await early.expectError("publish", ["topic": "t", "message": "x"])
        #expect(before.code == 3035)
        #expect(before.message.contains("publish"))

        let (a, _) = try await TestClient.joined(server, participant: "alice")
        // Messages without a usable id are answered with an `error` notification.
        func nullIdError() async throws -> RoomError {
            let e = try await a.notification("error")
            return RoomError(
                code: e["code"]?.intValue ?? 0, name: e["name"]?.stringValue ?? "",
                message: e["message"]?.stringValue ?? "")
        }
        a.send(raw: "{not json")
        #expect(try await nullIdError().code == 3073)
        a.send(raw: "[1,2,3]")
        #expect(try await nullIdError().code == 3073)
        a.send(raw: #"{"id": 1, "method": "ping", "data": {"pad": ""# + String(repeating: "x", count: 3000) + #""}}"#)
        let oversize = try await nullIdError()
        #expect(oversize.code == 3073)
        #expect(oversize.message.contains("exceeds"))
        let unknown = try await a.expectError("teleport")
        #expect(unknown.code == 3068)
        let missingField = try await a.expectError("changeMode")
        #expect(missingField.code == 3073)
        #expect(missingField.name == "ERROR_INVALID_PARAMETER")
        let wrongType = try await a.expectError("setMediaStatus", ["kind": "mic", "enabled": "yes"])
        #expect(wrongType.code == 3073)
        _ = try await a.request("ping").get()
        #expect(!a.isClosed)
    }

    @Test func repeatedAbuseClosesOnlyTheAbuser() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (good, _) = try await TestClient.joined(server, participant: "good")
        let (bad, _) = try await TestClient.joined(server, participant: "bad")
        for _ in 0..<25 { bad.send(raw: "garbage") }
        #expect(try await bad.closed() == 1008)
        let left = try await good.notification("participantLeft")
        #expect(left["participantId"] == "bad")
        _ = try await good.request("ping").get()
        let metrics = try await http(server, "GET", "/metrics").text
        #expect(metrics.contains("understudy_signaling_abuse_closures_total 1"))
    }

    @Test func perConnectionRateLimit() async throws {
        let server = try startServer {
            $0.rateLimitBurst = 5
            $0.rateLimitPerSecond = 0.5
        }
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob")
        let ids = (0..<10).map { _ in a.sendRequest("ping") }
        var limited = 0
        for id in ids {
            if case .failure(let e) = try await a.response(id: .number(Double(id))) {
                #expect(e.code == 4000)
                #expect(e.message.contains("rate limit"))
                limited += 1
            }
        }
        #expect(limited >= 4)
        // Another connection has its own bucket.
        _ = try await b.request("ping").get()
    }
}
