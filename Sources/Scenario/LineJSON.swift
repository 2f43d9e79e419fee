import Signaling

/// A JSON value that remembers the line it started on, so scenario errors can point at the file.
///
/// Foundation's `JSONSerialization` drops positions; scenario files are small, so a plain recursive
/// descent reader over the UTF-8 bytes is enough.
public struct LineJSON: Sendable {
    /// The value itself; objects keep their keys in file order.
    public indirect enum Value: Sendable {
        case null
        case bool(Bool)
        case number(Double)
        case string(String)
        case array([LineJSON])
        case object([(key: String, value: LineJSON)])
    }

    public var value: Value
    /// 1-based line of the value's first character.
    public var line: Int

    /// The member `key` of an object (nil when absent or not an object).
    public subscript(key: String) -> LineJSON? {
        guard case .object(let members) = value else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// The value as compact JSON text (for parsers that take text).
    public var jsonText: String {
        switch value {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .number(let d): return d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
        case .string(let s):
            var out = "\""
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case _ where scalar.value < 0x20:
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        case .array(let items): return "[" + items.map(\.jsonText).joined(separator: ",") + "]"
        case .object(let members):
            return "{"
                + members.map { LineJSON(value: .string($0.key), line: 0).jsonText + ":" + $0.value.jsonText }
                .joined(separator: ",") + "}"
        }
    }

    /// A short name of the value's JSON type, for error messages.
    public var typeName: String {
        switch value {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// Where and why a JSON text could not be read.
public struct LineJSONSyntaxError: Error, Sendable, Equatable {
    public var line: Int
    public var message: String
}

/// Reads JSON text (RFC 8259) into ``LineJSON`` values.
public enum LineJSONReader {
    /// Deeper nesting than this is refused rather than risking the stack.
    static let maximumDepth = 64

    /// Parses one JSON document; trailing non-whitespace is an error.
    public static func parse(_ bytes: [UInt8]) throws(LineJSONSyntaxError) -> LineJSON {
        var reader = Cursor(bytes: bytes)
        reader.skipWhitespace()
        let value = try reader.readValue(depth: 0)
        reader.skipWhitespace()
        if reader.index < bytes.count {
            throw LineJSONSyntaxError(line: reader.line, message: "unexpected text after the JSON document")
        }
        return value
    }

    private struct Cursor {
        let bytes: [UInt8]
        var index = 0
        var line = 1

        init(bytes: [UInt8]) { self.bytes = bytes }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        func fail(_ message: String) -> LineJSONSyntaxError { LineJSONSyntaxError(line: line, message: message) }

        mutating func skipWhitespace() {
            while let c = current {
                switch c {
                case UInt8(ascii: "\n"): line += 1
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"): break
                default: return
                }
                index += 1
            }
        }

        static func describe(_ c: UInt8?) -> String {
            guard let c else { return "end of file" }
            if c >= 0x20 && c < 0x7f { return "'\(Character(Unicode.Scalar(c)))'" }
            return "byte 0x\(String(c, radix: 16))"
        }

        mutating func readValue(depth: Int) throws(LineJSONSyntaxError) -> LineJSON {
            guard depth < LineJSONReader.maximumDepth else { throw fail("nesting deeper than \(maximumDepth) levels") }
            let startLine = line
            guard let c = current else { throw fail("expected a value, found end of file") }
            switch c {
            case UInt8(ascii: "{"): return LineJSON(value: try readObject(depth: depth), line: startLine)
            case UInt8(ascii: "["): return LineJSON(value: try readArray(depth: depth), line: startLine)
            case UInt8(ascii: "\""): return LineJSON(value: .string(try readString()), line: startLine)
            case UInt8(ascii: "t"):
                try readLiteral("true")
                return LineJSON(value: .bool(true), line: startLine)
            case UInt8(ascii: "f"):
                try readLiteral("false")
                return LineJSON(value: .bool(false), line: startLine)
            case UInt8(ascii: "n"):
                try readLiteral("null")
                return LineJSON(value: .null, line: startLine)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return LineJSON(value: .number(try readNumber()), line: startLine)
            default:
                throw fail("expected a value, found \(Self.describe(c))")
            }
        }

        mutating func readLiteral(_ word: String) throws(LineJSONSyntaxError) {
            for expected in word.utf8 {
                guard current == expected else { throw fail("invalid literal, expected '\(word)'") }
                index += 1
            }
        }

        mutating func readObject(depth: Int) throws(LineJSONSyntaxError) -> LineJSON.Value {
            index += 1  // {
            var members: [(key: String, value: LineJSON)] = []
            if isEmptyContainer(UInt8(ascii: "}")) { return .object(members) }
            repeat {
                skipWhitespace()
                guard current == UInt8(ascii: "\"") else {
                    throw fail("expected a quoted member name, found \(Self.describe(current))")
                }
                let key = try readString()
                if members.contains(where: { $0.key == key }) { throw fail("duplicate member '\(key)'") }
                skipWhitespace()
                guard current == UInt8(ascii: ":") else {
                    throw fail("expected ':' after member name '\(key)', found \(Self.describe(current))")
                }
                index += 1
                skipWhitespace()
                members.append((key, try readValue(depth: depth + 1)))
            } while try !endOfContainer(UInt8(ascii: "}"), "an object")
            return .object(members)
        }

        mutating func readArray(depth: Int) throws(LineJSONSyntaxError) -> LineJSON.Value {
            index += 1  // [
            var items: [LineJSON] = []
            if isEmptyContainer(UInt8(ascii: "]")) { return .array(items) }
            repeat {
                skipWhitespace()
                items.append(try readValue(depth: depth + 1))
            } while try !endOfContainer(UInt8(ascii: "]"), "an array")
            return .array(items)
        }

        /// After an opening bracket: true past `close` right away (an empty object or array).
        mutating func isEmptyContainer(_ close: UInt8) -> Bool {
            skipWhitespace()
            guard current == close else { return false }
            index += 1
            return true
        }

        /// After a member or element of `container`: false past a `,` (another follows), true past `close`.
        mutating func endOfContainer(_ close: UInt8, _ container: String) throws(LineJSONSyntaxError) -> Bool {
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","):
                index += 1
                return false
            case close:
                index += 1
                return true
            default:
                throw fail(
                    "expected ',' or '\(Character(Unicode.Scalar(close)))' in \(container), found \(Self.describe(current))"
                )
            }
        }

        mutating func readHex4() throws(LineJSONSyntaxError) -> UInt32 {
            var v: UInt32 = 0
            for _ in 0..<4 {
                guard let c = current else { throw fail("unfinished \\u escape") }
                let digit: UInt32
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
                default: throw fail("invalid hex digit in \\u escape")
                }
                v = v << 4 | digit
                index += 1
            }
            return v
        }

        mutating func readString() throws(LineJSONSyntaxError) -> String {
            index += 1  // opening quote
            var out: [UInt8] = []
            while true {
                guard let c = current else { throw fail("unterminated string") }
                index += 1
                switch c {
                case UInt8(ascii: "\""):
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let e = current else { throw fail("unterminated string") }
                    index += 1
                    if let byte = JSONEscape.byte(escapedBy: e) {
                        out.append(byte)
                        continue
                    }
                    guard e == UInt8(ascii: "u") else {
                        throw fail("invalid escape '\\\(Character(Unicode.Scalar(e)))'")
                    }
                    var scalar = try readHex4()
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        // A high surrogate must be followed by an escaped low surrogate.
                        guard current == UInt8(ascii: "\\"), index + 1 < bytes.count,
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw fail("unpaired surrogate in \\u escape") }
                        index += 2
                        let low = try readHex4()
                        guard low >= 0xDC00 && low < 0xE000 else { throw fail("unpaired surrogate in \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                case 0..<0x20:
                    if c == UInt8(ascii: "\n") { throw fail("unterminated string (line break inside)") }
                    throw fail("control character in string")
                default:
                    out.append(c)
                }
            }
        }

        mutating func readNumber() throws(LineJSONSyntaxError) -> Double {
            let start = index
            if current == UInt8(ascii: "-") { index += 1 }
            func digits(_ cursor: inout Cursor) -> Int {
                var n = 0
                while let c = cursor.current, c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") {
                    cursor.index += 1
                    n += 1
                }
                return n
            }
            let intStart = index
            let intDigits = digits(&self)
            guard intDigits > 0 else { throw fail("invalid number") }
            if intDigits > 1 && bytes[intStart] == UInt8(ascii: "0") { throw fail("invalid number (leading zero)") }
            if current == UInt8(ascii: ".") {
                index += 1
                guard digits(&self) > 0 else { throw fail("invalid number (no digits after '.')") }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                index += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                guard digits(&self) > 0 else { throw fail("invalid number (no exponent digits)") }
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            guard let v = Double(text), v.isFinite else { throw fail("number out of range") }
            return v
        }
    }
}
