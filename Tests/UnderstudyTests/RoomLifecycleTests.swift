import Foundation
import Media
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

/// Every gated async method of a participant (docs/spec/participant-methods.md: all except captureImage).
func participantActions(_ p: Participant) -> [(String, () async throws -> Void)] {
    [
        ("enableMic", { try await p.enableMic() }), ("disableMic", { try await p.disableMic() }),
        ("enableCam", { try await p.enableCam() }), ("disableCam", { try await p.disableCam() }),
        ("setQuality", { try await p.setQuality(.low) }),
        ("setScreenShareQuality", { try await p.setScreenShareQuality(.low) }),
        ("setViewPort", { try await p.setViewPort(width: 320, height: 180) }),
        ("consumeMicStreams", { try await p.consumeMicStreams() }),
        ("consumeWebcamStreams", { try await p.consumeWebcamStreams() }),
        ("stopConsumingMicStreams", { try await p.stopConsumingMicStreams() }),
        ("stopConsumingWebcamStreams", { try await p.stopConsumingWebcamStreams() }),
        ("remove", { try await p.remove() }), ("pin", { try await p.pin() }), ("unpin", { try await p.unpin(.CAM) }),
    ]
}

/// Every gated async method of the room that the spec pages (docs/spec/) lean on.
func roomActions(_ r: Room) -> [(String, () async throws -> Void)] {
    [
        ("unmuteMic", { try await r.unmuteMic() }), ("muteMic", { try await r.muteMic() }),
        ("enableCam", { try await r.enableCam() }), ("disableCam", { try await r.disableCam() }),
        ("changeMode", { try await r.changeMode(.RECV_ONLY) }),
        ("enableScreenShare", { try await r.enableScreenShare() }),
        ("disableScreenShare", { try await r.disableScreenShare() }),
        ("publish", { try await r.pubSub.publish(topic: "t", message: "m") }),
    ]
}

/// Runs each action, expecting `code` with the method named in the message; then checks that
/// `onError` saw each refusal exactly once.
func expectEachRefused(
    _ code: Int, _ actions: [(String, () async throws -> Void)], log: EventLog, room: Room,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    let before = log.errorCodes.filter { $0 == code }.count
    for (name, action) in actions {
        do {
            try await action()
            Issue.record("\(name) succeeded, expected \(code)", sourceLocation: sourceLocation)
        } catch let e as UnderstudyError {
            #expect(e.code == code, "\(name): \(e)", sourceLocation: sourceLocation)
            #expect(e.name == UnderstudyError.canonicalName(code), sourceLocation: sourceLocation)
            #expect(e.message.contains(name), "\(name): \(e.message)", sourceLocation: sourceLocation)
        }
    }
    try await waitUntil("\(actions.count) refusals reported") {
        log.errorCodes.filter { $0 == code }.count >= before + actions.count
    }
    // Every report was queued before its refusal was thrown: one turn of the event queue delivers them all.
    await room.onQueue {}
    #expect(
        log.errorCodes.filter { $0 == code }.count == before + actions.count, "each refusal is reported once",
        sourceLocation: sourceLocation)
}

func expectNoStats(_ p: Participant, sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(p.getAudioStats() == nil, sourceLocation: sourceLocation)
    #expect(p.getVideoStats() == nil, sourceLocation: sourceLocation)
    #expect(try p.getShareStats() == nil, sourceLocation: sourceLocation)
    #expect(p.getShareAudioStats() == nil, sourceLocation: sourceLocation)
    #expect(p.getTransportStats() == nil, sourceLocation: sourceLocation)
}

@Suite("Understudy room lifecycle", .serialized)
struct RoomLifecycleTests {
    @Test func emptyRoomIdIsRefusedWith3073() throws {
        #expect(throws: UnderstudyError.self) {
            _ = try Understudy.createRoom(roomId: "", token: "t", participantName: "x")
        }
        do {
            _ = try Understudy.createRoom(roomId: "", token: "t", participantName: "x")
        } catch {
            // `createRoom` throws only UnderstudyError (typed throws).
            let e: UnderstudyError = error
            #expect(e.code == 3073)
            #expect(e.name == "ERROR_INVALID_PARAMETER")
        }
    }

    @Test func existingParticipantsArriveBeforeRoomJoinedAndLeaveEndsOnce() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "life", id: "host")
        let (guest, guestLog) = try await joinedRoom(server, room: "life", id: "guest")

        let events = guestLog.events
        #expect(Array(events.prefix(4)) == ["state:CONNECTING", "pjoined:host", "state:CONNECTED", "joined"])
        #expect(guest.participants.keys.sorted() == ["host"])
        #expect(guest.localParticipant.id == "guest")
        try await waitUntil("host sees guest") { hostLog.has("pjoined:guest") }
        #expect(host.participants["guest"]?.displayName == "name-guest")

        await guest.leave()
        try await waitUntil("guest left") { guestLog.has("left:1101") }
        let tail = Array(guestLog.events.suffix(2))
        #expect(tail == ["state:DISCONNECTED", "left:1101"])
        #expect(guestLog.count("state:DISCONNECTED") == 1)
        try await waitUntil("host sees guest leave") { hostLog.has("pleft:guest:1101") }
        #expect(host.participants.isEmpty)

        // After leaving, every action is refused with 3035 naming the method.
        await expectCode(3035) { try await guest.changeMode(.RECV_ONLY) }
        await host.leave()
        try await waitUntil("host left") { hostLog.has("left:1101") }
        #expect(hostLog.count("state:DISCONNECTED") == 1)
    }

    @Test func endClosesTheRoomForEveryone() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (a, aLog) = try await joinedRoom(server, room: "end", id: "a")
        // The app keeps its Room alive; a released Room stops delivering events.
        let (b, bLog) = try await joinedRoom(server, room: "end", id: "b")
        try await a.end()
        try await waitUntil("a left") { aLog.has("left:1006") }
        try await waitUntil("b left (\(bLog.events))") { bLog.has("left:1006") }
        for log in [aLog, bLog] {
            #expect(log.count("state:DISCONNECTED") == 1)
            #expect(Array(log.events.suffix(2)) == ["state:DISCONNECTED", "left:1006"])
        }
        #expect(b.state == .DISCONNECTED)
    }

    @Test func actionsBeforeJoinAreRefusedWith3035OnceToOnError() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let room = try makeRoom(server, room: "gate", id: "early")
        let log = EventLog()
        room.addEventListener(log)
        do {
            try await room.changeMode(.RECV_ONLY)
            Issue.record("changeMode before join succeeded")
        } catch let e as UnderstudyError {
            #expect(e.code == 3035)
            #expect(e.name == "ERROR_ACTION_PERFORMED_BEFORE_ROOM_JOINED")
            #expect(e.message.contains("changeMode"))
        }
        do {
            try await room.pubSub.subscribe(topic: "t", listener: log)
            Issue.record("subscribe before join succeeded")
        } catch let e as UnderstudyError {
            #expect(e.code == 3035)
            #expect(e.message.contains("subscribe"))
        }
        try await waitUntil("two errors") { log.errorCodes.count >= 2 }
        await room.onQueue {}  // each report was queued before its refusal was thrown
        #expect(log.errorCodes == [3035, 3035])
    }

    @Test func invalidTokenFailsTheJoinWithFailedThenDisconnected() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let room = try Understudy.createRoom(
            roomId: "bad", token: "not-a-jwt", participantName: "x", participantId: "x",
            signalingBaseUrl: server.signalingURL)
        let log = EventLog()
        room.addEventListener(log)
        await room.join()
        try await waitUntil("left") { log.has("left:1103") }
        #expect(log.events == ["state:CONNECTING", "state:FAILED", "error:4002", "state:DISCONNECTED", "left:1103"])
    }

    @Test func everyMethodIsRefusedWith3035BeforeTheJoinAndAfterLeavingOncePerCall() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let early = try makeRoom(server, room: "gating", id: "early", mode: .SEND_AND_RECV)
        let earlyLog = EventLog()
        early.addEventListener(earlyLog)
        try await expectEachRefused(
            3035, participantActions(early.localParticipant) + roomActions(early), log: earlyLog, room: early)
        try expectNoStats(early.localParticipant)

        let (pub, pubLog) = try await joinedRoom(server, room: "gating", id: "pub", mode: .SEND_AND_RECV, mic: true)
        try await waitUntil("mic on") { pubLog.has("streamOn:pub:audio") }
        let (viewer, viewerLog) = try await joinedRoom(server, room: "gating", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["pub"])
        try await waitForStream(remote, .audio)
        #expect(remote.getAudioStats() != nil)
        await viewer.leave()
        try await expectEachRefused(
            3035, participantActions(remote) + roomActions(viewer), log: viewerLog, room: viewer)
        try expectNoStats(remote)
        try expectNoStats(viewer.localParticipant)
        await pub.leave()
    }

    @Test func everyMethodIsRefusedWith3065WhileReconnectingAndStatsAreNil() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, _) = try await joinedRoom(server, room: "reconnecting", id: "pub", mode: .SEND_AND_RECV)
        let (viewer, viewerLog) = try await joinedRoom(
            server, room: "reconnecting", id: "viewer", mode: .SEND_AND_RECV)
        let remote = try #require(viewer.participants["pub"])
        viewer.reconnectDelay = 4  // long enough to try everything while RECONNECTING
        viewer.simulateConnectionDrop()
        try await waitUntil("reconnecting") { viewer.state == .RECONNECTING }
        try await expectEachRefused(
            3065, participantActions(remote) + roomActions(viewer), log: viewerLog, room: viewer)
        try expectNoStats(remote)
        // captureImage is not gated: there is no webcam video while reconnecting.
        await expectCode(3062) { _ = try await remote.captureImage() }
        try await waitUntil("reconnected", seconds: 30) { viewer.state == .CONNECTED }
        #expect(remote.getAudioStats() != nil)
        await viewer.leave()
        await pub.leave()
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
}

@Suite("Understudy duplicate participants", .serialized)
struct DuplicateParticipantTests {
    @Test func aSecondJoinWithTheSameIdReplacesTheFirst() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (first, firstLog) = try await joinedRoom(server, room: "dup", id: "same")
        let (second, _) = try await joinedRoom(server, room: "dup", id: "same")
        try await waitUntil("first replaced") { firstLog.has("left:1011") }
        #expect(firstLog.errorCodes.contains(4005))
        #expect(Array(firstLog.events.suffix(2)) == ["state:DISCONNECTED", "left:1011"])
        #expect(firstLog.count("state:DISCONNECTED") == 1)
        #expect(first.state == .DISCONNECTED)
        #expect(second.state == .CONNECTED)
        await second.leave()
    }
}

/// Consumes from `onParticipantJoined` while `join()` is still running (docs/spec/room-api.md §4).
final class EagerConsumer: RoomEventListener, @unchecked Sendable {
    private let lock = NSLock()
    private var _outcomes: [String] = []
    var outcomes: [String] { lock.withLock { _outcomes } }
    func onParticipantJoined(_ participant: Participant) {
        Task {
            do {
                try await participant.consumeWebcamStreams()
                lock.withLock { _outcomes.append("ok:\(participant.id)") }
            } catch {
                lock.withLock { _outcomes.append("\(error)") }
            }
        }
    }
}

@Suite("Understudy consume during join", .serialized)
struct ConsumeDuringJoinTests {
    @Test func consumeFromOnParticipantJoinedWaitsForTheJoin() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(server, room: "eager", id: "host")
        let room = try makeRoom(server, room: "eager", id: "late", mode: .RECV_ONLY, autoConsume: false)
        let eager = EagerConsumer()
        room.addEventListener(eager)
        await room.join()
        try await waitUntil("consume finished") { !eager.outcomes.isEmpty }
        #expect(eager.outcomes == ["ok:host"])
        await room.leave()
        await host.leave()
    }
}
