import Foundation
import RoomServer
import Signaling
import Testing

@Suite("RoomServer HTTP API")
struct HTTPAPITests {
    @Test func healthAndMetrics() async throws {
        let server = try startServer()
        defer { server.stop() }
        #expect(try await http(server, "GET", "/healthz").text == "ok\n")
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob")
        _ = try await a.request("produce", ["kind": "mic"]).get()
        try await b.notification("consumerCreated")
        let response = try await http(server, "GET", "/metrics")
        #expect(response.status == 200)
        #expect(response.headers["Content-Type"]?.hasPrefix("text/plain") == true)
        let lines = Set(response.text.split(separator: "\n").map(String.init))
        for expected in [
            "understudy_rooms 1", "understudy_participants 2", "understudy_producers 1", "understudy_consumers 1",
            "understudy_rtp_packets_forwarded_total 0", "understudy_rtp_bytes_forwarded_total 0",
            "# TYPE understudy_participants gauge", "# TYPE understudy_signaling_messages_received_total counter",
        ] {
            #expect(lines.contains(expected), "missing \(expected)")
        }
    }

    @Test func adminAPINeedsAllowMod() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, room: "stage", participant: "alice")
        let none = try await http(server, "GET", "/v1/rooms")
        #expect(none.status == 401)
        #expect(try JSONValue.parse(none.body)["error"]?["code"]?.intValue == 4002)
        let forged = try await http(
            server, "GET", "/v1/rooms", bearer: token(server, permissions: ["allow_mod"], secret: "nope"))
        #expect(forged.status == 401)
        let joinOnly = try await http(server, "GET", "/v1/rooms", bearer: token(server))
        #expect(joinOnly.status == 403)
        let mod = token(server, permissions: ["allow_join", "allow_mod"])
        let list = try await http(server, "GET", "/v1/rooms", bearer: mod)
        #expect(list.status == 200)
        let rooms = try JSONValue.parse(list.body)["rooms"]?.arrayValue ?? []
        #expect(rooms.count == 1)
        #expect(rooms.first?["roomId"] == "stage")
        #expect(rooms.first?["participants"] == ["alice"])

        let wrongRoom = try await http(
            server, "POST", "/v1/rooms/stage/end", bearer: token(server, room: "other", permissions: ["allow_mod"]))
        #expect(wrongRoom.status == 403)
        let refused = try await http(server, "POST", "/v1/rooms/stage/end", bearer: token(server))
        #expect(refused.status == 403)
        let ended = try await http(server, "POST", "/v1/rooms/stage/end", bearer: mod)
        #expect(ended.status == 200)
        #expect(try await a.notification("roomClosed")["reason"]?.intValue == 1006)
        _ = try await a.closed()
        let again = try await http(server, "POST", "/v1/rooms/stage/end", bearer: mod)
        #expect(again.status == 404)
        let unknown = try await http(server, "POST", "/v1/rooms/end", bearer: mod, body: #"{"roomId":"ghost"}"#)
        #expect(unknown.status == 404)
    }
}
