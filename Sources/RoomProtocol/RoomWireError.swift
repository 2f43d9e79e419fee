import Signaling

/// The error object of a refused request, `{code, name, message}` (docs/protocol.md §11): the one
/// shape the server sends, the SDK throws from and the load bots count.
public typealias RoomWireError = SignalError

/// The room API's table of error codes and their names (docs/spec/room-api.md §9, typos
/// included), written once for the server, the SDK and the load bots.
public enum RoomErrorNames {
    /// Every documented code with its name.
    public static let table: [Int: String] = [
        3035: "ERROR_ACTION_PERFORMED_BEFORE_ROOM_JOINED", 3044: "ERROR_ROOM_MEDIA_CONNECTION_FAILED",
        3047: "ERROR_UNABLE_TO_JOIN_ROOM", 3048: "ERROR_MEDIA_NOT_READY", 3049: "ERROR_WEBCAM_PRODUCE_FAILED",
        3051: "ERROR_NO_WEBCAM_DEVICE_FOUND", 3054: "ERROR_ALREADY_IN_REQUESTED_STATE",
        3055: "ERROR_OPERATION_IN_PROGRESS", 3056: "ERROR_OPERATION_ABORTED", 3057: "ERROR_END_ROOM_FAILED",
        3058: "ERROR_MICROPHONE_PRODUCE_FAILED", 3059: "ERROR_NO_MICROPHONE_DEVICE_FOUND",
        3061: "ERROR_SCREENSHARE_PRODUCE_FAILED", 3062: "ERROR_WEBCAM_NOT_ENABLED",
        3063: "ERROR_SET_WEBCAM_QUALITY_FAILED", 3065: "ERROR_ROOM_RECONNECTING",
        3066: "ERROR_ACTION_NOT_SUPPORTED_IN_MODE", 3067: "ERROR_INVALID_MODE", 3068: "ERROR_ACTION_NOT_SUPPORTED",
        3069: "ERROR_CAPTURE_IMAGE_FAILED", 3073: "ERROR_INVALID_PARAMETER", 3079: "ERROR_OPERATION_TIMED_OUT",
        4000: "UNKNOWN_ERROR", 4002: "INVALID_TOKEN", 4003: "INVALID_MEETING_ID", 4004: "INVALID_PARTICIPANT_ID",
        4005: "DUPLICATE_PARTICIPANT", 4008: "INVALID_PERMISSIONS", 4009: "MAX_PARTCIPANT_REACHED",
        4022: "UNAUTHORIZED_MEETING_ID", 4023: "UNAUTHORIZED_PARTCIPANT_ID", 4024: "UNAUTHORIZED_ROLE",
        4050: "CREATE_CONSUMER_FAILED", 4051: "CODEC_NOT_SUPPORTED", 4065: "CHANGE_MODE_FAILED",
        4066: "REMOVE_PARTICIPANT_FAILED", 4067: "ENABLE_PARTICIPANT_MIC_FAILED",
        4068: "DISABLE_PARTICIPANT_MIC_FAILED", 4069: "ENABLE_PARTICIPANT_WEBCAM_FAILED",
        4070: "DISABLE_PARTICIPANT_WEBCAM_FAILED", 4071: "PIN_FAILED", 4072: "UNPIN_FAILED",
        4073: "SET_QUALITY_FAILED", 4080: "CONSUME_MIC_STREAMS_FAILED", 4081: "CONSUME_WEBCAM_STREAMS_FAILED",
        4082: "STOP_CONSUMING_MIC_STREAMS_FAILED", 4083: "STOP_CONSUMING_WEBCAM_STREAMS_FAILED",
        4087: "PUBSUB_PUBLISH_FAILED", 4088: "PUBSUB_SUBSCRIBE_FAILED", 4089: "PUBSUB_UNSUBSCRIBE_FAILED",
        5000: "SOMETHING_WENT_WRONG",
    ]

    /// The documented name of `code`, or `UNKNOWN_ERROR` for a code the table does not list.
    public static func name(_ code: Int) -> String { table[code] ?? "UNKNOWN_ERROR" }

    /// A wire error with the documented name of `code`.
    public static func error(_ code: Int, _ message: String) -> RoomWireError {
        RoomWireError(code: code, name: name(code), message: message)
    }
}

/// Why a participant left (docs/protocol.md §12): the code and name in `participantLeft`,
/// `roomLeft` and `roomClosed`, and the reason a client gives to `leave`.
public enum RoomLeaveCode: Int, Sendable, Hashable, CaseIterable {
    case WEBSOCKET_DISCONNECTED = 1001
    case REMOVE_PEER = 1002
    case ROOM_CLOSE = 1006
    case UNKNOWN = 1007
    case DUPLICATE_PARTICIPANT = 1011
    case MANUAL_LEAVE_CALLED = 1101
    case WEBSOCKET_CONNECTION_ATTEMPTS_EXHAUSTED = 1102
    case JOIN_ROOM_FAILED = 1103

    /// The reason for a wire code; unknown codes read as `.UNKNOWN`.
    public init(code: Int) { self = RoomLeaveCode(rawValue: code) ?? .UNKNOWN }

    /// The wire name (`reasonName`).
    public var name: String { "\(self)" }

    /// Whether a client may give this reason to its own `leave`: the codes from 1101 up are the
    /// SDK's; the lower ones only the server decides.
    public var isClientReason: Bool { rawValue >= 1101 }
}
