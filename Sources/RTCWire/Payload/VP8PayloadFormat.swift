/// VP8 (RFC 7741) as an ``RTPPayloadFormat``: the payload descriptor and the key-frame header read in
/// one pass, without allocating.
public enum VP8PayloadFormat: VideoPayloadFormat {
    /// Reads the payload descriptor and, on a frame's first packet, the key-frame header.
    ///
    /// A descriptor that is cut short, or is followed by no VP8 byte, throws
    /// ``RTPPayloadError/malformedHeader`` (the rules of ``VP8PayloadDescriptor/parse(_:)``).
    @inlinable
    public static func read(_ p: UnsafeRawBufferPointer, into info: inout RTPPayloadInfo) throws(RTPPayloadError) {
        let b0 = p[0]
        info.nonReference = b0 & 0x20 != 0
        info.startsFrame = b0 & 0x10 != 0 && b0 & 0x07 == 0
        var at = 1
        if b0 & 0x80 != 0 {
            guard at < p.count else { throw .malformedHeader }
            let x = p[at]
            at += 1
            if x & 0x80 != 0 { try readPictureID(p, at: &at, into: &info) }
            if x & 0x40 != 0 {
                guard at < p.count else { throw .malformedHeader }
                info.tl0PicIdxOffset = UInt8(at)
                info.tl0PicIdx = p[at]
                at += 1
            }
            if x & 0x30 != 0 {
                guard at < p.count else { throw .malformedHeader }
                if x & 0x20 != 0 { info.temporalLayer = p[at] >> 6 }
                at += 1
            }
        }
        guard at < p.count else { throw .malformedHeader }
        info.headerLength = at
        // Key frame: P bit clear in the frame tag, then the start code 9d 01 2a (RFC 6386 §9.1).
        info.isKeyframe =
            info.startsFrame && p[at] & 0x01 == 0 && p.count >= at + 6 && p[at + 3] == 0x9D && p[at + 4] == 0x01
            && p[at + 5] == 0x2A
        if info.isKeyframe, p.count >= at + 10 {
            info.width = (UInt16(p[at + 6]) | UInt16(p[at + 7]) << 8) & 0x3FFF
            info.height = (UInt16(p[at + 8]) | UInt16(p[at + 9]) << 8) & 0x3FFF
        }
    }

    /// Reads the picture ID at `at` (an M bit, then 7 or 15 bits), records where it sits and moves
    /// `at` past it. VP8 and VP9 descriptors place it alike, so one munger rewrites both.
    @inlinable
    static func readPictureID(
        _ p: UnsafeRawBufferPointer, at: inout Int, into info: inout RTPPayloadInfo
    ) throws(RTPPayloadError) {
        guard at < p.count else { throw .malformedHeader }
        info.pictureIDOffset = UInt8(at)
        let p0 = p[at]
        if p0 & 0x80 != 0 {
            guard at + 1 < p.count else { throw .malformedHeader }
            info.pictureID = UInt16(p0 & 0x7F) << 8 | UInt16(p[at + 1])
            info.pictureIDIs15Bit = true
            at += 2
        } else {
            info.pictureID = UInt16(p0)
            at += 1
        }
    }

    /// The payloads a frame of `frameLength` bytes is split into, balanced so that the last packet
    /// is not a tiny remainder. Packet `k` carries bytes ``chunk(_:)`` of the frame.
    ///
    /// Every packet but the last carries the same number of bytes and the last one a few bytes
    /// fewer (fewer than the packet count), so that a frame's packets to one receiver make one run
    /// of equal-sized datagrams, the shape one UDP GSO message sends (`UDPSendBatch`). Where that
    /// shape does not fit (tiny payload sizes), sizes differ by at most one byte, larger first.
    public struct Split: Sendable, Equatable {
        /// Number of packets (0 for an empty frame or a payload size with no room for data).
        public let count: Int
        private let small: Int
        private let extra: Int
        private let frameLength: Int

        /// Plans the split of a `frameLength`-byte frame into payloads of at most `maxPayloadSize`
        /// bytes, each starting with a `descriptorLength`-byte descriptor.
        public init(frameLength: Int, maxPayloadSize: Int, descriptorLength: Int) {
            count = VP8Packetizer.packetCount(
                frameLength: frameLength, maxPayloadSize: maxPayloadSize, descriptorLength: descriptorLength)
            self.frameLength = frameLength
            let even = count > 0 ? (frameLength + count - 1) / count : 0
            if count > 0 && (count - 1) * even < frameLength {
                // Equal chunks of `even` bytes; the last one takes the rest.
                small = even
                extra = 0
            } else {
                small = count > 0 ? frameLength / count : 0
                extra = count > 0 ? frameLength % count : 0
            }
        }

        /// The frame bytes of packet `k`.
        public func chunk(_ k: Int) -> Range<Int> {
            let start = k * small + min(k, extra)
            if k == count - 1 { return start..<frameLength }
            return start..<(start + small + (k < extra ? 1 : 0))
        }
    }

    /// Writes packet `k` of `split` (descriptor and frame bytes) at the start of `buffer` and returns
    /// its length. The first packet has S=1 and partition 0; every packet carries a 15-bit picture ID.
    @inlinable
    public static func writePacket(
        _ k: Int, of split: Split, frame: UnsafeRawBufferPointer, pictureID: UInt16,
        into buffer: UnsafeMutableRawBufferPointer
    ) throws(VP8Error) -> Int {
        let descriptor = VP8PayloadDescriptor(
            startOfPartition: k == 0, pictureID: pictureID & 0x7FFF, pictureIDIs15Bit: true)
        let at = try descriptor.write(into: buffer)
        let chunk = split.chunk(k)
        guard at + chunk.count <= buffer.count else { throw .bufferTooSmall }
        if let src = frame.baseAddress, let dst = buffer.baseAddress, !chunk.isEmpty {
            (dst + at).copyMemory(from: src + chunk.lowerBound, byteCount: chunk.count)
        }
        return at + chunk.count
    }
}

/// Keeps the VP8 picture ID and TL0PICIDX of a forwarded stream continuous when its source switches
/// (another simulcast layer): after a switch, each field continues one past the last value sent, so a
/// decoder sees no gap in picture IDs (which would make it wait for a key frame) and no TL0PICIDX jump.
///
/// Like the sequence and timestamp offsets of a down track, the offsets change only at a switch, and
/// both fields keep the width (7 or 15 bits) the source used.
public struct VP8Munger: RTPPayloadMunger, Sendable {
    private var pictureIDOffset: UInt16 = 0
    private var tl0Offset: UInt8 = 0
    /// The newest picture ID sent (valid once ``hasSent``).
    public private(set) var lastPictureID: UInt16 = 0
    /// The newest TL0PICIDX sent.
    public private(set) var lastTL0PicIdx: UInt8 = 0
    private var hasSentPictureID = false
    private var hasSentTL0 = false

    /// Creates a munger that passes the first source's values through unchanged.
    public init() {}

    /// Whether any packet with a picture ID went through.
    public var hasSent: Bool { hasSentPictureID }

    public mutating func switchSource(at info: RTPPayloadInfo) {
        if info.hasPictureID, hasSentPictureID { pictureIDOffset = lastPictureID &+ 1 &- info.pictureID }
        if info.hasTL0PicIdx, hasSentTL0 { tl0Offset = lastTL0PicIdx &+ 1 &- info.tl0PicIdx }
    }

    public mutating func munge(_ info: RTPPayloadInfo) -> RTPPayloadRewrite {
        var rewrite = RTPPayloadRewrite()
        if info.hasPictureID {
            let mask: UInt16 = info.pictureIDIs15Bit ? 0x7FFF : 0x7F
            let out = (info.pictureID &+ pictureIDOffset) & mask
            // Only a newer picture moves `last` (a late packet of an older picture must not).
            let ahead = (out &- lastPictureID) & mask
            if !hasSentPictureID || (ahead != 0 && ahead <= mask / 2) { lastPictureID = out }
            hasSentPictureID = true
            rewrite.pictureIDOffset = info.pictureIDOffset
            rewrite.pictureIDIs15Bit = info.pictureIDIs15Bit
            rewrite.pictureID = out
        }
        if info.hasTL0PicIdx {
            let out = info.tl0PicIdx &+ tl0Offset
            let ahead = out &- lastTL0PicIdx
            if !hasSentTL0 || (ahead != 0 && ahead < 128) { lastTL0PicIdx = out }
            hasSentTL0 = true
            rewrite.tl0PicIdxOffset = info.tl0PicIdxOffset
            rewrite.tl0PicIdx = out
        }
        return rewrite
    }
}
