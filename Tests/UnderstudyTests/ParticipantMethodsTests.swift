import Foundation
import Media
import RTC
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

    @Test func setQualityWithTheValueAlreadySetDoesNothing() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(
            server, room: "same-quality", id: "host", mode: .SEND_AND_RECV, cam: true, multiStream: true)
        let (viewer, viewerLog) = try await joinedRoom(server, room: "same-quality", id: "viewer", mode: .RECV_ONLY)
        let atViewer = try #require(viewer.participants["host"])
        atViewer.addEventListener(viewerLog)
        try await waitUntil("webcam received") { atViewer.hasStream(.video) }
        try await atViewer.setQuality(.low)
        #expect(atViewer.videoQuality == .low)

        // With the webcam off nothing is received, yet the same value is still a no-op.
        try await host.disableCam()
        try await waitUntil("webcam gone") { !atViewer.hasStream(.video) }
        try await atViewer.setQuality(.low)
        // Another value is asked of the server, which has nothing to switch (3068).
        await expectCode(3068) { try await atViewer.setQuality(.high) }
        #expect(atViewer.videoQuality == .low)

        // While the server's room is stalled the same value still returns at once: nothing is asked.
        try await host.enableCam()
        try await waitUntil("webcam back") { atViewer.hasStream(.video) }
        let gate = try await gateRoom(server, "same-quality")
        defer { gate.open() }
        let started = Date()
        try await atViewer.setQuality(.low)
        #expect(Date().timeIntervalSince(started) < 2)
        gate.open()
        await viewer.leave()
        await host.leave()
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

    @Test func remoteCamRequestsAndDisablesReachEveryReceiver() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(server, room: "cam-mod", id: "host", mode: .SEND_AND_RECV)
        let (guest, guestLog) = try await joinedRoom(server, room: "cam-mod", id: "guest", mode: .SEND_AND_RECV)
        let requests = RequestLog()
        guest.addEventListener(requests)
        let (viewer, viewerLog) = try await joinedRoom(server, room: "cam-mod", id: "viewer", mode: .RECV_ONLY)
        let atHost = try #require(host.participants["guest"])
        let atViewer = try #require(viewer.participants["guest"])
        atViewer.addEventListener(viewerLog)

        // enableCam asks; once accepted, every receiver gets onStreamEnabled.
        try await atHost.enableCam()
        try await waitUntil("request") { requests.events == ["webcamRequested:host"] }
        try await waitUntil("guest cam on") { guestLog.has("streamOn:guest:video") }
        try await waitUntil("viewer receives it") { viewerLog.has("streamOn:guest:video") }

        // setViewPort: for a received webcam it works; bad sizes, the local participant and a
        // participant whose webcam is not received throw.
        try await atViewer.setViewPort(width: 320, height: 180)
        await expectCode(3073) { try await atViewer.setViewPort(width: 0, height: 180) }
        await expectCode(3068) { try await viewer.localParticipant.setViewPort(width: 1, height: 1) }
        let hostAtViewer = try #require(viewer.participants["host"])
        await expectCode(3068) { try await hostAtViewer.setViewPort(width: 320, height: 180) }
        await expectCode(3068) { try await hostAtViewer.setQuality(.low) }

        // disableCam acts at once, without asking; receivers get onStreamDisabled.
        try await atHost.disableCam()
        try await waitUntil("guest cam off") { guestLog.has("streamOff:guest:video") }
        try await waitUntil("viewer stream off") { viewerLog.has("streamOff:guest:video") }
        #expect(requests.events.count == 1)
        try await waitUntil("viewer sees the webcam off") { !atViewer.webcamOn }

        // With autoConsume on, stopConsuming does nothing.
        try await atHost.enableMic()
        try await waitUntil("viewer hears guest") { viewerLog.has("streamOn:guest:audio") }
        try await atViewer.stopConsumingMicStreams()
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(!viewerLog.has("streamOff:guest:audio"))
        await viewer.leave()
        await guest.leave()
        await host.leave()
    }

    @Test func moderationIsForRemoteParticipantsAndPinDefaultsToShareAndCam() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "self-mod", id: "host", mode: .SEND_AND_RECV)
        let me = host.localParticipant
        await expectCode(3068) { try await me.enableMic() }
        await expectCode(3068) { try await me.disableMic() }
        await expectCode(3068) { try await me.enableCam() }
        await expectCode(3068) { try await me.disableCam() }
        // pin() without a type pins both the webcam and the screen share; unpin(.SHARE) keeps the cam.
        try await me.pin()
        try await waitUntil("pinned") { me.pinState == PinState(cam: true, share: true) }
        try await me.unpin(.SHARE)
        try await waitUntil("share unpinned") { me.pinState == PinState(cam: true, share: false) }
        try await me.unpin()
        try await waitUntil("unpinned") { me.pinState == PinState(cam: false, share: false) }
        #expect(hostLog.count("pin:host:true") == 2 && hostLog.count("pin:host:false") == 1)
        await host.leave()
    }

    /// `setQuality(.low)` holds after the publisher turns its camera off and on (the server makes a
    /// new consumer): the received picture is the low layer again, and the same call is not a no-op.
    @Test func aQualityChoiceSurvivesANewConsumer() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, pubLog) = try await joinedRoom(
            server, room: "quality", id: "pub", mode: .SEND_AND_RECV, cam: true, multiStream: true)
        try await waitUntil("camera on") { pubLog.has("streamOn:pub:video") }
        let (viewer, viewerLog) = try await joinedRoom(server, room: "quality", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["pub"])
        remote.addEventListener(viewerLog)
        try await waitUntil("the top layer arrives", seconds: 20) {
            remote.captureFrames.pictureSize?.width == 640
        }
        try await remote.setQuality(.low)
        try await waitUntil("the low layer arrives", seconds: 20) { remote.captureFrames.pictureSize?.width == 160 }
        // onVideoQualityChanged reports the switch of what is received.
        try await waitUntil("quality event", seconds: 20) { viewerLog.has("quality:pub:high->low") }
        try await pub.disableCam()
        try await waitUntil("stream off at the viewer") { viewerLog.has("streamOff:pub:video") }
        try await pub.enableCam()
        try await waitUntil("stream on again", seconds: 20) { viewerLog.count("streamOn:pub:video") == 2 }
        try await waitUntil("the low layer arrives again", seconds: 20) {
            remote.captureFrames.pictureSize?.width == 160
        }
        try await remote.setQuality(.medium)
        try await waitUntil("the middle layer arrives", seconds: 20) { remote.captureFrames.pictureSize?.width == 320 }
        try await waitUntil("quality event", seconds: 20) { viewerLog.has("quality:pub:low->medium") }
        await viewer.leave()
        await pub.leave()
    }

    /// `enableMic()` on a remote waits for the answer: accepted → it returns with the mic on;
    /// rejected (silent) → 3079.
    @Test func enableMicOnARemoteWaitsForTheAnswer() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (target, _) = try await joinedRoom(server, room: "ask", id: "target", mode: .SEND_AND_RECV)
        let requests = RequestLog()
        target.addEventListener(requests)
        let (mod, _) = try await joinedRoom(server, room: "ask", id: "mod")
        let remote = try #require(mod.participants["target"])
        requests.acceptRequests = false
        mod.requestTimeout = 1
        await expectCode(3079) { try await remote.enableMic() }
        #expect(requests.events == ["micRequested:mod"])
        #expect(!remote.micOn)
        requests.acceptRequests = true
        mod.requestTimeout = 30
        try await remote.enableCam()
        // The server answers after it announced the camera on: the state is already here.
        #expect(remote.webcamOn)
        #expect(requests.events == ["micRequested:mod", "webcamRequested:mod"])
        await mod.leave()
        await target.leave()
    }
}
