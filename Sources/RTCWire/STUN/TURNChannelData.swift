// TURN ChannelData framing (RFC 8656 §12.4): a 4-byte header (channel number, length) in front of
// the application datagram, the compact alternative to Send and Data indications.

/// One ChannelData message, parsed without copying.
public enum TURNChannelData {
    /// Channel numbers a client may bind (RFC 8656 §12).
    public static let validChannels: ClosedRange<UInt16> = 0x4000...0x4FFF
    /// The header length.
    public static let headerLength = 4

    /// True if the first byte marks a ChannelData message (0b01 in the top two bits, RFC 7983).
    @inline(__always)
    public static func looksLikeChannelData(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= headerLength && bytes[0] >= 0x40 && bytes[0] <= 0x4F
    }

    /// The channel number and the range of the payload inside `bytes`, or nil when the message is
    /// malformed: a channel outside 0x4000–0x4FFF or a length beyond the datagram. Trailing bytes
    /// (UDP may carry up to 3 bytes of padding) are ignored.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> (channel: UInt16, payload: Range<Int>)? {
        guard bytes.count >= headerLength else { return nil }
        let channel = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        let length = Int(UInt16(bytes[2]) << 8 | UInt16(bytes[3]))
        guard validChannels.contains(channel), length <= bytes.count - headerLength else { return nil }
        return (channel, headerLength..<(headerLength + length))
    }

    /// Writes the header for `length` payload bytes on `channel` into the first 4 bytes of `target`
    /// (which must hold at least 4).
    @inline(__always)
    public static func writeHeader(into target: UnsafeMutableRawBufferPointer, channel: UInt16, length: Int) {
        target[0] = UInt8(truncatingIfNeeded: channel >> 8)
        target[1] = UInt8(truncatingIfNeeded: channel)
        target[2] = UInt8(truncatingIfNeeded: length >> 8)
        target[3] = UInt8(truncatingIfNeeded: length)
    }

    /// What the start of a TCP/TLS byte stream to a TURN server holds (RFC 8656 §12.5).
    public enum StreamFrame: Equatable, Sendable {
        /// A complete STUN or ChannelData frame of this many bytes (ChannelData padding included).
        case complete(Int)
        /// Too few bytes yet.
        case needMore
        /// Neither STUN nor ChannelData: the connection must be closed.
        case invalid
    }

    /// Over a stream STUN messages are self-delimiting and ChannelData is padded to a multiple of 4
    /// bytes; returns the frame at the start of `bytes`.
    public static func streamFrame(_ bytes: UnsafeRawBufferPointer) -> StreamFrame {
        guard bytes.count >= 4 else { return .needMore }
        let length = Int(UInt16(bytes[2]) << 8 | UInt16(bytes[3]))
        let first = bytes[0]
        let total: Int
        if first < 0x40 {
            guard length % 4 == 0 else { return .invalid }
            total = 20 + length
        } else if first <= 0x4F {
            total = headerLength + ((length + 3) & ~3)
        } else {
            return .invalid
        }
        return bytes.count >= total ? .complete(total) : .needMore
    }
}
