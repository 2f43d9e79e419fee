import Foundation
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

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
