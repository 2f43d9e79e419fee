import RTCWire

/// Room events. Every method has a no-op default. Events are delivered on the room's serial
/// ``Room/eventQueue``, one at a time, in the order the room's state changed.
public protocol RoomEventListener: AnyObject {
    /// The local participant joined the room (after ``Room/join()``).
    func onRoomJoined()
    /// The local participant left the room, for `reason`; no event of this room follows.
    func onRoomLeft(reason: LeaveReason)
    /// A remote participant joined (or was already there when this one joined).
    func onParticipantJoined(_ participant: Participant)
    /// A remote participant left, for `reason`.
    func onParticipantLeft(_ participant: Participant, reason: LeaveReason)
    /// A participant (the local one included) changed its ``Mode``.
    func onParticipantModeChanged(participantId: String, mode: Mode)
    /// The connection state changed (``RoomState``).
    func onRoomStateChanged(_ state: RoomState)
    /// A moderator (`participantId`) asks the local participant to turn its mic on; call `accept` to do so or `reject`.
    func onMicRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void)
    /// A moderator (`participantId`) asks the local participant to turn its webcam on; call `accept` to do so or `reject`.
    func onWebcamRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void)
    /// A participant's room-wide pin state changed.
    func onPinStateChanged(participantId: String, pinState: PinState)
    /// The active speaker changed (nil: nobody speaks).
    func onSpeakerChanged(participantId: String?)
    /// Who shares a screen changed (nil: nobody).
    func onPresenterChanged(participantId: String?)
    /// The video codecs every receiver in the room accepts changed (``Room/roomVideoCodecs``).
    func onRoomVideoCodecsChanged(_ codecs: [MediaCodec])
    /// Someone (`participantId`, `name`) waits in the lobby; call `allow` or `deny` (needs `allow_join`).
    func onEntryRequested(
        participantId: String, name: String, allow: @escaping @Sendable () -> Void, deny: @escaping @Sendable () -> Void
    )
    /// A lobby request was decided (or withdrawn).
    func onEntryResponded(participantId: String, decision: EntryDecision)
    /// An error the room reports outside a call that throws (e.g. a failed publish at join).
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
    public func onRoomVideoCodecsChanged(_ codecs: [MediaCodec]) {}
    public func onEntryRequested(
        participantId: String, name: String, allow: @escaping @Sendable () -> Void, deny: @escaping @Sendable () -> Void
    ) {}
    public func onEntryResponded(participantId: String, decision: EntryDecision) {}
    public func onError(_ error: UnderstudyError) {}
}

/// A participant's events, delivered on the room's ``Room/eventQueue``. Participants hold these
/// listeners weakly.
public protocol ParticipantEventListener: AnyObject {
    /// One of the participant's streams started (local: produced; remote: received on this device).
    func onStreamEnabled(_ stream: MediaStream, participant: Participant)
    /// One of the participant's streams ended.
    func onStreamDisabled(_ stream: MediaStream, participant: Participant)
    /// The participant turned its mic or webcam on or off (room-wide status, whether or not this device receives it).
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
    /// A message was published on a subscribed topic.
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
