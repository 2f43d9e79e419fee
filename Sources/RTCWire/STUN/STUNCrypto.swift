// Pure-Swift SHA-1, HMAC-SHA1 and CRC-32: STUN needs them and RTCWire may not link C.

/// SHA-1 (FIPS 180-4), used only for STUN MESSAGE-INTEGRITY.
public enum SHA1 {
    /// Returns the 20-byte SHA-1 digest of `bytes`.
    public static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var state = State()
        state.update(bytes)
        return state.finish()
    }

    /// Returns the 20-byte SHA-1 digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0) }
    }

    /// Incremental SHA-1 state.
    public struct State: Sendable {
        var h0: UInt32 = 0x6745_2301
        var h1: UInt32 = 0xEFCD_AB89
        var h2: UInt32 = 0x98BA_DCFE
        var h3: UInt32 = 0x1032_5476
        var h4: UInt32 = 0xC3D2_E1F0
        var buffer: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        var bufferCount = 0
        var totalLength: UInt64 = 0

        /// Creates a fresh state.
        public init() {}

        /// Absorbs more input.
        public mutating func update(_ bytes: UnsafeRawBufferPointer) {
            for byte in bytes {
                append(byte)
            }
        }

        @inline(__always)
        mutating func append(_ byte: UInt8) {
            let index = bufferCount
            withUnsafeMutableBytes(of: &buffer) { $0[index] = byte }
            bufferCount = index + 1
            totalLength &+= 1
            if bufferCount == 64 {
                compress()
                bufferCount = 0
            }
        }

        mutating func compress() {
            var w = (
                UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0),
                UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0)
            )
            withUnsafeBytes(of: &buffer) { block in
                withUnsafeMutableBytes(of: &w) { words in
                    for i in 0..<16 {
                        let value =
                            UInt32(block[i * 4]) << 24 | UInt32(block[i * 4 + 1]) << 16
                            | UInt32(block[i * 4 + 2]) << 8 | UInt32(block[i * 4 + 3])
                        words.storeBytes(of: value, toByteOffset: i * 4, as: UInt32.self)
                    }
                }
            }
            var a = h0
            var b = h1
            var c = h2
            var d = h3
            var e = h4
            withUnsafeMutableBytes(of: &w) { raw in
                let words = raw.bindMemory(to: UInt32.self)
                for t in 0..<80 {
                    let wt: UInt32
                    if t < 16 {
                        wt = words[t]
                    } else {
                        let x = words[(t - 3) & 15] ^ words[(t - 8) & 15] ^ words[(t - 14) & 15] ^ words[t & 15]
                        wt = (x << 1) | (x >> 31)
                        words[t & 15] = wt
                    }
                    let f: UInt32
                    let k: UInt32
                    switch t {
                    case 0..<20:
                        f = (b & c) | (~b & d)
                        k = 0x5A82_7999
                    case 20..<40:
                        f = b ^ c ^ d
                        k = 0x6ED9_EBA1
                    case 40..<60:
                        f = (b & c) | (b & d) | (c & d)
                        k = 0x8F1B_BCDC
                    default:
                        f = b ^ c ^ d
                        k = 0xCA62_C1D6
                    }
                    let temp = ((a << 5) | (a >> 27)) &+ f &+ e &+ k &+ wt
                    e = d
                    d = c
                    c = (b << 30) | (b >> 2)
                    b = a
                    a = temp
                }
            }
            h0 = h0 &+ a
            h1 = h1 &+ b
            h2 = h2 &+ c
            h3 = h3 &+ d
            h4 = h4 &+ e
        }

        /// Pads, finishes and returns the digest.
        public mutating func finish() -> [UInt8] {
            let bitLength = totalLength &* 8
            append(0x80)
            while bufferCount != 56 {
                append(0)
            }
            for shift in stride(from: 56, through: 0, by: -8) {
                append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift)))
            }
            var out = [UInt8]()
            out.reserveCapacity(20)
            for word in [h0, h1, h2, h3, h4] {
                out.append(UInt8(truncatingIfNeeded: word >> 24))
                out.append(UInt8(truncatingIfNeeded: word >> 16))
                out.append(UInt8(truncatingIfNeeded: word >> 8))
                out.append(UInt8(truncatingIfNeeded: word))
            }
            return out
        }
    }
}

/// HMAC-SHA1 (RFC 2104).
public enum HMACSHA1 {
    /// Returns the 20-byte HMAC-SHA1 of `message` under `key`.
    public static func authenticate(key: [UInt8], message: UnsafeRawBufferPointer) -> [UInt8] {
        var block = key.count > 64 ? SHA1.hash(key) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        var inner = SHA1.State()
        let ipad = block.map { $0 ^ 0x36 }
        let opad = block.map { $0 ^ 0x5C }
        ipad.withUnsafeBytes { inner.update($0) }
        inner.update(message)
        let innerDigest = inner.finish()
        var outer = SHA1.State()
        opad.withUnsafeBytes { outer.update($0) }
        innerDigest.withUnsafeBytes { outer.update($0) }
        return outer.finish()
    }

    /// Returns the 20-byte HMAC-SHA1 of `message` under `key`.
    public static func authenticate(key: [UInt8], message: [UInt8]) -> [UInt8] {
        message.withUnsafeBytes { authenticate(key: key, message: $0) }
    }
}

/// CRC-32 (ISO-HDLC, the zlib polynomial) as STUN FINGERPRINT uses it.
public enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 {
            c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1
        }
        return c
    }

    /// Returns the CRC-32 checksum of `bytes`.
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        table.withUnsafeBufferPointer { t in
            for byte in bytes {
                crc = t[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
            }
        }
        return crc ^ 0xFFFF_FFFF
    }

    /// Returns the CRC-32 checksum of `bytes`.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }
}
