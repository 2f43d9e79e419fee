import Dispatch
import Foundation
import RTC
import RoomProtocol
import Signaling

// Reconnection (docs/spec/room-api.md §2): CONNECTED → RECONNECTING → CONNECTED, or → FAILED →
// DISCONNECTED → onRoomLeft(1102).
//
// - A media connection that goes `disconnected` (no ICE consent response for 3 s) or `failed`, while
//   the WebSocket is up: ICE restart of both connections over `restartIce` (docs/protocol.md §16).
//   DTLS, SRTP and every RTP stream are kept, so frames resume on the same tracks and a recorder
//   just continues. When both connections have selected a new pair within `iceRestartTimeout` the
//   room is CONNECTED again; otherwise it falls back to a full rejoin.
// - A dropped WebSocket (or a failed ICE restart): full rejoin. The old socket is closed, both media
//   connections are rebuilt, `join` is sent again with the same participant id, then PubSub topics,
//   local mic/cam/share and the app's consume choices are restored. The join announces the mic and
//   camera as they were when the connection dropped (not as `micEnabled`/`camEnabled` said). Local
//   streams end (`onStreamDisabled`) when the rejoin starts and start again once re-published.
//   Attempts follow `reconnect` (``ReconnectPolicy``): exponential backoff with jitter within a time
//   window; when it runs out: FAILED, then DISCONNECTED, then onRoomLeft(1102).
//
// Everything here runs on the room's event queue unless it says otherwise.

/// Reconnection bookkeeping of one room.
// Safe: its state is guarded by `lock`.
final class ReconnectionState: @unchecked Sendable {
    /// Bumped by every recovery; a recovery task that sees another value has been overtaken.
    var generation = 0
    /// A full rejoin loop is running.
    var rejoining = false
    /// How long an ICE restart may take before the room rejoins instead, in seconds.
    var iceRestartTimeout = 10.0
    /// Recoveries finished by an ICE restart (tests tell the two paths apart with it).
    private(set) var iceRestarts = 0
    /// Recoveries finished by a full rejoin.
    private(set) var rejoins = 0

    private let lock = NSLock()
    /// (participant id, wire kind) consumed with `autoConsume` off; re-consumed after a rejoin.
    private var consumed: Set<String> = []

    func noteRecovered(byRejoin: Bool) {
        if byRejoin { rejoins += 1 } else { iceRestarts += 1 }
    }

    func setConsumed(_ participantId: String, _ kind: String, _ on: Bool) {
        let key = participantId + "\u{0}" + kind
        lock.withLock {
            if on { consumed.insert(key) } else { consumed.remove(key) }
        }
    }

    var consumeChoices: [(participantId: String, kind: String)] {
        lock.withLock {
            consumed.sorted().compactMap { key in
                guard let split = key.firstIndex(of: "\u{0}") else { return nil }
                return (String(key[..<split]), String(key[key.index(after: split)...]))
            }
        }
    }
}

extension RoomMedia {
    /// Client connections notice lost media within about 3 s: a consent check every ~1 s (RFC 7675
    /// allows more frequent checks than its 5 s default) and `disconnected` after 3 s without a
    /// response. Consent expires (`failed`) after the standard 30 s.
    static let clientConfiguration: PeerConnectionConfiguration = {
        var configuration = PeerConnectionConfiguration()
        configuration.iceTimeouts.consentInterval = 1_000_000_000
        configuration.iceTimeouts.disconnectedAfter = 3_000_000_000
        return configuration
    }()

    /// Reports `pc`'s state changes to the room (set once, when the connection is created).
    func watch(_ pc: PeerConnection) {
        pc.loop.execute { [weak self, weak pc] in
            pc?.onStateChange = { state in
                guard let self, let room = self.room, let pc else { return }
                let box = UncheckedSendable(pc)
                room.eventQueue.async { room.mediaConnectionChanged(box.value, state) }
            }
        }
    }
}

extension Room {
    /// Records the app's consume choices (autoConsume off) so a rejoin can restore them.
    func noteConsumeChoice(_ method: RoomMethod, _ data: JSONValue) {
        guard !autoConsume, method == .consume || method == .stopConsuming,
            let pid = data["participantId"]?.stringValue, let kind = data["kind"]?.stringValue
        else { return }
        reconnection.setConsumed(pid, kind, method == .consume)
    }

    /// A media connection changed state.
    func mediaConnectionChanged(_ pc: PeerConnection, _ connectionState: PeerConnectionState) {
        guard connectionState == .disconnected || connectionState == .failed else { return }
        guard exitReason == nil, !leaving, !ending, isJoined, state == .CONNECTED, reconnectAttempts > 0,
            media.connections.contains(where: { $0.pc === pc })
        else { return }
        setState(.RECONNECTING)
        reconnection.generation += 1
        let generation = reconnection.generation
        Task {
            let restarted = await self.restartICE(generation)
            await self.onQueue {
                guard self.exitReason == nil, self.reconnection.generation == generation,
                    !self.reconnection.rejoining, self.state == .RECONNECTING
                else { return }
                if restarted {
                    self.reconnection.noteRecovered(byRejoin: false)
                    self.setState(.CONNECTED)
                } else {
                    self.beginRejoin()
                }
            }
        }
    }

    /// Off the event queue: restarts ICE on every open connection and waits until each has selected
    /// a pair with the new credentials. False when signalling failed, a connection failed, the room
    /// moved on, or `iceRestartTimeout` passed.
    private func restartICE(_ generation: Int) async -> Bool {
        let connections = media.connections
        guard !connections.isEmpty else { return true }
        for (role, pc) in connections {
            guard let mine = try? await pc.loop.submit({ try pc.restartICE() }) else { return false }
            let reply: JSONValue
            do {
                reply = try await call(
                    .restartIce,
                    ["connection": .string(role), "ufrag": .string(mine.ufrag), "pwd": .string(mine.password)])
            } catch {
                return false
            }
            guard let ufrag = reply["ufrag"]?.stringValue, let pwd = reply["pwd"]?.stringValue else { return false }
            do { try await pc.loop.submit { try pc.setRemoteICECredentials(ufrag: ufrag, password: pwd) } } catch {
                return false
            }
        }
        // Each wait is woken by its connection's ICE events. Leaving or a rejoin closes the
        // connections, which ends the waits at once.
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(reconnection.iceRestartTimeout * 1e9)
        for (_, pc) in connections {
            let left = Double(deadline &- min(deadline, DispatchTime.now().uptimeNanoseconds)) / 1e9
            do { try await pc.waitUntilFullyConnected(timeout: left) } catch { return false }
        }
        return !isFinished && reconnection.generation == generation
    }

    /// The signalling socket dropped (while CONNECTED or RECONNECTING).
    func startReconnect() {
        if reconnection.rejoining {
            // A rejoin attempt lost its socket: its pending join fails (3065) so the loop tries again.
            client = nil
            return
        }
        beginRejoin()
    }

    /// Full rejoin: a new socket, a new `join` with the same participant id, new media connections.
    func beginRejoin() {
        guard exitReason == nil, !reconnection.rejoining else { return }
        reconnection.rejoining = true
        reconnection.generation += 1
        if state != .RECONNECTING { setState(.RECONNECTING) }
        if let old = client {
            // The server drops the old session when this socket closes; nothing from it matters now.
            // Its requests still waiting fail with 3065 (`send`).
            old.setNotificationHandler(nil)
            old.setCloseHandler(nil)
            old.close(code: 1001, reason: "rejoining")
        }
        client = nil
        // The devices on now (or still being published by the join) are the ones to restore.
        let restore = media.producingKinds.union(media.joinPublishing)
        media.resetConnections()
        rejoinSeen = []
        let localId = localParticipant.id
        let policy = reconnect
        Task {
            let rejoined = await policy.retry(stop: { self.isFinished }) {
                await self.rejoinOnce(participantId: localId, restore: restore)
            }
            if rejoined || self.isFinished { return }
            await self.onQueue {
                self.reconnection.rejoining = false
                guard self.exitReason == nil else { return }
                self.setState(.FAILED)
                self.finish(.WEBSOCKET_CONNECTION_ATTEMPTS_EXHAUSTED)
            }
        }
    }

    /// One rejoin attempt; true when the server accepted the join.
    private func rejoinOnce(participantId: String, restore: Set<StreamKind>) async -> Bool {
        let outcome = OnceFlag()
        let rejoined: Bool = await withCheckedContinuation { c in
            Task {
                await self.connectAndJoin(
                    participantId: participantId, mic: restore.contains(.audio), cam: restore.contains(.video)
                ) { result in
                    var ok = false
                    if case .success(let response) = result {
                        self.rejoinSucceeded(response, restore: restore)
                        ok = true
                    }
                    if outcome.claim() { c.resume(returning: ok) }
                }
                // The room was left while connecting: the handler never ran.
                if outcome.claim() { c.resume(returning: false) }
            }
        }
        return rejoined
    }

    private func rejoinSucceeded(_ response: JSONValue, restore: Set<StreamKind>) {
        reconnection.rejoining = false
        guard exitReason == nil else { return }
        let seen = rejoinSeen ?? []
        rejoinSeen = nil
        for p in dropParticipants(notIn: seen) { emit { $0.onParticipantLeft(p, reason: .UNKNOWN) } }
        reconnection.noteRecovered(byRejoin: true)
        setState(.CONNECTED)
        emit { $0.onRoomJoined() }
        let topics = pubSub.topics
        let present = Set(participants.keys)
        let choices = reconnection.consumeChoices
        Task {
            for topic in topics { _ = try? await self.call(.subscribe, ["topic": .string(topic)]) }
            let kinds = [StreamKind.audio, .video, .share].filter { restore.contains($0) }
            if self.localParticipant.mode == .SEND_AND_RECV && !kinds.isEmpty {
                try? await self.media.produce(kinds, reportStatus: true)
            }
            // The app's consume choices survive the rejoin (autoConsume off).
            for choice in choices where present.contains(choice.participantId) {
                _ = try? await self.call(
                    .consume, ["participantId": .string(choice.participantId), "kind": .string(choice.kind)])
            }
        }
    }

    /// Test hook: drops every datagram the local media connections receive while `paused`, as a
    /// network outage would (the WebSocket is not affected).
    func setMediaPaused(_ paused: Bool) async {
        // Resuming restores the room's own impairment, if any.
        let impairment = paused ? Impairment(receiveDropRate: 1) : self.impairment
        for (_, pc) in media.connections {
            _ = await pc.loop.submitIfRunning { pc.setImpairment(impairment) }
        }
    }
}

/// Lets exactly one of several racing paths resume a continuation (the SDK's requests and
/// rejoins, the scenario runner's step timeouts).
// Safe: the flag is guarded by `lock`, so exactly one racer wins.
package final class OnceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var claimed = false

    package init() {}

    /// True for the first caller only.
    package func claim() -> Bool {
        lock.withLock {
            if claimed { return false }
            claimed = true
            return true
        }
    }
}
