import RoomProtocol

/// An error of the room SDK: a client-side refusal (3xxx), a server refusal (4xxx) or a failed
/// service (5xxx). Codes and names follow the SDK's documented table, spelling included.
public struct UnderstudyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The documented code (e.g. 3073).
    public var code: Int
    /// The documented name of ``code`` (e.g. `ERROR_INVALID_PARAMETER`).
    public var name: String
    /// What went wrong, for people.
    public var message: String

    /// An error with an explicit name (a server's refusal carries its own).
    public init(code: Int, name: String, message: String) {
        self.code = code
        self.name = name
        self.message = message
    }

    /// An error with the canonical name of `code`.
    public init(code: Int, message: String) {
        self.init(code: code, name: UnderstudyError.canonicalName(code), message: message)
    }

    /// `code name: message`.
    public var description: String { "\(code) \(name): \(message)" }

    /// The documented name of `code`, or `UNKNOWN_ERROR` for a code the table does not list.
    public static func canonicalName(_ code: Int) -> String { RoomErrorNames.name(code) }
}

/// The SDK's documented error type name, so that code written against the docs
/// (`catch let error as VideoSDKError`) ports unchanged.
public typealias VideoSDKError = UnderstudyError

/// Why a participant left the room (`onRoomLeft`, `onParticipantLeft`): the room protocol's leave
/// codes (docs/protocol.md §12), one type for the wire and the SDK.
public typealias LeaveReason = RoomLeaveCode
