import Foundation
import RTC
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

// Issue 32, items 3, 4, 5, 6, 8 and 11: the SDK's behaviours, each driven through the SDK against
// the real in-process room server.

/// A screen flash that counts its calls (an app's own ``ScreenFlash``).
final class CountingScreenFlash: ScreenFlash, @unchecked Sendable {
    private let lock = NSLock()
    private var applied = 0
    private var cleared = 0
    var calls: (applied: Int, cleared: Int) { lock.withLock { (applied, cleared) } }
    func apply() async { lock.withLock { applied += 1 } }
    func clear() async { lock.withLock { cleared += 1 } }
}

/// Records lobby events at a moderator; answers entry requests after `answerAfter` seconds when set.
final class EntryLog: RoomEventListener, @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var answerAfter: Double?
    var events: [String] { lock.withLock { lines } }
    func has(_ line: String) -> Bool { events.contains(line) }
    func onEntryRequested(
        participantId: String, name: String, allow: @escaping @Sendable () -> Void, deny: @escaping @Sendable () -> Void
    ) {
        lock.withLock { lines.append("requested:\(participantId)") }
        guard let delay = answerAfter else { return }
        Task {
            try? await Task.sleep(nanoseconds: UInt64(delay * 1e9))
            allow()
        }
    }
    func onEntryResponded(participantId: String, decision: EntryDecision) {
        lock.withLock { lines.append("responded:\(participantId):\(decision.rawValue)") }
    }
}

/// A guest with an `ask_join` token whose requests time out after `requestTimeout` seconds.
func lobbyGuest(_ server: RoomServer, room: String, requestTimeout: Double, lobbyWait: Double? = nil) throws -> (
    Room, EventLog
) {
    let guest = try Understudy.createRoom(
        roomId: room, token: sdkToken(server, room: room, participant: "guest", permissions: ["ask_join"]),
        participantName: "Guest", participantId: "guest", micEnabled: false, camEnabled: false,
        mode: .SIGNALLING_ONLY, signalingBaseUrl: server.signalingURL, lobbyWait: lobbyWait)
    guest.requestTimeout = requestTimeout
    let log = EventLog()
    guest.addEventListener(log)
    return (guest, log)
}

/// A moderator (`allow_join`) in `room` with its lobby log.
func lobbyModerator(_ server: RoomServer, room: String) async throws -> (Room, EntryLog) {
    let entries = EntryLog()
    let mod = try makeRoom(server, room: room, id: "mod")
    mod.addEventListener(entries)
    let log = EventLog()
    mod.addEventListener(log)
    await mod.join()
    try await waitUntil("moderator joined") { log.has("joined") }
    return (mod, entries)
}

@Suite("Understudy: issue 32 (lobby, stage order, errors, setQuality, screen flash)", .serialized)
struct Issue32Tests {
    // MARK: 3. The lobby waits as long as the server's lobby

    /// The guest's requests time out after 2 s, the server's lobby waits 5 s: the join waits for the
    /// server's verdict (3047 at expiry), and the moderator hears the request expire.
    @Test func aLobbyJoinOutlastsTheRequestTimeoutUntilTheServersLobbyExpires() async throws {
        let server = try startTestServer(secret: "sdk-test-secret") { $0.lobbyTimeoutSeconds = 5 }
        defer { server.stop() }
        let (mod, entries) = try await lobbyModerator(server, room: "lobby-expiry")
        let (guest, log) = try lobbyGuest(server, room: "lobby-expiry", requestTimeout: 2)
        let started = Date()
        await guest.join()
        let waited = Date().timeIntervalSince(started)
        #expect(waited > 4, "the join gave up after \(waited) s")
        #expect(log.errorCodes == [3047], "\(log.events)")
        #expect(log.has("left:\(Understudy.LeaveReason.JOIN_ROOM_FAILED.rawValue)"))
        try await waitUntil("the moderator hears the expiry") {
            entries.has("requested:guest") && entries.has("responded:guest:timeout")
        }
        await mod.leave()
    }

    /// A moderator who answers after the guest's request timeout still lets it in.
    @Test func aModeratorMayAnswerAfterTheRequestTimeout() async throws {
        let server = try startTestServer(secret: "sdk-test-secret") { $0.lobbyTimeoutSeconds = 30 }
        defer { server.stop() }
        let (mod, entries) = try await lobbyModerator(server, room: "lobby-late")
        entries.answerAfter = 4
        let (guest, log) = try lobbyGuest(server, room: "lobby-late", requestTimeout: 2)
        await guest.join()
        #expect(log.has("joined"), "\(log.events)")
        #expect(log.errorCodes.isEmpty)
        try await waitUntil("the moderator sees the guest") { mod.participants["guest"] != nil }
        #expect(entries.has("responded:guest:allowed"))
        await guest.leave()
        await mod.leave()
    }

    /// `lobbyWait` shorter than the server's lobby: the guest withdraws its request (3079) and the
    /// moderator is told (`onEntryResponded(.withdrawn)`); its late answer is refused (3073).
    @Test func aGuestThatStopsWaitingWithdrawsItsRequest() async throws {
        let server = try startTestServer(secret: "sdk-test-secret") { $0.lobbyTimeoutSeconds = 30 }
        defer { server.stop() }
        let (mod, entries) = try await lobbyModerator(server, room: "lobby-withdraw")
        let (guest, log) = try lobbyGuest(server, room: "lobby-withdraw", requestTimeout: 3, lobbyWait: 5)
        let started = Date()
        await guest.join()
        let waited = Date().timeIntervalSince(started)
        #expect(waited > 4, "the join gave up after \(waited) s")
        #expect(log.errorCodes == [3079], "\(log.events)")
        try await waitUntil("the moderator hears the withdrawal") { entries.has("responded:guest:withdrawn") }
        await expectCode(3073) {
            _ = try await mod.call(.respondEntry, ["participantId": "guest", "decision": "allowed"])
        }
        await mod.leave()
    }

    /// `leave()` in the lobby withdraws the request and leaves with MANUAL_LEAVE_CALLED; a guest whose
    /// connection drops in the lobby is withdrawn too.
    @Test func leavingOrDroppingOutOfTheLobbyWithdrawsTheRequest() async throws {
        let server = try startTestServer(secret: "sdk-test-secret") { $0.lobbyTimeoutSeconds = 30 }
        defer { server.stop() }
        let (mod, entries) = try await lobbyModerator(server, room: "lobby-leave")
        let (guest, log) = try lobbyGuest(server, room: "lobby-leave", requestTimeout: 30)
        let joining = Task { await guest.join() }
        try await waitUntil("the guest waits") { entries.has("requested:guest") }
        try await waitUntil("the guest knows it waits") {
            guest.eventQueue.sync { guest.pendingJoin?.lobbyWait != nil }
        }
        await guest.leave()
        await joining.value
        #expect(log.has("left:\(Understudy.LeaveReason.MANUAL_LEAVE_CALLED.rawValue)"), "\(log.events)")
        #expect(!log.has("joined"))
        try await waitUntil("withdrawn by leave") { entries.has("responded:guest:withdrawn") }

        let (second, secondLog) = try lobbyGuest(server, room: "lobby-leave", requestTimeout: 30)
        let joiningAgain = Task { await second.join() }
        try await waitUntil("the second request") { entries.events.filter { $0 == "requested:guest" }.count == 2 }
        second.simulateConnectionDrop()
        await joiningAgain.value
        #expect(secondLog.has("left:\(Understudy.LeaveReason.WEBSOCKET_DISCONNECTED.rawValue)"), "\(secondLog.events)")
        try await waitUntil("withdrawn by the dropped socket") {
            entries.events.filter { $0 == "responded:guest:withdrawn" }.count == 2
        }
        await mod.leave()
    }

    // MARK: 4. Leaving the stage: own streams end before the own mode event

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

    // MARK: 5. Local WebRTC failures are VideoSDKErrors with their cause

    @Test func localWebRTCFailuresAreVideoSDKErrorsThatKeepTheirCause() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, _) = try await joinedRoom(server, room: "raw-errors", id: "me", mode: .SEND_AND_RECV)
        // An address this host does not have (TEST-NET-1): the publish connection's socket cannot bind.
        room.media.connectionConfiguration.bindAddresses = ["192.0.2.1"]
        func expectMediaError(_ what: String, _ codes: Set<Int>, _ body: () async throws -> Void) async {
            do {
                try await body()
                Issue.record("\(what) succeeded")
            } catch let error as VideoSDKError {
                #expect(codes.contains(error.code), "\(what): \(error)")
                #expect(error.name == UnderstudyError.canonicalName(error.code))
                #expect(
                    error.underlyingError is PeerConnectionError,
                    "\(what): \(String(describing: error.underlyingError))")
            } catch {
                Issue.record("\(what) threw a raw error: \(error)")
            }
        }
        await expectMediaError("unmuteMic", [3044, 3058]) { try await room.unmuteMic() }
        await expectMediaError("enableCam", [3044, 3049]) { try await room.enableCam() }
        await expectMediaError("enableScreenShare", [3044, 3061]) { try await room.enableScreenShare() }
        try await room.changeMode(.RECV_ONLY)
        // Back on stage the camera and mic of createRoom are published: that fails the same way.
        let (viewer, _) = try await joinedRoom(
            server, room: "raw-errors", id: "v", mode: .RECV_ONLY, mic: true, cam: true)
        viewer.media.connectionConfiguration.bindAddresses = ["192.0.2.1"]
        await expectMediaError("changeMode", [3044, 3049]) { try await viewer.changeMode(.SEND_AND_RECV) }
        await viewer.leave()
        await room.leave()
    }

    // MARK: 6. setQuality with the value already set does nothing

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
        try await stallRoom(server, "same-quality", seconds: 3)
        let started = Date()
        try await atViewer.setQuality(.low)
        #expect(Date().timeIntervalSince(started) < 2)
        await viewer.leave()
        await host.leave()
    }

    // MARK: 8. VideoSDK.setScreenFlash and WhiteOverlayScreenFlash

    @Test func aFlashCaptureCallsTheScreenFlashSetWithVideoSDK() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, _) = try await joinedRoom(server, room: "screen-flash", id: "me", mode: .SEND_AND_RECV, cam: true)
        defer { VideoSDK.setScreenFlash(nil) }
        let counting = CountingScreenFlash()
        VideoSDK.setScreenFlash(counting)
        let lit = try await room.localParticipant.captureImage(width: 160, height: 90, flash: .ON)
        #expect(!lit.isEmpty)
        let after = counting.calls
        #expect(after.applied >= 1 && after.cleared >= 1)

        // The documented call compiles and runs; headless, the overlay is a no-op hook.
        let overlay = WhiteOverlayScreenFlash(window: nil)
        VideoSDK.setScreenFlash(overlay)
        #expect(VideoSDK.screenFlash === overlay)
        #expect(!(try await room.localParticipant.captureImage(flash: .ON)).isEmpty)
        #expect(!overlay.isLit)
        await room.leave()
    }
}
