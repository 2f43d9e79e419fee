/// The header-extension URIs WebRTC negotiates with `a=extmap` (RFC 8285).
public enum RTPExtensionURI {
    /// MID of the media section (RFC 8843 §15).
    public static let mid = "urn:ietf:params:rtp-hdrext:sdes:mid"
    /// RtpStreamId, the simulcast RID (RFC 8852).
    public static let rtpStreamID = "urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id"
    /// RepairedRtpStreamId, the RID an RTX stream repairs (RFC 8852).
    public static let repairedRTPStreamID = "urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id"
    /// Absolute send time, 24-bit 6.18 fixed-point seconds (used by REMB).
    public static let absSendTime = "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time"
    /// Client-to-mixer audio level (RFC 6464).
    public static let audioLevel = "urn:ietf:params:rtp-hdrext:ssrc-audio-level"
    /// Transport-wide sequence number for transport-cc feedback (draft-holmer-rmcat-transport-wide-cc).
    public static let transportWideCC =
        "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    /// Capture time, forwarded unchanged by SFUs (``AbsCaptureTime``).
    public static let absCaptureTime = AbsCaptureTime.uri
    /// The AV1 dependency descriptor: a frame's layers and decode targets (``AV1DependencyDescriptor``).
    public static let dependencyDescriptor = AV1DependencyDescriptorURI.uri
}

/// The audio level carried by the RFC 6464 extension.
public struct RTPAudioLevel: Sendable, Equatable {
    /// The V bit: the sender believes the packet contains voice.
    public var voiceActivity: Bool
    /// Level in -dBov, 0 (loudest) to 127 (silence).
    public var level: UInt8

    /// Creates a level; `level` is clamped to 127.
    public init(voiceActivity: Bool, level: UInt8) {
        self.voiceActivity = voiceActivity
        self.level = min(level, 127)
    }
}

/// Typed decoders and encoders for the header extensions in ``RTPExtensionURI``.
///
/// Decoders take the packet buffer and the element range returned by
/// ``RTPHeader/extensionElement(id:in:)``; they return nil when the element has the wrong size or
/// content, and never allocate except for the `String` results (short ids fit in a small string).
public enum RTPExtensions {
    /// Longest MID/RID we accept; RFC 8852 does not bound it, but the two-byte form caps data at 255.
    public static let maxIdentifierLength = 255

    // MARK: decoding

    /// Decodes a MID, RID or repaired RID: 1–255 bytes of printable ASCII (0x21–0x7E).
    public static func identifier(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String? {
        guard isValidIdentifier(bytes, range) else { return nil }
        return String(unsafeUninitializedCapacity: range.count) { out in
            for (k, i) in range.enumerated() { out[k] = bytes[i] }
            return range.count
        }
    }

    /// Compares a MID/RID element with `expected` without allocating (for per-packet demultiplexing).
    public static func identifier(
        _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, equals expected: String
    ) -> Bool {
        guard range.lowerBound >= 0, range.upperBound <= bytes.count else { return false }
        var i = range.lowerBound
        for c in expected.utf8 {
            guard i < range.upperBound, bytes[i] == c else { return false }
            i += 1
        }
        return i == range.upperBound
    }

    /// Decodes abs-send-time: the raw 24-bit value, 6.18 fixed-point seconds modulo 64 s.
    public static func absSendTime(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> UInt32? {
        guard range.count == 3, range.lowerBound >= 0, range.upperBound <= bytes.count else {
            return nil
        }
        let i = range.lowerBound
        return UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
    }

    /// Decodes the RFC 6464 audio level (one byte; RFC 8285 allows padding the one-byte form, so
    /// only the first data byte is read).
    public static func audioLevel(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>)
        -> RTPAudioLevel?
    {
        guard range.count >= 1, range.lowerBound >= 0, range.upperBound <= bytes.count else {
            return nil
        }
        let b = bytes[range.lowerBound]
        return RTPAudioLevel(voiceActivity: b & 0x80 != 0, level: b & 0x7F)
    }

    /// Decodes a transport-wide sequence number (two bytes, big-endian).
    public static func transportSequenceNumber(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>)
        -> UInt16?
    {
        guard range.count == 2, range.lowerBound >= 0, range.upperBound <= bytes.count else {
            return nil
        }
        return UInt16(bytes[range.lowerBound]) << 8 | UInt16(bytes[range.lowerBound + 1])
    }

    // MARK: abs-send-time conversions

    /// Converts a 64-bit NTP timestamp (32.32) to abs-send-time (6.18, seconds modulo 64).
    @inlinable
    public static func absSendTime(fromNTP ntp: UInt64) -> UInt32 {
        UInt32(truncatingIfNeeded: (ntp >> 14) & 0xFF_FFFF)
    }

    /// Expands abs-send-time back to the low 38 bits of a 32.32 NTP timestamp (the seconds wrap at 64).
    @inlinable
    public static func ntpTimestamp(fromAbsSendTime value: UInt32) -> UInt64 {
        UInt64(value & 0xFF_FFFF) << 14
    }

    /// Converts abs-send-time to microseconds within its 64-second period.
    @inlinable
    public static func microseconds(fromAbsSendTime value: UInt32) -> UInt64 {
        (UInt64(value & 0xFF_FFFF) * 1_000_000) >> 18
    }

    /// Converts microseconds (any origin) to abs-send-time, wrapping at 64 s.
    @inlinable
    public static func absSendTime(fromMicroseconds us: UInt64) -> UInt32 {
        // Split to avoid overflow: whole seconds, then the sub-second part in 1/2^18 s.
        let seconds = (us / 1_000_000) & 63
        let fraction = ((us % 1_000_000) << 18) / 1_000_000
        return UInt32(truncatingIfNeeded: (seconds << 18) | fraction) & 0xFF_FFFF
    }

    // MARK: encoding element data

    /// Writes MID/RID bytes at `offset`; returns the offset past them. Throws when `value` is empty,
    /// longer than 255 bytes, not printable ASCII, or does not fit.
    public static func writeIdentifier(
        _ value: String, into buffer: UnsafeMutableRawBufferPointer, at offset: Int
    ) throws(RTPError) -> Int {
        let n = value.utf8.count
        guard n >= 1, n <= maxIdentifierLength, offset >= 0, offset <= buffer.count - n else {
            throw .bufferTooSmall
        }
        var i = offset
        for c in value.utf8 {
            guard c >= 0x21, c <= 0x7E else { throw .bufferTooSmall }
            buffer[i] = c
            i += 1
        }
        return i
    }

    /// Writes the 1-byte audio level; returns the offset past it.
    public static func writeAudioLevel(
        _ value: RTPAudioLevel, into buffer: UnsafeMutableRawBufferPointer, at offset: Int
    ) throws(RTPError) -> Int {
        guard offset >= 0, offset < buffer.count else { throw .bufferTooSmall }
        buffer[offset] = (value.voiceActivity ? 0x80 : 0) | min(value.level, 127)
        return offset + 1
    }

    static func isValidIdentifier(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Bool {
        guard !range.isEmpty, range.count <= maxIdentifierLength, range.lowerBound >= 0,
            range.upperBound <= bytes.count
        else { return false }
        for i in range where bytes[i] < 0x21 || bytes[i] > 0x7E { return false }
        return true
    }
}

/// Builds an RFC 8285 extension block in place, element by element, without allocating.
///
/// Use on the send hot path after ``RTPHeaderWriter/writeFixedHeader(into:marker:payloadType:sequenceNumber:timestamp:ssrc:hasExtension:)``:
/// ```swift
/// var ext = try RTPExtensionBlockWriter(buffer: buf, at: 12)
/// try ext.appendTransportSequenceNumber(id: 3, seq)
/// let payloadOffset = try ext.finish()
/// ```
/// The block is padded with zeros to a 4-byte boundary, its length word is filled in and the X bit
/// of byte 0 is set by ``finish()``.
public struct RTPExtensionBlockWriter {
    private let buffer: UnsafeMutableRawBufferPointer
    private let start: Int
    private var position: Int
    /// True for the two-byte form (profile 0x1000), which allows ids up to 255 and 0–255 data bytes.
    public let twoByte: Bool

    /// Reserves the 4-byte extension header at `offset`.
    public init(buffer: UnsafeMutableRawBufferPointer, at offset: Int, twoByte: Bool = false)
        throws(RTPError)
    {
        guard offset >= 0, buffer.count >= 1, offset <= buffer.count - 4 else { throw .bufferTooSmall }
        self.buffer = buffer
        self.start = offset
        self.position = offset + 4
        self.twoByte = twoByte
    }

    /// Writes an element header for `length` data bytes and returns where the data goes.
    private mutating func beginElement(id: UInt8, length: Int) throws(RTPError) -> Int {
        if twoByte {
            guard id != 0, length <= 255, position <= buffer.count - 2 - length else {
                throw .bufferTooSmall
            }
            buffer[position] = id
            buffer[position + 1] = UInt8(length)
            position += 2
        } else {
            guard id >= 1, id <= 14, length >= 1, length <= 16, position <= buffer.count - 1 - length
            else {
                throw .bufferTooSmall
            }
            buffer[position] = id << 4 | UInt8(length - 1)
            position += 1
        }
        return position
    }

    /// Appends a MID/RID element.
    public mutating func appendIdentifier(id: UInt8, _ value: String) throws(RTPError) {
        let at = try beginElement(id: id, length: value.utf8.count)
        position = try RTPExtensions.writeIdentifier(value, into: buffer, at: at)
    }

    /// Appends an abs-send-time element (its low 24 bits).
    public mutating func appendAbsSendTime(id: UInt8, _ value: UInt32) throws(RTPError) {
        try appendInteger(id: id, UInt64(value), bytes: 3)
    }

    /// Appends an audio-level element.
    public mutating func appendAudioLevel(id: UInt8, _ value: RTPAudioLevel) throws(RTPError) {
        let at = try beginElement(id: id, length: 1)
        position = try RTPExtensions.writeAudioLevel(value, into: buffer, at: at)
    }

    /// Appends a transport-wide sequence number element.
    public mutating func appendTransportSequenceNumber(id: UInt8, _ value: UInt16) throws(RTPError) {
        try appendInteger(id: id, UInt64(value), bytes: 2)
    }

    /// Appends an abs-capture-time element with only the capture timestamp (NTP 32.32, 8 bytes).
    public mutating func appendAbsCaptureTime(id: UInt8, _ ntp: UInt64) throws(RTPError) {
        try appendInteger(id: id, ntp, bytes: 8)
    }

    /// Appends an element holding the low `count` bytes of `value`, big-endian.
    private mutating func appendInteger(id: UInt8, _ value: UInt64, bytes count: Int) throws(RTPError) {
        let at = try beginElement(id: id, length: count)
        for i in 0..<count { buffer[at + i] = UInt8(truncatingIfNeeded: value >> (8 * (count - 1 - i))) }
        position = at + count
    }

    /// Appends an element whose data is `bytes` as they are (a forwarded element, such as an AV1
    /// dependency descriptor copied from the publisher's packet).
    public mutating func appendBytes(id: UInt8, _ bytes: UnsafeRawBufferPointer) throws(RTPError) {
        let at = try beginElement(id: id, length: bytes.count)
        if let src = bytes.baseAddress, let dst = buffer.baseAddress, !bytes.isEmpty {
            (dst + at).copyMemory(from: src, byteCount: bytes.count)
        }
        position = at + bytes.count
    }

    /// Pads, writes the block header and sets the X bit; returns the offset just past the block
    /// (the payload offset when there are no CSRCs after it).
    public mutating func finish() throws(RTPError) -> Int {
        let dataLength = position - start - 4
        let padded = (dataLength + 3) & ~3
        guard start + 4 + padded <= buffer.count else { throw .bufferTooSmall }
        while position < start + 4 + padded {
            buffer[position] = 0
            position += 1
        }
        let profile: UInt16 = twoByte ? 0x1000 : 0xBEDE
        buffer[start] = UInt8(profile >> 8)
        buffer[start + 1] = UInt8(profile & 0xFF)
        buffer[start + 2] = UInt8(truncatingIfNeeded: (padded / 4) >> 8)
        buffer[start + 3] = UInt8(truncatingIfNeeded: padded / 4)
        buffer[0] |= 0x10
        return position
    }
}
