import Dispatch
import Foundation
import Media
import RTC
import RTCWire
import Understudy

/// A headless room participant: joins a room, consumes and records whoever qualifies, and follows
/// stage invites (docs/spec/change-mode.md) by changing its own mode.
///
/// Threading: SDK callbacks arrive on the room's event queue. Frames go, on the subscribe loop thread,
/// to one ``AgentTrackSink`` per consumed track (count, record, relay) with no lock per frame; the
/// recordings hand their disk writes to a `DiskWriter` thread. The agent's own state (consumed set,
/// the recordings' table, manifest) is guarded by one lock, taken once per track, not per frame. Consume and
/// stop-consuming calls run one at a time, in order, on a chain of tasks.
public final class RoomAgent: RoomEventListener, PubSubMessageListener, @unchecked Sendable {
    /// Whose media the agent consumes.
    public enum ConsumePolicy: Sendable, Equatable {
        /// Every remote participant (those that do not send simply contribute nothing).
        case all
        /// Exactly the remote participants in `SEND_AND_RECV`.
        case stage
        /// Nobody.
        case none
        /// Only these participant ids, in this order of preference.
        case ids([String])
    }

    /// Which stage invites the agent follows.
    public enum InvitePolicy: Sendable, Equatable {
        /// Invites from participants whose token holds `allow_mod`, as the server vouches for it on
        /// each message (`senderIsModerator`): the default, since anyone may publish an invite. Being
        /// on stage is no proof: any `allow_join` participant can put itself there with `changeMode`.
        case trusted
        /// Every invite.
        case yes
        case no
        /// Only invites sent by these participant ids.
        case from([String])
    }

    /// How recordings are stored (nothing is transcoded either way).
    public enum RecordFormat: String, Sendable, Equatable {
        /// One WebM per participant, VP8 and Opus together.
        case webm
        /// One Ogg Opus file (audio) and one IVF file (VP8) per participant.
        case oggIVF = "ogg+ivf"
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
        /// At most this many webcams are consumed (nil: no limit). Audio is not limited.
        public var maxVideo: Int?
        /// The simulcast layer asked for each consumed webcam (`setQuality`; nil: the server's
        /// default, the top layer). A publisher with one layer sends that one whatever is asked.
        public var videoQuality: VideoQuality?
        public var acceptInvites: InvitePolicy = .trusted
        /// Directory for the recordings plus `manifest.json`; nil records nothing.
        public var recordDirectory: String?
        /// Container(s) of the recordings.
        public var recordFormat: RecordFormat = .webm
        /// `rtp://host:port` to relay received media to; nil relays nothing.
        public var relayURL: String?
        /// A room to republish each consumed participant into, as `relay-<id>`; nil republishes nothing.
        public var relayRoom: String?
        /// The token for ``relayRoom`` (nil: ``token``).
        public var relayRoomToken: String?
        /// What the agent publishes on stage: `testsrc` (nil), `none`, or a .ivf/.webm file.
        public var video: String?
        /// What the agent publishes on stage: `tone` (nil), `none`, an .ogg/.webm file or `alsa:DEVICE`.
        public var audio: String?
        /// How long a lost connection is retried. A daemon's default: 5 minutes, enough to ride out a
        /// server restart or a deploy, with pauses growing to 10 s.
        public var reconnect = ReconnectPolicy(window: 300, maxDelay: 10)
        /// How long a join with an `ask_join` token waits in the lobby (nil: as long as the server).
        public var lobbyWait: Double?
        /// TURN servers for the media (`--ice-servers`); nil uses those the room server hands out.
        public var iceServers: [ICEServer]?

        public init(roomId: String, token: String, signalingURL: String) {
            self.roomId = roomId
            self.token = token
            self.signalingURL = signalingURL
        }
    }

    /// One recorded file: a participant's WebM (`kind` nil) or one track of it.
    fileprivate struct RecordingKey: Hashable {
        var participantId: String
        var kind: MediaKind?
    }

    public let options: Options
    /// The SDK room the agent drives.
    public let room: Room
    /// Counters exposed through ``metricsText()``.
    public let counters = RoomAgentCounters()
    private let log: @Sendable (String) -> Void
    private let lock = NSLock()
    /// Kinds currently consumed (or being consumed) per participant id.
    private var consumed: [String: Set<MediaKind>] = [:]
    /// Remote participant ids in the order the agent saw them join.
    private var joinOrder: [String] = []
    private var recordings: [RecordingKey: Recording] = [:]
    /// Tracks carrying one of the agent's sinks, and who waits for them to end (``stop()``).
    private var liveTracks = 0
    private var tracksGone: CheckedContinuation<Void, Never>?
    /// Writes the manifest when a recording opens, away from the loop thread.
    private let manifestQueue = DispatchQueue(label: "understudy.agent.manifest")
    private var files: [[String: Any]] = []
    private var modeChanges: [[String: Any]] = []
    /// Every remote participant seen: id, name, last known mode, join and leave times.
    private var participantsSeen: [String: [String: Any]] = [:]
    private var refusedInvites = 0
    private var stopped = false
    /// Set by ``requestStop()`` or leaving the room; ``run(duration:until:)`` waits for it.
    private var stopRequested = false
    private var runWaiter: CheckedContinuation<Void, Never>?
    private var inviteSubscribed = false
    private var joined = false
    private var leftReason: Understudy.LeaveReason?
    private var lastError: UnderstudyError?
    private var relay: RTPRelay?
    private var relayLoop: EventLoop?
    private let relayRooms: RelayRoomSet?
    /// The last queued consume/stop operation; the next one waits for it.
    private var operationTail: Task<Void, Never>?
    /// The same for joining and leaving the relay room.
    private var relayRoomTail: Task<Void, Never>?
    /// Each consumed track's last quality reading for the manifest, by participant, kind and mid.
    private var trackQuality: [String: [String: Any]] = [:]
    /// The stage and audience just before leaving, kept for the final manifest.
    private var finalStage: (stage: [String], audience: [String])?

    /// Builds the agent and its room; connects to nothing until ``start()``.
    public init(options: Options, log: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.options = options
        self.log = log
        room = try Understudy.createRoom(
            roomId: options.roomId, token: options.token, participantName: options.participantName,
            // Used on stage only: the sources are opened when the agent goes on stage, closed when it leaves.
            participantId: options.participantId,
            micEnabled: LocalSources.publishes(.audio, video: options.video, audio: options.audio),
            camEnabled: LocalSources.publishes(.video, video: options.video, audio: options.audio),
            mode: options.mode, multiStream: false, autoConsume: false, signalingBaseUrl: options.signalingURL,
            agentId: options.asAgent ? (options.participantId ?? "understudy-agent") : nil,
            reconnect: options.reconnect, lobbyWait: options.lobbyWait)
        room.mediaSourceFactory = try LocalSources.factory(video: options.video, audio: options.audio)
        if let iceServers = options.iceServers { room.iceServers = iceServers }
        relayRooms = options.relayRoom.map {
            RelayRoomSet(
                roomId: $0, token: options.relayRoomToken ?? options.token, signalingURL: options.signalingURL,
                log: log)
        }
        room.addEventListener(self)
    }

    /// The room's local participant id (known after joining).
    public var participantId: String { room.localParticipant.id }
    /// Whether the subscription to `REQUEST_TO_JOIN_AS_HOST_<own id>` is in place.
    public var isListeningForInvites: Bool { lock.withLock { inviteSubscribed } }
    /// Stage invites refused so far.
    public var refusedInviteCount: Int { lock.withLock { refusedInvites } }
    /// Ids currently consumed (any kind).
    public var consumedIds: [String] { lock.withLock { consumed.keys.sorted() } }
    /// Ids whose webcam is currently consumed.
    public var consumedVideoIds: [String] {
        lock.withLock { consumed.filter { $0.value.contains(.video) }.keys.sorted() }
    }
    /// The first recording path of each participant (its WebM, or its IVF/Ogg file).
    public var recordingPaths: [String: String] {
        lock.withLock {
            var paths: [String: String] = [:]
            for (key, rec) in recordings.sorted(by: {
                ($0.key.kind == .video ? 0 : 1) < ($1.key.kind == .video ? 0 : 1)
            })
            where paths[key.participantId] == nil {
                paths[key.participantId] = rec.path
            }
            return paths
        }
    }
    /// Every recording path, sorted.
    public var recordedFiles: [String] { lock.withLock { recordings.values.map(\.path).sorted() } }
    /// The manifest path when recording.
    public var manifestPath: String? {
        options.recordDirectory.map { ($0 as NSString).appendingPathComponent("manifest.json") }
    }
    /// Why the room was left, once it was.
    public var leaveReason: Understudy.LeaveReason? { lock.withLock { leftReason } }
    /// Ids of the stand-ins in the relay room (`--relay-room`).
    public var relayRoomParticipantIds: [String] { relayRooms?.participantIds ?? [] }

    /// Joins the room; throws when the join fails (unreachable server, refused token, no answer
    /// within the SDK's request timeout).
    public func start() async throws(RoomAgentError) {
        if let dir = options.recordDirectory {
            do {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            } catch { throw .recordDirectory(path: dir, cause: error) }
        }
        if let url = options.relayURL {
            do { try await startRelay(url) } catch { throw .relay(url: url, cause: error) }
        }
        room.onTrack = { [weak self] track in self?.trackStarted(track) }
        // `join()` returns once the outcome was reported to the listeners (this agent among them).
        await room.join()
        let (ok, left, err) = lock.withLock { (joined, leftReason, lastError) }
        guard ok else { throw .joinFailed(reason: left ?? .JOIN_ROOM_FAILED, cause: err) }
        log("joined room \(options.roomId) as \(participantId) (\(room.localParticipant.mode.rawValue))")
    }

    private func startRelay(_ url: String) async throws(RelayError) {
        let loop = EventLoop(name: "understudy-relay")
        do {
            relay = try await RTPRelay.start(url: url, loop: loop, sdpDirectory: options.recordDirectory, log: log)
            relayLoop = loop
        } catch {
            loop.shutdown()
            throw error
        }
    }

    /// Runs until the room is left, `duration` seconds pass, ``requestStop()`` is called or
    /// `stopEvent` returns (the CLI passes its SIGINT/SIGTERM wait); then stops. Every one of these
    /// wakes the run directly; nothing is polled. `stopEvent` should return when its task is cancelled.
    public func run(duration: Double?, until stopEvent: (@Sendable () async -> Void)? = nil) async {
        let watchers = [
            duration.map { seconds in
                Task { [weak self] in
                    try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                    if !Task.isCancelled { self?.requestStop() }
                }
            },
            stopEvent.map { stopEvent in
                Task { [weak self] in
                    await stopEvent()
                    if !Task.isCancelled { self?.requestStop() }
                }
            },
        ]
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = lock.withLock {
                if stopRequested || leftReason != nil { return true }
                runWaiter = c
                return false
            }
            if done { c.resume() }
        }
        for w in watchers { w?.cancel() }
        await stop()
    }

    /// Ends ``run(duration:until:)``: the agent stops (recordings closed, room left). Safe to call any time.
    public func requestStop() {
        let waiter = lock.withLock {
            stopRequested = true
            defer { runWaiter = nil }
            return runWaiter
        }
        waiter?.resume()
    }

    /// Closes recordings, writes the manifest and leaves the room (and the relay room). Safe to call twice.
    public func stop() async {
        let first = lock.withLock { () -> Bool in
            if stopped { return false }
            stopped = true
            return true
        }
        guard first else { return }
        // The manifest keeps the stage as it was in the room, not the empty one after leaving.
        let lastStage = stageAndAudience()
        lock.withLock { finalStage = lastStage }
        // The tracks' last quality readings, before leaving ends them.
        refreshQuality()
        if leaveReason == nil { await room.leave() }
        // Leaving ends every track on the subscribe loop; after that no sink writes, and the
        // recordings can be closed (and their disk writes awaited) here.
        await tracksEnded(timeout: 5)
        let closing: [RecordingKey: Recording] = lock.withLock {
            let r = recordings
            for (key, rec) in r {
                do { try rec.close() } catch { log("closing recording of \(key.participantId) failed: \(error)") }
                if let index = files.firstIndex(where: { ($0["path"] as? String) == rec.path }) {
                    // What the file holds, not what was received.
                    files[index]["videoFrames"] = rec.videoFrames
                    files[index]["audioFrames"] = rec.audioFrames
                    files[index]["droppedFrames"] = rec.droppedFrames
                    files[index]["framesNotWritten"] = rec.framesNotWritten
                    if let failure = rec.diskError { files[index]["error"] = failure.description }
                    files[index]["complete"] = rec.diskError == nil
                }
            }
            return r
        }
        if let relay, let relayLoop {
            await relayLoop.submit { relay.close() }
            relayLoop.shutdown()
        }
        await relayRooms?.closeAll()
        writeManifest()
        for (key, rec) in closing.sorted(by: { $0.value.path < $1.value.path }) {
            log(
                "recorded \(key.participantId): \(rec.videoFrames) video, \(rec.audioFrames) audio frames -> \(rec.path)"
            )
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

    /// What the policy wants now: kinds per participant id. Webcam slots (`maxVideo`) go first to
    /// those already holding one, then in policy order (the id list, else join order), and only to
    /// participants on stage, since nobody else can send a webcam.
    private func desiredKinds(_ remote: [String: Participant]) -> [String: Set<MediaKind>] {
        let (order, holders) = lock.withLock {
            (joinOrder, Set(consumed.filter { $0.value.contains(.video) }.keys))
        }
        let ordered: [Participant]
        if case .ids(let ids) = options.consume {
            ordered = ids.compactMap { remote[$0] }
        } else {
            let known = order.compactMap { remote[$0] }
            let unknown = remote.values.filter { !order.contains($0.id) }.sorted { $0.id < $1.id }
            ordered = (known + unknown).filter(qualifies)
        }
        var desired: [String: Set<MediaKind>] = [:]
        for p in ordered where options.kinds.contains(.audio) { desired[p.id, default: []].insert(.audio) }
        if options.kinds.contains(.video) {
            if let limit = options.maxVideo {
                let eligible = ordered.filter { $0.mode.canonical == .SEND_AND_RECV }
                let chosen = eligible.filter { holders.contains($0.id) } + eligible.filter { !holders.contains($0.id) }
                for p in chosen.prefix(max(0, limit)) { desired[p.id, default: []].insert(.video) }
            } else {
                for p in ordered { desired[p.id, default: []].insert(.video) }
            }
        }
        return desired
    }

    /// Brings the consumed set in line with the policy: consume newcomers, stop those who left it.
    private func reconcile() {
        guard !lock.withLock({ stopped }) else { return }
        let remote = room.participants
        let desired = desiredKinds(remote)
        let changes: [(id: String, start: Set<MediaKind>, stop: Set<MediaKind>, wasConsumed: Bool)] = lock.withLock {
            var list: [(String, Set<MediaKind>, Set<MediaKind>, Bool)] = []
            for id in Set(consumed.keys).union(desired.keys).sorted() {
                let have = consumed[id] ?? []
                let want = desired[id] ?? []
                guard have != want else { continue }
                list.append((id, want.subtracting(have), have.subtracting(want), !have.isEmpty))
                consumed[id] = want.isEmpty ? nil : want
            }
            return list
        }
        for change in changes {
            let participant = remote[change.id]
            if !change.start.isEmpty { log("consuming \(change.id) \(Self.describe(change.start))") }
            if !change.stop.isEmpty { log("stopped consuming \(change.id) \(Self.describe(change.stop))") }
            // A participant who left needs no stopConsuming: the server closed its consumers.
            guard let participant else {
                if change.wasConsumed { relayRoomChange(remove: change.id) }
                continue
            }
            enqueueOperation { [self] in
                if change.start.contains(.audio) {
                    await perform("consumeMicStreams", change.id) { try await participant.consumeMicStreams() }
                }
                if change.start.contains(.video) {
                    await perform("consumeWebcamStreams", change.id) { try await participant.consumeWebcamStreams() }
                    if let quality = options.videoQuality {
                        await perform("setQuality", change.id) { try await participant.setQuality(quality) }
                    }
                }
                if change.stop.contains(.audio) {
                    await perform("stopConsumingMicStreams", change.id) {
                        try await participant.stopConsumingMicStreams()
                    }
                }
                if change.stop.contains(.video) {
                    await perform("stopConsumingWebcamStreams", change.id) {
                        try await participant.stopConsumingWebcamStreams()
                    }
                }
            }
            let nowConsumed = lock.withLock { consumed[change.id] != nil }
            if !change.wasConsumed && nowConsumed {
                relayRoomChange(add: participant)
            } else if change.wasConsumed && !nowConsumed {
                relayRoomChange(remove: change.id)
            }
        }
    }

    private static func describe(_ kinds: Set<MediaKind>) -> String {
        kinds.map { $0 == .audio ? "audio" : "video" }.sorted().joined(separator: "+")
    }

    /// Queues `work` after every earlier consume/stop operation.
    private func enqueueOperation(_ work: @escaping @Sendable () async -> Void) {
        lock.withLock {
            let previous = operationTail
            operationTail = Task {
                await previous?.value
                await work()
            }
        }
    }

    private func relayRoomChange(add participant: Participant? = nil, remove id: String? = nil) {
        guard let relayRooms else { return }
        let kinds = options.kinds
        let room = self.room
        lock.withLock {
            let previous = relayRoomTail
            relayRoomTail = Task {
                await previous?.value
                if let participant {
                    let id = participant.id
                    await relayRooms.add(
                        participantId: id, name: participant.displayName, kinds: kinds,
                        requestUpstreamKeyframe: { [weak room] in room?.participants[id]?.requestWebcamKeyframe() })
                }
                if let id { await relayRooms.remove(participantId: id) }
            }
        }
    }

    /// Errors worth one retry: the room was reconnecting or the request was cut off.
    static func isTransient(_ error: Error) -> Bool {
        guard let e = error as? UnderstudyError else { return false }
        return e.code == 3065 || e.code == 3056 || e.code == 3047
    }

    /// Runs one consume/stop call, retries once after a transient error and logs a failure.
    private func perform(_ api: String, _ id: String, _ call: @Sendable () async throws -> Void) async {
        for attempt in 1...2 {
            if lock.withLock({ stopped }) { return }
            do {
                try await call()
                return
            } catch {
                if lock.withLock({ stopped }) { return }
                if attempt == 1 && Self.isTransient(error) {
                    log("\(api)(\(id)) failed: \(error); retrying once")
                    try? await Task.sleep(nanoseconds: 1_000_000_000)
                    continue
                }
                counters.consumeFailed()
                log("\(api)(\(id)) failed: \(error)")
                return
            }
        }
    }

    // MARK: Frames

    /// Subscribe loop: a consumed track starts; the agent's sink joins it if the agent wants its kind.
    private func trackStarted(_ track: RemoteTrack) {
        let kind = track.mediaKind
        guard options.kinds.contains(kind) else { return }
        let key: RecordingKey? = options.recordDirectory.map { _ in
            RecordingKey(participantId: track.participantId, kind: options.recordFormat == .webm ? nil : kind)
        }
        let wanted = lock.withLock { () -> Bool in
            guard !stopped, consumed[track.participantId]?.contains(kind) == true else { return false }
            liveTracks += 1
            return true
        }
        guard wanted else { return }
        track.addSink(
            AgentTrackSink(
                agent: self, recordingKey: key, relay: relay.flatMap { r in relayLoop.map { (r, $0) } },
                relayRooms: relayRooms))
    }

    /// Subscribe loop: a track the agent's sink was on ended.
    fileprivate func trackEnded() {
        let waiter: CheckedContinuation<Void, Never>? = lock.withLock {
            liveTracks -= 1
            guard liveTracks == 0 else { return nil }
            defer { tracksGone = nil }
            return tracksGone
        }
        waiter?.resume()
    }

    /// Waits until every track the agent's sinks are on has ended (or `timeout` seconds).
    private func tracksEnded(timeout: Double) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = lock.withLock { () -> Bool in
                if liveTracks == 0 { return true }
                tracksGone = c
                return false
            }
            if done { return c.resume() }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
                let late = self?.lock.withLock { () -> CheckedContinuation<Void, Never>? in
                    defer { self?.tracksGone = nil }
                    return self?.tracksGone
                }
                late?.resume()
            }
        }
    }

    /// Subscribe loop: the recording of `key`, opened on first use (one per participant for WebM, one
    /// per participant and kind otherwise). Nil when it cannot be opened.
    fileprivate func recording(for key: RecordingKey) -> Recording? {
        guard let dir = options.recordDirectory else { return nil }
        if let existing = lock.withLock({ recordings[key] }) { return existing }
        let ext: String
        switch key.kind {
        case nil: ext = "webm"
        case .audio?: ext = "ogg"
        case .video?: ext = "ivf"
        }
        let id = key.participantId
        let path: String
        let rec: Recording
        do {
            path = try AgentManifest.createRecordingFile(in: dir, for: id, ext: ext)
            rec = try Recording(path: path)
        } catch {
            log("cannot record \(id): \(error)")
            return nil
        }
        // What reached the file is counted by the disk writer, and a write error is reported when
        // it happens, not at close (issue 31 item 16).
        rec.observeDisk(
            DiskEvents(
                written: { [weak self] frames in self?.counters.recorded(frames) },
                failed: { [weak self] error, frames in
                    self?.recordingFailed(participantId: id, path: path, error: error, inFile: frames)
                }))
        let kept = lock.withLock { () -> Recording in
            if let raced = recordings[key] { return raced }
            recordings[key] = rec
            files.append([
                "participantId": id, "path": path, "format": ext, "startedAt": AgentManifest.timestamp(),
                "kinds": key.kind.map { [$0 == .audio ? "audio" : "video"] } ?? ["audio", "video"],
            ])
            // Each file names its codecs: Opus for audio at once, the video codec at its first keyframe.
            if key.kind != .video { files[files.count - 1]["audioCodec"] = "opus" }
            return rec
        }
        guard kept === rec else { return kept }
        log("recording \(id) -> \(path)")
        // The manifest is a file too: written off the loop thread.
        manifestQueue.async { [weak self] in
            // Off the event queue and the loop: reading the tracks' quality waits for the subscribe loop.
            self?.refreshQuality()
            self?.writeManifest()
        }
        return rec
    }

    /// Subscribe loop: a recording's video codec is known (its first keyframe was written), and an
    /// H.264 file got its `.mkv` name: the manifest names both.
    fileprivate func recordingCodecKnown(previousPath: String, path: String, video: MediaCodec) {
        if path != previousPath { log("recording \(previousPath) holds H.264 -> \(path)") }
        manifestQueue.async { [weak self] in
            guard let self else { return }
            lock.withLock {
                guard let index = files.firstIndex(where: { ($0["path"] as? String) == previousPath }) else { return }
                files[index]["path"] = path
                if path != previousPath { files[index]["format"] = "mkv" }
                files[index]["videoCodec"] = video.rawValue
                writeManifestLocked()
            }
        }
    }

    /// A recording's file failed (disk writer thread): logged and counted now, put in the manifest
    /// from the manifest queue. The disk thread never waits for the agent's lock: ``stop()`` holds
    /// it while `close()` waits for the disk thread, and a close can be what hits the full disk.
    private func recordingFailed(participantId: String, path: String, error: MediaError, inFile: RecordedFrames) {
        counters.recordingFailed()
        log(
            "recording of \(participantId) failed: \(error); \(path) holds \(inFile.video) video, \(inFile.audio) audio frames and gets no more"
        )
        manifestQueue.async { [weak self] in
            guard let self else { return }
            lock.withLock {
                if let index = files.firstIndex(where: { ($0["path"] as? String) == path }) {
                    files[index]["error"] = error.description
                    files[index]["failedAt"] = AgentManifest.timestamp()
                    files[index]["videoFrames"] = inFile.video
                    files[index]["audioFrames"] = inFile.audio
                }
                writeManifestLocked()
            }
        }
    }

    // MARK: Manifest

    private func writeManifest() { lock.withLock { writeManifestLocked() } }

    /// Reads every consumed track's quality (off the lock: it waits for the subscribe loop) into
    /// ``trackQuality``, where a track keeps its last reading after it ends.
    private func refreshQuality() {
        let rows = room.receiveQuality()
        guard !rows.isEmpty else { return }
        let encoder = JSONEncoder()
        var readings: [String: [String: Any]] = [:]
        for row in rows {
            guard let data = try? encoder.encode(row.quality),
                let quality = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { continue }
            readings["\(row.participantId)|\(row.kind.rawValue)|\(row.mid)"] = [
                "participantId": row.participantId, "kind": row.kind.rawValue, "mid": row.mid, "quality": quality,
            ]
        }
        lock.withLock { trackQuality.merge(readings) { _, new in new } }
    }

    /// Who is on stage and who is in the audience now, the agent included.
    private func stageAndAudience() -> (stage: [String], audience: [String]) {
        var everyone = room.participants.values.map { ($0.id, $0.mode.canonical) }
        let local = room.localParticipant
        if !local.id.isEmpty { everyone.append((local.id, local.mode.canonical)) }
        let stage = everyone.filter { $0.1 == .SEND_AND_RECV }.map(\.0).sorted()
        // The audience is RECV_ONLY (docs/spec/change-mode.md); SIGNALLING_ONLY members get no media: neither.
        let audience = everyone.filter { $0.1 == .RECV_ONLY }.map(\.0).sorted()
        return (stage, audience)
    }

    private func writeManifestLocked() {
        guard let path = manifestPath else { return }
        let (stage, audience) = finalStage ?? stageAndAudience()
        let manifest: [String: Any] = [
            "room": options.roomId,
            "participantId": room.localParticipant.id,
            "mode": room.localParticipant.mode.rawValue,
            "recordFormat": options.recordFormat.rawValue,
            "files": files,
            "participants": participantsSeen.keys.sorted().compactMap { participantsSeen[$0] },
            "stage": stage,
            "audience": audience,
            "modeChanges": modeChanges,
            "refusedInvites": refusedInvites,
            "tracks": trackQuality.keys.sorted().compactMap { trackQuality[$0] },
        ]
        AgentManifest.write(manifest, to: path, log: log)
    }

    private func noteParticipant(_ p: Participant) {
        lock.withLock {
            if participantsSeen[p.id] == nil {
                participantsSeen[p.id] = ["id": p.id, "name": p.displayName, "joinedAt": AgentManifest.timestamp()]
            }
            participantsSeen[p.id]?["mode"] = p.mode.rawValue
            participantsSeen[p.id]?["leftAt"] = nil
            if !joinOrder.contains(p.id) { joinOrder.append(p.id) }
            writeManifestLocked()
        }
    }

    private func logStage() {
        let (stage, audience) = stageAndAudience()
        log("stage: [\(stage.joined(separator: ","))] audience: [\(audience.joined(separator: ","))]")
    }

    // MARK: Metrics

    /// The agent's metrics in the Prometheus text format (what `GET /metrics` serves).
    public func metricsText() -> String {
        var out = PrometheusText()
        let remote = room.participants
        let local = room.localParticipant
        let (consumedAudio, consumedVideo, recordingCount) = lock.withLock {
            (
                consumed.values.filter { $0.contains(.audio) }.count,
                consumed.values.filter { $0.contains(.video) }.count, recordings.count
            )
        }
        out.single("understudy_agent_participants", "gauge", "Remote participants in the room.", remote.count)
        out.single(
            "understudy_agent_stage_participants", "gauge", "Remote participants on stage (SEND_AND_RECV).",
            remote.values.filter { $0.mode.canonical == .SEND_AND_RECV }.count)
        out.family("understudy_agent_consumed_tracks", "gauge", "Tracks the agent consumes now.")
        out.sample("understudy_agent_consumed_tracks", labels: ["kind": "audio"], Double(consumedAudio))
        out.sample("understudy_agent_consumed_tracks", labels: ["kind": "video"], Double(consumedVideo))
        out.single("understudy_agent_recordings", "gauge", "Recording files opened.", recordingCount)
        out.family("understudy_agent_mode", "gauge", "The agent's own mode (1 for the current one).")
        for mode in [Mode.SEND_AND_RECV, .RECV_ONLY, .SIGNALLING_ONLY] {
            out.sample(
                "understudy_agent_mode", labels: ["mode": mode.rawValue], local.mode.canonical == mode ? 1 : 0)
        }
        out.single(
            "understudy_agent_connected", "gauge", "1 while the room is connected.", room.state == .CONNECTED ? 1 : 0)
        if let relayRooms {
            let c = relayRooms.counters
            out.single(
                "understudy_agent_relay_room_participants", "gauge", "Stand-ins in the relay room.",
                relayRooms.participantIds.count)
            out.single(
                "understudy_agent_relay_room_frames_forwarded_total", "counter",
                "Frames handed to the relay room's publishers.", c.forwarded)
            out.single(
                "understudy_agent_relay_room_frames_dropped_total", "counter",
                "Frames dropped before the relay room (queue overflow, waiting for a keyframe).", c.dropped)
            out.single(
                "understudy_agent_relay_room_keyframe_requests_total", "counter",
                "Keyframe requests received from the relay room.", c.keyframeRequests)
        }
        out.subscribeFeedback(room.subscribeFeedbackSent)
        out.trackQuality(room.receiveQuality())
        // On stage: the publish connection's send-side estimate from the server's feedback (issue 33).
        let estimate = room.publishBandwidthEstimate
        out.single(
            "understudy_agent_publish_estimate_bits_per_second", "gauge",
            "The publish connection's send-side bandwidth estimate (availableOutgoingBitrate; 0: none).",
            estimate?.targetBitrate ?? 0)
        counters.render(into: &out)
        return out.text
    }

    // MARK: RoomEventListener

    public func onRoomJoined() {
        lock.withLock { joined = true }
        for p in room.participants.values.sorted(by: { $0.id < $1.id }) { noteParticipant(p) }
        writeManifest()
        logStage()
        let topic = "REQUEST_TO_JOIN_AS_HOST_\(room.localParticipant.id)"
        Task {
            do {
                try await room.pubSub.subscribe(topic: topic, listener: self)
                lock.withLock { inviteSubscribed = true }
                log("listening for stage invites on \(topic)")
            } catch {
                log("cannot subscribe to \(topic): \(error)")
            }
        }
        reconcile()
    }

    public func onRoomLeft(reason: Understudy.LeaveReason) {
        // Before the join completes, start() reports the failure itself as one line.
        let (wasJoined, waiter) = lock.withLock { () -> (Bool, CheckedContinuation<Void, Never>?) in
            leftReason = reason
            defer { runWaiter = nil }
            return (joined, runWaiter)
        }
        if wasJoined { log("left room: \(reason.name) (\(reason.rawValue))") }
        waiter?.resume()
    }

    public func onRoomStateChanged(_ state: RoomState) {
        guard lock.withLock({ joined }) else { return }
        if state == .RECONNECTING {
            counters.reconnected()
            log("connection lost; reconnecting")
        } else if state == .CONNECTED {
            log("reconnected to room \(options.roomId)")
        }
    }

    public func onParticipantJoined(_ participant: Participant) {
        noteParticipant(participant)
        log("participant joined: \(participant.id) (\(participant.mode.rawValue))")
        logStage()
        reconcile()
    }

    public func onParticipantLeft(_ participant: Participant, reason: Understudy.LeaveReason) {
        log("participant left: \(participant.id) (\(reason.name))")
        lock.withLock {
            participantsSeen[participant.id]?["leftAt"] = AgentManifest.timestamp()
            writeManifestLocked()
        }
        logStage()
        reconcile()
    }

    public func onParticipantModeChanged(participantId: String, mode: Mode) {
        lock.withLock {
            modeChanges.append(["participantId": participantId, "mode": mode.rawValue, "at": AgentManifest.timestamp()])
            participantsSeen[participantId]?["mode"] = mode.rawValue
            writeManifestLocked()
        }
        log("mode of \(participantId) is now \(mode.rawValue)")
        logStage()
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
        case .trusted:
            // Only what the server vouches for (issue 31 item 9): a mode is something a participant
            // gives itself, `allow_mod` in its token is not.
            accepted = message.senderIsModerator
        case .yes: accepted = true
        case .no: accepted = false
        case .from(let ids): accepted = ids.contains(message.senderId)
        }
        counters.invite(accepted: accepted)
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

/// The agent's sink on one consumed track, on the subscribe loop thread: counts the frames, writes
/// them to the participant's recording and hands them to the relays. No lock per frame.
private final class AgentTrackSink: RemoteTrackSink {
    private weak var agent: RoomAgent?
    private let recordingKey: RoomAgent.RecordingKey?
    private var recording: Recording?
    private var recordingLooked = false
    /// Whether the file's video codec (known at its first keyframe) went into the manifest.
    private var codecNoted = false
    private let relay: (RTPRelay, EventLoop)?
    private let relayRooms: RelayRoomSet?

    init(
        agent: RoomAgent, recordingKey: RoomAgent.RecordingKey?, relay: (RTPRelay, EventLoop)?,
        relayRooms: RelayRoomSet?
    ) {
        self.agent = agent
        self.recordingKey = recordingKey
        self.relay = relay
        self.relayRooms = relayRooms
    }

    func receive(_ frame: EncodedFrame, arrival: UInt64, track: RemoteTrack) {
        guard let agent else { return }
        agent.counters.received(frame)
        if let recordingKey {
            if !recordingLooked {
                recordingLooked = true
                recording = agent.recording(for: recordingKey)
            }
            // Counted as recorded by the disk writer, once the frame is in the file.
            if let recording {
                let path = recording.path
                recording.write(frame, arrival: arrival)
                if !codecNoted, frame.codec.kind == .video, let codec = recording.videoCodec {
                    codecNoted = true
                    agent.recordingCodecKnown(previousPath: path, path: recording.path, video: codec)
                }
            }
        }
        if let (relay, relayLoop) = relay {
            // The relay's socket lives on its own loop.
            relayLoop.execute { relay.relay(frame, arrival: arrival) }
        }
        relayRooms?.forward(track.participantId, frame)
    }

    func trackEnded(_ track: RemoteTrack) { agent?.trackEnded() }
}
