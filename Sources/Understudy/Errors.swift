import RoomProtocol

/// An error of the room SDK: a client-side refusal (3xxx), a server refusal (4xxx) or a failed
/// service (5xxx). Codes and names follow the SDK's documented table, spelling included.
public struct UnderstudyError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: Int
    public var name: String
    public var message: String

    public init(code: Int, name: String, message: String) {
        self.code = code
        self.name = name
        self.message = message
    }

    /// An error with the canonical name of `code`.
    public init(code: Int, message: String) {
        self.init(code: code, name: UnderstudyError.canonicalName(code), message: message)
    }

    public var description: String { "\(code) \(name): \(message)" }

    /// The documented name of `code`, or `UNKNOWN_ERROR` for a code the table does not list.
    public static func canonicalName(_ code: Int) -> String { RoomErrorNames.name(code) }
}

/// The SDK's documented error type name, so that code written against the docs
/// (`catch let error as VideoSDKError`) ports unchanged.
public typealias VideoSDKError = UnderstudyError

/// Why a participant left the room (`onRoomLeft`, `onParticipantLeft`).
public enum LeaveReason: Int, Sendable, Hashable {
    case WEBSOCKET_DISCONNECTED = 1001
    case REMOVE_PEER = 1002
    case ROOM_CLOSE = 1006
    case UNKNOWN = 1007
    case DUPLICATE_PARTICIPANT = 1011
    case MANUAL_LEAVE_CALLED = 1101
    case WEBSOCKET_CONNECTION_ATTEMPTS_EXHAUSTED = 1102
    case JOIN_ROOM_FAILED = 1103

    /// The reason for a wire code; unknown codes read as `.UNKNOWN`.
    public init(code: Int) { self = LeaveReason(rawValue: code) ?? .UNKNOWN }

    public var name: String { "\(self)" }
}
