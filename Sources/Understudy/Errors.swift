import RoomProtocol

/// An error of the room SDK: a client-side refusal (3xxx), a server refusal (4xxx) or a failed
/// service (5xxx). Codes and names follow the SDK's documented table, spelling included.
///
/// When a lower layer's error caused it (a peer connection that failed, a source that could not
/// open, a server refusal wrapped in a more specific code), that error is kept, typed, in
/// ``underlyingError``. Two errors are equal when code, name and message are: the cause is detail.
public struct UnderstudyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The documented code (e.g. 3073).
    public var code: Int
    /// The documented name of ``code`` (e.g. `ERROR_INVALID_PARAMETER`).
    public var name: String
    /// What went wrong, for people.
    public var message: String
    /// The lower-level error that caused this one (e.g. a `PeerConnectionError`, a
    /// `MediaSourceError` or the server's ``UnderstudyError``), nil when the SDK itself refused.
    public var underlyingError: (any Error)?

    /// An error with an explicit name (a server's refusal carries its own).
    public init(code: Int, name: String, message: String, underlyingError: (any Error)? = nil) {
        self.code = code
        self.name = name
        self.message = message
        self.underlyingError = underlyingError
    }

    /// An error with the canonical name of `code`.
    public init(code: Int, message: String, underlyingError: (any Error)? = nil) {
        self.init(
            code: code, name: UnderstudyError.canonicalName(code), message: message, underlyingError: underlyingError)
    }

    /// `code name: message`.
    public var description: String { "\(code) \(name): \(message)" }

    /// The documented name of `code`, or `UNKNOWN_ERROR` for a code the table does not list.
    public static func canonicalName(_ code: Int) -> String { RoomErrorNames.name(code) }

    /// Equal code, name and message (the cause is not compared).
    public static func == (lhs: UnderstudyError, rhs: UnderstudyError) -> Bool {
        lhs.code == rhs.code && lhs.name == rhs.name && lhs.message == rhs.message
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(name)
        hasher.combine(message)
    }
}

/// The SDK's documented error type name, so that code written against the docs
/// (`catch let error as VideoSDKError`) ports unchanged.
public typealias VideoSDKError = UnderstudyError

/// Why a participant left the room (`onRoomLeft`, `onParticipantLeft`): the room protocol's leave
/// codes (docs/protocol.md §12), one type for the wire and the SDK.
public typealias LeaveReason = RoomLeaveCode
