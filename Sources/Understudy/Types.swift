import RTCWire

/// A participant's mode: what it may publish and receive.
public enum Mode: String, Sendable, Hashable, CaseIterable {
    case SEND_AND_RECV
    case RECV_ONLY
    case SIGNALLING_ONLY
    /// Deprecated alias of `SEND_AND_RECV`.
    case CONFERENCE
    /// Deprecated alias of `SIGNALLING_ONLY`.
    case VIEWER

    /// The mode this one stands for, with the deprecated aliases resolved.
    public var canonical: Mode {
        switch self {
        case .CONFERENCE: return .SEND_AND_RECV
        case .VIEWER: return .SIGNALLING_ONLY
        default: return self
        }
    }
}

/// The connection state reported by `onRoomStateChanged`.
public enum RoomState: String, Sendable, Hashable {
    case CONNECTING, CONNECTED, RECONNECTING, FAILED, DISCONNECTED
}

/// The kind of a participant's stream.
public enum StreamKind: String, Sendable, Hashable {
    case audio, video, share, shareAudio

    /// The room protocol's track kind.
    var wireKind: String {
        switch self {
        case .audio: return "mic"
        case .video: return "webcam"
        case .share: return "screen"
        case .shareAudio: return "screenAudio"
        }
    }

    init?(wire: String) {
        switch wire {
        case "mic", "audio": self = .audio
        case "webcam", "video": self = .video
        case "screen", "share": self = .share
        case "screenAudio", "shareAudio": self = .shareAudio
        default: return nil
        }
    }
}

/// One media stream of a participant (local: produced; remote: received on this device).
public struct MediaStream: Sendable, Hashable {
    /// The producer id on the server.
    public var id: String
    public var kind: StreamKind
    public var participantId: String
}

/// Whether a participant's mic or webcam is on (`onMediaStatusChanged`).
public enum MediaStatus: String, Sendable, Hashable { case on, off }

/// What `pin()`/`unpin()` applies to.
public enum PinType: String, Sendable, Hashable { case SHARE_AND_CAM, CAM, SHARE }

/// A participant's room-wide pin state.
public struct PinState: Sendable, Hashable {
    public var cam: Bool
    public var share: Bool
}

/// The simulcast layer this device prefers for a remote webcam.
public enum VideoQuality: String, Sendable, Hashable { case low, medium, high }

/// A lobby decision (`onEntryResponded`).
public enum EntryDecision: String, Sendable, Hashable { case allowed, denied, withdrawn }

/// A PubSub message.
public struct PubSubMessage: Sendable, Hashable {
    public var id: String
    public var topic: String
    public var message: String
    public var senderId: String
    public var senderName: String
    /// Milliseconds since 1970.
    public var timestamp: Int
    /// The publisher's payload, untouched (nil when none was sent).
    public var payloadJSON: String?
    public var sendOnly: [String]
}
