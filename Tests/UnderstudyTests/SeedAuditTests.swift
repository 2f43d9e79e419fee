import Foundation
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

/// Every gated async method of the room that the seeds lean on.
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

/// `getTransportStats()` on a global queue (it waits for the server).
func transportStats(_ p: Participant) async -> [String: Any]? {
    let box = UncheckedSendable(p)
    let result: UncheckedSendable<[String: Any]?> = await withCheckedContinuation { c in
        DispatchQueue.global().async { c.resume(returning: UncheckedSendable(box.value.getTransportStats())) }
    }
    return result.value
}

func expectNoStats(_ p: Participant, sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(p.getAudioStats() == nil, sourceLocation: sourceLocation)
    #expect(p.getVideoStats() == nil, sourceLocation: sourceLocation)
    #expect(try p.getShareStats() == nil, sourceLocation: sourceLocation)
    #expect(p.getShareAudioStats() == nil, sourceLocation: sourceLocation)
    #expect(p.getTransportStats() == nil, sourceLocation: sourceLocation)
}

@Suite("Understudy spec audit (participant-methods, change-mode)", .serialized)
struct SeedAuditTests {
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

    @Test func statsAreDeltasWithOneRowPerLayerAndTheDocumentedFields() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, _) = try await joinedRoom(
            server, room: "stats", id: "pub", mode: .SEND_AND_RECV, cam: true, multiStream: true)
        let (viewer, _) = try await joinedRoom(server, room: "stats", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["pub"])
        try await waitForStream(remote, .video)

        // Each row covers the sampling clock's last interval (about a second), not a running total.
        try await waitUntil("packets flow", seconds: 20) {
            (remote.getVideoStats()?.first?["totalPackets"] as? Int ?? 0) > 0
        }
        let first = try #require(remote.getVideoStats()?.first)
        let firstPackets = first["totalPackets"] as? Int ?? 0
        #expect(firstPackets > 10)
        #expect(firstPackets < 400, "one interval, not the total: \(firstPackets)")
        for key in ["jitter", "bitrate", "totalPackets", "packetsLost", "rtt", "codec", "size"] {
            #expect(first[key] != nil, "missing \(key)")
        }
        #expect(first["codec"] as? String == "vp8")
        let size = try #require(first["size"] as? [String: Any])
        let width = size["width"] as? Int ?? 0
        #expect([640, 320, 160].contains(width), "size \(size)")
        #expect(width * 9 == (size["height"] as? Int ?? 0) * 16)
        #expect((size["framerate"] as? Double ?? 0) > 0, "framerate is known from the second sample on")
        // No mic: an empty array, not nil.
        #expect(remote.getAudioStats()?.isEmpty == true)

        // The local webcam: one row per layer it sends, each with its own size.
        try await waitUntil("local rows", seconds: 20) { pub.localParticipant.getVideoStats()?.count == 3 }
        let local = try #require(pub.localParticipant.getVideoStats())
        let widths = Set(local.compactMap { ($0["size"] as? [String: Any])?["width"] as? Int })
        #expect(widths == [640, 320, 160])

        // Transport: blocking, so called off the cooperative pool as the seed advises.
        let remoteTransport = try #require(await transportStats(remote))
        let remoteSend = try #require(remoteTransport["send"] as? [String: Any])
        #expect((remoteSend["totalSentBytes"] as? Int ?? 0) > 0)
        #expect(remoteTransport["receive"] is [String: Any])
        let localTransport = try #require(await transportStats(pub.localParticipant))
        let localSend = try #require(localTransport["send"] as? [String: Any])
        #expect((localSend["totalSentBytes"] as? Int ?? 0) > 0)
        #expect((localSend["outgoingBitrate"] as? Double ?? 0) > 0)
        #expect((localTransport["receive"] as? [String: Any])?["incomingBitrate"] is Double)
        await viewer.leave()
        await pub.leave()
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

    @Test func aFlashCaptureRunningRefusesAnotherFlashCaptureWith3069() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, log) = try await joinedRoom(server, room: "flash", id: "me", mode: .SEND_AND_RECV, cam: true)
        try await waitUntil("cam on") { log.has("streamOn:me:video") }
        let me = room.localParticipant
        #expect(me.beginFlashCapture())  // a flash capture is running
        await expectCode(3069) { _ = try await me.captureImage(flash: .ON) }
        #expect(!(try await me.captureImage(flash: .OFF)).isEmpty)  // without flash it is not blocked
        me.endFlashCapture()
        #expect(!(try await me.captureImage(flash: .ON)).isEmpty)
        try await waitUntil("3069 reported") { log.errorCodes.contains(3069) }
        await room.leave()
    }

    @Test func stopConsumingDoesNotMuteTheParticipantForOthers() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, _) = try await joinedRoom(server, room: "stop", id: "pub", mode: .SEND_AND_RECV, mic: true)
        let (picky, pickyLog) = try await joinedRoom(
            server, room: "stop", id: "picky", mode: .RECV_ONLY, autoConsume: false)
        let (other, _) = try await joinedRoom(server, room: "stop", id: "other", mode: .RECV_ONLY)
        let atPicky = try #require(picky.participants["pub"])
        atPicky.addEventListener(pickyLog)
        let atOther = try #require(other.participants["pub"])
        try await atPicky.consumeMicStreams()
        try await waitUntil("picky hears pub") { pickyLog.has("streamOn:pub:audio") }
        try await waitForStream(atOther, .audio)
        try await atPicky.stopConsumingMicStreams()
        try await waitUntil("picky stops") { pickyLog.has("streamOff:pub:audio") }
        #expect(atPicky.micOn, "the participant is not muted")
        #expect(pub.localParticipant.micOn)
        // Others still hear it: their stats show packets in the sampling clock's next intervals.
        try await waitUntil("others still hear it", seconds: 20) {
            (atOther.getAudioStats()?.first?["totalPackets"] as? Int ?? 0) > 0
        }
        // Receiving it again.
        try await atPicky.consumeMicStreams()
        try await waitUntil("picky hears pub again") { pickyLog.count("streamOn:pub:audio") == 2 }
        await other.leave()
        await picky.leave()
        await pub.leave()
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

    @Test func aRunningWebcamKeepsFlowingWhenTheMicStartsAndStops() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, pubLog) = try await joinedRoom(server, room: "toggle", id: "pub", mode: .SEND_AND_RECV, cam: true)
        try await waitUntil("cam on") { pubLog.has("streamOn:pub:video") }
        let (viewer, _) = try await joinedRoom(server, room: "toggle", id: "viewer", mode: .RECV_ONLY)
        let frames = FrameCounter()
        viewer.onFrame = { pid, kind, _, _ in frames.add(pid, kind) }
        // Several seconds of webcam first: a pump restarted from zero would now stall that long.
        try await waitUntil("5 s of video", seconds: 30) { frames.count("pub", .video) >= 150 }
        try await pub.unmuteMic()
        let before = frames.count("pub", .video)
        try await waitUntil("video keeps flowing after unmuting", seconds: 4) {
            frames.count("pub", .video) >= before + 30
        }
        try await waitUntil("audio flows") { frames.count("pub", .audio) >= 10 }
        try await pub.muteMic()
        let afterMute = frames.count("pub", .video)
        try await waitUntil("video keeps flowing after muting", seconds: 4) {
            frames.count("pub", .video) >= afterMute + 30
        }
        viewer.onFrame = nil
        await viewer.leave()
        await pub.leave()
    }

    @Test func errorsCarryCodeNameAndMessageAsVideoSDKError() throws {
        do {
            _ = try Understudy.createRoom(roomId: "r", token: "t", participantName: "n", participantId: "a b")
            Issue.record("a participantId with whitespace was accepted")
        } catch {
            let error: VideoSDKError = error
            #expect(error.code == 4004)
            #expect(error.name == "INVALID_PARTICIPANT_ID")
            #expect(!error.message.isEmpty)
        }
        #expect(UnderstudyError.canonicalName(3069) == "ERROR_CAPTURE_IMAGE_FAILED")
        #expect(UnderstudyError.canonicalName(3062) == "ERROR_WEBCAM_NOT_ENABLED")
        #expect(UnderstudyError.canonicalName(3068) == "ERROR_ACTION_NOT_SUPPORTED")
        #expect(UnderstudyError.canonicalName(4009) == "MAX_PARTCIPANT_REACHED")  // the documented typo
    }

    @Test func aCauseIsKeptButNotCompared() {
        struct Cause: Error, Equatable { let detail: String }
        let caused = UnderstudyError(
            code: 3044, message: "publish connection failed", underlyingError: Cause(detail: "x"))
        let plain = UnderstudyError(code: 3044, message: "publish connection failed")
        #expect((caused.underlyingError as? Cause) == Cause(detail: "x"))
        #expect(caused == plain)
        #expect(Set([caused, plain]).count == 1)
        #expect(caused != UnderstudyError(code: 3044, message: "another message"))
    }
}
