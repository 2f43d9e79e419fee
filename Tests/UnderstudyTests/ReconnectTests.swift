import Foundation
import RTCWire
import RoomServer
import Testing

@testable import Understudy

@Suite("Understudy reconnection", .serialized)
struct ReconnectTests {
    @Test func aDroppedSocketRejoinsAndRefusesActionsWith3065Meanwhile() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "rc", id: "host")
        let (guest, guestLog) = try await joinedRoom(server, room: "rc", id: "guest", mode: .SEND_AND_RECV, mic: true)
        try await waitUntil("guest mic") { guestLog.has("streamOn:guest:audio") }
        try await waitUntil("host sees guest") { hostLog.has("pjoined:guest") }
        guest.reconnectDelay = 0.5
        guest.simulateConnectionDrop()
        try await waitUntil("reconnecting") { guest.state == .RECONNECTING }
        await expectCode(3065) { try await guest.pubSub.publish(topic: "t", message: "x") }
        try await waitUntil("rejoined") { guestLog.count("joined") == 2 }
        let events = guestLog.events
        #expect(
            events.filter { $0.hasPrefix("state:") }
                == ["state:CONNECTING", "state:CONNECTED", "state:RECONNECTING", "state:CONNECTED"])
        #expect(guestLog.count("pjoined:host") == 1)
        #expect(guest.participants.keys.sorted() == ["host"])
        #expect(guestLog.errorCodes == [3065])
        // The mic is published again after the rejoin.
        try await waitUntil("mic restored") { guestLog.count("streamOn:guest:audio") == 2 }
        try await waitUntil("host sees guest back") { hostLog.count("pjoined:guest") == 2 }
        // Works normally afterwards.
        try await guest.pubSub.publish(topic: "t", message: "after")
        await guest.leave()
        try await waitUntil("guest left") { guestLog.has("left:1101") }
        #expect(guestLog.count("state:DISCONNECTED") == 1)
        await host.leave()
    }

    @Test func exhaustedAttemptsFailAndLeaveWith1102() async throws {
        let server = try startRoomServer()
        let (room, log) = try await joinedRoom(server, room: "gone", id: "solo")
        room.reconnectAttempts = 2
        room.reconnectDelay = 1.0
        room.simulateConnectionDrop()
        try await waitUntil("reconnecting") { room.state == .RECONNECTING }
        server.stop()
        try await waitUntil("gave up", seconds: 20) { log.has("left:1102") }
        #expect(Array(log.events.suffix(3)) == ["state:FAILED", "state:DISCONNECTED", "left:1102"])
        #expect(log.count("state:DISCONNECTED") == 1)
    }
}
