import Dispatch
import Foundation
import RTC
import RTCWire
import Streaming
import Understudy

/// A headless room participant: joins a room, consumes and records whoever qualifies, and follows
/// stage invites (seed 000) by changing its own mode.
///
/// Threading: SDK callbacks arrive on the room's event queue, frames on the subscribe loop thread;
/// the agent's own state (consumed set, recordings, manifest) is guarded by one lock.
public final class RoomAgent: RoomEventListener, PubSubMessageListener, @unchecked Sendable {
    /// Whose media the agent consumes.
    public enum ConsumePolicy: Sendable, Equatable {
        /// Every remote participant (those that do not send simply contribute nothing).
        case all
        /// Exactly the remote participants in `SEND_AND_RECV`.
        case stage
        /// Nobody.
        case none
        /// Only these participant ids.
        case ids([String])
    }

    /// Which stage invites the agent follows.
    public enum InvitePolicy: Sendable, Equatable {
        case yes
        case no
        /// Only invites sent by these participant ids.
        case from([String])
    }

    /// Everything the agent needs to run.
    public struct Options: Sendable {
        public var roomId: String
        public var token: String
        public var signalingURL: String
        public var participantName: String = "understudy-agent"
        public var participantId: String?
        public var mode: Mode = .RECV_ONLY
        public var asAgent: Bool = false
        public var consume: ConsumePolicy = .all
        public var kinds: Set<MediaKind> = [.audio, .video]
        public var acceptInvites: InvitePolicy = .yes
        /// Directory for one WebM per remote participant plus `manifest.json`; nil records nothing.
        public var recordDirectory: String?
        /// `rtp://host:port` to relay received media to; nil relays nothing.
        public var relayURL: String?

        public init(roomId: String, token: String, signalingURL: String) {
            self.roomId = roomId
            self.token = token
            self.signalingURL = signalingURL
        }
    }

    /// Why ``start()`` failed.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public let options: Options
    /// The SDK room the agent drives.
    public let room: Room
    private let log: @Sendable (String) -> Void
    private let lock = NSLock()
    private var consumed: [String: Set<MediaKind>] = [:]
    private var recordings: [String: Recording] = [:]
    private var files: [[String: Any]] = []
    private var modeChanges: [[String: Any]] = []
    private var participantsSeen: [String: String] = [:]
    private var refusedInvites = 0
    private var stopped = false
    private var inviteSubscribed = false
    private var joined = false
    private var leftReason: Understudy.LeaveReason?
    private var lastError: UnderstudyError?
    private var relay: RTPRelay?
    private var relayLoop: EventLoop?

    /// Builds the agent and its room; connects to nothing until ``start()``.
    public init(options: Options, log: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.options = options
        self.log = log
        room = try Understudy.createRoom(
            roomId: options.roomId, token: options.token, participantName: options.participantName,
            // Ignored in the audience; on stage the agent publishes the synthetic tone and test pattern.
            participantId: options.participantId, micEnabled: true, camEnabled: true, mode: options.mode,
            multiStream: false, autoConsume: false, signalingBaseUrl: options.signalingURL,
            agentId: options.asAgent ? (options.participantId ?? "understudy-agent") : nil)
        room.addEventListener(self)
    }

    /// The room's local participant id (known after joining).
    public var participantId: String { room.localParticipant.id }
    /// Whether the subscription to `REQUEST_TO_JOIN_AS_HOST_<own id>` is in place.
    public var isListeningForInvites: Bool { lock.withLock { inviteSubscribed } }
    /// Stage invites refused so far.
    public var refusedInviteCount: Int { lock.withLock { refusedInvites } }
    /// Ids currently consumed.
    public var consumedIds: [String] { lock.withLock { consumed.keys.sorted() } }
    /// Recording paths by participant id.
    public var recordingPaths: [String: String] { lock.withLock { recordings.mapValues(\.path) } }
    /// The manifest path when recording.
    public var manifestPath: String? {
        options.recordDirectory.map { ($0 as NSString).appendingPathComponent("manifest.json") }
    }
    /// Why the room was left, once it was.
    public var leaveReason: Understudy.LeaveReason? { lock.withLock { leftReason } }

    /// Joins the room; throws when the join fails (unreachable server, refused token).
    public func start(timeout: Double = 15) async throws {
        if let dir = options.recordDirectory {
            do {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            } catch { throw Failure(description: "cannot create record directory '\(dir)': \(error)") }
        }
        if let url = options.relayURL {
            let target = try RTPRelay.parseURL(url)
            let loop = EventLoop(name: "understudy-relay")
            relayLoop = loop
            let created = try await loop.submit { () throws -> RTPRelay in
                try RTPRelay(destination: target.host, basePort: target.port, loop: loop)
            }
            relay = created
            // The .sdp lets ffmpeg/GStreamer/VLC open the relayed streams.
            let sdpPath = (options.recordDirectory ?? ".") + "/relay.sdp"
            try created.writeSDP(to: sdpPath)
            log("relaying to \(url); play with: ffmpeg -protocol_whitelist file,udp,rtp -i \(sdpPath)")
        }
        room.onFrame = { [weak self] id, kind, frame, arrival in self?.handleFrame(id, kind, frame, arrival) }
        await room.join()
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let (ok, left, err) = lock.withLock { (joined, leftReason, lastError) }
            if ok { break }
            if let left {
                throw Failure(description: "join failed (\(left.name))" + (err.map { ": \($0)" } ?? ""))
            }
            if Date() > deadline { throw Failure(description: "join timed out after \(Int(timeout)) s") }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        log("joined room \(options.roomId) as \(participantId) (\(room.localParticipant.mode.rawValue))")
    }

    /// Runs until the room is left, `duration` seconds pass, or shutdown is requested; then stops.
    public func run(duration: Double?) async {
        let end = duration.map { Date().addingTimeInterval($0) }
        while leaveReason == nil && !ShutdownSignal.shared.isRequested {
            if let end, Date() >= end { break }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        await stop()
    }

    /// Closes recordings, writes the manifest and leaves the room. Safe to call twice.
    public func stop() async {
        let first = lock.withLock { () -> Bool in
            if stopped { return false }
            stopped = true
            return true
        }
        guard first else { return }
        if leaveReason == nil { await room.leave() }
        room.onFrame = nil
        let closing: [String: Recording] = lock.withLock {
            let r = recordings
            for (id, rec) in r {
                do { try rec.close() } catch { log("closing recording of \(id) failed: \(error)") }
            }
            return r
        }
        if let relay, let relayLoop {
            await relayLoop.submit { relay.close() }
            relayLoop.shutdown()
        }
        writeManifest()
        for (id, rec) in closing {
            log("recorded \(id): \(rec.videoFrames) video, \(rec.audioFrames) audio frames -> \(rec.path)")
        }
    }

    // MARK: Consumption

    private func qualifies(_ p: Participant) -> Bool {
        switch options.consume {
        case .all: return true
        case .none: return false
        case .stage: return p.mode.canonical == .SEND_AND_RECV
        case .ids(let ids): return ids.contains(p.id)
        }
    }

    /// Brings the consumed set in line with the policy: consume newcomers, stop those who left it.
    private func reconcile() {
        guard !lock.withLock({ stopped }) else { return }
        let remote = room.participants
        let wanted = Set(remote.values.filter(qualifies).map(\.id))
        let (toStart, toStop): ([Participant], [(Participant?, String, Set<MediaKind>)]) = lock.withLock {
            let start = remote.values.filter { wanted.contains($0.id) && consumed[$0.id] == nil }
            let stop = consumed.filter { !wanted.contains($0.key) }.map { (remote[$0.key], $0.key, $0.value) }
            for p in start { consumed[p.id] = options.kinds }
            for s in stop { consumed[s.1] = nil }
            return (start, stop)
        }
        for p in toStart {
            log("consuming \(p.id)")
            Task {
                if options.kinds.contains(.audio) { try? await p.consumeMicStreams() }
                if options.kinds.contains(.video) { try? await p.consumeWebcamStreams() }
            }
        }
        for (p, id, kinds) in toStop {
            log("stopped consuming \(id)")
            guard let p else { continue }
            Task {
                if kinds.contains(.audio) { try? await p.stopConsumingMicStreams() }
                if kinds.contains(.video) { try? await p.stopConsumingWebcamStreams() }
            }
        }
    }

    private func handleFrame(_ id: String, _ kind: MediaKind, _ frame: EncodedFrame, _ arrival: UInt64) {
        guard options.kinds.contains(kind) else { return }
        lock.withLock {
            guard !stopped, consumed[id] != nil else { return }
            if let dir = options.recordDirectory {
                let rec: Recording?
                if let existing = recordings[id] {
                    rec = existing
                } else {
                    let path = (dir as NSString).appendingPathComponent("\(Self.fileSafe(id)).webm")
                    do {
                        let r = try Recording(path: path)
                        recordings[id] = r
                        files.append([
                            "participantId": id, "path": path, "startedAt": Self.timestamp(),
                        ])
                        rec = r
                        writeManifestLocked()
                    } catch {
                        log("cannot record \(id): \(error)")
                        rec = nil
                    }
                }
                rec?.write(frame, arrival: arrival)
            }
        }
        if let relay, let relayLoop {
            relayLoop.execute { relay.relay(frame, arrival: arrival) }
        }
    }

    // MARK: Manifest

    private static func fileSafe(_ id: String) -> String {
        String(id.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" })
    }

    private static func timestamp() -> String { ISO8601DateFormatter().string(from: Date()) }

    private func writeManifest() { lock.withLock { writeManifestLocked() } }

    private func writeManifestLocked() {
        guard let path = manifestPath else { return }
        let manifest: [String: Any] = [
            "room": options.roomId,
            "participantId": room.localParticipant.id,
            "files": files,
            "participants": participantsSeen.keys.sorted().map { ["id": $0, "name": participantsSeen[$0] ?? ""] },
            "modeChanges": modeChanges,
            "refusedInvites": refusedInvites,
        ]
        do {
            let data = try JSONSerialization.data(withJSONObject: manifest, options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            log("cannot write manifest: \(error)")
        }
    }

    private func noteParticipant(_ p: Participant) {
        lock.withLock {
            participantsSeen[p.id] = p.displayName
            writeManifestLocked()
        }
    }

    // MARK: RoomEventListener

    public func onRoomJoined() {
        lock.withLock { joined = true }
        for p in room.participants.values { noteParticipant(p) }
        let topic = "REQUEST_TO_JOIN_AS_HOST_\(room.localParticipant.id)"
        Task {
            do {
                try await room.pubSub.subscribe(topic: topic, listener: self)
                lock.withLock { inviteSubscribed = true }
            } catch {
                log("cannot subscribe to \(topic): \(error)")
            }
        }
        reconcile()
    }

    public func onRoomLeft(reason: Understudy.LeaveReason) {
        // Before the join completes, start() reports the failure itself as one line.
        let wasJoined = lock.withLock { () -> Bool in
            leftReason = reason
            return joined
        }
        if wasJoined { log("left room: \(reason.name)") }
    }

    public func onParticipantJoined(_ participant: Participant) {
        noteParticipant(participant)
        reconcile()
    }

    public func onParticipantLeft(_ participant: Participant, reason: Understudy.LeaveReason) {
        lock.withLock { consumed[participant.id] = nil }
        reconcile()
    }

    public func onParticipantModeChanged(participantId: String, mode: Mode) {
        lock.withLock {
            modeChanges.append(["participantId": participantId, "mode": mode.rawValue, "at": Self.timestamp()])
            writeManifestLocked()
        }
        log("mode of \(participantId) is now \(mode.rawValue)")
        reconcile()
    }

    public func onError(_ error: UnderstudyError) {
        let wasJoined = lock.withLock { () -> Bool in
            lastError = error
            return joined
        }
        if wasJoined { log("error \(error)") }
    }

    // MARK: Stage invites

    public func onMessageReceived(_ message: PubSubMessage) {
        guard message.topic == "REQUEST_TO_JOIN_AS_HOST_\(room.localParticipant.id)" else { return }
        let requested = Self.requestedMode(message)
        guard let mode = requested else {
            log("ignored invite from \(message.senderId): no mode in '\(message.message)'")
            return
        }
        let accepted: Bool
        switch options.acceptInvites {
        case .yes: accepted = true
        case .no: accepted = false
        case .from(let ids): accepted = ids.contains(message.senderId)
        }
        guard accepted else {
            lock.withLock {
                refusedInvites += 1
                writeManifestLocked()
            }
            log("refused invite from \(message.senderId) to \(mode.rawValue)")
            return
        }
        log("accepting invite from \(message.senderId) to \(mode.rawValue)")
        Task {
            do {
                try await room.changeMode(mode)
                log("changed own mode to \(mode.rawValue)")
            } catch {
                log("changeMode(\(mode.rawValue)) failed: \(error)")
            }
        }
    }

    /// The mode named by the message text, or by a `mode` field / string in its JSON payload.
    static func requestedMode(_ message: PubSubMessage) -> Mode? {
        let text = message.message.trimmingCharacters(in: .whitespacesAndNewlines)
        if let m = Mode(rawValue: text) { return m }
        guard let json = message.payloadJSON, let data = json.data(using: .utf8),
            let value = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        else { return nil }
        if let s = value as? String { return Mode(rawValue: s) }
        if let d = value as? [String: Any], let s = d["mode"] as? String { return Mode(rawValue: s) }
        return nil
    }
}
