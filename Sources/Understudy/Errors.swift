import RoomProtocol

/// An error of the room SDK: a client-side refusal (3xxx), a server refusal (4xxx) or a failed
/// service (5xxx); the room's one error, ``RoomProtocol/RoomError``, under the SDK's name. Codes and
/// names follow the SDK's documented table (docs/spec/room-api.md §9), spelling included.
///
/// When a lower layer's error caused it (a peer connection that failed, a source that could not
/// open, a server refusal wrapped in a more specific code), that error is kept, typed, in
/// `underlyingError`. Two errors are equal when code, name and message are:
/// the cause is detail.
public typealias UnderstudyError = RoomError

/// The SDK's documented error type name (docs/spec/room-api.md §9), so that code written against the docs
/// (`catch let error as VideoSDKError`) ports unchanged.
public typealias VideoSDKError = RoomError

extension RoomError {
    /// The lower-level error that caused this one (e.g. a `PeerConnectionError`, a
    /// `MediaSourceError` or the server's refusal), nil when the SDK itself refused: the SDK's name
    /// for `cause`.
    public var underlyingError: (any Error)? {
        get { cause }
        set { cause = newValue }
    }

    /// An error with an explicit name (a server's refusal carries its own).
    public init(code: Int, name: String, message: String, underlyingError: (any Error)?) {
        self.init(code: code, name: name, message: message, cause: underlyingError)
    }

    /// An error with the canonical name of `code`.
    public init(code: Int, message: String, underlyingError: (any Error)?) {
        self.init(code: code, message: message, cause: underlyingError)
    }
}

/// Why a participant left the room (`onRoomLeft`, `onParticipantLeft`): the room protocol's leave
/// codes (docs/protocol.md §12), one type for the wire and the SDK.
public typealias LeaveReason = RoomLeaveCode
