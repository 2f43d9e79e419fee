import RoomProtocol
import Signaling

/// A refusal sent back to a client as `{code, name, message}`; codes and names are those of the
/// room API (docs/spec/room-api.md §9), typos included.
///
/// A refusal caused by a lower error (the SFU's, a socket's, Redis's) keeps it in ``cause`` for
/// the server's own callers and logs; the wire carries only code, name and message. Equality
/// compares code and message.
public struct RoomError: Error, Sendable, Equatable {
    public var code: Int
    public var message: String
    /// The lower-level error behind this refusal, if any (never sent to clients).
    public var cause: (any Error)?

    public init(_ code: Int, _ message: String, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public static func == (lhs: RoomError, rhs: RoomError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
    }

    /// The canonical name of `code`.
    public var name: String { RoomErrorNames.name(code) }

    /// The wire form.
    public var signalError: SignalError { SignalError(code: code, name: name, message: message) }

    /// Every documented code with its name (the table shared with the SDK, `RoomErrorNames`).
    public static var names: [Int: String] { RoomErrorNames.table }

    static func invalidParameter(_ message: String, cause: (any Error)? = nil) -> RoomError {
        RoomError(3073, message, cause: cause)
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
