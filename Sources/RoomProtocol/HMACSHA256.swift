import COpenSSL
import Foundation

/// HMAC-SHA256 through OpenSSL.
enum HMACSHA256 {
    static func mac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        // OpenSSL wants a non-null key pointer even for an empty key; the length stays 0.
        let keyBytes = key.isEmpty ? [0] : key
        keyBytes.withUnsafeBufferPointer { k in
            message.withUnsafeBufferPointer { m in
                out.withUnsafeMutableBufferPointer { o in
                    _ = HMAC(
                        EVP_sha256(), k.baseAddress, Int32(key.count), m.baseAddress, m.count, o.baseAddress, &length)
                }
            }
        }
        return out
    }

    /// Compares without an early exit so timing does not reveal how many leading bytes match.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

/// Base64url without padding (RFC 7515 §2).
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        var s = Data(bytes).base64EncodedString()
        s = s.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while s.hasSuffix("=") { s.removeLast() }
        return s
    }

    /// Strict decode: only the URL alphabet, no padding, no whitespace.
    static func decode(_ text: Substring) -> [UInt8]? {
        var standard = ""
        standard.reserveCapacity(text.utf8.count + 3)
        for c in text.unicodeScalars {
            switch c {
            case "A"..."Z", "a"..."z", "0"..."9": standard.unicodeScalars.append(c)
            case "-": standard.append("+")
            case "_": standard.append("/")
            default: return nil
            }
        }
        switch standard.utf8.count % 4 {
        case 1: return nil
        case 2: standard += "=="
        case 3: standard += "="
        default: break
        }
        return Data(base64Encoded: standard).map { Array($0) }
    }
}
