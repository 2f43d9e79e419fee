/// Byte-level helpers for SDP tokenizing.
///
/// SDP separators are all ASCII, so the parser works on UTF-8 bytes: splitting valid UTF-8 at an
/// ASCII byte always yields valid UTF-8, and we avoid grapheme-cluster surprises (e.g. "\r\n" or a
/// space followed by a combining mark being one `Character`).
typealias SDPBytes = ArraySlice<UInt8>

enum SDPText {
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A
    static let equals: UInt8 = 0x3D
    static let slash: UInt8 = 0x2F
    static let semicolon: UInt8 = 0x3B
    static let comma: UInt8 = 0x2C
    static let tilde: UInt8 = 0x7E

    @inline(__always)
    static func isSpace(_ byte: UInt8) -> Bool { byte == space || byte == tab }

    /// Drops leading and trailing spaces and tabs.
    static func trim(_ bytes: SDPBytes) -> SDPBytes {
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        return bytes[start..<end]
    }

    /// Splits on runs of spaces/tabs, dropping empty pieces.
    static func tokens(_ bytes: SDPBytes) -> [SDPBytes] {
        bytes.split(whereSeparator: isSpace)
    }

    /// Splits off the first whitespace-delimited token; the rest has its surrounding whitespace trimmed.
    static func firstToken(_ bytes: SDPBytes) -> (token: SDPBytes, rest: SDPBytes) {
        let trimmed = trim(bytes)
        guard let gap = trimmed.firstIndex(where: isSpace) else {
            return (trimmed, trimmed[trimmed.endIndex...])
        }
        return (trimmed[trimmed.startIndex..<gap], trim(trimmed[gap...]))
    }

    /// Splits at the first occurrence of `separator`; `after` is nil when it does not occur.
    static func splitOnce(_ bytes: SDPBytes, at separator: UInt8) -> (before: SDPBytes, after: SDPBytes?) {
        guard let index = bytes.firstIndex(of: separator) else { return (bytes, nil) }
        return (bytes[bytes.startIndex..<index], bytes[(index + 1)...])
    }

    /// Splits on every `separator`, keeping empty pieces.
    static func split(_ bytes: SDPBytes, on separator: UInt8) -> [SDPBytes] {
        bytes.split(separator: separator, omittingEmptySubsequences: false)
    }

    static func string(_ bytes: SDPBytes) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    static func bytes(_ string: String) -> SDPBytes {
        SDPBytes(string.utf8)
    }

    /// Parses an unsigned decimal made only of ASCII digits; nil on empty input, any other byte, or overflow.
    static func unsigned<T: FixedWidthInteger & UnsignedInteger>(_ bytes: SDPBytes, as type: T.Type = T.self) -> T? {
        guard !bytes.isEmpty, bytes.count <= 40 else { return nil }
        var value: T = 0
        for byte in bytes {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(T(byte - 0x30))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
        }
        return value
    }

    /// True when every byte is an ICE "ice-char" (ALPHA / DIGIT / "+" / "/").
    static func isICEChars(_ bytes: SDPBytes) -> Bool {
        bytes.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2B || byte == 0x2F
        }
    }

    /// Parses `key[=value]` pairs separated by `;` (fmtp and rid restrictions). Empty pieces are skipped.
    static func parameters(_ bytes: SDPBytes) -> [SDPParameter] {
        var result: [SDPParameter] = []
        for piece in split(bytes, on: semicolon) {
            let trimmed = trim(piece)
            if trimmed.isEmpty { continue }
            let (key, value) = splitOnce(trimmed, at: equals)
            result.append(SDPParameter(key: string(trim(key)), value: value.map { string(trim($0)) }))
        }
        return result
    }

    static func serialize(_ parameters: [SDPParameter]) -> String {
        var out = ""
        for (index, parameter) in parameters.enumerated() {
            if index > 0 { out += ";" }
            out += parameter.key
            if let value = parameter.value { out += "=" + value }
        }
        return out
    }
}
