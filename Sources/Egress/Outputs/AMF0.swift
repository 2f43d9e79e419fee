/// AMF0 (Action Message Format 0), the encoding of RTMP's commands: only the types RTMP publishing sends
/// and reads (number, boolean, string, object, null, ECMA array).
enum AMF0 {
    /// A decoded value; types a publisher never needs read as `.unsupported` and stop the decoding.
    enum Value: Equatable {
        case number(Double)
        case boolean(Bool)
        case string(String)
        case object([(String, Value)])
        case null
        case undefined

        static func == (a: Value, b: Value) -> Bool {
            switch (a, b) {
            case (.number(let x), .number(let y)): return x == y
            case (.boolean(let x), .boolean(let y)): return x == y
            case (.string(let x), .string(let y)): return x == y
            case (.null, .null), (.undefined, .undefined): return true
            case (.object(let x), .object(let y)):
                return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
            default: return false
            }
        }

        /// A property of an object by name.
        subscript(key: String) -> Value? {
            guard case .object(let fields) = self else { return nil }
            return fields.first { $0.0 == key }?.1
        }

        var string: String? { if case .string(let s) = self { s } else { nil } }
        var number: Double? { if case .number(let n) = self { n } else { nil } }
    }

    /// A malformed AMF0 value in a server's message.
    struct Malformed: Error { let reason: String }

    static func append(_ value: Value, to b: inout [UInt8]) {
        switch value {
        case .number(let n):
            b.append(0x00)
            let bits = n.bitPattern
            for shift in stride(from: 56, through: 0, by: -8) {
                b.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
            }
        case .boolean(let v): b.append(contentsOf: [0x01, v ? 1 : 0])
        case .string(let s):
            b.append(0x02)
            appendKey(s, to: &b)
        case .object(let fields):
            b.append(0x03)
            appendFields(fields, to: &b)
        case .null: b.append(0x05)
        case .undefined: b.append(0x06)
        }
    }

    /// An ECMA array (what `onMetaData` carries): a count, then fields like an object's.
    static func appendECMAArray(_ fields: [(String, Value)], to b: inout [UInt8]) {
        b.append(0x08)
        let n = UInt32(fields.count)
        b.append(contentsOf: [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)])
        appendFields(fields, to: &b)
    }

    private static func appendFields(_ fields: [(String, Value)], to b: inout [UInt8]) {
        for (key, value) in fields {
            appendKey(key, to: &b)
            append(value, to: &b)
        }
        b.append(contentsOf: [0, 0, 0x09])
    }

    private static func appendKey(_ s: String, to b: inout [UInt8]) {
        let utf8 = Array(s.utf8.prefix(0xFFFF))
        b.append(UInt8(utf8.count >> 8))
        b.append(UInt8(utf8.count & 0xFF))
        b.append(contentsOf: utf8)
    }

    /// Decodes the values of a command message, in order. Throws ``Malformed`` for truncated or unknown data.
    static func decode(_ b: ArraySlice<UInt8>) throws -> [Value] {
        var i = b.startIndex
        var out: [Value] = []
        while i < b.endIndex { out.append(try value(b, &i, depth: 0)) }
        return out
    }

    private static func need(_ b: ArraySlice<UInt8>, _ i: Int, _ n: Int) throws {
        guard b.endIndex - i >= n else { throw Malformed(reason: "AMF0 value truncated") }
    }

    private static func key(_ b: ArraySlice<UInt8>, _ i: inout Int) throws -> String {
        try need(b, i, 2)
        let n = Int(b[i]) << 8 | Int(b[i + 1])
        i += 2
        try need(b, i, n)
        defer { i += n }
        return String(decoding: b[i..<i + n], as: UTF8.self)
    }

    private static func value(_ b: ArraySlice<UInt8>, _ i: inout Int, depth: Int) throws -> Value {
        guard depth < 16 else { throw Malformed(reason: "AMF0 nesting deeper than 16") }
        try need(b, i, 1)
        let type = b[i]
        i += 1
        switch type {
        case 0x00:
            try need(b, i, 8)
            var bits: UInt64 = 0
            for k in 0..<8 { bits = bits << 8 | UInt64(b[i + k]) }
            i += 8
            return .number(Double(bitPattern: bits))
        case 0x01:
            try need(b, i, 1)
            i += 1
            return .boolean(b[i - 1] != 0)
        case 0x02: return .string(try key(b, &i))
        case 0x03, 0x08:
            if type == 0x08 {
                try need(b, i, 4)
                i += 4
            }
            var fields: [(String, Value)] = []
            while true {
                let name = try key(b, &i)
                try need(b, i, 1)
                if name.isEmpty && b[i] == 0x09 {
                    i += 1
                    return .object(fields)
                }
                fields.append((name, try value(b, &i, depth: depth + 1)))
            }
        case 0x05: return .null
        case 0x06: return .undefined
        default: throw Malformed(reason: "AMF0 type \(type) not supported")
        }
    }
}
