extension UnsafeMutableRawBufferPointer {
    // Big-endian (network order) writes at offset `i`: the one home of the RTP, RTCP and pipe
    // header writers. Inlined into every caller (no call per field on the packet path).
    @inlinable @inline(__always) package func put16(_ v: UInt16, at i: Int) {
        self[i] = UInt8(truncatingIfNeeded: v >> 8)
        self[i + 1] = UInt8(truncatingIfNeeded: v)
    }
    @inlinable @inline(__always) package func put24(_ v: UInt32, at i: Int) {
        self[i] = UInt8(truncatingIfNeeded: v >> 16)
        self[i + 1] = UInt8(truncatingIfNeeded: v >> 8)
        self[i + 2] = UInt8(truncatingIfNeeded: v)
    }
    @inlinable @inline(__always) package func put32(_ v: UInt32, at i: Int) {
        self[i] = UInt8(truncatingIfNeeded: v >> 24)
        self[i + 1] = UInt8(truncatingIfNeeded: v >> 16)
        self[i + 2] = UInt8(truncatingIfNeeded: v >> 8)
        self[i + 3] = UInt8(truncatingIfNeeded: v)
    }
    @inlinable @inline(__always) package func put64(_ v: UInt64, at i: Int) {
        put32(UInt32(truncatingIfNeeded: v >> 32), at: i)
        put32(UInt32(truncatingIfNeeded: v), at: i + 4)
    }
}
