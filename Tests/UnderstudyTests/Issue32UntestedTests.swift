import Foundation
import Media
import SDKTestSupport
import TestSupport
import Testing

@testable import RoomServer
@testable import Understudy

// Issue 32 item 11: behaviours the spec states that had no test through the SDK.

@Suite(
    "Understudy: issue 32 item 11 (aliases, 4065 rollback, listener counting, 3056, 3057, single layer)", .serialized)
struct Issue32UntestedTests {
    /// `CONFERENCE` and `VIEWER` stand for `SEND_AND_RECV` and `SIGNALLING_ONLY`, at join and in
    /// `changeMode`, for the caller and for everyone else.
    @Test func theDeprecatedModeAliasesWorkThroughTheSDK() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (other, otherLog) = try await joinedRoom(server, room: "aliases", id: "other")
        let (me, log) = try await joinedRoom(server, room: "aliases", id: "me", mode: .CONFERENCE)
        #expect(me.localParticipant.mode == .SEND_AND_RECV)
        try await waitUntil("the other sees me") { other.participants["me"] != nil }
        #expect(other.participants["me"]?.mode == .SEND_AND_RECV)

        try await me.changeMode(.VIEWER)
        try await waitUntil("my mode event") { log.has("mode:me:SIGNALLING_ONLY") }
        try await waitUntil("the other's") { otherLog.has("mode:me:SIGNALLING_ONLY") }
        #expect(me.localParticipant.mode == .SIGNALLING_ONLY && other.participants["me"]?.mode == .SIGNALLING_ONLY)
        // An alias of the mode already held is that mode (3054).
        await expectCode(3054) { try await me.changeMode(.SIGNALLING_ONLY) }
        await expectCode(3054) { try await me.changeMode(.VIEWER) }

        try await me.changeMode(.CONFERENCE)
        try await waitUntil("back on stage") { otherLog.has("mode:me:SEND_AND_RECV") }
        #expect(me.localParticipant.mode == .SEND_AND_RECV)
        #expect(!log.events.contains { $0.hasSuffix(":CONFERENCE") || $0.hasSuffix(":VIEWER") })
        await me.leave()
        await other.leave()
    }

    /// A `changeMode` the server refuses (here its rate limit, 4000) is 4065 `CHANGE_MODE_FAILED`, with
    /// the refusal as its cause, and the local state rolls back: mode, streams and mic stay as they were.
    @Test func aRefusedChangeModeIs4065AndRollsBack() async throws {
        let server = try startTestServer(secret: "sdk-test-secret") {
            $0.rateLimitPerSecond = 0.01
            $0.rateLimitBurst = 40
        }
        defer { server.stop() }
        let (me, log) = try await joinedRoom(server, room: "rollback", id: "me", mode: .SEND_AND_RECV, mic: true)
        try await waitUntil("mic on") { log.has("streamOn:me:audio") }
        // Spend the connection's request budget until the server refuses.
        var refused = false
        for _ in 0..<80 where !refused {
            do { _ = try await me.call(.ping) } catch let e as UnderstudyError { refused = e.code == 4000 }
        }
        try #require(refused, "the rate limit never refused a request")
        do {
            try await me.changeMode(.RECV_ONLY)
            Issue.record("the refused changeMode succeeded")
        } catch let e as VideoSDKError {
            #expect(e.code == 4065 && e.name == "CHANGE_MODE_FAILED", "\(e)")
            #expect((e.underlyingError as? UnderstudyError)?.code == 4000)
        }
        #expect(me.localParticipant.mode == .SEND_AND_RECV)
        #expect(me.localParticipant.micOn)
        #expect(me.localParticipant.streams.values.map(\.kind) == [.audio])
        #expect(me.media.producingKinds == [.audio])
        #expect(!log.has("streamOff:me:audio") && !log.events.contains { $0.hasPrefix("mode:me:") })
        await me.leave()
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

    /// 3056 `ERROR_OPERATION_ABORTED`: a request overtaken by the room closing (another participant
    /// ended it first).
    @Test func aRequestOvertakenByTheRoomClosingIs3056() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (me, log) = try await joinedRoom(server, room: "aborted", id: "me")
        let (host, _) = try await joinedRoom(server, room: "aborted", id: "host")
        try await stallRoom(server, "aborted", seconds: 3)
        let ending = Task { try await host.end() }
        try await waitUntil("end sent") { host.eventQueue.sync { host.client?.pendingCount ?? 0 } == 1 }
        try await Task.sleep(nanoseconds: 500_000_000)  // it reaches the room's queue before the pin
        let target = try #require(me.participants["host"])
        await expectCode(3056) { try await target.pin() }
        try await ending.value
        try await waitUntil("room closed") { log.has("left:\(Understudy.LeaveReason.ROOM_CLOSE.rawValue)") }
    }

    /// 3057 `ERROR_END_ROOM_FAILED`: `end()` the server refuses (no `allow_mod`: 4024, the cause);
    /// the room stays open.
    @Test func aRefusedEndIs3057() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let plain = try Understudy.createRoom(
            roomId: "end-refused",
            token: sdkToken(
                server, room: "end-refused", participant: "plain",
                permissions: ["allow_join"]),
            participantName: "Plain", participantId: "plain", micEnabled: false, camEnabled: false,
            mode: .SIGNALLING_ONLY, signalingBaseUrl: server.signalingURL)
        let log = EventLog()
        plain.addEventListener(log)
        await plain.join()
        try await waitUntil("joined") { log.has("joined") }
        do {
            try await plain.end()
            Issue.record("end succeeded without allow_mod")
        } catch let e as VideoSDKError {
            #expect(e.code == 3057 && e.name == "ERROR_END_ROOM_FAILED", "\(e)")
            #expect((e.underlyingError as? UnderstudyError)?.code == 4024)
        }
        #expect(plain.state == .CONNECTED && !log.has("left:\(Understudy.LeaveReason.ROOM_CLOSE.rawValue)"))
        let (other, _) = try await joinedRoom(server, room: "end-refused", id: "other")
        #expect(other.participants["plain"] != nil)
        await other.leave()
        await plain.leave()
    }

    /// docs/spec/participant-methods.md:161: with a single published layer (`multiStream: false`) setViewPort
    /// and setQuality are accepted but cannot change what is received: the one layer keeps arriving.
    @Test func setViewPortOnASingleLayerParticipantKeepsItsOneLayer() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(
            server, room: "one-layer", id: "host", mode: .SEND_AND_RECV, cam: true, multiStream: false)
        let frames = FrameCounter()
        let viewer = try makeRoom(server, room: "one-layer", id: "viewer", mode: .RECV_ONLY)
        let log = EventLog()
        viewer.addEventListener(log)
        viewer.onFrame = { participantId, kind, _, _ in
            frames.add(participantId, kind)
        }
        await viewer.join()
        try await waitUntil("joined") { log.has("joined") }
        let atViewer = try #require(viewer.participants["host"])
        atViewer.addEventListener(log)
        try await waitUntil("webcam received") { atViewer.hasStream(.video) && frames.count("host", .video) > 5 }
        let statsBefore = atViewer.getVideoStats() ?? []

        try await atViewer.setViewPort(width: 160, height: 90)
        try await atViewer.setQuality(.low)
        let after = frames.count("host", .video)
        try await waitUntil("frames keep coming", seconds: 15) { frames.count("host", .video) > after + 30 }
        #expect(!log.events.contains { $0.hasPrefix("quality:host:") })
        #expect(atViewer.hasStream(.video))
        // Still the one layer: the stats have no simulcast rid, before and after.
        let statsAfter = try #require(atViewer.getVideoStats())
        #expect((statsBefore + statsAfter).allSatisfy { $0["rid"] == nil })
        await viewer.leave()
        await host.leave()
    }
}
