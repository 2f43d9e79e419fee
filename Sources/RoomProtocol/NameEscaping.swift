/// The one escaping for names that become file names or Redis key components (room ids,
/// participant ids, node ids, topics): `A-Z`, `a-z`, `0-9` and `-` stay as they are, and every other
/// UTF-8 byte, `_` and `.` included, becomes `_` and two uppercase hex digits (`cam.a` → `cam_2Ea`,
/// `cam_a` → `cam_5Fa`, `v:pins` → `v_3Apins`).
///
/// The encoding is injective and reversible (``unescape(_:)``), so distinct names never share a file
/// or a key, and its output never contains `.`, `:`, `/` or `~`: a key built as
/// `PREFIX:room:ESCAPED:pins` or a file `ESCAPED.webm` cannot be produced by any other name.
/// docs/protocol.md ("Limits") documents it.
public enum NameEscaping {
    /// Longest ``fileName(_:)`` stem, in bytes: with an extension and a clash suffix it stays under
    /// the 255 bytes a Linux file name may have.
    public static let maxFileStemBytes = 200

    /// `name` escaped (see ``NameEscaping``).
    public static func escape(_ name: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(name.utf8.count)
        for byte in name.utf8 {
            if isKept(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "_"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The name that ``escape(_:)`` turned into `escaped`; nil for a string it never produces
    /// (a byte outside the kept set, a bad or lowercase hex pair, an escape of a kept byte, invalid
    /// UTF-8).
    public static func unescape(_ escaped: String) -> String? {
        var out: [UInt8] = []
        let bytes = Array(escaped.utf8)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if isKept(b) {
                out.append(b)
                i += 1
                continue
            }
            guard b == UInt8(ascii: "_"), i + 2 < bytes.count,
                let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2])
            else { return nil }
            let decoded = hi << 4 | lo
            // Only the canonical form: an escaped kept byte would make two spellings of one name.
            guard !isKept(decoded) else { return nil }
            out.append(decoded)
            i += 3
        }
        return String(validating: out, as: UTF8.self)
    }

    /// A file name stem for `name`: its escaping, or when that is longer than ``maxFileStemBytes``,
    /// its first 180 bytes, `~` and 16 hex digits of a 64-bit FNV-1a hash of the whole name (the
    /// `~` never occurs in an escaping, so a shortened stem never equals a whole one). Recorders
    /// still open their files exclusively: a hash clash gets a suffix, never another's file.
    public static func fileName(_ name: String) -> String {
        let escaped = escape(name)
        guard escaped.utf8.count > maxFileStemBytes else { return escaped }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        var out = Array(escaped.utf8.prefix(180))
        out.append(UInt8(ascii: "~"))
        for shift in stride(from: 60, through: 0, by: -4) { out.append(hexDigits[Int((hash >> UInt64(shift)) & 0xF)]) }
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    @inline(__always) private static func isKept(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x41 + 10
        default: return nil
        }
    }
}
