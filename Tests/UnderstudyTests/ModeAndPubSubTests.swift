import Foundation
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

@Suite("Understudy modes and PubSub", .serialized)
struct ModeAndPubSubTests {
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
}
