import RTCWire
import RoomProtocol

/// A participant's mode: what it may publish and receive.
public enum Mode: String, Sendable, Hashable, CaseIterable {
    /// Publishes and receives media (on stage).
    case SEND_AND_RECV
    /// Receives media, publishes none (audience).
    case RECV_ONLY
    /// Neither publishes nor receives media: signalling, PubSub and events only.
    case SIGNALLING_ONLY
    /// Deprecated alias of `SEND_AND_RECV`.
    case CONFERENCE
    /// Deprecated alias of `SIGNALLING_ONLY`.
    case VIEWER

    /// The mode this one stands for, with the deprecated aliases resolved.
    public var canonical: Mode { Mode(participantMode) }

    /// The room protocol's mode (the wire name is its raw value).
    var participantMode: ParticipantMode {
        switch self {
        case .SEND_AND_RECV, .CONFERENCE: return .sendAndRecv
        case .RECV_ONLY: return .recvOnly
        case .SIGNALLING_ONLY, .VIEWER: return .signallingOnly
        }
    }

    init(_ mode: ParticipantMode) {
        switch mode {
        case .sendAndRecv: self = .SEND_AND_RECV
        case .recvOnly: self = .RECV_ONLY
        case .signallingOnly: self = .SIGNALLING_ONLY
        }
    }

    /// Reads a wire name, the deprecated aliases resolved; nil for anything else.
    init?(wireName: String) {
        guard let mode = ParticipantMode(wireName: wireName) else { return nil }
        self.init(mode)
    }
}

/// The connection state reported by `onRoomStateChanged`.
public enum RoomState: String, Sendable, Hashable {
    /// ``Room/join()`` is connecting and joining.
    case CONNECTING
    /// Joined; requests and media flow.
    case CONNECTED
    /// The connection dropped and is being restored (requests throw 3065 meanwhile).
    case RECONNECTING
    /// The join or the reconnection failed; `DISCONNECTED` follows.
    case FAILED
    /// The room was left; final.
    case DISCONNECTED
}

/// The kind of a participant's stream.
public enum StreamKind: String, Sendable, Hashable {
    /// The microphone.
    case audio
    /// The webcam.
    case video
    /// A screen share's video.
    case share
    /// A screen share's audio.
    case shareAudio

    /// The room protocol's track kind.
    var trackKind: TrackKind {
        switch self {
        case .audio: return .mic
        case .video: return .webcam
        case .share: return .screen
        case .shareAudio: return .screenAudio
        }
    }

    /// The room protocol's name of the track kind.
    var wireKind: String { trackKind.rawValue }

    init(_ kind: TrackKind) {
        switch kind {
        case .mic: self = .audio
        case .webcam: self = .video
        case .screen: self = .share
        case .screenAudio: self = .shareAudio
        }
    }

    /// Reads a wire name (the stream kinds' own names are aliases); nil for anything else.
    init?(wire: String) {
        guard let kind = TrackKind(wireName: wire) else { return nil }
        self.init(kind)
    }
}

/// One media stream of a participant (local: produced; remote: received on this device).
public struct MediaStream: Sendable, Hashable {
    /// The producer id on the server.
    public var id: String
    /// What the stream carries.
    public var kind: StreamKind
    /// Whose stream it is.
    public var participantId: String
}

/// Whether a participant's mic or webcam is on (`onMediaStatusChanged`).
public enum MediaStatus: String, Sendable, Hashable {
    /// The device is on.
    case on
    /// The device is off.
    case off
}

/// What `pin()`/`unpin()` applies to.
public enum PinType: String, Sendable, Hashable {
    /// The webcam and the screen share.
    case SHARE_AND_CAM
    /// The webcam only.
    case CAM
    /// The screen share only.
    case SHARE
}

/// A participant's room-wide pin state.
public struct PinState: Sendable, Hashable {
    /// Whether the webcam is pinned.
    public var cam: Bool
    /// Whether the screen share is pinned.
    public var share: Bool
}

/// The simulcast layer this device prefers for a remote webcam.
public enum VideoQuality: String, Sendable, Hashable {
    /// The lowest simulcast layer.
    case low
    /// The middle layer.
    case medium
    /// The full-resolution layer.
    case high
}

/// A lobby decision (`onEntryResponded`).
public enum EntryDecision: String, Sendable, Hashable {
    /// Let in.
    case allowed
    /// Turned away.
    case denied
    /// The waiting participant gave up (left the lobby, or its connection went away).
    case withdrawn
    /// Nobody answered within the server's lobby wait (`lobbyTimeoutSeconds`); the join failed with 3047.
    case timeout
}

/// A PubSub message: the room's one message type, ``RoomProtocol/PubSubMessage``, under the SDK's
/// name, so that code importing only the SDK finds it. ``PubSubMessage/payloadJSON`` and
/// ``PubSubMessage/payload`` are the SDK's views of its payload.
public typealias PubSubMessage = RoomProtocol.PubSubMessage

/// How a room rides out a lost signalling connection: ``RoomProtocol/ReconnectPolicy``, under the
/// SDK's name (the load generator's bots share it).
public typealias ReconnectPolicy = RoomProtocol.ReconnectPolicy
