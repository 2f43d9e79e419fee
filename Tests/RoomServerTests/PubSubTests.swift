import Foundation
import RoomServer
import Signaling
import Testing

@Suite("RoomServer PubSub")
struct PubSubTests {
    @Test func persistedHistoryIsReplayedInBatchesWithTheLastMarked() async throws {
        let server = try startServer {
            $0.pubsubHistoryBatchSize = 2
            $0.pubsubHistoryLimit = 4
        }
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        for i in 1...5 {
            _ = try await a.request("publish", ["topic": "chat", "message": .string("m\(i)"), "persist": true]).get()
        }
        _ = try await a.request("publish", ["topic": "chat", "message": "ephemeral", "persist": false]).get()
        let (b, _) = try await TestClient.joined(server, participant: "bob")
        let sub = try await b.request("subscribe", ["topic": "chat"]).get()
        #expect(sub["historyCount"]?.intValue == 4)
        let first = try await b.notification("pubsubHistory")
        let second = try await b.notification("pubsubHistory")
        // Bounded: the oldest message was dropped; the non-persisted one was never stored.
        let texts = (first["messages"]?.arrayValue ?? []) + (second["messages"]?.arrayValue ?? [])
        #expect(texts.compactMap { $0["message"]?.stringValue } == ["m2", "m3", "m4", "m5"])
        #expect(first["isLast"] == false)
        #expect(second["isLast"] == true)
        #expect(texts.first?["senderId"] == "alice")
        #expect(texts.first?["senderName"] == "name-alice")

        // A topic without history fires no history notification.
        _ = try await b.request("subscribe", ["topic": "empty"]).get()
        _ = try await b.request("ping").get()
        #expect(b.notifications("pubsubHistory").count == 2)
    }

    @Test func deliveryHonoursSendOnlyAndTheSenderGetsItsOwnMessage() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob")
        let (c, _) = try await TestClient.joined(server, participant: "carol")
        for client in [a, b, c] { _ = try await client.request("subscribe", ["topic": "t"]).get() }
        let payload: JSONValue = ["nested": ["x": 1.5, "list": [1, "two", nil, false]], "emoji": "🎭"]
        _ = try await a.request(
            "publish", ["topic": "t", "message": "for bob", "options": ["sendOnly": ["bob"]], "payload": payload]
        ).get()
        let atBob = try await b.notification("pubsubMessage")
        #expect(atBob["message"] == "for bob")
        #expect(atBob["payload"] == payload)
        #expect(atBob["sendOnly"] == ["bob"])
        let own = try await a.notification("pubsubMessage")
        #expect(own["id"] == atBob["id"])
        _ = try await a.request("publish", ["topic": "t", "message": "all"]).get()
        try await c.notification("pubsubMessage") { $0["message"] == "all" }
        #expect(!c.notifications("pubsubMessage").contains { $0["message"] == "for bob" })
    }

    @Test func pubSubErrorsUseTheirCodes() async throws {
        let server = try startServer {
            $0.maxPubSubMessageBytes = 100
            $0.maxPersistedTopicsPerRoom = 1
        }
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let big = try await a.expectError(
            "publish", ["topic": "t", "message": .string(String(repeating: "x", count: 101))])
        #expect(big.code == 4087)
        #expect(big.name == "PUBSUB_PUBLISH_FAILED")
        _ = try await a.request("publish", ["topic": "kept", "message": "x", "persist": true]).get()
        let tooManyTopics = try await a.expectError("publish", ["topic": "another", "message": "x", "persist": true])
        #expect(tooManyTopics.code == 4087)
        let noTopic = try await a.expectError("publish", ["message": "hi"])
        #expect(noTopic.code == 4087)
        let badSub = try await a.expectError("subscribe", ["topic": ""])
        #expect(badSub.code == 4088)
        #expect(badSub.name == "PUBSUB_SUBSCRIBE_FAILED")
        let badUnsub = try await a.expectError("unsubscribe", ["topic": "never"])
        #expect(badUnsub.code == 4089)
        #expect(badUnsub.name == "PUBSUB_UNSUBSCRIBE_FAILED")
        _ = try await a.request("subscribe", ["topic": "t"]).get()
        _ = try await a.request("unsubscribe", ["topic": "t"]).get()
        _ = try await a.request("publish", ["topic": "t", "message": "after"]).get()
        _ = try await a.request("ping").get()
        #expect(a.notifications("pubsubMessage").isEmpty)
    }

    @Test func stageInviteFlowOverPubSub() async throws {
        // Seed 000: the host publishes, the audience member subscribes and calls changeMode itself.
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let (guest, _) = try await TestClient.joined(server, participant: "guest", extra: ["mode": "RECV_ONLY"])
        _ = try await guest.request("subscribe", ["topic": "REQUEST_TO_JOIN_AS_HOST_guest"]).get()
        _ = try await host.request("publish", ["topic": "REQUEST_TO_JOIN_AS_HOST_guest", "message": "SEND_AND_RECV"])
            .get()
        let invite = try await guest.notification("pubsubMessage")
        let mode = try #require(invite["message"]?.stringValue)
        _ = try await guest.request("changeMode", ["mode": .string(mode)]).get()
        let changed = try await host.notification("participantModeChanged")
        #expect(changed["participantId"] == "guest")
        #expect(changed["mode"] == "SEND_AND_RECV")
        _ = try await guest.request("produce", ["kind": "mic"]).get()
    }

    /// Issue 32 item 2: the payload's exact bytes (key order, `1.50`, `1e2`, `-0.0`, an integer beyond
    /// 2^53, escapes) reach live subscribers and later ones through the history.
    static let exactPayload =
        #"{"z":1.50,"a":1e2,"neg":-0.0,"big":12345678901234567890,"s":"\u00e9\/é","n":[ 1 , {"y":2,"x":1} ]}"#

    @Test func payloadBytesPassThroughUntouchedLiveAndInHistory() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob")
        _ = try await b.request("subscribe", ["topic": "t"]).get()
        a.send(
            raw: #"{"id":"p1","method":"publish","data":{"topic":"t","message":"m","persist":true,"payload":"#
                + Self.exactPayload + "}}")
        _ = try await a.response(id: "p1").get()
        _ = try await b.notification("pubsubMessage")
        let live = b.rawTexts.filter { $0.contains("pubsubMessage") }
        #expect(live.count == 1)
        #expect(live.first?.contains(#""payload":"# + Self.exactPayload) == true, "\(live)")

        let (c, _) = try await TestClient.joined(server, participant: "carol")
        _ = try await c.request("subscribe", ["topic": "t"]).get()
        _ = try await c.notification("pubsubHistory")
        let replayed = c.rawTexts.filter { $0.contains("pubsubHistory") }
        #expect(replayed.first?.contains(#""payload":"# + Self.exactPayload) == true, "\(replayed)")

        // Still one JSON object: anything else is refused with its documented code.
        a.send(raw: #"{"id":"p2","method":"publish","data":{"topic":"t","message":"m","payload":[1]}}"#)
        guard case .failure(let notObject) = try await a.response(id: "p2") else {
            Issue.record("a non-object payload was accepted")
            return
        }
        #expect(notObject.code == 4087)
        a.send(raw: #"{"id":"p3","method":"publish","data":{"topic":"t","message":"m","payload":{"a":01}}}"#)
        try await a.notification("error") { $0["code"] == 3073 }
    }
}
