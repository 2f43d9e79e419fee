/// The abs-capture-time RTP header extension
/// (`http://www.webrtc.org/experiments/rtp-hdrext/abs-capture-time`).
///
/// Its element is the NTP time (unsigned 32.32 fixed point, seconds since 1900) at which the frame's
/// first sample was captured, optionally followed by the sender's estimated capture-clock offset
/// (signed 32.32), 8 or 16 bytes in all. Unlike abs-send-time it survives forwarding: an SFU copies it
/// unchanged, so a receiver can measure capture-to-arrival latency across the whole path.
public enum AbsCaptureTime {
    /// The extension URI used in `a=extmap`.
    public static let uri = "http://www.webrtc.org/experiments/rtp-hdrext/abs-capture-time"
    /// Reads the capture timestamp (NTP 32.32) from the element at `range` of `bytes`; nil when the
    /// element does not have the 8- or 16-byte size the format allows or lies outside `bytes`.
    public static func captureTime(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> UInt64? {
        guard range.count == 8 || range.count == 16, range.lowerBound >= 0, range.upperBound <= bytes.count else {
            return nil
        }
        var value: UInt64 = 0
        for i in range.lowerBound..<(range.lowerBound + 8) { value = value << 8 | UInt64(bytes[i]) }
        return value
    }

    /// The NTP 32.32 value of a Unix time in nanoseconds.
    public static func ntp(unixNanoseconds ns: UInt64) -> UInt64 { NTPTime(unixNanoseconds: ns).value }

    /// The Unix time in nanoseconds of an NTP 32.32 value (0 for times before 1970).
    public static func unixNanoseconds(ntp: UInt64) -> UInt64 { NTPTime(value: ntp).unixNanoseconds }
}
