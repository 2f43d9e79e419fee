/// CRC-32 with polynomial 0x04C11DB7, most significant bit first (not reflected), no final XOR: the Ogg
/// page checksum starts from 0 (RFC 3533 §6), an MPEG-TS section's CRC_32 from 0xFFFFFFFF (ISO/IEC
/// 13818-1 Annex A).
public enum CRC32MSB {
    static let table: [UInt32] = (0..<256).map { i -> UInt32 in
        var r = UInt32(i) << 24
        for _ in 0..<8 { r = r & 0x8000_0000 != 0 ? (r << 1) ^ 0x04C1_1DB7 : r << 1 }
        return r
    }

    /// `crc` carried over `bytes`.
    public static func update<C: Collection>(_ crc: UInt32, _ bytes: C) -> UInt32 where C.Element == UInt8 {
        var c = crc
        table.withUnsafeBufferPointer { t in
            for byte in bytes { c = (c << 8) ^ t[Int((c >> 24) ^ UInt32(byte))] }
        }
        return c
    }
}
