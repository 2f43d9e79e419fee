import RTCWire

/// Durations in the engine's clock (monotonic nanoseconds).
enum RTPNanos {
    static let millisecond: UInt64 = 1_000_000
    static let second: UInt64 = 1_000_000_000
}

/// Converts a nanosecond span to RTP clock units without overflow.
@inlinable
public func rtpTicks(nanoseconds: UInt64, clockRate: UInt32) -> UInt64 {
    let product = nanoseconds.multipliedFullWidth(by: UInt64(clockRate))
    // The quotient is smaller than `nanoseconds` (clock rates are < 1 GHz), so it cannot overflow.
    return UInt64(1_000_000_000).dividingFullWidth(product).quotient
}

extension UnsafeRawBufferPointer {
    @inline(__always) func rtpGet16(_ i: Int) -> UInt16 { UInt16(self[i]) << 8 | UInt16(self[i + 1]) }
    @inline(__always) func rtpGet32(_ i: Int) -> UInt32 {
        UInt32(self[i]) << 24 | UInt32(self[i + 1]) << 16 | UInt32(self[i + 2]) << 8 | UInt32(self[i + 3])
    }
}
