import Foundation
import RoomProtocol
import Signaling
import Testing

@testable import RoomServer

/// `PubSubHistory`: every stored byte counted, capped per room and over all rooms.
@Suite("PubSubHistory")
struct PubSubHistoryTests {
    @Test func historyCountsEveryStoredByteAndIsCappedPerRoom() async throws {
        let cap = 64 * 1024
        let server = try startServer {
            $0.maxPubSubHistoryBytesPerRoom = cap
            $0.maxParticipantsPerRoom = 100
        }
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "a")
        // Small messages with long sendOnly lists: the old limit counted only message + payload.
        let ids = (0..<100).map { JSONValue.string("recipient-" + String(repeating: "x", count: 110) + "-\($0)") }
        for i in 0..<30 {
            _ = try await a.request(
                "publish", ["topic": "t", "message": .string("m\(i)"), "persist": true, "sendOnly": .array(ids)]
            ).get()
        }
        #expect(server.pubsubHistoryBytes <= cap)
        #expect(server.pubsubHistoryBytes > cap / 2)
        let sub = try await a.request("subscribe", ["topic": "t"]).get()
        let kept = sub["historyCount"]?.intValue ?? 0
        #expect(kept > 0 && kept < 30)
        // The newest survive.
        var messages: [JSONValue] = []
        while messages.count < kept {
            let batch = try await a.notification("pubsubHistory")
            messages += batch["messages"]?.arrayValue ?? []
        }
        #expect(messages.last?["message"] == "m29")
        a.close()
        // Stored bytes go back to the server budget when the room ends.
        let deadline = Date().addingTimeInterval(5)
        while server.pubsubHistoryBytes != 0 && Date() < deadline { try await Task.sleep(nanoseconds: 10_000_000) }
        #expect(server.pubsubHistoryBytes == 0)
    }

    @Test func historyIsCappedOverAllRooms() async throws {
        let server = try startServer {
            $0.maxPubSubHistoryBytesPerRoom = 40 * 1024
            $0.maxPubSubHistoryBytesTotal = 60 * 1024
        }
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, room: "one", participant: "a")
        let (b, _) = try await TestClient.joined(server, room: "two", participant: "b")
        let big = JSONValue.string(String(repeating: "y", count: 8 * 1024))
        for _ in 0..<6 { _ = try await a.request("publish", ["topic": "t", "message": big, "persist": true]).get() }
        var refused: RoomError?
        for _ in 0..<6 {
            if case .failure(let e) = try await b.request("publish", ["topic": "t", "message": big, "persist": true]) {
                refused = e
                break
            }
        }
        #expect(refused?.code == 4087)
        #expect(server.pubsubHistoryBytes <= 60 * 1024)
        // Not persisting still works.
        _ = try await b.request("publish", ["topic": "t", "message": big]).get()
    }
}
