import Foundation

/// A JSON value that is `Sendable` and `Hashable`, for protocol payloads whose shape the message
/// layer does not know.
public enum JSONValue: Sendable, Hashable, Codable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
    /// A value kept exactly as written (a PubSub payload that is passed on, never interpreted):
    /// produced only where a parse asks for it (``JSONRawPaths``), written back byte for byte. Its
    /// accessors (``objectValue``, …) are nil; ``RawJSON/value`` parses it.
    case raw(RawJSON)

    // MARK: Accessors

    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    public var doubleValue: Double? { if case .number(let n) = self { return n } else { return nil } }
    /// The number as an integer when it is integral and in range.
    public var intValue: Int? {
        guard case .number(let n) = self, n.rounded() == n, n >= -9.007_199_254_740_992e15,
            n <= 9.007_199_254_740_992e15
        else { return nil }
        return Int(n)
    }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { return o } else { return nil } }
    public var isNull: Bool { self == .null }

    /// Member `key` of an object (nil for other kinds or a missing key).
    public subscript(key: String) -> JSONValue? { objectValue?[key] }

    /// Element `index` of an array (nil when out of range or not an array).
    public subscript(index: Int) -> JSONValue? {
        guard let a = arrayValue, a.indices.contains(index) else { return nil }
        return a[index]
    }

    // MARK: Conversions

    /// Converts a `JSONSerialization` object graph. Returns nil for values JSON cannot hold.
    public init?(any value: Any) {
        // Containers and strings first: casting an array to NSNumber/Bool/Int/Double bridges the
        // whole subtree, which made nested input cost quadratic time (500 levels: 0.4 s).
        switch value {
        case let string as String:
            self = .string(string)
        case let array as [Any]:
            var out: [JSONValue] = []
            out.reserveCapacity(array.count)
            for element in array {
                guard let v = JSONValue(any: element) else { return nil }
                out.append(v)
            }
            self = .array(out)
        case let object as [String: Any]:
            var out: [String: JSONValue] = [:]
            for (k, element) in object {
                guard let v = JSONValue(any: element) else { return nil }
                out[k] = v
            }
            self = .object(out)
        case is NSNull:
            self = .null
        case let number as NSNumber:
            // JSONSerialization hands booleans over as NSNumber too; their type encoding is "c".
            if String(cString: number.objCType) == "c" || String(describing: type(of: number)).contains("Boolean") {
                self = .bool(number.boolValue)
            } else {
                self = .number(number.doubleValue)
            }
        case let bool as Bool:
            self = .bool(bool)
        case let int as Int:
            self = .number(Double(int))
        case let double as Double:
            self = .number(double)
        default:
            return nil
        }
    }

    /// The `JSONSerialization`-compatible object graph.
    public var anyValue: Any {
        switch self {
        case .null: return NSNull()
        case .bool(let b): return b
        case .number(let n):
            // Integral values go out as integers (exact up to 2^63): Foundation's parser can read the
            // exponent form of a large number back one ulp off (5.5555555555552557e+17).
            if let integer = Int64(exactly: n) { return integer }
            return n
        case .string(let s): return s
        case .array(let a): return a.map(\.anyValue)
        case .object(let o): return o.mapValues(\.anyValue)
        case .raw(let r): return r.value.anyValue
        }
    }

    /// Parses JSON text (any top-level value); the values at `keepingRaw` come back as ``raw(_:)``.
    public static func parse(_ text: String, keepingRaw paths: JSONRawPaths = .none) throws(SignalEnvelopeError)
        -> JSONValue
    {
        var text = text
        // A native string's own UTF-8 storage: no copy of the message.
        let result = text.withUTF8 { raw in
            Result { () throws(SignalEnvelopeError) in try JSONParser.parse(raw, keepingRaw: paths) }
        }
        return try result.get()
    }

    /// Parses JSON bytes (any top-level value); the values at `keepingRaw` come back as ``raw(_:)``.
    public static func parse(_ bytes: [UInt8], keepingRaw paths: JSONRawPaths = .none) throws(SignalEnvelopeError)
        -> JSONValue
    {
        try bytes.withUnsafeBufferPointer { (raw) throws(SignalEnvelopeError) in
            try JSONParser.parse(raw, keepingRaw: paths)
        }
    }

    /// Compact JSON text with sorted keys (deterministic, so equal values serialize equally).
    public var jsonString: String { JSONWriter.text(self) }

    public var description: String { jsonString }

    // MARK: Codable

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let b = try? container.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? container.decode(Double.self) {
            self = .number(n)
        } else if let s = try? container.decode(String.self) {
            self = .string(s)
        } else if let a = try? container.decode([JSONValue].self) {
            self = .array(a)
        } else if let o = try? container.decode([String: JSONValue].self) {
            self = .object(o)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a JSON value")
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .number(let n): try container.encode(n)
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        case .raw(let r): try container.encode(r.value)
        }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var o: [String: JSONValue] = [:]
        for (k, v) in elements { o[k] = v }
        self = .object(o)
    }
}

/// One JSON value kept exactly as it was written: checked against the JSON grammar once, then
/// carried and written back byte for byte (key order, number spelling, escapes and all), so that a
/// server never changes what it does not interpret (room API: the PubSub `payload` "passes through
/// untouched").
public struct RawJSON: Sendable, Hashable, CustomStringConvertible {
    /// The value's text: no surrounding whitespace.
    public let text: String

    /// Text the parser has already checked.
    init(unchecked text: String) { self.text = text }

    /// Checks that `text` is one JSON value (surrounding whitespace is dropped); throws
    /// ``SignalEnvelopeError/malformedJSON(_:)`` otherwise.
    public init(validating text: String) throws(SignalEnvelopeError) {
        guard case .raw(let checked) = try JSONValue.parse(text, keepingRaw: .whole) else {
            preconditionFailure("a whole-text raw path yields a raw value")
        }
        self = checked
    }

    /// The text of `value` (written compactly, keys sorted).
    public init(_ value: JSONValue) {
        if case .raw(let r) = value {
            self = r
        } else {
            text = value.jsonString
        }
    }

    /// Whether the value is a JSON object (the first byte of valid JSON text tells).
    public var isObject: Bool { text.utf8.first == UInt8(ascii: "{") }

    /// Length of the text in UTF-8 bytes.
    public var byteCount: Int { text.utf8.count }

    /// The value parsed (numbers as doubles, keys unordered): for reading it, not for passing it on.
    public var value: JSONValue { (try? JSONValue.parse(text)) ?? .null }

    public var description: String { text }
}

/// Where in a JSON text the parser keeps values as written (``JSONValue/raw(_:)``) instead of
/// building them: each path is a list of object keys and "any array element" steps from the
/// top-level value. At most 64 paths; matching costs nothing where no path leads.
public struct JSONRawPaths: Sendable {
    /// One step of a path.
    public enum Step: Sendable, Hashable {
        /// The member with this key of an object.
        case key(String)
        /// Every element of an array.
        case anyElement
    }

    let paths: [[Step]]

    /// Paths such as `[.key("data"), .key("payload")]`.
    public init(_ paths: [Step]...) {
        precondition(paths.count <= 64, "at most 64 raw paths")
        self.paths = paths
    }

    /// Nothing kept raw.
    public static let none = JSONRawPaths()

    /// The whole text is one raw value (``RawJSON/init(validating:)``).
    static let whole = JSONRawPaths([])
}
