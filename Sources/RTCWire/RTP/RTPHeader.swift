/// Errors from ``RTPHeader/parse(_:)``.
public enum RTPError: Error, Equatable, Sendable {
    case tooShort(Int)
    case badVersion(UInt8)
    case csrcOverrun
    case extensionOverrun
    case badPadding
    case bufferTooSmall
}

/// A parsed RTP fixed header plus the location of its header extension and payload (RFC 3550, RFC 8285).
///
/// Parsing never allocates: the struct only records offsets into the caller's buffer, so it can be
/// used on the receive hot path. Extension elements are looked up on demand with
/// ``extensionElement(id:in:)``.
public struct RTPHeader: Sendable, Equatable {
    public var padding: Bool
    public var marker: Bool
    public var payloadType: UInt8
    public var sequenceNumber: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32
    public var csrcCount: Int
    /// The extension profile (0xBEDE one-byte, 0x100x two-byte), or nil without an extension.
    public var extensionProfile: UInt16?
    /// Byte offset and length of the extension data (after the 4-byte extension header).
    public var extensionOffset: Int
    public var extensionLength: Int
    /// Byte offset of the payload, which is also the full header length.
    public var payloadOffset: Int
    /// Payload length, excluding padding.
    public var payloadLength: Int
    /// Number of padding bytes at the end of the packet.
    public var paddingLength: Int

    /// Returns true when the first two bytes look like RTP or RTCP (RFC 7983: first byte 128–191).
    @inlinable
    public static func isRTPOrRTCP(_ firstByte: UInt8) -> Bool { firstByte >= 128 && firstByte <= 191 }

    /// Returns true when a packet that passed ``isRTPOrRTCP(_:)`` is RTCP (RFC 5761 demultiplexing:
    /// packet type 192–223).
    @inlinable
    public static func isRTCP(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 2 else { return false }
        let pt = bytes[1]
        return pt >= 192 && pt <= 223
    }

    /// Parses the header of the RTP packet in `bytes`.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(RTPError) -> RTPHeader {
        let n = bytes.count
        guard n >= 12 else { throw .tooShort(n) }
        let b0 = bytes[0]
        guard b0 >> 6 == 2 else { throw .badVersion(b0 >> 6) }
        let b1 = bytes[1]
        let cc = Int(b0 & 0x0F)
        var offset = 12 + cc * 4
        guard offset <= n else { throw .csrcOverrun }
        var profile: UInt16? = nil
        var extOffset = 0
        var extLength = 0
        if b0 & 0x10 != 0 {
            guard offset + 4 <= n else { throw .extensionOverrun }
            profile = UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
            let words = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            extOffset = offset + 4
            extLength = words * 4
            offset = extOffset + extLength
            guard offset <= n else { throw .extensionOverrun }
        }
        var padLength = 0
        if b0 & 0x20 != 0 {
            padLength = Int(bytes[n - 1])
            guard padLength > 0, offset + padLength <= n else { throw .badPadding }
        }
        return RTPHeader(
            padding: b0 & 0x20 != 0,
            marker: b1 & 0x80 != 0,
            payloadType: b1 & 0x7F,
            sequenceNumber: UInt16(bytes[2]) << 8 | UInt16(bytes[3]),
            timestamp: UInt32(bytes[4]) << 24 | UInt32(bytes[5]) << 16 | UInt32(bytes[6]) << 8 | UInt32(bytes[7]),
            ssrc: UInt32(bytes[8]) << 24 | UInt32(bytes[9]) << 16 | UInt32(bytes[10]) << 8 | UInt32(bytes[11]),
            csrcCount: cc,
            extensionProfile: profile,
            extensionOffset: extOffset,
            extensionLength: extLength,
            payloadOffset: offset,
            payloadLength: n - offset - padLength,
            paddingLength: padLength
        )
    }

    /// Finds header-extension element `id` and returns the byte range of its data in `bytes`.
    ///
    /// Handles both the one-byte (0xBEDE) and two-byte (0x100x) forms of RFC 8285. Returns nil when
    /// the element is absent or the extension block is malformed.
    public func extensionElement(id: UInt8, in bytes: UnsafeRawBufferPointer) -> Range<Int>? {
        guard let profile = extensionProfile, id != 0 else { return nil }
        var i = extensionOffset
        let end = min(extensionOffset + extensionLength, bytes.count)
        if profile == 0xBEDE {
            while i < end {
                let b = bytes[i]
                if b == 0 {
                    i += 1
                    continue
                }  // padding
                let elementID = b >> 4
                let length = Int(b & 0x0F) + 1
                if elementID == 15 { return nil }  // reserved: stop parsing (RFC 8285 §4.2)
                let dataStart = i + 1
                guard dataStart + length <= end else { return nil }
                if elementID == id { return dataStart..<(dataStart + length) }
                i = dataStart + length
            }
        } else if profile & 0xFFF0 == 0x1000 {
            while i < end {
                let elementID = bytes[i]
                if elementID == 0 {
                    i += 1
                    continue
                }
                guard i + 1 < end else { return nil }
                let length = Int(bytes[i + 1])
                let dataStart = i + 2
                guard dataStart + length <= end else { return nil }
                if elementID == id { return dataStart..<(dataStart + length) }
                i = dataStart + length
            }
        }
        return nil
    }
}

/// Writes RTP headers into caller-owned buffers without allocating.
public enum RTPHeaderWriter {
    /// Writes the 12-byte fixed header at `buffer[0..<12]` and returns 12.
    @inlinable @discardableResult
    public static func writeFixedHeader(
        into buffer: UnsafeMutableRawBufferPointer, marker: Bool, payloadType: UInt8, sequenceNumber: UInt16,
        timestamp: UInt32, ssrc: UInt32, hasExtension: Bool = false
    ) throws(RTPError) -> Int {
        guard buffer.count >= 12 else { throw .bufferTooSmall }
        buffer[0] = 0x80 | (hasExtension ? 0x10 : 0)
        buffer[1] = (marker ? 0x80 : 0) | (payloadType & 0x7F)
        buffer[2] = UInt8(truncatingIfNeeded: sequenceNumber >> 8)
        buffer[3] = UInt8(truncatingIfNeeded: sequenceNumber)
        buffer[4] = UInt8(truncatingIfNeeded: timestamp >> 24)
        buffer[5] = UInt8(truncatingIfNeeded: timestamp >> 16)
        buffer[6] = UInt8(truncatingIfNeeded: timestamp >> 8)
        buffer[7] = UInt8(truncatingIfNeeded: timestamp)
        buffer[8] = UInt8(truncatingIfNeeded: ssrc >> 24)
        buffer[9] = UInt8(truncatingIfNeeded: ssrc >> 16)
        buffer[10] = UInt8(truncatingIfNeeded: ssrc >> 8)
        buffer[11] = UInt8(truncatingIfNeeded: ssrc)
        return 12
    }
}
