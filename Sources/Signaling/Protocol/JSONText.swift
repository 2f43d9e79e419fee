/// A strict JSON (RFC 8259) parser straight to ``JSONValue``.
///
/// Going through `JSONSerialization` and then bridging its `Any` graph into ``JSONValue`` spent most
/// of its time in dynamic casts and `NSDictionary` bridging: a load generator with a thousand
/// audience bots, each hearing of every join, spent two thirds of its CPU there. This parser reads
/// the UTF-8 bytes once and builds the value directly.
///
/// Strict: one value surrounded by optional whitespace; strings must be valid UTF-8 without raw
/// control characters and with valid escapes (surrogates paired); numbers follow the JSON grammar
/// and must be finite; nesting is limited to ``maximumDepth``.
struct JSONParser {
    /// Deeper nesting is refused (a stack guard for hostile input).
    static let maximumDepth = 512

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0
    /// The paths whose values are kept as written (``JSONValue/raw(_:)``).
    private let raw: [[JSONRawPaths.Step]]

    private init(_ bytes: UnsafeBufferPointer<UInt8>, raw: [[JSONRawPaths.Step]]) {
        self.bytes = bytes
        self.raw = raw
    }

    /// Parses one complete JSON text; the values at `keepingRaw` are checked but not built: they
    /// come back as ``JSONValue/raw(_:)`` holding their exact bytes.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>, keepingRaw paths: JSONRawPaths = .none)
        throws(SignalEnvelopeError) -> JSONValue
    {
        var parser = JSONParser(bytes, raw: paths.paths)
        parser.skipWhitespace()
        if paths.paths.contains(where: \.isEmpty) {
            let start = parser.index
            try parser.scanValue()
            let end = parser.index
            parser.skipWhitespace()
            guard parser.index == bytes.count else { throw parser.failure("unexpected data after the value") }
            return .raw(
                RawJSON(unchecked: String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)))
        }
        // Bit i set: the path so far matches the first `level` steps of raw path i.
        let live: UInt64 = paths.paths.isEmpty ? 0 : (paths.paths.count == 64 ? ~0 : (1 << paths.paths.count) - 1)
        let value = try parser.parseValue(live: live, level: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.failure("unexpected data after the value") }
        return value
    }

    private func failure(_ why: String) -> SignalEnvelopeError {
        .malformedJSON("\(why) at byte \(index)")
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// The raw paths among `live` that continue with `matches` at `level`, and whether one of them
    /// ends there (the value is then kept raw).
    private func descend(_ live: UInt64, level: Int, _ matches: (JSONRawPaths.Step) -> Bool) -> (UInt64, Bool) {
        var next: UInt64 = 0
        var ends = false
        var bits = live
        while bits != 0 {
            let i = bits.trailingZeroBitCount
            bits &= bits - 1
            let path = raw[i]
            guard level < path.count, matches(path[level]) else { continue }
            if level + 1 == path.count { ends = true } else { next |= 1 << UInt64(i) }
        }
        return (next, ends)
    }

    /// A value, or its exact text when a raw path ends here.
    private mutating func parseMember(live: UInt64, level: Int, _ matches: (JSONRawPaths.Step) -> Bool)
        throws(SignalEnvelopeError) -> JSONValue
    {
        guard live != 0 else { return try parseValue(live: 0, level: level + 1) }
        let (next, ends) = descend(live, level: level, matches)
        guard ends else { return try parseValue(live: next, level: level + 1) }
        let start = index
        try scanValue()
        return .raw(
            RawJSON(unchecked: String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)))
    }

    private mutating func parseValue(live: UInt64, level: Int) throws(SignalEnvelopeError) -> JSONValue {
        guard index < bytes.count else { throw failure("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(live: live, level: level)
        case UInt8(ascii: "["): return try parseArray(live: live, level: level)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw failure("unexpected character")
        }
    }

    private mutating func expectLiteral(_ word: StaticString) throws(SignalEnvelopeError) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw failure("unexpected end of input") }
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: count)
        for k in 0..<count where bytes[index + k] != expected[k] { throw failure("invalid literal") }
        index += count
    }

    private mutating func enter() throws(SignalEnvelopeError) {
        depth += 1
        guard depth <= Self.maximumDepth else { throw failure("nesting deeper than \(Self.maximumDepth)") }
    }

    private mutating func parseObject(live: UInt64, level: Int) throws(SignalEnvelopeError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1  // {
        var object: [String: JSONValue] = [:]
        if isEmptyContainer(UInt8(ascii: "}")) { return .object(object) }
        repeat {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            object[key] = try parseMember(live: live, level: level) { $0 == .key(key) }
        } while try !endOfContainer(UInt8(ascii: "}"))
        return .object(object)
    }

    private mutating func parseArray(live: UInt64, level: Int) throws(SignalEnvelopeError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1  // [
        var array: [JSONValue] = []
        if isEmptyContainer(UInt8(ascii: "]")) { return .array(array) }
        repeat {
            skipWhitespace()
            array.append(try parseMember(live: live, level: level) { $0 == .anyElement })
        } while try !endOfContainer(UInt8(ascii: "]"))
        return .array(array)
    }

    /// After an opening bracket: true past `close` right away (an empty object or array).
    private mutating func isEmptyContainer(_ close: UInt8) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == close else { return false }
        index += 1
        return true
    }

    /// After a member or element: false past a `,` (another follows), true past `close`.
    private mutating func endOfContainer(_ close: UInt8) throws(SignalEnvelopeError) -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw failure("unexpected end of input") }
        if bytes[index] == UInt8(ascii: ",") {
            index += 1
            return false
        }
        guard bytes[index] == close else { throw failure("expected ',' or '\(Character(Unicode.Scalar(close)))'") }
        index += 1
        return true
    }

    private mutating func parseString() throws(SignalEnvelopeError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let text = try validUTF8(UnsafeBufferPointer(rebasing: bytes[start..<index]))
                index += 1
                return text
            }
            if b == UInt8(ascii: "\\") { break }
            guard b >= 0x20 else { throw failure("control character in a string") }
            index += 1
        }
        guard index < bytes.count else { throw failure("unterminated string") }
        var buffer = Array(bytes[start..<index])
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                index += 1
                return try buffer.withUnsafeBufferPointer { (raw) throws(SignalEnvelopeError) in try validUTF8(raw) }
            }
            guard b >= 0x20 else { throw failure("control character in a string") }
            guard b == UInt8(ascii: "\\") else {
                buffer.append(b)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { throw failure("unterminated string") }
            let e = bytes[index]
            index += 1
            if let byte = JSONEscape.byte(escapedBy: e) {
                buffer.append(byte)
                continue
            }
            switch e {
            case UInt8(ascii: "u"):
                var scalar = UInt32(try hex4())
                if (0xD800...0xDBFF).contains(scalar) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u")
                    else { throw failure("unpaired surrogate") }
                    index += 2
                    let low = UInt32(try hex4())
                    guard (0xDC00...0xDFFF).contains(low) else { throw failure("unpaired surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw failure("unpaired surrogate")
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw failure("invalid escape") }
                buffer.append(contentsOf: String(Character(unicode)).utf8)
            default: throw failure("invalid escape")
            }
        }
        throw failure("unterminated string")
    }

    // MARK: Checking without building (raw values)

    /// Checks one value against the same grammar as ``parseValue(live:level:)`` (strings, escapes,
    /// UTF-8, numbers, nesting) without building anything; `index` ends after it.
    private mutating func scanValue() throws(SignalEnvelopeError) {
        guard index < bytes.count else { throw failure("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            let close = bytes[index] == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
            try enter()
            defer { depth -= 1 }
            index += 1
            if isEmptyContainer(close) { return }
            repeat {
                skipWhitespace()
                if close == UInt8(ascii: "}") {
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                        throw failure("expected a key")
                    }
                    try scanString()
                    skipWhitespace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
                    index += 1
                    skipWhitespace()
                }
                try scanValue()
            } while try !endOfContainer(close)
        case UInt8(ascii: "\""): try scanString()
        case UInt8(ascii: "t"): try expectLiteral("true")
        case UInt8(ascii: "f"): try expectLiteral("false")
        case UInt8(ascii: "n"): try expectLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): _ = try parseNumber()
        default: throw failure("unexpected character")
        }
    }

    /// Checks a string (escapes, surrogate pairs, control characters, UTF-8) without decoding it.
    private mutating func scanString() throws(SignalEnvelopeError) {
        index += 1  // opening quote
        while index < bytes.count {
            let b = bytes[index]
            switch b {
            case UInt8(ascii: "\""):
                index += 1
                return
            case 0..<0x20: throw failure("control character in a string")
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw failure("unterminated string") }
                let e = bytes[index]
                index += 1
                switch e {
                case _ where JSONEscape.byte(escapedBy: e) != nil: break
                case UInt8(ascii: "u"):
                    let unit = try hex4()
                    if (0xD800...0xDBFF).contains(unit) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw failure("unpaired surrogate") }
                        index += 2
                        guard (0xDC00...0xDFFF).contains(try hex4()) else { throw failure("unpaired surrogate") }
                    } else if (0xDC00...0xDFFF).contains(unit) {
                        throw failure("unpaired surrogate")
                    }
                default: throw failure("invalid escape")
                }
            case 0x20..<0x80: index += 1
            default: try scanUTF8Sequence()
            }
        }
        throw failure("unterminated string")
    }

    /// Checks one multi-byte UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at most
    /// U+10FFFF) starting at `index`.
    private mutating func scanUTF8Sequence() throws(SignalEnvelopeError) {
        let lead = bytes[index]
        let count: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: count = 2
        case 0xE0:
            count = 3
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: count = 3
        case 0xED:
            count = 3
            high = 0x9F
        case 0xF0:
            count = 4
            low = 0x90
        case 0xF1...0xF3: count = 4
        case 0xF4:
            count = 4
            high = 0x8F
        default: throw failure("invalid UTF-8 in a string")
        }
        guard index + count <= bytes.count else { throw failure("invalid UTF-8 in a string") }
        let second = bytes[index + 1]
        guard second >= low, second <= high else { throw failure("invalid UTF-8 in a string") }
        for k in 2..<max(2, count) where bytes[index + k] & 0xC0 != 0x80 {
            throw failure("invalid UTF-8 in a string")
        }
        index += count
    }

    private func validUTF8(_ raw: UnsafeBufferPointer<UInt8>) throws(SignalEnvelopeError) -> String {
        guard let text = String(validating: raw, as: UTF8.self) else { throw failure("invalid UTF-8 in a string") }
        return text
    }

    private mutating func hex4() throws(SignalEnvelopeError) -> UInt16 {
        guard index + 4 <= bytes.count else { throw failure("unterminated escape") }
        var v: UInt16 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default: throw failure("invalid \\u escape")
            }
            v = v << 4 | UInt16(digit)
            index += 1
        }
        return v
    }

    private mutating func parseNumber() throws(SignalEnvelopeError) -> Double {
        let start = index
        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        var integral = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            integral = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let digits = UnsafeBufferPointer(rebasing: bytes[start..<index])
        // Short integers (ids, codes, sizes) without a string round trip.
        if integral, digits.count <= 16 {
            var value: Int64 = 0
            var negative = false
            for b in digits {
                if b == UInt8(ascii: "-") {
                    negative = true
                } else {
                    value = value * 10 + Int64(b - UInt8(ascii: "0"))
                }
            }
            return Double(negative ? -value : value)
        }
        guard let value = Double(String(decoding: digits, as: UTF8.self)), value.isFinite else {
            throw failure("number out of range")
        }
        return value
    }
}

/// JSON's one-character string escapes (RFC 8259 §7), for every JSON reader in the package.
package enum JSONEscape {
    /// The byte that `\` followed by `e` stands for (`n` → line feed, `"` → `"`…); nil for `u`,
    /// which starts a four-digit escape, and for anything that is no escape.
    @inline(__always)
    package static func byte(escapedBy e: UInt8) -> UInt8? {
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): e
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        default: nil
        }
    }
}

/// Compact JSON text of a ``JSONValue``, keys sorted (deterministic), written straight to UTF-8
/// without the `JSONSerialization` bridging (a broadcast to a thousand participants, and every
/// request of a thousand bots, encodes here). Slashes are not escaped; non-ASCII stays UTF-8;
/// integral numbers up to 2^53 print without a fraction.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []

    static func text(_ value: JSONValue) -> String {
        var w = JSONWriter()
        w.bytes.reserveCapacity(128)
        w.write(value)
        return String(decoding: w.bytes, as: UTF8.self)
    }

    private mutating func write(_ value: JSONValue) {
        switch value {
        case .null: append("null")
        case .bool(let b): append(b ? "true" : "false")
        case .number(let n): writeNumber(n)
        case .string(let s): writeString(s)
        case .raw(let r): bytes.append(contentsOf: r.text.utf8)
        case .array(let a):
            bytes.append(UInt8(ascii: "["))
            for (i, element) in a.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let o):
            bytes.append(UInt8(ascii: "{"))
            for (i, key) in o.keys.sorted().enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                writeString(key)
                bytes.append(UInt8(ascii: ":"))
                write(o[key] ?? .null)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private mutating func append(_ s: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    private mutating func writeNumber(_ n: Double) {
        guard n.isFinite else {
            append("null")  // JSON has no NaN or infinity
            return
        }
        if n.rounded() == n, abs(n) <= 9_007_199_254_740_992 {
            bytes.append(contentsOf: String(Int64(n)).utf8)
        } else {
            bytes.append(contentsOf: "\(n)".utf8)
        }
    }

    private mutating func writeString(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): append("\\\"")
            case UInt8(ascii: "\\"): append("\\\\")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            case 0x08: append("\\b")
            case 0x0C: append("\\f")
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                append("\\u00")
                bytes.append(hex[Int(b >> 4)])
                bytes.append(hex[Int(b & 0xF)])
            default: bytes.append(b)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
