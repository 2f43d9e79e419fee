import Signaling

/// One protocol message on the signalling WebSocket.
///
/// - request: `{"id", "method", "data"}`
/// - response: `{"id", "ok": true, "data"}` or `{"id", "ok": false, "error": {code, name, message}}` (a ``RoomError``)
/// - notification: `{"method", "data"}` (no id)
///
/// `id` may be a number or a string on the wire; it is kept as a ``JSONValue`` so a response
/// echoes it exactly. A missing `data` reads as an empty object.
public enum SignalEnvelope: Sendable, Hashable {
    case request(id: JSONValue, method: String, data: JSONValue)
    case response(id: JSONValue, result: Result<JSONValue, RoomError>)
    case notification(method: String, data: JSONValue)

    /// Parses one text frame; the values at `keepingRaw` (a PubSub payload) stay as written
    /// (``JSONValue/raw(_:)``).
    public static func parse(_ text: String, keepingRaw paths: JSONRawPaths = .none) throws(SignalEnvelopeError)
        -> SignalEnvelope
    {
        try parse(value: JSONValue.parse(text, keepingRaw: paths))
    }

    /// Interprets an already-parsed JSON value.
    public static func parse(value: JSONValue) throws(SignalEnvelopeError) -> SignalEnvelope {
        guard let object = value.objectValue else { throw .invalidEnvelope("message is not a JSON object") }
        let data = object["data"] ?? .object([:])
        let id = object["id"]
        if let id {
            guard id.stringValue != nil || id.intValue != nil else {
                throw .invalidEnvelope("id must be a string or an integer")
            }
        }
        if let ok = object["ok"] {
            guard let id else { throw .invalidEnvelope("response without id") }
            guard let success = ok.boolValue else { throw .invalidEnvelope("ok must be a boolean") }
            if success { return .response(id: id, result: .success(data)) }
            guard let error = object["error"]?.objectValue else {
                throw .invalidEnvelope("failed response without error object")
            }
            guard let failure = RoomError(json: .object(error)) else {
                throw .invalidEnvelope("error.code must be an integer")
            }
            return .response(id: id, result: .failure(failure))
        }
        guard let methodValue = object["method"] else { throw .invalidEnvelope("missing method") }
        guard let method = methodValue.stringValue, !method.isEmpty else {
            throw .invalidEnvelope("method must be a non-empty string")
        }
        if let id { return .request(id: id, method: method, data: data) }
        return .notification(method: method, data: data)
    }

    /// The JSON value of this message.
    public var jsonValue: JSONValue {
        switch self {
        case .request(let id, let method, let data):
            return .object(["id": id, "method": .string(method), "data": data])
        case .notification(let method, let data):
            return .object(["method": .string(method), "data": data])
        case .response(let id, .success(let data)):
            return .object(["id": id, "ok": true, "data": data])
        case .response(let id, .failure(let error)):
            return .object(["id": id, "ok": false, "error": error.json])
        }
    }

    /// Compact JSON text for a text frame.
    public var text: String { jsonValue.jsonString }
}
