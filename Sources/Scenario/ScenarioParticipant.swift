import Agent
import Foundation
import Media
import RTCWire
import Signaling
import Understudy

/// The step that is running, read by bots to stamp the events they receive.
// Safe: the current step is guarded by `lock`.
final class StepClock: @unchecked Sendable {
    private let lock = NSLock()
    private var step = 0
    var current: Int {
        get { lock.withLock { step } }
        set { lock.withLock { step = newValue } }
    }
}

/// A scenario participant: one SDK ``Room`` per join, an event log, the stage and audience lists it
/// rebuilds on every mode change (docs/spec/change-mode.md), its consume policy and optional recordings.
///
/// Threading: SDK callbacks arrive on the room's event queue and frames on the subscribe loop thread;
/// everything the runner reads is guarded by `lock`.
// Safe: everything the runner reads is guarded by `lock` (see above); frames arrive on one loop.
final class ScenarioParticipant: RoomEventListener, ParticipantEventListener, PubSubMessageListener, @unchecked Sendable
{
    let spec: ParticipantSpec
    private let clock: StepClock
    private let log: @Sendable (String) -> Void
    private let lock = NSLock()
    private var _room: Room?
    private var _events: [ParticipantEvent] = []
    private var _stage: [String] = []
    private var _audience: [String] = []
    private var _joined = false
    /// Follows every stage invite when `acceptInvites` (set once in `init`).
    private var invites: InviteResponder?
    /// Kinds consumed per participant id under the `stage`/`all` policy.
    private var _consumed: [String: Set<MediaKind>] = [:]
    private var received: [String: (video: Int, audio: Int)] = [:]
    /// The recordings (one WebM per peer), opened off the loop; nil when the bot does not record.
    private let recorder: ParticipantRecorder?
    /// Each recorded peer's slot, looked up on the frame path.
    private var slots: [String: ParticipantRecorder.Slot] = [:]
    private var _recordingErrors: [String] = []
    /// Set once the recordings are closed: a frame still in flight must not touch them.
    private var closed = false

    init(spec: ParticipantSpec, clock: StepClock, recordDirectory: String?, log: @escaping @Sendable (String) -> Void) {
        self.spec = spec
        self.clock = clock
        self.log = log
        if spec.record, let recordDirectory {
            let recorder = ParticipantRecorder(
                directory: recordDirectory, format: .webm, writesManifest: false,
                manifest: RecordingManifest(room: "", recordFormat: RoomAgent.RecordFormat.webm.rawValue),
                log: { [id = spec.id] in log("\(id): \($0)") })
            self.recorder = recorder
            var hooks = ParticipantRecorder.Hooks()
            // Noted from the recorder's queue: shutdown() never holds the bot's lock while it waits.
            hooks.cannotOpen = { [weak self] key, error in
                self?.noteRecordingError("cannot record \(key.participantId): \(error)")
            }
            hooks.diskFailed = { [weak self] key, error, inFile in
                self?.noteRecordingError(
                    "recording \(key.participantId) failed: \(error) (\(inFile.video) video, \(inFile.audio) audio frames in the file)"
                )
            }
            hooks.closeFailed = { [weak self] key, error in
                self?.noteRecordingError("closing \(key.participantId): \(error)")
            }
            recorder.observe(hooks)
        } else {
            recorder = nil
        }
        if spec.acceptInvites {
            let id = spec.id
            invites = InviteResponder(policy: .yes, log: { log("\(id): \($0)") }) { [weak self] message, _ in
                self?.noteMessage(message)
            }
        }
    }

    var id: String { spec.id }
    var room: Room? { lock.withLock { _room } }
    /// In the room now (joined and not yet left or removed).
    var isJoined: Bool { lock.withLock { _joined } }
    var inviteReady: Bool { invites?.isListening ?? false }
    var events: [ParticipantEvent] { lock.withLock { _events } }
    var stage: [String] { lock.withLock { _stage } }
    var audience: [String] { lock.withLock { _audience } }
    var recordingErrors: [String] { lock.withLock { _recordingErrors } }
    var recordingPaths: [String: String] {
        var paths: [String: String] = [:]
        for (key, rec) in recorder?.recordings ?? [:] { paths[key.participantId] = rec.path }
        return paths
    }

    /// Frames from `participant` of `kind`: those written when recording, else those received.
    func frames(from participant: String, kind: FrameKind) -> Int {
        lock.withLock {
            let counts: (video: Int, audio: Int)
            if slots[participant] != nil {
                // Recorded: what is in the file (nothing while it opens).
                let rec = recorder?.recording(ParticipantRecorder.Key(participantId: participant, kind: nil))
                counts = (rec?.videoFrames ?? 0, rec?.audioFrames ?? 0)
            } else {
                counts = received[participant] ?? (0, 0)
            }
            switch kind {
            case .video: return counts.video
            case .audio: return counts.audio
            case .any: return counts.video + counts.audio
            }
        }
    }

    // MARK: Actions

    /// Creates a fresh room and joins it; returns once joined, invites are listened for and the
    /// bot's topics are subscribed.
    func join(roomId: String, token: String, url: String, mode: Mode?, video: String?, audio: String?) async throws {
        guard !isJoined else { throw ScenarioStepError.alreadyJoined(id) }
        let video = video ?? spec.video
        let audio = audio ?? spec.audio
        let room = try Understudy.createRoom(
            roomId: roomId, token: token, participantName: spec.displayName, participantId: spec.id,
            micEnabled: audio != "none", camEnabled: video != "none", mode: mode ?? spec.mode,
            multiStream: spec.multiStream, autoConsume: spec.consume == .auto, signalingBaseUrl: url)
        // Nil for the synthetic pair: the SDK's default sources.
        room.mediaSourceFactory = try LocalSources.factory(
            video: video == "testsrc" ? nil : video, audio: audio == "tone" ? nil : audio)
        room.impairment = spec.impairment
        room.addEventListener(self)
        room.onFrame = { [weak self] id, kind, frame, arrival in self?.frame(id, kind, frame, arrival) }
        lock.withLock {
            _room = room
            _consumed = [:]
        }
        await room.join()
        guard room.state == .CONNECTED else {
            let why = events.last { $0.name == .error }.map { " (\($0))" } ?? ""
            throw ScenarioStepError.joinFailed(bot: id, detail: "state \(room.state?.rawValue ?? "none")\(why)")
        }
        for topic in spec.subscribe { try await room.pubSub.subscribe(topic: topic, listener: self) }
    }

    func leave() async throws {
        guard let room, isJoined else { throw ScenarioStepError.notInRoom(id) }
        await room.leave()
    }

    func requireRoom() throws -> Room {
        guard let room, isJoined else { throw ScenarioStepError.notInRoom(id) }
        return room
    }

    func remote(_ participant: String) throws -> Participant {
        let room = try requireRoom()
        guard let p = room.participants[participant] else {
            throw ScenarioStepError.participantNotSeen(bot: id, participant: participant)
        }
        return p
    }

    func subscribe(topic: String) async throws {
        try await requireRoom().pubSub.subscribe(topic: topic, listener: self)
    }

    private func noteRecordingError(_ text: String) { lock.withLock { _recordingErrors.append(text) } }

    /// Leaves if still in the room and closes the recordings.
    func shutdown() async {
        if isJoined, let room { await room.leave() }
        room?.onFrame = nil
        // No frame writes after this (the frame path checks it under the lock, and writes under it).
        lock.withLock { closed = true }
        await recorder?.close()
    }

    // MARK: State

    private func note(
        _ name: EventName, participant: String? = nil, mode: Mode? = nil, kind: String? = nil,
        topic: String? = nil, message: String? = nil, reason: String? = nil, code: Int? = nil
    ) {
        let event = ParticipantEvent(
            name: name, step: clock.current,
            details: EventDetails(
                participant: participant, mode: mode, kind: kind, topic: topic, message: message, reason: reason,
                code: code))
        lock.withLock { _events.append(event) }
        log("\(id): \(event)")
    }

    /// Re-derives both lists from the current participants (docs/spec/change-mode.md: rebuild stage *and* audience).
    private func rebuildLists() {
        guard let room else { return }
        let everyone = [room.localParticipant] + Array(room.participants.values)
        let stage = everyone.filter { $0.mode.canonical == .SEND_AND_RECV }.map(\.id).sorted()
        let audience = everyone.filter { $0.mode.canonical == .RECV_ONLY }.map(\.id).sorted()
        lock.withLock {
            _stage = stage
            _audience = audience
        }
    }

    /// The shared consume rule for the bot's `stage`/`all` policy (nil: `auto`/`manual`).
    private var consumePolicy: ConsumePolicy? {
        switch spec.consume {
        case .stage: .stage
        case .all: .all
        case .auto, .manual: nil
        }
    }

    /// Brings consumption in line with the bot's `stage`/`all` policy.
    private func reconcile() {
        guard let policy = consumePolicy, let room, isJoined else { return }
        let remote = room.participants
        let wanted = policy.wanted(
            remote.values.map { ConsumePolicy.Candidate(id: $0.id, onStage: $0.mode.canonical == .SEND_AND_RECV) },
            kinds: [.audio, .video], maxVideo: nil)
        let changes: [(Participant, start: Set<MediaKind>, stop: Set<MediaKind>)] = lock.withLock {
            // Those who left need no stopConsuming: the server closed their consumers.
            _consumed = _consumed.filter { remote[$0.key] != nil }
            var changes: [(Participant, Set<MediaKind>, Set<MediaKind>)] = []
            for p in remote.values {
                let have = _consumed[p.id] ?? []
                let want = wanted[p.id] ?? []
                guard have != want else { continue }
                changes.append((p, want.subtracting(have), have.subtracting(want)))
                _consumed[p.id] = want.isEmpty ? nil : want
            }
            return changes
        }
        for (p, start, stop) in changes {
            Task {
                do {
                    if start.contains(.audio) { try await p.consumeMicStreams() }
                    if start.contains(.video) { try await p.consumeWebcamStreams() }
                } catch { self.log("\(self.id): consuming \(p.id) failed: \(error)") }
                do {
                    if stop.contains(.audio) { try await p.stopConsumingMicStreams() }
                    if stop.contains(.video) { try await p.stopConsumingWebcamStreams() }
                } catch { self.log("\(self.id): stopping \(p.id) failed: \(error)") }
            }
        }
    }

    private func frame(_ peer: String, _ kind: MediaKind, _ frame: EncodedFrame, _ arrival: UInt64) {
        lock.withLock {
            var counts = received[peer] ?? (0, 0)
            if kind == .video { counts.video += 1 } else { counts.audio += 1 }
            received[peer] = counts
            guard let recorder, !closed else { return }
            if slots[peer] == nil {
                // The agents' naming: distinct peers never share (or truncate) a file (issue 31 item 2).
                slots[peer] = recorder.slot(.init(participantId: peer, kind: nil), name: peer)
            }
            slots[peer]?.write(frame, arrival: arrival)
        }
    }

    // MARK: RoomEventListener

    func onRoomJoined() {
        guard let room else { return }
        lock.withLock { _joined = true }
        room.localParticipant.addEventListener(self)
        for p in room.participants.values { p.addEventListener(self) }
        rebuildLists()
        note(.roomJoined, participant: room.localParticipant.id, mode: room.localParticipant.mode.canonical)
        reconcile()
        // docs/spec/change-mode.md step 3: subscribe to our own invite topic once joined; an invite changes our mode.
        if let invites { Task { await invites.listen(on: room) } }
    }

    func onRoomLeft(reason: LeaveReason) {
        invites?.roomLeft()
        lock.withLock {
            _joined = false
            _stage = []
            _audience = []
        }
        note(.roomLeft, reason: reason.name)
    }

    func onRoomStateChanged(_ state: RoomState) { note(.roomStateChanged, reason: state.rawValue) }

    func onParticipantJoined(_ participant: Participant) {
        participant.addEventListener(self)
        rebuildLists()
        note(.participantJoined, participant: participant.id, mode: participant.mode.canonical)
        reconcile()
    }

    func onParticipantLeft(_ participant: Participant, reason: LeaveReason) {
        rebuildLists()
        note(.participantLeft, participant: participant.id, reason: reason.name)
        reconcile()
    }

    func onParticipantModeChanged(participantId: String, mode: Mode) {
        rebuildLists()
        note(.participantModeChanged, participant: participantId, mode: mode.canonical)
        reconcile()
    }

    func onMicRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void
    ) {
        note(.micRequested, participant: participantId)
        accept()
    }

    func onWebcamRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void
    ) {
        note(.webcamRequested, participant: participantId)
        accept()
    }

    func onPinStateChanged(participantId: String, pinState: PinState) {
        let kind =
            pinState.cam && pinState.share ? "SHARE_AND_CAM" : pinState.cam ? "CAM" : pinState.share ? "SHARE" : "none"
        note(.pinStateChanged, participant: participantId, kind: kind)
    }

    func onSpeakerChanged(participantId: String?) { note(.speakerChanged, participant: participantId) }
    func onPresenterChanged(participantId: String?) { note(.presenterChanged, participant: participantId) }

    func onError(_ error: UnderstudyError) {
        note(.error, message: error.message, reason: error.name, code: error.code)
    }

    // MARK: ParticipantEventListener

    func onStreamEnabled(_ stream: MediaStream, participant: Participant) {
        note(.streamEnabled, participant: participant.id, kind: stream.kind.rawValue)
    }

    func onStreamDisabled(_ stream: MediaStream, participant: Participant) {
        note(.streamDisabled, participant: participant.id, kind: stream.kind.rawValue)
    }

    func onMediaStatusChanged(peerId: String, kind: StreamKind, newStatus: MediaStatus) {
        note(.mediaStatusChanged, participant: peerId, kind: kind.rawValue, reason: newStatus.rawValue)
    }

    // MARK: PubSubMessageListener

    func onMessageReceived(_ message: PubSubMessage) { noteMessage(message) }

    /// A message on one of the bot's topics (its invite topic included) is an event.
    private func noteMessage(_ message: PubSubMessage) {
        note(.message, participant: message.senderId, topic: message.topic, message: message.message)
    }

    /// Waits until this bot has finished answering the invites it received so far: a scenario's
    /// next mode or media step on it comes after its answer, not into the middle of it (which the
    /// SDK refuses with 3055 while the invite's publish is still connecting on a busy machine).
    func finishInviteResponses() async { await invites?.finishAnswers() }
}

/// A step that could not be carried out.
/// Why a scenario step failed; the description is the line the report shows.
enum ScenarioStepError: Error, CustomStringConvertible {
    /// The step names a bot the scenario does not declare.
    case unknownBot(String)
    /// The bot must be in the room for this step.
    case notInRoom(String)
    /// The bot joined already.
    case alreadyJoined(String)
    /// The join failed: `detail` says how far it got, `cause` is the error underneath when there is one.
    case joinFailed(bot: String, detail: String, cause: (any Error)? = nil)
    /// The bot does not see `participant` in the room.
    case participantNotSeen(bot: String, participant: String)
    /// The step has no meaning for this kind of room.
    case notSupported(String)
    /// An expectation did not hold in time (`why`: the last reason it did not).
    case timedOut(String)
    /// The wait was cancelled before it could decide (`why`: the last reason).
    case cancelled(String)
    /// The step needs at least one bot in the room.
    case noBotJoined

    var description: String {
        switch self {
        case .unknownBot(let id): "unknown bot '\(id)'"
        case .notInRoom(let id): "\(id) is not in the room"
        case .alreadyJoined(let id): "\(id) is already in the room"
        case .joinFailed(let id, let detail, let cause):
            "\(id) could not join: \(detail)" + (cause.map { "\($0)" } ?? "")
        case .participantNotSeen(let id, let participant): "\(id) does not see participant '\(participant)' in the room"
        case .notSupported(let what): what
        case .timedOut(let why): "timed out: \(why)"
        case .cancelled(let why): why
        case .noBotJoined: "no bot is in the room"
        }
    }
}
