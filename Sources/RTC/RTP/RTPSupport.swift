import RTCWire

/// A 64-bit NTP timestamp (RFC 5905 era 0): seconds since 1900 in the high 32 bits, fraction in the low 32.
///
/// Sender reports carry this wall-clock time next to an RTP timestamp; receivers use the pair to map
/// media time to wall time (A/V sync).
public struct NTPTime: Sendable, Hashable, Comparable {
    /// The raw 32.32 fixed-point value.
    public var value: UInt64

    /// Creates a time from its raw 32.32 value.
    public init(value: UInt64) { self.value = value }

    /// Creates a time from whole seconds since 1900 and a binary fraction.
    public init(seconds: UInt32, fraction: UInt32) { value = UInt64(seconds) << 32 | UInt64(fraction) }

    /// Converts a Unix time in nanoseconds (e.g. `clock_gettime(CLOCK_REALTIME)`).
    public init(unixNanoseconds ns: UInt64) {
        let seconds = ns / 1_000_000_000 + 2_208_988_800
        let fraction = ((ns % 1_000_000_000) << 32) / 1_000_000_000
        value = seconds << 32 | fraction
    }

    /// Whole seconds since 1900.
    public var seconds: UInt32 { UInt32(truncatingIfNeeded: value >> 32) }
    /// Binary fraction of a second.
    public var fraction: UInt32 { UInt32(truncatingIfNeeded: value) }
    /// The middle 32 bits, as used by the LSR field of report blocks.
    public var middle32: UInt32 { UInt32(truncatingIfNeeded: value >> 16) }
    /// Unix time in nanoseconds (0 for times before 1970).
    public var unixNanoseconds: UInt64 {
        let s = UInt64(seconds)
        guard s >= 2_208_988_800 else { return 0 }
        return (s - 2_208_988_800) * 1_000_000_000 + (UInt64(fraction) * 1_000_000_000) >> 32
    }

    public static func < (a: NTPTime, b: NTPTime) -> Bool { a.value < b.value }

    /// Adds a signed offset in nanoseconds, saturating at the ends of the range.
    func adding(nanoseconds delta: Int64) -> NTPTime {
        let magnitude = delta.magnitude
        let ticks = (magnitude / 1_000_000_000) << 32 + ((magnitude % 1_000_000_000) << 32) / 1_000_000_000
        if delta >= 0 {
            let (r, o) = value.addingReportingOverflow(ticks)
            return NTPTime(value: o ? .max : r)
        }
        return NTPTime(value: value >= ticks ? value - ticks : 0)
    }
}

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

/// A small deterministic generator (RTPRandom) so a seed makes tests reproducible.
struct RTPRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension UnsafeMutableRawBufferPointer {
    @inline(__always) func rtpPut16(_ v: UInt16, at i: Int) {
        self[i] = UInt8(truncatingIfNeeded: v >> 8)
        self[i + 1] = UInt8(truncatingIfNeeded: v)
    }
    @inline(__always) func rtpPut24(_ v: UInt32, at i: Int) {
        self[i] = UInt8(truncatingIfNeeded: v >> 16)
        self[i + 1] = UInt8(truncatingIfNeeded: v >> 8)
        self[i + 2] = UInt8(truncatingIfNeeded: v)
    }
    @inline(__always) func rtpPut32(_ v: UInt32, at i: Int) {
        self[i] = UInt8(truncatingIfNeeded: v >> 24)
        self[i + 1] = UInt8(truncatingIfNeeded: v >> 16)
        self[i + 2] = UInt8(truncatingIfNeeded: v >> 8)
        self[i + 3] = UInt8(truncatingIfNeeded: v)
    }
}

extension UnsafeRawBufferPointer {
    @inline(__always) func rtpGet16(_ i: Int) -> UInt16 { UInt16(self[i]) << 8 | UInt16(self[i + 1]) }
    @inline(__always) func rtpGet32(_ i: Int) -> UInt32 {
        UInt32(self[i]) << 24 | UInt32(self[i + 1]) << 16 | UInt32(self[i + 2]) << 8 | UInt32(self[i + 3])
    }
}
