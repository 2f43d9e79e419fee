import Foundation
import RoomProtocol
import Signaling

/// A participant in the room: ``Room/localParticipant`` or one of ``Room/participants``.
///
/// State is updated on the room's ``Room/eventQueue`` and may be read from any thread.
public final class Participant: @unchecked Sendable {
    /// The participant id (the server's, once joined).
    public let id: String
    /// The name shown to others.
    public let displayName: String
    /// Whether this is the room's local participant.
    public let isLocal: Bool
    /// Whether this participant is an agent (the spec's `isAgent()`).
    public func isAgent() -> Bool { agent }
    private let agent: Bool
    /// The agent id of an agent participant (nil for others).
    public let agentId: String?
    /// The participant's `metaData` as JSON text (nil when none).
    public let metaDataJSON: String?

    weak var room: Room?
    private let lock = NSLock()
    private var _mode: Mode
    private var _micOn: Bool
    private var _webcamOn: Bool
    private var _streams: [String: MediaStream] = [:]
    private var _pinState = PinState(cam: false, share: false)
    private var _quality: VideoQuality?
    private var _shareQuality: VideoQuality?
    private var _viewPort: (width: Int, height: Int)?
    /// The webcam layer this device receives now (nil before the first, or after the stream ended).
    private var _receivedQuality: VideoQuality?
    private var _flashCaptureRunning = false
    private var listeners: [WeakParticipantListener] = []
    /// The webcam frames since the last keyframe, for ``captureImage(width:height:flash:)``.
    let captureFrames = CaptureFrameBuffer()
    /// The received screen share's picture size (stats).
    let sharePictureSize = PictureSizeTracker()
    /// The previous transport totals (``getTransportStats()`` bitrates).
    let transportSample = TransportSample()

    init(id: String, name: String, isLocal: Bool, json: JSONValue?) {
        self.id = id
        displayName = name
        self.isLocal = isLocal
        agent = json?["isAgent"]?.boolValue ?? false
        agentId = json?["agentId"]?.stringValue
        metaDataJSON = json?["metaData"].flatMap { $0.isNull ? nil : $0.jsonString }
        _mode = json?["mode"]?.stringValue.flatMap(Mode.init(rawValue:))?.canonical ?? .SEND_AND_RECV
        _micOn = json?["micEnabled"]?.boolValue ?? false
        _webcamOn = json?["camEnabled"]?.boolValue ?? false
    }

    /// The current mode.
    public var mode: Mode { lock.withLock { _mode } }
    /// Whether the mic is on (as announced by the room).
    public var micOn: Bool { lock.withLock { _micOn } }
    /// Whether the webcam is on (as announced by the room).
    public var webcamOn: Bool { lock.withLock { _webcamOn } }
    /// Streams that exist now, keyed by stream id (local: produced; remote: arriving on this device).
    public var streams: [String: MediaStream] { lock.withLock { _streams } }
    /// The room-wide pin state.
    public var pinState: PinState { lock.withLock { _pinState } }
    /// The preferred webcam quality this device set with ``setQuality(_:)``.
    public var videoQuality: VideoQuality? { lock.withLock { _quality } }
    /// The preferred screen-share quality this device set with ``setScreenShareQuality(_:)``.
    public var screenShareQuality: VideoQuality? { lock.withLock { _shareQuality } }

    func update(mode: Mode) { lock.withLock { _mode = mode } }
    func update(mic: Bool) { lock.withLock { _micOn = mic } }
    func update(webcam: Bool) { lock.withLock { _webcamOn = webcam } }
    func update(pin: PinState) { lock.withLock { _pinState = pin } }
    func addStream(_ s: MediaStream) { lock.withLock { _streams[s.id] = s } }
    func removeStream(id: String) -> MediaStream? {
        let removed = lock.withLock { _streams.removeValue(forKey: id) }
        // A stopped webcam leaves nothing to capture; a restarted one starts from its next keyframe.
        if removed?.kind == .video {
            captureFrames.clear()
            lock.withLock { _receivedQuality = nil }
        }
        if removed?.kind == .share { sharePictureSize.clear() }
        return removed
    }
    func setShareQuality(_ q: VideoQuality) { lock.withLock { _shareQuality = q } }
    /// The webcam view size this device set with ``setViewPort(width:height:)``.
    var viewPort: (width: Int, height: Int)? { lock.withLock { _viewPort } }

    /// The server made a new consumer of this participant's `kind`: this device's quality and view
    /// size choices apply to it as they did to the one it replaces. Off the event queue.
    func reapplyChoices(to kind: StreamKind) async {
        guard let room else { return }
        let (quality, shareQuality, viewPort) = lock.withLock { (_quality, _shareQuality, _viewPort) }
        let wire = kind == .share ? "screen" : "webcam"
        if let q = kind == .share ? shareQuality : quality {
            _ = try? await room.call(
                .setQuality, ["participantId": .string(id), "quality": .string(q.rawValue), "kind": .string(wire)])
        }
        if kind == .video, let viewPort {
            _ = try? await room.call(
                .setViewPort,
                [
                    "participantId": .string(id), "width": .number(Double(viewPort.width)),
                    "height": .number(Double(viewPort.height)),
                ])
        }
    }
    /// Claims the single flash capture slot; false when a flash capture is already running.
    func beginFlashCapture() -> Bool {
        lock.withLock {
            if _flashCaptureRunning { return false }
            _flashCaptureRunning = true
            return true
        }
    }
    func endFlashCapture() { lock.withLock { _flashCaptureRunning = false } }
    /// Whether a stream of `kind` exists now (local: produced; remote: arriving on this device).
    func hasStream(_ kind: StreamKind) -> Bool { lock.withLock { _streams.values.contains { $0.kind == kind } } }

    // MARK: Listeners

    /// Adds a listener, held weakly. Streams that already exist are not reported again; read ``streams``.
    public func addEventListener(_ listener: ParticipantEventListener) {
        lock.withLock {
            listeners.removeAll { $0.value == nil || $0.value === listener }
            listeners.append(WeakParticipantListener(value: listener))
        }
    }

    /// Removes a listener added with ``addEventListener(_:)``.
    public func removeEventListener(_ listener: ParticipantEventListener) {
        lock.withLock { listeners.removeAll { $0.value == nil || $0.value === listener } }
    }

    /// Removes every listener of this participant.
    public func removeAllEventListeners() { lock.withLock { listeners.removeAll() } }

    /// Takes over `other`'s listeners (the local participant object is replaced when the join finishes).
    func adoptListeners(from other: Participant) {
        guard other !== self else { return }
        let adopted = other.lock.withLock { other.listeners.filter { $0.value != nil } }
        lock.withLock {
            for l in adopted where !listeners.contains(where: { $0.value === l.value }) { listeners.append(l) }
        }
    }

    /// Live listeners (called on the event queue).
    var liveListeners: [ParticipantEventListener] { lock.withLock { listeners.compactMap(\.value) } }

    // MARK: Remote methods (docs/spec/participant-methods.md)

    /// Mic/cam moderation: remote participants only (the local one uses the Room's methods): 3068.
    private func moderate(_ api: String, _ method: RoomMethod) async throws {
        guard let room else { throw UnderstudyError(code: 3035, message: "\(api) called outside a room") }
        try room.gate(api)
        if isLocal {
            let roomMethod = ["enableMic": "unmuteMic", "disableMic": "muteMic"][api] ?? api
            throw UnderstudyError(
                code: 3068, message: "\(api) works only on remote participants; use Room.\(roomMethod)() for your own")
        }
        try await remoteCall(api, method, ["participantId": .string(id)], agentRefused: true)
    }

    private func remoteCall(_ api: String, _ method: RoomMethod, _ data: JSONValue, agentRefused: Bool) async throws {
        guard let room else { throw UnderstudyError(code: 3035, message: "\(api) called outside a room") }
        try await room.participantRequest(
            api: api, method: method, data: data, target: self, agentRefused: agentRefused)
    }

    /// Asks this remote participant to turn its mic on (it gets `onMicRequested`).
    /// - Throws: 3035/3065 (gating); 3068 on the local participant (use ``Room/unmuteMic()``) or an agent.
    public func enableMic() async throws {
        try await moderate("enableMic", .requestMic)
    }
    /// Asks this remote participant to turn its webcam on (it gets `onWebcamRequested`).
    /// - Throws: 3035/3065 (gating); 3068 on the local participant (use ``Room/enableCam()``) or an agent.
    public func enableCam() async throws {
        try await moderate("enableCam", .requestCam)
    }
    /// Turns this remote participant's mic off at once, without asking.
    /// - Throws: 3035/3065 (gating); 3068 on the local participant (use ``Room/muteMic()``) or an agent.
    public func disableMic() async throws {
        try await moderate("disableMic", .disableMic)
    }
    /// Turns this remote participant's webcam off at once, without asking.
    /// - Throws: 3035/3065 (gating); 3068 on the local participant (use ``Room/disableCam()``) or an agent.
    public func disableCam() async throws {
        try await moderate("disableCam", .disableCam)
    }
    /// Removes this participant from the room (it leaves with `REMOVE_PEER`).
    public func remove() async throws {
        try await remoteCall("remove", .remove, ["participantId": .string(id)], agentRefused: false)
    }
    /// Pins this participant for the whole room.
    public func pin(_ type: PinType = .SHARE_AND_CAM) async throws {
        try await remoteCall(
            "pin", .pin, ["participantId": .string(id), "pinType": .string(type.rawValue)], agentRefused: false)
    }
    /// Unpins this participant for the whole room.
    public func unpin(_ type: PinType = .SHARE_AND_CAM) async throws {
        try await remoteCall(
            "unpin", .unpin, ["participantId": .string(id), "pinType": .string(type.rawValue)], agentRefused: false)
    }
    /// Picks which simulcast layer of this participant's webcam this device receives.
    /// The choice survives the server re-creating the consumer (the publisher toggles its camera,
    /// stop/consume, a rejoin): the SDK applies it again to the new consumer.
    /// Does nothing for the local participant, or when ``videoQuality`` already is `quality` (seed
    /// 003; a re-created consumer gets the choice from the SDK anyway); throws 3068
    /// when this device receives no webcam video from the participant (or it is an agent).
    /// `onVideoQualityChanged` reports what is received, when the server switches layers (not the
    /// request): nothing when the publisher sends one layer.
    public func setQuality(_ quality: VideoQuality) async throws {
        guard let room else { throw UnderstudyError(code: 3035, message: "setQuality called outside a room") }
        try room.gate("setQuality")
        if agent { throw UnderstudyError(code: 3068, message: "setQuality is not supported on an agent participant") }
        if isLocal || videoQuality == quality { return }
        _ = try await room.call(
            .setQuality,
            ["participantId": .string(id), "quality": .string(quality.rawValue), "kind": "webcam"])
        lock.withLock { _quality = quality }
    }

    /// On the event queue: the server now forwards `quality` of this participant's webcam
    /// (`consumerLayerChanged`). A change from what was received before is reported to the listeners;
    /// the first layer of a new consumer is not a change.
    func receivedLayer(_ quality: VideoQuality) {
        let previous: VideoQuality? = lock.withLock {
            defer { _receivedQuality = quality }
            return _receivedQuality
        }
        guard let previous, previous != quality else { return }
        for l in liveListeners {
            l.onVideoQualityChanged(participantId: id, prevQuality: previous, currentQuality: quality)
        }
    }
    /// Tells the server the size (pixels) at which this participant's webcam is shown.
    /// - Throws: 3068 for the local participant or when this device receives no webcam video from
    ///   it; 3073 for a size that is not positive.
    public func setViewPort(width: Int, height: Int) async throws {
        if isLocal, let room {
            try room.gate("setViewPort")
            throw UnderstudyError(code: 3068, message: "setViewPort works only on remote participants")
        }
        try await remoteCall(
            "setViewPort", .setViewPort,
            ["participantId": .string(id), "width": .number(Double(width)), "height": .number(Double(height))],
            agentRefused: false)
        lock.withLock { _viewPort = (width, height) }
    }
    /// Starts receiving this participant's mic on this device (autoConsume off; no-op otherwise).
    public func consumeMicStreams() async throws { try await consume("consumeMicStreams", .consume, "mic") }
    /// Starts receiving this participant's webcam on this device (autoConsume off; no-op otherwise).
    public func consumeWebcamStreams() async throws { try await consume("consumeWebcamStreams", .consume, "webcam") }
    /// Stops receiving this participant's mic on this device only.
    public func stopConsumingMicStreams() async throws {
        try await consume("stopConsumingMicStreams", .stopConsuming, "mic")
    }
    /// Stops receiving this participant's webcam on this device only.
    public func stopConsumingWebcamStreams() async throws {
        try await consume("stopConsumingWebcamStreams", .stopConsuming, "webcam")
    }

    private func consume(_ api: String, _ method: RoomMethod, _ kind: String) async throws {
        guard let room else { throw UnderstudyError(code: 3035, message: "\(api) called outside a room") }
        await room.awaitJoinIfConnecting()
        try room.gate(api)
        if room.autoConsume { return }
        try await remoteCall(api, method, ["participantId": .string(id), "kind": .string(kind)], agentRefused: false)
    }

    // MARK: Stats

    /// Per-layer webcam metrics since the previous sample (nil when not joined or reconnecting).
    public func getVideoStats() -> [[String: Any]]? { room?.stats(for: self, kind: .video) }
    /// Mic metrics since the previous sample (nil when not joined or reconnecting).
    public func getAudioStats() -> [[String: Any]]? { room?.stats(for: self, kind: .audio) }
    /// Screen-share metrics; throws 3068 on an agent.
    public func getShareStats() throws -> [[String: Any]]? {
        if agent { throw UnderstudyError(code: 3068, message: "getShareStats is not supported on an agent") }
        return room?.stats(for: self, kind: .share)
    }
    /// Transport totals and bitrates; waits for the server (call off the event queue).
    public func getTransportStats() -> [String: Any]? { room?.transportStats(for: self) }
}

struct WeakParticipantListener {
    weak var value: ParticipantEventListener?
}
