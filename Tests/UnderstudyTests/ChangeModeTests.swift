import Foundation
import Media
import RTC
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

/// A gauge of the server's `/metrics` text.
func gauge(_ server: RoomServer, _ name: String) async -> Int? {
    let text = await server.metricsText()
    let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
    return line.flatMap { Int($0.split(separator: " ").last ?? "") }
}

/// The audience side of docs/spec/change-mode.md: subscribes to its invite topic and changes its own mode.
final class StageInviteHandler: PubSubMessageListener, @unchecked Sendable {
    let room: Room
    private let lock = NSLock()
    private var _results: [String] = []
    var results: [String] { lock.withLock { _results } }
    init(room: Room) { self.room = room }

    func onMessageReceived(_ message: PubSubMessage) {
        guard message.topic.hasPrefix("REQUEST_TO_JOIN_AS_HOST_"), let mode = Mode(rawValue: message.message) else {
            return
        }
        Task {
            do {
                try await room.changeMode(mode)
                lock.withLock { _results.append("ok") }
            } catch let e as UnderstudyError {
                lock.withLock { _results.append("\(e.code)") }
            }
        }
    }
}

func participants(of room: Room, in mode: Mode) -> [String] {
    ([room.localParticipant] + Array(room.participants.values)).filter { $0.mode == mode }.map(\.id).sorted()
}

@Suite("Understudy changeMode and the stage invite", .serialized)
struct ChangeModeTests {
    @Test func stageInviteMovesTheAudienceMemberOnEveryClient() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "stage", id: "host", mode: .SEND_AND_RECV)
        let (viewer, viewerLog) = try await joinedRoom(server, room: "stage", id: "viewer", mode: .RECV_ONLY)
        let (audience, audienceLog) = try await joinedRoom(server, room: "stage", id: "aud", mode: .RECV_ONLY)

        try await waitUntil("everyone sees everyone") {
            hostLog.has("pjoined:aud") && hostLog.has("pjoined:viewer") && viewerLog.has("pjoined:aud")
        }
        let handler = StageInviteHandler(room: audience)
        try await audience.pubSub.subscribe(
            topic: "REQUEST_TO_JOIN_AS_HOST_\(audience.localParticipant.id)", listener: handler)
        // Host side: publish the invite to the audience member (steps 1-2).
        let target = try #require(host.participants["aud"])
        #expect(target.mode == .RECV_ONLY)
        try await host.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_\(target.id)", message: "SEND_AND_RECV")

        try await waitUntil("audience changed mode") { handler.results == ["ok"] }
        for log in [hostLog, viewerLog, audienceLog] {
            try await waitUntil("mode event") { log.has("mode:aud:SEND_AND_RECV") }
        }
        for room in [host, viewer, audience] {
            #expect(participants(of: room, in: .SEND_AND_RECV) == ["aud", "host"])
            #expect(participants(of: room, in: .RECV_ONLY) == ["viewer"])
        }
        // Same mode again: 3054.
        do {
            try await audience.changeMode(.SEND_AND_RECV)
            Issue.record("second changeMode succeeded")
        } catch let e as UnderstudyError {
            #expect(e.code == 3054)
            #expect(e.name == "ERROR_ALREADY_IN_REQUESTED_STATE")
        }
        // Back to the audience: every list follows again.
        try await audience.changeMode(.RECV_ONLY)
        try await waitUntil("host sees demotion") { hostLog.has("mode:aud:RECV_ONLY") }
        #expect(participants(of: host, in: .RECV_ONLY) == ["aud", "viewer"])
        for r in [host, viewer, audience] { await r.leave() }
    }

    @Test func leavingSendAndRecvStopsMicAndCamAndReturningRestoresThem() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, log) = try await joinedRoom(
            server, room: "media-mode", id: "pub", mode: .SEND_AND_RECV, mic: true, cam: true)
        try await waitUntil("local streams") { log.has("streamOn:pub:audio") && log.has("streamOn:pub:video") }
        #expect(room.localParticipant.streams.count == 2)
        // Toggling the mic that is already on: 3054.
        await expectCode(3054) { try await room.unmuteMic() }

        try await room.changeMode(.RECV_ONLY)
        #expect(log.has("streamOff:pub:audio"))
        #expect(log.has("streamOff:pub:video"))
        #expect(room.localParticipant.streams.isEmpty)
        do {
            try await room.enableCam()
            Issue.record("enableCam in RECV_ONLY succeeded")
        } catch let e as UnderstudyError { #expect(e.code == 3066) }

        try await room.changeMode(.SEND_AND_RECV)
        try await waitUntil("streams restored") { room.localParticipant.streams.count == 2 }
        #expect(log.count("streamOn:pub:audio") == 2)
        await room.leave()
    }

    /// A guest back in the audience holds no publish connection, here or on the server; back on
    /// stage it publishes over a new one, and a viewer receives it again.
    @Test func aGuestBackInTheAudienceHoldsNoPublishConnectionAndPublishesAgainOnANewOne() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (guest, guestLog) = try await joinedRoom(
            server, room: "stage-pc", id: "guest", mode: .SEND_AND_RECV, mic: true, cam: true)
        try await waitUntil("published") {
            guestLog.has("streamOn:guest:video") && guestLog.has("streamOn:guest:audio")
        }
        let (viewer, _) = try await joinedRoom(server, room: "stage-pc", id: "viewer", mode: .RECV_ONLY)
        let frames = FrameCounter()
        viewer.onFrame = { pid, kind, _, _ in frames.add(pid, kind) }
        try await waitUntil("video frames") { frames.count("guest", .video) >= 5 }
        let first = try #require(guest.media.connections.first { $0.role == "publish" }?.pc)
        #expect(await gauge(server, "understudy_sfu_publish_connections") == 1)

        try await guest.changeMode(.RECV_ONLY)
        #expect(!guest.media.connections.contains { $0.role == "publish" })
        #expect(await gauge(server, "understudy_sfu_publish_connections") == 0)
        try await waitUntil("the old connection closed") { first.state == .closed }

        try await guest.changeMode(.SEND_AND_RECV)
        try await waitUntil("streams restored") { guest.localParticipant.streams.count == 2 }
        let second = try #require(guest.media.connections.first { $0.role == "publish" }?.pc)
        #expect(second !== first)
        #expect(await gauge(server, "understudy_sfu_publish_connections") == 1)
        let video = frames.count("guest", .video)
        let audio = frames.count("guest", .audio)
        try await waitUntil("media again", seconds: 20) {
            frames.count("guest", .video) >= video + 5 && frames.count("guest", .audio) >= audio + 5
        }
        await viewer.leave()
        await guest.leave()
    }

    @Test func leavingTheStageEndsTheCallersStreamsBeforeItsModeEvent() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (me, log) = try await joinedRoom(
            server, room: "stage-order", id: "me", mode: .SEND_AND_RECV, mic: true, cam: true)
        let (other, otherLog) = try await joinedRoom(server, room: "stage-order", id: "other", mode: .RECV_ONLY)
        try await waitUntil("mic and camera on") { log.has("streamOn:me:audio") && log.has("streamOn:me:video") }
        try await me.enableScreenShare()
        try await waitUntil("share on") { log.has("streamOn:me:share") }

        try await me.changeMode(.RECV_ONLY)
        try await waitUntil("own mode event") { log.has("mode:me:RECV_ONLY") }
        try await waitUntil("the other sees it") { otherLog.has("mode:me:RECV_ONLY") }
        let events = log.events
        let modeAt = try #require(events.firstIndex(of: "mode:me:RECV_ONLY"))
        let offs = ["share", "video", "audio"].map { events.firstIndex(of: "streamOff:me:\($0)") }
        #expect(offs.allSatisfy { $0 != nil && $0! < modeAt }, "\(events)")
        // In the order docs/spec/room-api.md §3 names them: screen share, camera, mic.
        #expect(offs.compactMap { $0 } == offs.compactMap { $0 }.sorted(), "\(events)")
        #expect(log.count("mode:me:RECV_ONLY") == 1)
        #expect(me.localParticipant.mode == .RECV_ONLY && me.localParticipant.streams.isEmpty)
        await other.leave()
        await me.leave()
    }

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

    @Test func joiningTheStageFromRecvOnlyTurnsOnTheConfiguredDevicesOnly() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, log) = try await joinedRoom(
            server, room: "stage", id: "aud", mode: .RECV_ONLY, mic: true, cam: false)
        #expect(room.localParticipant.streams.isEmpty)  // nothing is captured in RECV_ONLY
        await expectCode(3066) { try await room.unmuteMic() }
        try await room.changeMode(.SEND_AND_RECV)
        try await waitUntil("mic on") { log.has("streamOn:aud:audio") }
        #expect(!log.has("streamOn:aud:video"))
        await expectCode(3054) { try await room.unmuteMic() }  // already on
        await expectCode(3054) { try await room.changeMode(.SEND_AND_RECV) }
        try await room.enableCam()  // the device that stayed off
        try await waitUntil("cam on") { log.has("streamOn:aud:video") }
        await expectCode(3054) { try await room.enableCam() }
        try await waitUntil("mode event") { log.has("mode:aud:SEND_AND_RECV") }
        await room.leave()
    }

    /// A `changeMode` cut off by a reconnect throws 3065 (not 4065) and leaves the media as it was:
    /// the rejoin publishes the mic again, in SEND_AND_RECV.
    @Test func aChangeModeInterruptedByAReconnectIs3065AndKeepsTheMedia() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "mode-cut", id: "host")
        let (guest, guestLog) = try await joinedRoom(
            server, room: "mode-cut", id: "guest", mode: .SEND_AND_RECV, mic: true)
        try await waitUntil("guest mic") { guestLog.has("streamOn:guest:audio") }
        // Held until the reconnect has cut the request off, however slow the machine.
        let gate = try await gateRoom(server, "mode-cut")
        defer { gate.open() }
        let result = ErrorBox()
        let task = Task {
            do { try await guest.changeMode(.RECV_ONLY) } catch { result.set("mode", error) }
        }
        try await waitUntil("changeMode sent") {
            // Polled from the test: the request is on its way once it is pending.
            let box = ResultBox<Int>()
            let sem = DispatchSemaphore(value: 0)
            guest.eventQueue.async {
                box.value = guest.client?.pendingCount ?? 0
                sem.signal()
            }
            sem.wait()
            return (box.value ?? 0) > 0
        }
        guest.simulateConnectionDrop()
        await task.value
        gate.open()
        #expect(result.get("mode") == 3065)
        #expect(guest.localParticipant.mode == .SEND_AND_RECV)
        try await waitUntil("mic again", seconds: 30) { guestLog.count("streamOn:guest:audio") == 2 }
        try await waitUntil("host sees guest back", seconds: 30) { hostLog.count("pjoined:guest") == 2 }
        #expect(host.participants["guest"]?.mode == .SEND_AND_RECV)
        #expect(host.participants["guest"]?.micOn == true)
        await guest.leave()
        await host.leave()
    }
}
