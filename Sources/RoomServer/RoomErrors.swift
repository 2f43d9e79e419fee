import Signaling

/// A refusal sent back to a client as `{code, name, message}`; codes and names are those of the
/// room API (shared/spec/room-api.md §9), typos included.
public struct RoomError: Error, Sendable, Equatable {
    public var code: Int
    public var message: String

    public init(_ code: Int, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The canonical name of `code`.
    public var name: String { RoomError.names[code] ?? "UNKNOWN_ERROR" }

    /// The wire form.
    public var signalError: SignalError { SignalError(code: code, name: name, message: message) }

    /// Every code this server sends, with its name.
    public static let names: [Int: String] = [
        3035: "ERROR_ACTION_PERFORMED_BEFORE_ROOM_JOINED",
        3047: "ERROR_UNABLE_TO_JOIN_ROOM",
        3049: "ERROR_WEBCAM_PRODUCE_FAILED",
        3054: "ERROR_ALREADY_IN_REQUESTED_STATE",
        3058: "ERROR_MICROPHONE_PRODUCE_FAILED",
        3061: "ERROR_SCREENSHARE_PRODUCE_FAILED",
        3066: "ERROR_ACTION_NOT_SUPPORTED_IN_MODE",
        3067: "ERROR_INVALID_MODE",
        3068: "ERROR_ACTION_NOT_SUPPORTED",
        3073: "ERROR_INVALID_PARAMETER",
        4000: "UNKNOWN_ERROR",
        4002: "INVALID_TOKEN",
        4003: "INVALID_MEETING_ID",
        4004: "INVALID_PARTICIPANT_ID",
        4005: "DUPLICATE_PARTICIPANT",
        4008: "INVALID_PERMISSIONS",
        4009: "MAX_PARTCIPANT_REACHED",
        4022: "UNAUTHORIZED_MEETING_ID",
        4023: "UNAUTHORIZED_PARTCIPANT_ID",
        4024: "UNAUTHORIZED_ROLE",
        4050: "CREATE_CONSUMER_FAILED",
        4051: "CODEC_NOT_SUPPORTED",
        4065: "CHANGE_MODE_FAILED",
        4066: "REMOVE_PARTICIPANT_FAILED",
        4067: "ENABLE_PARTICIPANT_MIC_FAILED",
        4068: "DISABLE_PARTICIPANT_MIC_FAILED",
        4069: "ENABLE_PARTICIPANT_WEBCAM_FAILED",
        4070: "DISABLE_PARTICIPANT_WEBCAM_FAILED",
        4071: "PIN_FAILED",
        4072: "UNPIN_FAILED",
        4073: "SET_QUALITY_FAILED",
        4080: "CONSUME_MIC_STREAMS_FAILED",
        4081: "CONSUME_WEBCAM_STREAMS_FAILED",
        4082: "STOP_CONSUMING_MIC_STREAMS_FAILED",
        4083: "STOP_CONSUMING_WEBCAM_STREAMS_FAILED",
        4087: "PUBSUB_PUBLISH_FAILED",
        4088: "PUBSUB_SUBSCRIBE_FAILED",
        4089: "PUBSUB_UNSUBSCRIBE_FAILED",
        5000: "SOMETHING_WENT_WRONG",
    ]

    static func invalidParameter(_ message: String) -> RoomError { RoomError(3073, message) }
}

/// Why a participant left, as sent in `participantLeft` and `roomLeft` (room-api.md §10).
public enum LeaveReason: Int, Sendable {
    case websocketDisconnected = 1001
    case removePeer = 1002
    case roomClose = 1006
    case unknown = 1007
    case duplicateParticipant = 1011
    case manualLeaveCalled = 1101
    case websocketConnectionAttemptsExhausted = 1102
    case joinRoomFailed = 1103

    /// The reasons a client may give for its own `leave` (codes 1101 and above come from the SDK).
    public var isClientReason: Bool { rawValue >= 1101 }

    public var name: String {
        switch self {
        case .websocketDisconnected: return "WEBSOCKET_DISCONNECTED"
        case .removePeer: return "REMOVE_PEER"
        case .roomClose: return "ROOM_CLOSE"
        case .unknown: return "UNKNOWN"
        case .duplicateParticipant: return "DUPLICATE_PARTICIPANT"
        case .manualLeaveCalled: return "MANUAL_LEAVE_CALLED"
        case .websocketConnectionAttemptsExhausted: return "WEBSOCKET_CONNECTION_ATTEMPTS_EXHAUSTED"
        case .joinRoomFailed: return "JOIN_ROOM_FAILED"
        }
    }
}

// MARK: Reading request fields

extension JSONValue {
    /// A required string member, or 3073 naming the field.
    func requiredString(_ key: String, maxLength: Int = 1024) throws(RoomError) -> String {
        guard let value = self[key] else { throw .invalidParameter("missing field '\(key)'") }
        guard let s = value.stringValue else { throw .invalidParameter("field '\(key)' must be a string") }
        guard s.utf8.count <= maxLength else {
            throw .invalidParameter("field '\(key)' is longer than \(maxLength) bytes")
        }
        return s
    }

    func optionalString(_ key: String, maxLength: Int = 1024) throws(RoomError) -> String? {
        guard let value = self[key], !value.isNull else { return nil }
        return try requiredString(key, maxLength: maxLength)
    }

    func optionalBool(_ key: String) throws(RoomError) -> Bool? {
        guard let value = self[key], !value.isNull else { return nil }
        guard let b = value.boolValue else { throw .invalidParameter("field '\(key)' must be a boolean") }
        return b
    }

    func optionalInt(_ key: String) throws(RoomError) -> Int? {
        guard let value = self[key], !value.isNull else { return nil }
        guard let i = value.intValue else { throw .invalidParameter("field '\(key)' must be an integer") }
        return i
    }
}
