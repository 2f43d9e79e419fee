/// A participant's mode (docs/spec/room-api.md §3): what it may publish and receive. The raw value is the
/// wire name; only ``sendAndRecv`` may publish.
public enum ParticipantMode: String, Sendable, Hashable, CaseIterable {
    /// Publishes and receives media (on stage).
    case sendAndRecv = "SEND_AND_RECV"
    /// Receives media, publishes none (audience).
    case recvOnly = "RECV_ONLY"
    /// Neither publishes nor receives media: signalling, PubSub and events only.
    case signallingOnly = "SIGNALLING_ONLY"

    /// The deprecated wire names (docs/spec/room-api.md §3) and the mode each stands for.
    public static let aliases: [String: ParticipantMode] = ["CONFERENCE": .sendAndRecv, "VIEWER": .signallingOnly]

    /// Parses a wire name, accepting the deprecated ``aliases``; nil for anything else.
    public init?(wireName: String) {
        guard let mode = ParticipantMode(rawValue: wireName) ?? ParticipantMode.aliases[wireName] else { return nil }
        self = mode
    }
}

/// The kind of a published track (docs/protocol.md §5). The raw value is the wire name.
public enum TrackKind: String, Sendable, Hashable, CaseIterable {
    case mic, webcam, screen, screenAudio

    /// The SDK's stream-kind names (`audio`, `video`, `share`, `shareAudio`), accepted on the wire
    /// as aliases, and the kind each stands for.
    public static let aliases: [String: TrackKind] = [
        "audio": .mic, "video": .webcam, "share": .screen, "shareAudio": .screenAudio,
    ]

    /// Parses a wire name, accepting the ``aliases``; nil for anything else.
    public init?(wireName: String) {
        guard let kind = TrackKind(rawValue: wireName) ?? TrackKind.aliases[wireName] else { return nil }
        self = kind
    }

    /// Whether the track carries audio (`mic`, `screenAudio`).
    public var isAudio: Bool { self == .mic || self == .screenAudio }
}
