/// Why a text frame is not valid JSON (``JSONValue/parse(_:keepingRaw:)``) or not a valid protocol
/// envelope (the room protocol's `SignalEnvelope`, which reads the JSON this module parses).
public enum SignalEnvelopeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text is not JSON.
    case malformedJSON(String)
    /// JSON, but not an object of a known shape (the reason names the missing or wrong field).
    case invalidEnvelope(String)

    public var description: String {
        switch self {
        case .malformedJSON(let why): return "malformed JSON: \(why)"
        case .invalidEnvelope(let why): return "invalid message: \(why)"
        }
    }
}
