import Foundation
import Media
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

@Suite("Understudy listeners", .serialized)
struct ListenerTests {
    @Test func listenersSeeOnlyNewStreamsAndCanBeRemoved() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, _) = try await joinedRoom(
            server, room: "listeners", id: "pub", mode: .SEND_AND_RECV, mic: true, cam: true)
        let (viewer, _) = try await joinedRoom(server, room: "listeners", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["pub"])
        try await waitForStream(remote, .audio)
        try await waitForStream(remote, .video)

        let late = EventLog()
        let removed = EventLog()
        let cleared = EventLog()
        remote.addEventListener(late)
        remote.addEventListener(removed)
        remote.addEventListener(late)  // added twice: still one listener
        #expect(remote.liveListeners.count == 2)
        await viewer.onQueue {}  // anything adding a listener caused would be delivered by now
        #expect(late.events.isEmpty, "existing streams are not reported again: \(late.events)")
        #expect(remote.streams.count == 2, "they are in streams")

        remote.removeEventListener(removed)
        try await pub.disableCam()
        try await waitUntil("late listener sees the webcam stop") { late.has("streamOff:pub:video") }
        #expect(late.count("streamOff:pub:video") == 1)
        #expect(removed.events.isEmpty)

        remote.addEventListener(cleared)
        remote.removeAllEventListeners()
        #expect(remote.liveListeners.isEmpty)
        try await pub.enableCam()
        try await waitForStream(remote, .video)
        await viewer.onQueue {}  // the stream's listener calls ran in the block that added it
        #expect(cleared.events.isEmpty && late.count("streamOn:pub:video") == 0)
        await viewer.leave()
        await pub.leave()
    }

    @Test func listenersAddedToTheLocalParticipantBeforeJoinStay() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let room = try makeRoom(server, room: "early-listener", id: "pub", mode: .SEND_AND_RECV, mic: true)
        let log = EventLog()
        room.addEventListener(log)
        room.localParticipant.addEventListener(log)  // before join(), as the spec says
        await room.join()
        #expect(log.has("joined"))
        #expect(log.has("streamOn:pub:audio"))
        await room.leave()
        #expect(log.has("streamOff:pub:audio"))
    }
}
