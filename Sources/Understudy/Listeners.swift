import RTCWire

/// Room events. Every method has a no-op default. Events are delivered on the room's serial
/// ``Room/eventQueue``, one at a time, in the order the room's state changed.
public protocol RoomEventListener: AnyObject {
    func onRoomJoined()
    func onRoomLeft(reason: LeaveReason)
    func onParticipantJoined(_ participant: Participant)
    func onParticipantLeft(_ participant: Participant, reason: LeaveReason)
    func onParticipantModeChanged(participantId: String, mode: Mode)
    func onRoomStateChanged(_ state: RoomState)
    func onMicRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void)
    func onWebcamRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void)
    func onPinStateChanged(participantId: String, pinState: PinState)
    func onSpeakerChanged(participantId: String?)
    func onPresenterChanged(participantId: String?)
    func onEntryRequested(
        participantId: String, name: String, allow: @escaping @Sendable () -> Void, deny: @escaping @Sendable () -> Void
    )
    func onEntryResponded(participantId: String, decision: EntryDecision)
    func onError(_ error: UnderstudyError)
}

extension RoomEventListener {
    public func onRoomJoined() {}
    public func onRoomLeft(reason: LeaveReason) {}
    public func onParticipantJoined(_ participant: Participant) {}
    public func onParticipantLeft(_ participant: Participant, reason: LeaveReason) {}
    public func onParticipantModeChanged(participantId: String, mode: Mode) {}
    public func onRoomStateChanged(_ state: RoomState) {}
    public func onMicRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void
    ) {}
    public func onWebcamRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void
    ) {}
    public func onPinStateChanged(participantId: String, pinState: PinState) {}
    public func onSpeakerChanged(participantId: String?) {}
    public func onPresenterChanged(participantId: String?) {}
    public func onEntryRequested(
        participantId: String, name: String, allow: @escaping @Sendable () -> Void, deny: @escaping @Sendable () -> Void
    ) {}
    public func onEntryResponded(participantId: String, decision: EntryDecision) {}
    public func onError(_ error: UnderstudyError) {}
}

/// A participant's events, delivered on the room's ``Room/eventQueue``. Participants hold these
/// listeners weakly.
public protocol ParticipantEventListener: AnyObject {
    func onStreamEnabled(_ stream: MediaStream, participant: Participant)
    func onStreamDisabled(_ stream: MediaStream, participant: Participant)
    func onMediaStatusChanged(peerId: String, kind: StreamKind, newStatus: MediaStatus)
    /// The webcam quality this device receives from the participant changed (after ``Participant/setQuality(_:)``).
    func onVideoQualityChanged(participantId: String, prevQuality: VideoQuality, currentQuality: VideoQuality)
}

extension ParticipantEventListener {
    public func onStreamEnabled(_ stream: MediaStream, participant: Participant) {}
    public func onStreamDisabled(_ stream: MediaStream, participant: Participant) {}
    public func onMediaStatusChanged(peerId: String, kind: StreamKind, newStatus: MediaStatus) {}
    public func onVideoQualityChanged(participantId: String, prevQuality: VideoQuality, currentQuality: VideoQuality) {}
}

/// PubSub deliveries for a topic, on the room's ``Room/eventQueue``.
public protocol PubSubMessageListener: AnyObject {
    func onMessageReceived(_ message: PubSubMessage)
    /// Stored history, oldest first, in batches; only the last batch has `isLast == true`.
    func onOldMessagesReceived(_ messages: [PubSubMessage], isLast: Bool)
}

extension PubSubMessageListener {
    public func onOldMessagesReceived(_ messages: [PubSubMessage], isLast: Bool) {}
}

/// Where received media goes: `(participantId, kind, frame, arrival monotonic ns)`, called on the
/// subscribe connection's event-loop thread (so a `Streaming.Recording` may be written directly).
public typealias RoomFrameHandler = @Sendable (String, MediaKind, EncodedFrame, UInt64) -> Void
