import Dispatch
import Egress
import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol
import Understudy

/// A headless room participant: joins a room, consumes and records whoever qualifies, and follows
/// stage invites (docs/spec/change-mode.md) by changing its own mode.
///
/// Threading: SDK callbacks arrive on the room's event queue. Frames go, on the subscribe loop thread,
/// to one ``AgentTrackSink`` per consumed track (count, record, RTP output, republish) with no lock per frame. The
/// parts are shared with the other participant cores: ``ConsumePolicy`` decides whom to consume,
/// ``InviteResponder`` follows stage invites and ``ParticipantRecorder`` opens the files and writes
/// the manifest off the loop. The agent's own state (consumed set, join order) is guarded by one
/// lock, taken once per track, not per frame. Consume and stop-consuming calls run one at a time, in
/// order, on a chain of tasks.
// Safe: its mutable state is guarded by one lock (see above); consume calls are serialized on a task chain.
public final class RoomAgent: RoomEventListener, @unchecked Sendable {
    /// Whose media the agent consumes (the policy all participant cores share).
    public typealias ConsumePolicy = Agent.ConsumePolicy

    /// Which stage invites the agent follows.
    public typealias InvitePolicy = InviteResponder.Policy

    /// How recordings are stored (nothing is transcoded either way).
    public enum RecordFormat: String, Sendable, Equatable {
        /// One WebM per participant, VP8 and Opus together (Matroska `.mkv` when the video is H.264).
        case webm
        /// One fragmented MP4 per participant, video (H.264, VP8, VP9 or AV1) and Opus together:
        /// a killed agent leaves files that play up to their last fragment.
        case mp4
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
        /// With a ``recordDirectory``: record each consumed participant's own files (a composite job
        /// turns this off: it writes the composite and the manifest only).
        public var recordTracks = true
        /// With a ``recordDirectory``: every this many seconds, each consumed webcam's current
        /// picture (`captureImage`, any codec) replaces `ID.jpg` there (the id escaped as the
        /// recordings' names are); nil takes none.
        public var snapshotInterval: Double?
        /// `--analyze` (with a record directory): decode each consumed webcam and run the
        /// full-reference checks on it live (``LiveQualityMonitor``), into the manifest and `/metrics`.
        public var analyze = false
        /// `--relay`: `rtp://host:port` to send received media to as plain RTP; nil sends nothing.
        public var rtpOutputURL: String?
        /// `--relay-room`: a room to republish each consumed participant into, as `relay-<id>`; nil republishes nothing.
        public var republishRoom: String?
        /// The token for ``republishRoom`` (nil: ``token``).
        public var republishRoomToken: String?
        /// What the agent publishes on stage: `testsrc` (nil), `none`, or a .ivf/.webm file.
        public var video: String?
        /// The test pattern in three simulcast layers on stage (`--simulcast`; the layers that do not
        /// fit the uplink's estimate stop).
        public var simulcast = false
        /// What the agent publishes on stage: `tone` (nil), `none`, an .ogg/.webm file or `alsa:DEVICE`.
        public var audio: String?
        /// The codec of the published video: `vp8` (nil), `h264`, `vp9`, `av1` or `auto` (see
        /// `LocalSources.videoCodecChoice`).
        /// The room must accept it: a produce it refuses fails with its error, no other codec is tried.
        public var videoCodec: String?
        /// How long a lost connection is retried. A daemon's default: 5 minutes, enough to ride out a
        /// server restart or a deploy, with pauses growing to 10 s.
        public var reconnect = ReconnectPolicy(window: 300, maxDelay: 10)
        /// How long a join with an `ask_join` token waits in the lobby (nil: as long as the server).
        public var lobbyWait: Double?
        /// TURN servers for the media (`--ice-servers`); nil uses those the room server hands out.
        public var iceServers: [ICEServer]?
        /// The network the media connections see (`--impair`); nil: none.
        public var impairment: Impairment?
        /// The mixed audio file and the per-speaker PCM socket (`--mix-audio`, `--transcribe`).
        public var audioEgress = AudioEgress.Options()
        /// `--composite`: where the room's composite goes (`.mp4`, `.webm`, `.mkv`); empty: no composite.
        public var composite: [String] = []
        /// The composite's size, rate, layout and encoder (`--size`, `--fps`, `--layout`, …).
        public var compositeOptions = Compositor.Options()
        /// An `.m3u8` composite output's segments and live window (`--hls-segment`, `--hls-window`).
        public var hlsOptions = HLSOutput.Options()

        public init(roomId: String, token: String, signalingURL: String) {
            self.roomId = roomId
            self.token = token
            self.signalingURL = signalingURL
        }
    }

    public let options: Options
    /// The SDK room the agent drives.
    public let room: Room
    /// Counters exposed through ``metricsText()``.
    public let counters = RoomAgentCounters()
    /// Each participant's mic placed beside its webcam by their sender reports, for the mix and the
    /// composite. Subscribe loop thread only (the track sinks).
    let senderClocks = SenderClocks()
    private let log: @Sendable (String) -> Void
    private let lock = NSLock()
    /// Kinds currently consumed (or being consumed) per participant id.
    private var consumed: [String: Set<MediaKind>] = [:]
    /// Remote participant ids in the order the agent saw them join.
    private var joinOrder: [String] = []
    /// The recordings and `manifest.json`.
    private let recorder: ParticipantRecorder
    /// `--analyze`: the live full-reference checks (nil: off).
    let qualityMonitor: LiveQualityMonitor?
    /// Tracks carrying one of the agent's sinks, and who waits for them to end (``stop()``).
    private var liveTracks = 0
    private var tracksGone: CheckedContinuation<Void, Never>?
    private var stopped = false
    /// Ended by ``requestStop()`` or leaving the room; ``run(duration:until:)`` waits for it.
    private let runEnd = RunEnd()
    /// Follows stage invites by the ``Options/acceptInvites`` policy. Set once in `init` (its callback
    /// needs `self`), only read afterwards.
    private var invites: InviteResponder!
    private var joined = false
    private var leftReason: Understudy.LeaveReason?
    private var lastError: UnderstudyError?
    private var rtpOutput: RTPOutput?
    private var rtpOutputLoop: EventLoop?
    private let republishRoom: RepublishRoom?
    /// Consume and stop operations, one after another.
    private let operations = SerialTasks()
    /// Joining and leaving the republish room, one after another.
    private let republishChanges = SerialTasks()
    /// The mixed audio and the transcription socket, from ``start()`` (set once, before the join).
    private var audioEgress: AudioEgress?
    /// The room composite (`--composite`), from ``start()`` (set once, before the join).
    private var compositor: Compositor?
    /// Each participant's composite tile size, sent again when its webcam track (re)starts.
    private var tileSizes: [String: (width: Int, height: Int)] = [:]
    /// The stage and audience just before leaving, kept for the final manifest.
    private var finalStage: (stage: [String], audience: [String])?
    /// Takes the webcam pictures of ``Options/snapshotInterval``; cancelled by ``stop()``.
    private var snapshotTask: Task<Void, Never>?
    /// The first write error of a recording or a composite output (``failure``).
    private var firstFailure: String?

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
            mode: options.mode, multiStream: options.simulcast, autoConsume: false,
            signalingBaseUrl: options.signalingURL,
            agentId: options.asAgent ? (options.participantId ?? "understudy-agent") : nil,
            reconnect: options.reconnect, lobbyWait: options.lobbyWait)
        let created = room
        created.videoCodec = try LocalSources.videoCodecChoice(options.videoCodec)
        created.mediaSourceFactory = try LocalSources.factory(
            video: options.video, audio: options.audio, videoCodec: options.videoCodec,
            autoCodec: { [weak created] in created?.publishVideoCodec ?? .vp8 })
        if let iceServers = options.iceServers { room.iceServers = iceServers }
        if let impairment = options.impairment, !impairment.isNone { room.impairment = impairment }
        republishRoom = options.republishRoom.map {
            RepublishRoom(
                roomId: $0, token: options.republishRoomToken ?? options.token, signalingURL: options.signalingURL,
                log: log)
        }
        var manifest = RecordingManifest(room: options.roomId, recordFormat: options.recordFormat.rawValue)
        (manifest.audience, manifest.modeChanges, manifest.refusedInvites, manifest.tracks) = ([], [], 0, [])
        let recorder = ParticipantRecorder(
            directory: options.recordDirectory, format: options.recordFormat, writesManifest: true,
            manifest: manifest, log: log)
        self.recorder = recorder
        qualityMonitor =
            options.analyze && options.recordDirectory != nil
            ? LiveQualityMonitor { id, reading in
                let entry = RecordingManifest.Analysis(
                    participantId: id, framesNotAnalysed: reading.framesNotAnalysed, video: reading.report)
                recorder.update { m in
                    var list = m.analysis ?? []
                    if let i = list.firstIndex(where: { $0.participantId == id }) {
                        list[i] = entry
                    } else {
                        list.append(entry)
                    }
                    m.analysis = list.sorted { $0.participantId < $1.participantId }
                }
            } : nil
        room.addEventListener(self)
        var hooks = ParticipantRecorder.Hooks()
        hooks.opened = { [weak self] _, _ in self?.refreshQuality() }
        hooks.written = { [weak self] frames in self?.counters.recorded(frames) }
        hooks.cannotOpen = { [weak self] key, error in
            self?.noteFailure("cannot record \(key.participantId): \(error)")
        }
        hooks.diskFailed = { [weak self] key, error, _ in
            self?.counters.recordingFailed()
            self?.noteFailure("recording of \(key.participantId) failed: \(error)")
        }
        hooks.beforeManifestWrite = { [weak self] m in self?.fillLiveFields(&m) }
        recorder.observe(hooks)
        invites = InviteResponder(policy: options.acceptInvites, log: log) { [weak self] _, outcome in
            self?.inviteDecided(outcome)
        }
    }

    /// The room's local participant id (known after joining).
    public var participantId: String { room.localParticipant.id }
    /// Whether the subscription to `REQUEST_TO_JOIN_AS_HOST_<own id>` is in place.
    public var isListeningForInvites: Bool { invites.isListening }
    /// Stage invites refused so far.
    public var refusedInviteCount: Int { recorder.manifest.refusedInvites ?? 0 }
    /// Ids currently consumed (any kind).
    public var consumedIds: [String] { lock.withLock { consumed.keys.sorted() } }
    /// Ids whose webcam is currently consumed.
    public var consumedVideoIds: [String] {
        lock.withLock { consumed.filter { $0.value.contains(.video) }.keys.sorted() }
    }
    /// The first recording path of each participant (its WebM, or its IVF/Ogg file).
    public var recordingPaths: [String: String] {
        var paths: [String: String] = [:]
        for (key, rec) in recorder.recordings.sorted(by: {
            ($0.key.kind == .video ? 0 : 1) < ($1.key.kind == .video ? 0 : 1)
        })
        where paths[key.participantId] == nil {
            paths[key.participantId] = rec.path
        }
        return paths
    }
    /// Every recording path, sorted.
    public var recordedFiles: [String] { recorder.recordings.values.map(\.path).sorted() }
    /// Every file the agent writes: the recordings, the mixed audio and the composite's file outputs (an
    /// HLS output by its playlist, its segments beside it), in that order; URLs (`rtmp://`) are not files.
    public var outputFiles: [String] {
        recordedFiles + [options.audioEgress.mixPath].compactMap { $0 }
            + options.composite.filter { !$0.lowercased().hasPrefix("rtmp://") }
    }
    /// The first error opening or writing a recording, or writing a composite output (a full disk, a lost
    /// mount): what a job that must not go on without its files ends with. Nil while everything is written.
    public var failure: String? { lock.withLock { firstFailure } }

    private func noteFailure(_ reason: String) {
        lock.withLock { if firstFailure == nil { firstFailure = reason } }
    }
    /// The manifest path when recording.
    public var manifestPath: String? { recorder.manifestPath }
    /// Why the room was left, once it was.
    public var leaveReason: Understudy.LeaveReason? { lock.withLock { leftReason } }
    /// Ids of the stand-ins in the republish room (`--relay-room`).
    public var republishParticipantIds: [String] { republishRoom?.participantIds ?? [] }

    /// Joins the room; throws when the join fails (unreachable server, refused token, no answer
    /// within the SDK's request timeout).
    public func start() async throws(RoomAgentError) {
        if let dir = options.recordDirectory {
            do {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            } catch { throw .recordDirectory(path: dir, cause: error) }
        }
        if let url = options.rtpOutputURL {
            do { try await startRTPOutput(url) } catch { throw .rtpOutput(url: url, cause: error) }
        }
        var outputs: [any CompositeOutput] = []
        for destination in options.composite {
            let failed: @Sendable (String, any Error) -> Void = { [weak self] destination, error in
                self?.noteFailure("composite output \(destination) failed: \(error)")
            }
            do {
                outputs.append(
                    try CompositeOutputs.make(
                        destination: destination, hls: options.hlsOptions, log: log, failed: failed))
            } catch {
                for output in outputs { try? output.finish() }
                throw .composite(destination: destination, cause: error)
            }
        }
        if !options.audioEgress.isEmpty || !outputs.isEmpty {
            // The composite's audio is the room's mix, on the mix's timeline.
            let tap: (@Sendable (EncodedFrame, [Int16], Int64) -> Void)? =
                outputs.isEmpty
                ? nil
                : { @Sendable [weak self] frame, pcm, pts in
                    guard let self else { return }
                    self.lock.withLock { self.compositor }?.writeAudio(frame, pcm: pcm, ptsMicros: pts)
                }
            do {
                let egress = try AudioEgress(options: options.audioEgress, recorder: recorder, log: log, mixTap: tap)
                lock.withLock { audioEgress = egress }
            } catch {
                for output in outputs { try? output.finish() }
                throw .mixAudio(path: options.audioEgress.mixPath ?? "", cause: error)
            }
        }
        if !outputs.isEmpty { try await startComposite(outputs) }
        room.onTrack = { [weak self] track in self?.trackStarted(track) }
        // `join()` returns once the outcome was reported to the listeners (this agent among them).
        await room.join()
        let (ok, left, err) = lock.withLock { (joined, leftReason, lastError) }
        guard ok else {
            // Nothing more comes: finish the mixed file (silence) and close the transcription socket.
            await lock.withLock { audioEgress }?.stop()
            await stopComposite()
            throw .joinFailed(reason: left ?? .JOIN_ROOM_FAILED, cause: err)
        }
        log("joined room \(options.roomId) as \(participantId) (\(room.localParticipant.mode.rawValue))")
        if let dir = options.recordDirectory, let interval = options.snapshotInterval {
            // Holds the agent until cancelled, which stop() does.
            let task = Task { await self.takeSnapshots(into: dir, every: interval) }
            lock.withLock { snapshotTask = task }
        }
    }

    /// Starts the compositor on `outputs`, on the audio mix's timeline; the manifest lists it.
    private func startComposite(_ outputs: [any CompositeOutput]) async throws(RoomAgentError) {
        let c = options.compositeOptions
        let egress = lock.withLock { audioEgress }
        let compositor: Compositor
        do {
            compositor = try Compositor(
                options: c, outputs: outputs, origin: egress?.origin, log: log,
                tileSize: { [weak self] id, width, height in self?.tileSized(id, width: width, height: height) })
        } catch {
            for output in outputs { try? output.finish() }
            await egress?.stop()
            throw .composite(destination: options.composite.joined(separator: ", "), cause: error)
        }
        lock.withLock { self.compositor = compositor }
        let startedAt = egress?.startedAt ?? RecordingManifest.timestamp()
        let destinations = outputs.map(\.destination)
        recorder.update {
            $0.composite = RecordingManifest.Composite(
                outputs: destinations.map { .init(destination: $0) }, layout: c.layout.rawValue, width: c.width,
                height: c.height, fps: c.fps, videoCodec: c.codec.rawValue, startedAt: startedAt)
        }
        log(
            "compositing \(c.width)x\(c.height) \(c.fps) fps \(c.codec.rawValue) (\(c.layout.rawValue)) -> "
                + destinations.joined(separator: ", "))
    }

    /// Finishes the composite's outputs (after the last audio) and notes how each ended. Safe to call twice.
    private func stopComposite() async {
        guard
            let compositor = lock.withLock({ () -> Compositor? in
                defer { self.compositor = nil }
                return self.compositor
            })
        else { return }
        // stop() blocks until the compositor's thread has finished the files: off the cooperative pool.
        let results = await withCheckedContinuation { (c: CheckedContinuation<[Compositor.OutputResult], Never>) in
            DispatchQueue.global().async { c.resume(returning: compositor.stop()) }
        }
        let stats = compositor.stats
        let seconds = Double(Compositor.now() &- compositor.origin) / 1e9
        recorder.update { m in
            m.composite?.outputs = results.map {
                .init(destination: $0.destination, error: $0.error, complete: $0.error == nil)
            }
            m.composite?.frames = stats.frames
            m.composite?.skippedFrames = stats.skipped
            m.composite?.droppedInputFrames = stats.droppedInput
            m.composite?.decodeErrors = stats.decodeErrors
            m.composite?.durationSeconds = (seconds * 1000).rounded() / 1000
        }
        for r in results {
            log("composite: \(stats.frames) frames -> \(r.destination)" + (r.error.map { " (failed: \($0))" } ?? ""))
        }
    }

    /// Compositor thread: a participant's tile is now `width`×`height`; the server is told, so that
    /// it forwards the simulcast layer that fits (`setViewPort`), after the pending consume calls.
    private func tileSized(_ id: String, width: Int, height: Int) {
        guard
            lock.withLock({ () -> Bool in
                tileSizes[id] = (width, height)
                return !stopped && consumed[id]?.contains(.video) == true
            })
        else { return }
        sendViewPort(id)
    }

    /// Sends `id`'s tile size (`setViewPort`) after the pending consume calls. A participant whose
    /// webcam is not received yet refuses it (3068): its track's start sends it again.
    private func sendViewPort(_ id: String) {
        guard let size = lock.withLock({ tileSizes[id] }), let participant = room.participants[id] else { return }
        enqueueOperation { [self] in
            do { try await participant.setViewPort(width: size.width, height: size.height) } catch {
                if (error as? UnderstudyError)?.code == 3068 { return }
                log("setViewPort(\(id), \(size.width)x\(size.height)) failed: \(error)")
            }
        }
    }

    /// Tells the compositor who is on stage and consumed, in the order they joined, with their names.
    private func updateCompositeStage() {
        guard let compositor = lock.withLock({ self.compositor }) else { return }
        let remote = room.participants
        let ids = lock.withLock { joinOrder.filter { consumed[$0] != nil } }
        let stage = ids.compactMap { id -> Compositor.StageMember? in
            guard let p = remote[id], p.mode.canonical == .SEND_AND_RECV else { return nil }
            return Compositor.StageMember(id: id, name: p.displayName)
        }
        compositor.setStage(stage)
    }

    private func startRTPOutput(_ url: String) async throws(RTPOutputError) {
        let loop = EventLoop(name: "understudy-relay")
        do {
            rtpOutput = try await RTPOutput.start(url: url, loop: loop, sdpDirectory: options.recordDirectory, log: log)
            rtpOutputLoop = loop
        } catch {
            loop.shutdown()
            throw error
        }
    }

    /// Runs until the room is left, `duration` seconds pass, ``requestStop()`` is called or
    /// `stopEvent` returns (the CLI passes its SIGINT/SIGTERM wait); then stops. Every one of these
    /// wakes the run directly; nothing is polled. `stopEvent` should return when its task is cancelled.
    public func run(duration: Double?, until stopEvent: (@Sendable () async -> Void)? = nil) async {
        await runEnd.wait(duration: duration, until: stopEvent) { [weak self] in self?.requestStop() }
        await stop()
    }

    /// Ends ``run(duration:until:)``: the agent stops (recordings closed, room left). Safe to call any time.
    public func requestStop() { runEnd.end() }

    /// Closes recordings, writes the manifest and leaves the room (and the republish room). Safe to call twice.
    public func stop() async {
        let first = lock.withLock { () -> Bool in
            if stopped { return false }
            stopped = true
            return true
        }
        guard first else { return }
        lock.withLock { snapshotTask }?.cancel()
        // The manifest keeps the stage as it was in the room, not the empty one after leaving.
        let lastStage = stageAndAudience()
        lock.withLock { finalStage = lastStage }
        // The tracks' last quality readings, before leaving ends them.
        refreshQuality()
        if leaveReason == nil { await room.leave() }
        // Leaving ends every track on the subscribe loop; after that no sink writes, and the
        // recordings can be closed (and their disk writes awaited) here.
        await tracksEnded(timeout: 5)
        await qualityMonitor?.finish()
        await lock.withLock { audioEgress }?.stop()
        await stopComposite()
        await recorder.close()
        if let rtpOutput, let rtpOutputLoop {
            await rtpOutputLoop.submit { rtpOutput.close() }
            rtpOutputLoop.shutdown()
        }
        await republishRoom?.closeAll()
        await recorder.flush()
    }

    /// Every `interval` seconds until cancelled: each consumed webcam's current picture
    /// (``Participant/captureImage(width:height:flash:)``, whatever the codec) replaces `ID.jpg` in
    /// `directory` (written to a temporary name, then renamed, so a reader never sees half a file).
    /// A failed capture (no keyframe yet, a decoder error) is logged when it starts failing, and
    /// the next round tries again.
    private func takeSnapshots(into directory: String, every interval: Double) async {
        var reported: [String: String] = [:]
        while !Task.isCancelled {
            try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
            for id in consumedVideoIds where !Task.isCancelled {
                guard let participant = room.participants[id] else { continue }
                let outcome: String
                do {
                    let jpeg = [UInt8](Data(base64Encoded: try await participant.captureImage()) ?? Data())
                    let size = JPEGDecoder.size(of: jpeg)
                    let path = directory + "/" + NameEscaping.fileName(id) + ".jpg"
                    let partial = path + ".partial"
                    try Data(jpeg).write(to: URL(fileURLWithPath: partial))
                    guard rename(partial, path) == 0 else { throw MediaError.writeFailed(path: path, errno: errno) }
                    outcome = "snapshot \(id) -> \(path) (\(size.map { "\($0.width)x\($0.height)" } ?? "?"))"
                } catch {
                    outcome = "snapshot of \(id) failed: \(error)"
                }
                // One line when the outcome changes (first picture, new size, failure), not every round.
                if reported[id] != outcome {
                    reported[id] = outcome
                    log(outcome)
                }
            }
        }
    }

    // MARK: Consumption

    /// What the policy wants now: kinds per participant id (``ConsumePolicy/wanted(_:kinds:maxVideo:holdingVideo:)``),
    /// with the participants in the order the agent saw them join.
    private func desiredKinds(_ remote: [String: Participant]) -> [String: Set<MediaKind>] {
        let (order, holders) = lock.withLock {
            (joinOrder, Set(consumed.filter { $0.value.contains(.video) }.keys))
        }
        let known = order.compactMap { remote[$0] }
        let unknown = remote.values.filter { !order.contains($0.id) }.sorted { $0.id < $1.id }
        let candidates = (known + unknown).map {
            ConsumePolicy.Candidate(id: $0.id, onStage: $0.mode.canonical == .SEND_AND_RECV)
        }
        return options.consume.wanted(
            candidates, kinds: options.kinds, maxVideo: options.maxVideo, holdingVideo: holders)
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
                if change.wasConsumed { republishChange(remove: change.id) }
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
                republishChange(add: participant)
            } else if change.wasConsumed && !nowConsumed {
                republishChange(remove: change.id)
            }
        }
        // Joins, leaves and mode changes all come through here.
        updateCompositeStage()
    }

    private static func describe(_ kinds: Set<MediaKind>) -> String {
        kinds.map { $0 == .audio ? "audio" : "video" }.sorted().joined(separator: "+")
    }

    /// Queues `work` after every earlier consume/stop operation.
    private func enqueueOperation(_ work: @escaping @Sendable () async -> Void) { operations.enqueue(work) }

    private func republishChange(add participant: Participant? = nil, remove id: String? = nil) {
        guard let republishRoom else { return }
        let kinds = options.kinds
        let room = self.room
        republishChanges.enqueue {
            if let participant {
                let id = participant.id
                await republishRoom.add(
                    participantId: id, name: participant.displayName, kinds: kinds,
                    requestUpstreamKeyframe: { [weak room] in room?.participants[id]?.requestWebcamKeyframe() })
            }
            if let id { await republishRoom.remove(participantId: id) }
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
        let key = recorder.key(participantId: track.participantId, kind: kind)
        let (wanted, egress, compositor) = lock.withLock { () -> (Bool, AudioEgress?, Compositor?) in
            guard !stopped, consumed[track.participantId]?.contains(kind) == true else { return (false, nil, nil) }
            liveTracks += 1
            return (true, audioEgress, self.compositor)
        }
        guard wanted else { return }
        // Mics only: a screen share's audio is not a speaker.
        let egressSlot =
            kind == .audio && track.kind == .audio
            ? egress?.slot(
                participantId: track.participantId, name: room.participants[track.participantId]?.displayName)
            : nil
        if kind == .video && track.kind == .video && compositor != nil { sendViewPort(track.participantId) }
        let compositeSlot =
            kind == .video
            ? compositor?.videoSlot(
                participantId: track.participantId, isScreen: track.kind == .share,
                requestKeyframe: { [weak track] in track?.requestKeyframe() })
            : nil
        track.addSink(
            AgentTrackSink(
                agent: self, recorder: options.recordDirectory == nil || !options.recordTracks ? nil : recorder,
                recordingKey: key,
                rtpOutput: rtpOutput.flatMap { r in rtpOutputLoop.map { (r, $0) } },
                republishRoom: republishRoom, audioEgress: egressSlot, composite: compositeSlot))
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

    // MARK: Manifest

    /// Reads every consumed track's quality (off the lock: it waits for the subscribe loop) into
    /// the manifest, where a track keeps its last reading after it ends.
    private func refreshQuality() {
        let rows = room.receiveQuality()
        guard !rows.isEmpty else { return }
        recorder.update { m in
            var tracks = m.tracks ?? []
            for row in rows {
                let reading = RecordingManifest.Track(
                    participantId: row.participantId, kind: row.kind.rawValue, mid: row.mid, quality: row.quality)
                if let i = tracks.firstIndex(where: {
                    ($0.participantId, $0.kind, $0.mid) == (row.participantId, row.kind.rawValue, row.mid)
                }) {
                    tracks[i] = reading
                } else {
                    tracks.append(reading)
                }
            }
            m.tracks = tracks.sorted {
                "\($0.participantId)|\($0.kind)|\($0.mid)" < "\($1.participantId)|\($1.kind)|\($1.mid)"
            }
        }
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

    /// Recorder queue, before each manifest write: the agent's own id and mode, the stage and audience
    /// (as they were before leaving, once left).
    private func fillLiveFields(_ m: inout RecordingManifest) {
        m.participantId = room.localParticipant.id
        m.mode = room.localParticipant.mode.rawValue
        (m.stage, m.audience) = lock.withLock { finalStage } ?? stageAndAudience()
    }

    private func noteParticipant(_ p: Participant) {
        lock.withLock { if !joinOrder.contains(p.id) { joinOrder.append(p.id) } }
        recorder.update { m in
            if let i = m.participants.firstIndex(where: { $0.id == p.id }) {
                m.participants[i].mode = p.mode.rawValue
                m.participants[i].leftAt = nil
            } else {
                m.participants.append(
                    RecordingManifest.Participant(
                        id: p.id, name: p.displayName, mode: p.mode.rawValue, joinedAt: RecordingManifest.timestamp()))
                m.participants.sort { $0.id < $1.id }
            }
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
                consumed.values.filter { $0.contains(.video) }.count, recorder.recordings.count
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
        if let republishRoom {
            let c = republishRoom.counters
            out.single(
                "understudy_agent_relay_room_participants", "gauge", "Stand-ins in the republish room.",
                republishRoom.participantIds.count)
            out.single(
                "understudy_agent_relay_room_frames_forwarded_total", "counter",
                "Frames handed to the republish room's publishers.", c.forwarded)
            out.single(
                "understudy_agent_relay_room_frames_dropped_total", "counter",
                "Frames dropped before the republish room (queue overflow, waiting for a keyframe).", c.dropped)
            out.single(
                "understudy_agent_relay_room_keyframe_requests_total", "counter",
                "Keyframe requests received from the republish room.", c.keyframeRequests)
        }
        if let egress = lock.withLock({ audioEgress }) {
            let m = egress.metrics
            if egress.options.mixPath != nil {
                out.single(
                    "understudy_agent_mixed_audio_seconds", "gauge", "Seconds of mixed audio written (--mix-audio).",
                    m.mixedSeconds)
            }
            if let t = m.transcribe {
                out.single(
                    "understudy_agent_transcribe_frames_sent_total", "counter",
                    "PCM frames sent to the --transcribe socket.", t.sent)
                out.single(
                    "understudy_agent_transcribe_frames_dropped_total", "counter",
                    "PCM frames not sent because the --transcribe socket was down.", t.dropped)
                out.single(
                    "understudy_agent_transcribe_connects_total", "counter",
                    "Connections opened to the --transcribe socket (reconnections included).", t.connects)
            }
        }
        if let compositor = lock.withLock({ compositor }) {
            let c = compositor.stats
            out.single(
                "understudy_agent_composite_frames_total", "counter", "Composite frames encoded (--composite).",
                c.frames)
            out.single(
                "understudy_agent_composite_skipped_frames_total", "counter",
                "Composite frame times skipped because the compositor was behind.", c.skipped)
            out.single(
                "understudy_agent_composite_dropped_input_frames_total", "counter",
                "Received frames dropped by the composite's full hand-off.", c.droppedInput)
            out.single(
                "understudy_agent_composite_decode_errors_total", "counter",
                "Received frames the composite's decoders refused.", c.decodeErrors)
        }
        out.subscribeFeedback(room.subscribeFeedbackSent)
        out.trackQuality(room.receiveQuality())
        qualityMonitor?.render(into: &out)
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
        recorder.update { _ in }
        logStage()
        Task { [invites, room] in await invites?.listen(on: room) }
        reconcile()
    }

    public func onRoomLeft(reason: Understudy.LeaveReason) {
        // Before the join completes, start() reports the failure itself as one line.
        let wasJoined = lock.withLock {
            leftReason = reason
            return joined
        }
        if wasJoined { log("left room: \(reason.name) (\(reason.rawValue))") }
        runEnd.end()
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
        recorder.update { m in
            if let i = m.participants.firstIndex(where: { $0.id == participant.id }) {
                m.participants[i].leftAt = RecordingManifest.timestamp()
            }
        }
        logStage()
        reconcile()
    }

    public func onParticipantModeChanged(participantId: String, mode: Mode) {
        recorder.update { m in
            m.modeChanges?.append(
                .init(participantId: participantId, mode: mode.rawValue, at: RecordingManifest.timestamp()))
            if let i = m.participants.firstIndex(where: { $0.id == participantId }) {
                m.participants[i].mode = mode.rawValue
            }
        }
        log("mode of \(participantId) is now \(mode.rawValue)")
        logStage()
        reconcile()
    }

    public func onSpeakerChanged(participantId: String?) {
        lock.withLock { compositor }?.setActiveSpeaker(participantId)
    }

    public func onError(_ error: UnderstudyError) {
        let wasJoined = lock.withLock { () -> Bool in
            lastError = error
            return joined
        }
        if wasJoined { log("error \(error)") }
    }

    // MARK: Stage invites

    /// Counts an invite's outcome; a refusal goes into the manifest.
    private func inviteDecided(_ outcome: InviteResponder.Outcome) {
        switch outcome {
        case .accepted: counters.invite(accepted: true)
        case .refused:
            counters.invite(accepted: false)
            recorder.update { $0.refusedInvites = ($0.refusedInvites ?? 0) + 1 }
        case .unreadable: break
        }
    }
}

/// The agent's sink on one consumed track, on the subscribe loop thread: counts the frames, writes
/// them to the participant's recording and hands them to the RTP output and the republish room. No lock per frame.
private final class AgentTrackSink: RemoteTrackSink {
    private weak var agent: RoomAgent?
    /// Where the track records (nil: not recording); its file is asked for at the first frame.
    private let recorder: ParticipantRecorder?
    private let recordingKey: ParticipantRecorder.Key
    private var slot: ParticipantRecorder.Slot?
    private let rtpOutput: (RTPOutput, EventLoop)?
    private let republishRoom: RepublishRoom?
    /// The mix and transcription input of a consumed mic (nil: none).
    private let audioEgress: AudioEgress.Slot?
    /// The composite's input of a consumed webcam or screen share (nil: none).
    private let composite: Compositor.VideoSlot?

    init(
        agent: RoomAgent, recorder: ParticipantRecorder?, recordingKey: ParticipantRecorder.Key,
        rtpOutput: (RTPOutput, EventLoop)?, republishRoom: RepublishRoom?, audioEgress: AudioEgress.Slot?,
        composite: Compositor.VideoSlot?
    ) {
        self.composite = composite
        self.agent = agent
        self.recorder = recorder
        self.recordingKey = recordingKey
        self.rtpOutput = rtpOutput
        self.republishRoom = republishRoom
        self.audioEgress = audioEgress
    }

    func receive(_ frame: EncodedFrame, arrival: UInt64, track: RemoteTrack) {
        guard let agent else { return }
        agent.counters.received(frame)
        if let recorder {
            // No file operation here: the recorder opens the file on its own queue.
            if slot == nil { slot = recorder.slot(recordingKey, name: recordingKey.participantId) }
            slot?.write(frame, arrival: arrival)
        }
        agent.qualityMonitor?.submit(track.participantId, frame, arrival: arrival)
        if let (rtpOutput, rtpOutputLoop) = rtpOutput {
            // The RTP output's socket lives on its own loop.
            rtpOutputLoop.execute { rtpOutput.send(frame, arrival: arrival) }
        }
        republishRoom?.forward(track.participantId, frame)
        if let audioEgress {
            let synced = agent.senderClocks.audioTime(track.participantId, senderTime: track.senderTime)
            audioEgress.write(frame, arrival: arrival, synced: synced ?? 0)
        } else if track.kind == .video, let senderTime = track.senderTime {
            // The webcam sets the sender's clock mapping that its mic follows.
            agent.senderClocks.video(track.participantId, senderTime: senderTime, arrival: arrival)
        }
        composite?.write(frame)
    }

    func trackEnded(_ track: RemoteTrack) {
        if track.kind == .video { agent?.senderClocks.forget(track.participantId) }
        audioEgress?.end()
        composite?.end()
        agent?.trackEnded()
    }
}
