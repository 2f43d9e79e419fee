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
        // docs/spec/change-mode.md: the host publishes, the audience member subscribes and calls changeMode itself.
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

    /// Issue 31 item 8: members re-subscribing to a topic with a full room's history (512 KiB) do not
    /// hold up another member: its ping is answered while the replays are still going out, in a
    /// small part of the time they take (before: it waited until every replay had been encoded on
    /// the room's queue).
    @Test func historyReplaysDoNotHoldUpAnotherMembersPing() async throws {
        // A bigger history than the default 512 KiB makes the replays long, and so the difference
        // between a ping that waits for them and one that does not, plain on a busy machine.
        let server = try startServer {
            $0.maxPubSubHistoryBytesPerRoom = 4 * 1024 * 1024
            $0.rateLimitPerSecond = 10_000
            $0.rateLimitBurst = 10_000
        }
        defer { server.stop() }
        let (publisher, _) = try await TestClient.joined(server, participant: "pub")
        let filler = String(repeating: "x", count: 15_800)
        for i in 0..<200 {
            _ = try await publisher.request(
                "publish", ["topic": "big", "message": .string("\(i)" + filler), "persist": true]
            ).get()
        }
        var replayers: [TestClient] = []
        for i in 0..<4 { replayers.append(try await TestClient.joined(server, participant: "r\(i)").0) }
        let (pinger, _) = try await TestClient.joined(server, participant: "pinger")
        _ = try await pinger.request("ping").get()

        let started = Date()
        var subscribes: [[Int]] = []
        for client in replayers {
            subscribes.append((0..<10).map { _ in client.sendRequest("subscribe", ["topic": "big"]) })
        }
        let ping = try await pinger.request("ping").get()
        let pingSeconds = Date().timeIntervalSince(started)
        #expect(ping["time"] != nil)

        // The replays end: every subscribe is answered (accepted, or 4088 while earlier replays of the
        // same member wait), and each accepted one's history ends with isLast.
        var accepted = 0
        for (client, ids) in zip(replayers, subscribes) {
            var mine = 0
            for id in ids {
                switch try await client.response(id: .number(Double(id))) {
                case .success(let data):
                    #expect(data["historyCount"]?.intValue ?? 0 > 0)
                    mine += 1
                case .failure(let error): #expect(error.code == 4088, "\(error)")
                }
            }
            for _ in 0..<mine { try await client.notification("pubsubHistory", seconds: 120) { $0["isLast"] == true } }
            #expect(mine >= 1)
            accepted += mine
        }
        let replaySeconds = Date().timeIntervalSince(started)
        print(
            "history replays: \(accepted) of 40 accepted, done after \(replaySeconds) s; ping answered after \(pingSeconds) s"
        )
        #expect(pingSeconds < replaySeconds / 2, "ping \(pingSeconds) s, replays \(replaySeconds) s")
    }

    /// The replay leaves the room's queue, but a subscriber still hears a topic's history before the
    /// messages published after its subscribe (they wait behind the replay under way).
    @Test func liveMessagesFollowTheHistoryReplayUnderWay() async throws {
        let server = try startServer {
            $0.pubsubHistoryBatchSize = 5
            $0.rateLimitPerSecond = 10_000
            $0.rateLimitBurst = 10_000
        }
        defer { server.stop() }
        let (publisher, _) = try await TestClient.joined(server, participant: "pub")
        let filler = String(repeating: "y", count: 15_000)
        for i in 0..<30 {
            _ = try await publisher.request(
                "publish", ["topic": "t", "message": .string("old\(i)" + filler), "persist": true]
            ).get()
        }
        let (sub, _) = try await TestClient.joined(server, participant: "sub")
        _ = sub.sendRequest("subscribe", ["topic": "t"])
        try await sub.waitFor("the subscribe's answer") {
            if case .response = $0 { return true } else { return false }
        }
        _ = try await publisher.request("publish", ["topic": "t", "message": "live"]).get()
        try await sub.notification("pubsubMessage", seconds: 30) { $0["message"] == "live" }
        let order = sub.messages.compactMap { envelope -> String? in
            guard case .notification(let method, let data) = envelope else { return nil }
            if method == "pubsubMessage" { return "live" }
            if method == "pubsubHistory" { return data["isLast"] == true ? "last" : "batch" }
            return nil
        }
        #expect(order == Array(repeating: "batch", count: 5) + ["last", "live"], "\(order)")
    }

    /// A subscriber that stops reading stalls only its own replay: it is not dropped for the history
    /// it asked for (the replay goes at its pace, a batch at a time), the room answers others, and the
    /// live messages that wait behind its replay are bounded: past the bound its connection's own
    /// limit drops it (1013, leave 1001) as it drops any client that does not read.
    @Test func aSubscriberThatStopsReadingStallsOnlyItsOwnReplay() async throws {
        let server = try startServer {
            $0.maxQueuedOutputBytes = 64 * 1024
            $0.rateLimitPerSecond = 10_000
            $0.rateLimitBurst = 10_000
        }
        defer { server.stop() }
        let (publisher, _) = try await TestClient.joined(server, participant: "pub")
        let filler = String(repeating: "h", count: 15_000)
        for i in 0..<30 {
            _ = try await publisher.request(
                "publish", ["topic": "t", "message": .string("old\(i)" + filler), "persist": true]
            ).get()
        }
        let stuck = try RawWebSocket(port: server.httpPort, path: "/v1/rtc?token=" + token(server, room: "r1"))
        stuck.sendText(#"{"id":1,"method":"join","data":{"roomId":"r1","participantId":"stuck"}}"#)
        stuck.sendText(#"{"id":2,"method":"subscribe","data":{"topic":"t"}}"#)
        try await publisher.notification("participantJoined") { $0["participantId"] == "stuck" }
        let (other, _) = try await TestClient.joined(server, participant: "other")
        for _ in 0..<20 { _ = try await other.request("ping").get() }
        // 450 KB of history for a 64 KiB output bound, and it is still in the room.
        #expect(publisher.notifications("participantLeft").isEmpty)
        let big = JSONValue.string(String(repeating: "z", count: 15 * 1024))
        var sent = 0
        while publisher.notifications("participantLeft").isEmpty, sent < 2000 {
            _ = try await publisher.request("publish", ["topic": "t", "message": big]).get()
            sent += 1
        }
        #expect(sent < 2000, "live messages piled up behind a stalled replay without a bound")
        let left = try await publisher.notification("participantLeft") { $0["participantId"] == "stuck" }
        #expect(left["reason"]?.intValue == 1001)
    }

    /// Issue 31 item 11: a persisted sendOnly message is replayed only to the participants it was
    /// meant for, not to whoever takes their ids later with an unbound token.
    @Test func sendOnlyHistoryGoesOnlyToTheSameParticipants() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (keeper, _) = try await TestClient.joined(server, participant: "keeper")  // keeps the room open
        let (alice, _) = try await TestClient.joined(server, participant: "alice")
        let (bob, _) = try await TestClient.joined(server, participant: "bob")
        _ = try await alice.request(
            "publish", ["topic": "dm", "message": "for bob", "persist": true, "sendOnly": ["bob"]]
        ).get()
        _ = try await alice.request("publish", ["topic": "dm", "message": "for all", "persist": true]).get()
        // Bob, present when it was published, gets it in the history (and so does its sender).
        let atBob = try await bob.request("subscribe", ["topic": "dm"]).get()
        #expect(atBob["historyCount"] == 2)
        let atAlice = try await alice.request("subscribe", ["topic": "dm"]).get()
        #expect(atAlice["historyCount"] == 2)
        try await alice.notification("pubsubHistory") { $0["isLast"] == true }
        bob.close()
        alice.close()
        _ = try await alice.closed()
        _ = try await bob.closed()
        try await keeper.notification("participantLeft") { $0["participantId"] == "alice" }
        try await keeper.notification("participantLeft") { $0["participantId"] == "bob" }

        // Someone else takes "bob" and "alice" with unbound tokens: only the broadcast.
        let (fakeBob, _) = try await TestClient.joined(server, participant: "bob")
        let atFakeBob = try await fakeBob.request("subscribe", ["topic": "dm"]).get()
        #expect(atFakeBob["historyCount"] == 1)
        let replayed = try await fakeBob.notification("pubsubHistory")
        #expect(replayed["messages"]?.arrayValue?.compactMap { $0["message"]?.stringValue } == ["for all"])
        let (fakeAlice, _) = try await TestClient.joined(server, participant: "alice")
        let atFakeAlice = try await fakeAlice.request("subscribe", ["topic": "dm"]).get()
        #expect(atFakeAlice["historyCount"] == 1)

        // A token bound to "bob" is bob (the secret's holder says so): it gets its message.
        let (realBob, _) = try await TestClient.joined(server, participant: "bob", bound: true)
        let atRealBob = try await realBob.request("subscribe", ["topic": "dm"]).get()
        #expect(atRealBob["historyCount"] == 2)
    }
}
