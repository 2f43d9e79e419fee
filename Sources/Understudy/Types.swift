import Foundation
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
    /// The publisher's payload, untouched, as JSON text (nil when none was sent).
    public var payloadJSON: String?
    public var sendOnly: [String]

    /// The publisher's payload as the spec shapes it (`[String: Any]?`), parsed from ``payloadJSON``.
    public var payload: [String: Any]? {
        guard let payloadJSON, let data = payloadJSON.data(using: .utf8) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}

/// How a room rides out a lost signalling connection (room-api.md §2): it stays `RECONNECTING`
/// (every action but `leave()` refused with 3065) and rejoins with exponential backoff and jitter
/// until a rejoin succeeds or `window` seconds have passed since the connection dropped; then it
/// goes `FAILED` and leaves with `WEBSOCKET_CONNECTION_ATTEMPTS_EXHAUSTED` (1102).
public struct ReconnectPolicy: Sendable, Hashable {
    /// How long to keep trying, in seconds (0 disables reconnection).
    public var window: Double
    /// The pause before the first attempt, in seconds; each later pause doubles, up to `maxDelay`.
    public var initialDelay: Double
    /// The longest pause between two attempts, in seconds.
    public var maxDelay: Double
    /// Each pause is scaled by a random factor in `1 ± jitter`, so that many clients cut off by one
    /// server restart do not all come back in the same instant.
    public var jitter: Double
    /// An optional cap on the number of attempts (nil: as many as fit in `window`).
    public var maxAttempts: Int?

    public init(
        window: Double, initialDelay: Double = 0.5, maxDelay: Double = 5, jitter: Double = 0.2,
        maxAttempts: Int? = nil
    ) {
        self.window = max(0, window)
        self.initialDelay = max(0, initialDelay)
        self.maxDelay = max(self.initialDelay, maxDelay)
        self.jitter = min(max(0, jitter), 1)
        self.maxAttempts = maxAttempts
    }

    /// The SDK's default: 30 seconds, enough for a server restart or a short network outage.
    public static let `default` = ReconnectPolicy(window: 30)
    /// No reconnection: a lost connection ends the room with `WEBSOCKET_DISCONNECTED` (1001).
    public static let disabled = ReconnectPolicy(window: 0)

    /// The pause before attempt `attempt` (0-based), jitter applied.
    func delay(beforeAttempt attempt: Int) -> Double {
        let base = min(maxDelay, initialDelay * pow(2, Double(min(attempt, 30))))
        return base * Double.random(in: (1 - jitter)...(1 + jitter))
    }
}
