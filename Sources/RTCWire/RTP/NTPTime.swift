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

    /// Seconds from 1900-01-01 (NTP era 0) to 1970-01-01 (the Unix epoch).
    public static let unixEpochSeconds: UInt64 = 2_208_988_800

    /// Converts a Unix time in nanoseconds (e.g. `clock_gettime(CLOCK_REALTIME)`).
    public init(unixNanoseconds ns: UInt64) {
        let seconds = ns / 1_000_000_000 + Self.unixEpochSeconds
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
        guard s >= Self.unixEpochSeconds else { return 0 }
        return (s - Self.unixEpochSeconds) * 1_000_000_000 + (UInt64(fraction) * 1_000_000_000) >> 32
    }

    /// Nanoseconds since 1900 (signed, so that two times subtract directly).
    public var nanosecondsSince1900: Int64 {
        Int64(seconds) * 1_000_000_000 + Int64((UInt64(fraction) * 1_000_000_000) >> 32)
    }

    public static func < (a: NTPTime, b: NTPTime) -> Bool { a.value < b.value }

    /// Adds a signed offset in nanoseconds, saturating at the ends of the range.
    public func adding(nanoseconds delta: Int64) -> NTPTime {
        let magnitude = delta.magnitude
        let ticks = (magnitude / 1_000_000_000) << 32 + ((magnitude % 1_000_000_000) << 32) / 1_000_000_000
        if delta >= 0 {
            let (r, o) = value.addingReportingOverflow(ticks)
            return NTPTime(value: o ? .max : r)
        }
        return NTPTime(value: value >= ticks ? value - ticks : 0)
    }
}
