import Foundation
import RoomProtocol
import Signaling
import Testing

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
