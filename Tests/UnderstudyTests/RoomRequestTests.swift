import Foundation
import Media
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

@Suite("Understudy room requests", .serialized)
struct RoomRequestTests {
    /// 3056 `ERROR_OPERATION_ABORTED`: a request overtaken by the room closing (another participant
    /// ended it first).
    @Test func aRequestOvertakenByTheRoomClosingIs3056() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (me, log) = try await joinedRoom(server, room: "aborted", id: "me")
        let (host, _) = try await joinedRoom(server, room: "aborted", id: "host")
        // The room's queue is held until both requests wait in it, end first, however slow the machine.
        let gate = try await gateRoom(server, "aborted")
        defer { gate.open() }
        let ending = Task { try await host.end() }
        try await gate.waitForRequests(1)
        let target = try #require(me.participants["host"])
        let pinning = Task { await expectCode(3056) { try await target.pin() } }
        try await gate.waitForRequests(2)
        gate.open()
        await pinning.value
        try await ending.value
        try await waitUntil("room closed") { log.has("left:\(Understudy.LeaveReason.ROOM_CLOSE.rawValue)") }
    }

    /// A request the server does not answer in time fails with 3079, reported once.
    @Test func anUnansweredRequestTimesOutWith3079() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(server, room: "slow", id: "host")
        let (guest, _) = try await joinedRoom(server, room: "slow", id: "guest")
        let remote = try #require(guest.participants["host"])
        guest.requestTimeout = 0.5
        // Held until the timeout has fired: no answer can come in time, however slow the machine.
        let gate = try await gateRoom(server, "slow")
        defer { gate.open() }
        await expectCode(3079) { try await remote.pin() }
        guest.requestTimeout = 30
        gate.open()
        // The room works on once the server catches up.
        try await remote.unpin()
        await guest.leave()
        await host.leave()
    }

    /// A join the server does not answer in time fails with 3079 and `JOIN_ROOM_FAILED` instead of
    /// hanging `join()`.
    @Test func anUnansweredJoinFailsWith3079() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(server, room: "slow-join", id: "host")
        let late = try makeRoom(server, room: "slow-join", id: "late")
        let log = EventLog()
        late.addEventListener(log)
        late.requestTimeout = 0.5
        let gate = try await gateRoom(server, "slow-join")
        defer { gate.open() }
        await late.join()
        gate.open()
        #expect(log.errorCodes == [3079])
        #expect(log.has("left:1103") && late.state == .DISCONNECTED)
        await host.leave()
    }
}
