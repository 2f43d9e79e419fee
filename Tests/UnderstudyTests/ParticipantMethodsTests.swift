import Foundation
import Media
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

@Suite("Understudy participant methods", .serialized)
struct ParticipantMethodsTests {
    @Test func pinRequestDisableAndRemoveActOnTheRealRoom() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "mod", id: "host", mode: .SEND_AND_RECV)
        let (guest, guestLog) = try await joinedRoom(server, room: "mod", id: "guest", mode: .SEND_AND_RECV)
        let requests = RequestLog()
        guest.addEventListener(requests)
        try await waitUntil("host sees guest") { hostLog.has("pjoined:guest") }
        let remoteGuest = try #require(host.participants["guest"])
        remoteGuest.addEventListener(hostLog)

        try await remoteGuest.pin(.CAM)
        try await waitUntil("pin everywhere") { hostLog.has("pin:guest:true") && guestLog.has("pin:guest:true") }
        #expect(guest.localParticipant.pinState.cam)
        try await remoteGuest.unpin(.CAM)
        try await waitUntil("unpin") { guestLog.has("pin:guest:false") }

        // enableMic asks; the guest accepts and publishes its mic.
        try await remoteGuest.enableMic()
        try await waitUntil("request arrives") { requests.events == ["micRequested:host"] }
        try await waitUntil("guest mic on at host") { remoteGuest.micOn }
        try await waitUntil("guest local stream") { guestLog.has("streamOn:guest:audio") }

        // disableMic acts at once.
        try await remoteGuest.disableMic()
        try await waitUntil("guest mic off") { guestLog.has("streamOff:guest:audio") }
        try await waitUntil("host sees mic off") { !remoteGuest.micOn }

        try await remoteGuest.remove()
        try await waitUntil("guest removed") { guestLog.has("left:1002") }
        try await waitUntil("host sees removal") { hostLog.has("pleft:guest:1002") }
        #expect(guestLog.count("state:DISCONNECTED") == 1)
        await host.leave()
    }

    @Test func agentParticipantsRefuseMediaMethodsWith3068() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "agents", id: "host")
        let agentRoom = try Understudy.createRoom(
            roomId: "agents", token: sdkToken(server, room: "agents"), participantName: "bot", participantId: "bot",
            mode: .SIGNALLING_ONLY, signalingBaseUrl: server.signalingURL, agentId: "agent-7")
        let agentLog = EventLog()
        agentRoom.addEventListener(agentLog)
        await agentRoom.join()
        try await waitUntil("host sees agent") { hostLog.has("pjoined:bot") }
        let agent = try #require(host.participants["bot"])
        #expect(agent.isAgent())
        #expect(agent.agentId == "agent-7")
        await expectCode(3068) { try await agent.enableMic() }
        await expectCode(3068) { try await agent.disableCam() }
        await expectCode(3068) { try await agent.setQuality(.low) }
        #expect(throws: UnderstudyError(code: 3068, message: "getShareStats is not supported on an agent")) {
            _ = try agent.getShareStats()
        }
        await expectCode(3068) { try await agent.disableMic() }
        await expectCode(3068) { try await agent.enableCam() }
        await expectCode(3068) { _ = try await agent.captureImage() }
        await expectCode(3068) { _ = try agent.getShareStats() }
        // Stats, listeners, pin/unpin and remove work on an agent.
        #expect(agent.getAudioStats() != nil && agent.getVideoStats() != nil && agent.getShareAudioStats() != nil)
        agent.addEventListener(hostLog)
        agent.removeEventListener(hostLog)
        try await agent.pin()
        try await agent.unpin()
        try await agent.remove()
        try await waitUntil("agent removed") { agentLog.has("left:1002") }
        await host.leave()
    }

    @Test func participantListenersAreHeldWeakly() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, _) = try await joinedRoom(server, room: "weak", id: "solo")
        do {
            let transient = EventLog()
            room.localParticipant.addEventListener(transient)
            #expect(room.localParticipant.liveListeners.contains { $0 === transient })
        }
        #expect(room.localParticipant.liveListeners.count == 1)  // only the joinedRoom log remains
        #expect(room.localParticipant.getAudioStats() != nil)
        await room.leave()
        #expect(room.localParticipant.getAudioStats() == nil)
        #expect(room.localParticipant.getTransportStats() == nil)
    }

    @Test func aSecondToggleWhileOneRunsIsRefusedWith3055() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, log) = try await joinedRoom(server, room: "busy", id: "pub", mode: .SEND_AND_RECV)
        let enabling = Task { try await room.enableCam() }
        try await waitUntil("toggle running", seconds: 5) { room.operationFlag.value || log.has("streamOn:pub:video") }
        // The first produce waits for ICE and DTLS, so the toggle is still running here.
        #expect(room.operationFlag.value)
        await expectCode(3055) { try await room.changeMode(.RECV_ONLY) }
        try await enabling.value
        try await waitUntil("cam on") { log.has("streamOn:pub:video") }
        await expectCode(3054) { try await room.enableCam() }
        #expect(room.localParticipant.mode == .SEND_AND_RECV)
        await room.leave()
    }

    @Test func receivedFramesCanBeRecordedToWebM() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (publisher, pubLog) = try await joinedRoom(
            server, room: "rec", id: "pub", mode: .SEND_AND_RECV, mic: true, cam: true, multiStream: true)
        try await waitUntil("published") { pubLog.has("streamOn:pub:video") }
        let (viewer, _) = try await joinedRoom(server, room: "rec", id: "viewer", mode: .RECV_ONLY)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("sdk-\(UUID().uuidString).webm").path
        let recording = try Recording(path: path)
        let box = UncheckedSendable(recording)
        viewer.onFrame = { pid, _, frame, arrival in
            if pid == "pub" { box.value.write(frame, arrival: arrival) }
        }
        try await waitUntil("recorded video") { recording.videoFrames >= 20 && recording.audioFrames >= 20 }
        viewer.onFrame = nil
        try await Task.sleep(nanoseconds: 200_000_000)
        try recording.close()
        #expect(recording.keyframes >= 1)
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        #expect(size > 1000)
        let remote = try #require(viewer.participants["pub"])
        try await remote.setQuality(.low)
        // What the server forwards, not the SDK's cache: the lowest layer's pictures arrive.
        try await waitUntil("the low layer arrives", seconds: 20) { remote.captureFrames.pictureSize?.width == 160 }
        try? FileManager.default.removeItem(atPath: path)
        await viewer.leave()
        await publisher.leave()
    }
}
