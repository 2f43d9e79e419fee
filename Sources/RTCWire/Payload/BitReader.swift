/// A most-significant-bit-first reader for codec headers (VP9 uncompressed header, AV1 sequence
/// header) that reads zeros past the end and remembers it did, so a parser checks ``overrun`` once at
/// the end instead of after every field. (H.264 has its own, which skips emulation-prevention bytes.)
@usableFromInline
struct BitReader {
    @usableFromInline let bytes: UnsafeRawBufferPointer
    @usableFromInline var bit = 0
    @usableFromInline var overrun = false

    @inlinable init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// The next `n` bits (at most 32) as an unsigned value.
    @inlinable mutating func read(_ n: Int) -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<n {
            let i = bit >> 3
            var b: UInt32 = 0
            if i < bytes.count {
                b = UInt32(bytes[i] >> (7 - UInt8(bit & 7))) & 1
            } else {
                overrun = true
            }
            v = v << 1 | b
            bit += 1
        }
        return v
    }

    /// AV1's uvlc() (AV1 specification §4.10.3); nil past 32 leading zeros.
    @inlinable mutating func readUVLC() -> UInt32? {
        var zeros = 0
        while read(1) == 0 {
            zeros += 1
            if zeros >= 32 || overrun { return nil }
        }
        return zeros == 0 ? 0 : read(zeros) + (UInt32(1) << zeros) - 1
    }
}
