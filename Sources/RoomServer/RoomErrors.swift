import RoomProtocol
import Signaling

// Refusals are the room's one error, `RoomError` (RoomProtocol): code, canonical name, message and
// the lower-level cause, which never reaches the wire.

extension RoomError {
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
