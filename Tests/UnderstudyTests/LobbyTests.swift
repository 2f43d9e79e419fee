import Foundation
import RTC
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

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

@Suite("Understudy lobby join", .serialized)
struct LobbyTests {
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
}
