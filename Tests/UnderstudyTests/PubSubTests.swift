import Foundation
import Media
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

@Suite("Understudy PubSub", .serialized)
struct PubSubTests {
    @Test func pubSubHistoryArrivesInBatchesEndingWithIsLast() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (a, aLog) = try await joinedRoom(server, room: "ps", id: "a")
        try await a.pubSub.subscribe(topic: "chat", listener: aLog)
        for i in 0..<3 {
            try await a.pubSub.publish(topic: "chat", message: "m\(i)", options: ["persist": true])
        }
        try await waitUntil("own messages") { aLog.received.count == 3 }
        let (b, bLog) = try await joinedRoom(server, room: "ps", id: "b")
        try await b.pubSub.subscribe(topic: "chat", listener: bLog)
        try await waitUntil("history") { bLog.historyBatches.last?.1 == true }
        let history = bLog.historyBatches.flatMap(\.0)
        #expect(history.map(\.message) == ["m0", "m1", "m2"])
        #expect(history.allSatisfy { $0.senderId == "a" })
        // A topic without history fires no history callback.
        try await b.pubSub.subscribe(topic: "empty", listener: bLog)
        try await a.pubSub.publish(topic: "chat", message: "live", options: ["sendOnly": ["b"]])
        try await waitUntil("live message") { bLog.received.map(\.message) == ["live"] }
        #expect(bLog.historyBatches.count == 1)
        await a.leave()
        await b.leave()
    }

    /// Several listeners share one server subscription per topic: the server holds it (and counts it
    /// against `maxTopicsPerParticipant`, here 1) until the topic's last listener unsubscribes.
    @Test func listenersAreCountedPerTopic() async throws {
        let server = try startTestServer(secret: "sdk-test-secret") { $0.maxTopicsPerParticipant = 1 }
        defer { server.stop() }
        let (me, _) = try await joinedRoom(server, room: "listeners", id: "me")
        let (sender, _) = try await joinedRoom(server, room: "listeners", id: "sender")
        try await sender.pubSub.publish(topic: "chat", message: "stored", options: ["persist": true])
        let a = EventLog()
        let b = EventLog()
        let other = EventLog()
        try await me.pubSub.subscribe(topic: "chat", listener: a)
        try await waitUntil("a's history") { a.historyBatches.count == 1 }
        try await me.pubSub.subscribe(topic: "chat", listener: b)
        // The second listener made no second server subscription: no history again for a.
        try await sender.pubSub.publish(topic: "chat", message: "one")
        try await waitUntil("both receive") { a.received.count == 1 && b.received.count == 1 }
        #expect(a.historyBatches.count == 1 && b.historyBatches.isEmpty)
        // One server topic is held: another topic is over the limit (4088).
        await expectCode(4088) { try await me.pubSub.subscribe(topic: "other", listener: other) }

        try await me.pubSub.unsubscribe(topic: "chat", listener: a)
        try await sender.pubSub.publish(topic: "chat", message: "two")
        try await waitUntil("b still receives") { b.received.map(\.message) == ["one", "two"] }
        #expect(a.received.count == 1)
        await expectCode(4088) { try await me.pubSub.subscribe(topic: "other", listener: other) }

        // The last listener ends the server subscription: the topic slot is free again.
        try await me.pubSub.unsubscribe(topic: "chat", listener: b)
        try await me.pubSub.subscribe(topic: "other", listener: other)
        try await sender.pubSub.publish(topic: "other", message: "three")
        try await waitUntil("the new topic") { other.received.map(\.message) == ["three"] }
        #expect(b.received.count == 2)
        await sender.leave()
        await me.leave()
    }

    /// `payload` is the spec's `[String: Any]` both ways.
    @Test func aPubSubPayloadIsADictionaryBothWays() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (a, aLog) = try await joinedRoom(server, room: "payload", id: "a")
        try await a.pubSub.subscribe(topic: "t", listener: aLog)
        try await a.pubSub.publish(topic: "t", message: "hi", payload: ["n": 7, "s": "x", "list": [1, 2]])
        try await waitUntil("message back") { !aLog.received.isEmpty }
        let payload = try #require(aLog.received.first?.payload)
        #expect(payload["n"] as? Int == 7)
        #expect(payload["s"] as? String == "x")
        #expect(payload["list"] as? [Int] == [1, 2])
        await a.leave()
    }

    /// `payloadText` goes out as written and `payloadJSON` is the exact text the
    /// publisher sent, live and in the history; the dictionary view still works.
    @Test func aPubSubPayloadTextArrivesByteForByte() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let exact = #"{"z":1.50,"a":1e2,"neg":-0.0,"big":12345678901234567890,"s":"\u00e9","n":[ 1 , {"y":2} ]}"#
        let (a, aLog) = try await joinedRoom(server, room: "payload-text", id: "a")
        try await a.pubSub.subscribe(topic: "t", listener: aLog)
        try await a.pubSub.publish(topic: "t", message: "hi", options: ["persist": true], payloadText: exact)
        try await waitUntil("message back") { !aLog.received.isEmpty }
        #expect(aLog.received.first?.payloadJSON == exact)
        #expect(aLog.received.first?.payload?["z"] as? Double == 1.5)
        let (b, bLog) = try await joinedRoom(server, room: "payload-text", id: "b")
        try await b.pubSub.subscribe(topic: "t", listener: bLog)
        try await waitUntil("history") { bLog.historyBatches.last?.1 == true }
        #expect(bLog.historyBatches.flatMap(\.0).first?.payloadJSON == exact)
        await expectCode(3073) { try await a.pubSub.publish(topic: "t", message: "x", payloadText: "[1]") }
        await expectCode(3073) { try await a.pubSub.publish(topic: "t", message: "x", payloadText: "{\"a\":}") }
        await a.leave()
        await b.leave()
    }
}
