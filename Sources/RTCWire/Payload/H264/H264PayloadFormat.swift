/// NAL unit types that the H.264 payload format (RFC 6184 §5.4) and the frame logic care about.
public enum H264NALType {
    /// A coded slice of a non-IDR picture.
    public static let slice: UInt8 = 1
    /// A coded slice of an IDR picture (a key frame).
    public static let idr: UInt8 = 5
    /// Supplemental enhancement information.
    public static let sei: UInt8 = 6
    /// Sequence parameter set.
    public static let sps: UInt8 = 7
    /// Picture parameter set.
    public static let pps: UInt8 = 8
    /// Access unit delimiter.
    public static let aud: UInt8 = 9
    /// Single-time aggregation packet (RFC 6184 §5.7.1).
    public static let stapA: UInt8 = 24
    /// Fragmentation unit without DON (RFC 6184 §5.8).
    public static let fuA: UInt8 = 28
}

/// H.264 (RFC 6184) as an ``RTPPayloadFormat``: single NAL unit packets, STAP-A and FU-A
/// (packetization modes 0 and 1), read in one pass without allocating.
///
/// ``RTPPayloadInfo`` for H.264:
/// - `headerLength` is 0: the payload is kept whole, and ``AnnexBWriter`` turns a frame's payloads
///   into an Annex B access unit when the frame is complete.
/// - `startsFrame` is set when the payload certainly begins an access unit: its first NAL unit is an
///   access unit delimiter, a sequence parameter set, or the first slice of a picture
///   (`first_mb_in_slice` 0). Frame boundaries are otherwise told by the RTP timestamp and marker.
/// - `isKeyframe` is set when the payload carries an SPS or the start of an IDR slice, so the SFU
///   switches layers and ends PLI retries at the first packet of a key frame (the SPS precedes the
///   IDR slices in its access unit).
/// - `width`/`height` come from an SPS in the payload.
///
/// Interleaved-mode packets (STAP-B, MTAP, FU-B) and the reserved types 0, 30 and 31 throw
/// ``RTPPayloadError/malformedHeader``: packetization mode 2 is never negotiated.
public enum H264PayloadFormat: VideoPayloadFormat {
    /// Reads the NAL unit header and, for STAP-A and FU-A, what it carries (see above).
    @inlinable
    public static func read(_ p: UnsafeRawBufferPointer, into info: inout RTPPayloadInfo) throws(RTPPayloadError) {
        let header = p[0]
        guard header & 0x80 == 0 else { throw .malformedHeader }  // forbidden_zero_bit
        let type = header & 0x1F
        switch type {
        case 1...23:
            let first = UnsafeRawBufferPointer(rebasing: p[0...])
            info.startsFrame = beginsAccessUnit(first)
            info.isKeyframe = type == H264NALType.idr || type == H264NALType.sps
            if type == H264NALType.sps { readSize(first, into: &info) }
        case H264NALType.stapA:
            var at = 1
            var units = 0
            var key = false
            while at < p.count {
                guard at + 2 <= p.count else { throw .malformedHeader }
                let length = Int(p[at]) << 8 | Int(p[at + 1])
                at += 2
                guard length > 0, at + length <= p.count else { throw .malformedHeader }
                let unit = UnsafeRawBufferPointer(rebasing: p[at..<(at + length)])
                guard unit[0] & 0x80 == 0 else { throw .malformedHeader }
                let t = unit[0] & 0x1F
                guard t >= 1 && t <= 23 else { throw .malformedHeader }
                if units == 0 { info.startsFrame = beginsAccessUnit(unit) }
                if t == H264NALType.idr || t == H264NALType.sps { key = true }
                if t == H264NALType.sps { readSize(unit, into: &info) }
                units += 1
                at += length
            }
            guard units > 0 else { throw .malformedHeader }
            info.isKeyframe = key
        case H264NALType.fuA:
            guard p.count >= 3 else { throw .malformedHeader }
            let fu = p[1]
            let start = fu & 0x80 != 0
            let end = fu & 0x40 != 0
            let t = fu & 0x1F
            guard !(start && end), t >= 1 && t <= 23 else { throw .malformedHeader }
            if start {
                // The fragmented unit's own first bytes: its header rebuilt, then the data.
                info.startsFrame =
                    t == H264NALType.aud || t == H264NALType.sps
                    || ((t == H264NALType.slice || t == H264NALType.idr) && p[2] & 0x80 != 0)
                info.isKeyframe = t == H264NALType.idr || t == H264NALType.sps
            } else {
                info.startsFrame = false
                info.isKeyframe = false
            }
        default:
            throw .malformedHeader
        }
    }

    /// Whether a whole NAL unit (header first) begins an access unit for certain.
    @inlinable
    static func beginsAccessUnit(_ unit: UnsafeRawBufferPointer) -> Bool {
        let t = unit[0] & 0x1F
        if t == H264NALType.aud || t == H264NALType.sps { return true }
        // first_mb_in_slice is ue(v): 0 is coded as a single 1 bit.
        if t == H264NALType.slice || t == H264NALType.idr { return unit.count >= 2 && unit[1] & 0x80 != 0 }
        return false
    }

    @inlinable
    static func readSize(_ sps: UnsafeRawBufferPointer, into info: inout RTPPayloadInfo) {
        if let size = H264SPS.parse(sps) {
            info.width = UInt16(clamping: size.width)
            info.height = UInt16(clamping: size.height)
        }
    }

    /// Turns the RTP payloads of one access unit, in order, into Annex B bytes (each NAL unit after a
    /// 4-byte start code): single NAL units are copied, STAP-A units split, FU-A fragments joined
    /// behind their rebuilt NAL header.
    ///
    /// The writer runs twice over the same payloads: once without a buffer to count bytes, once to
    /// write them. A fragment whose start it never saw, and a payload that does not parse, add
    /// nothing; ``sawNonContinuousFragment`` then tells the frame is damaged.
    public struct AnnexBWriter {
        /// Bytes written (or counted) so far.
        public private(set) var length = 0
        /// A fragment came without its start, or a fragmented unit was left open by a new one.
        public private(set) var sawNonContinuousFragment = false
        /// NAL unit types seen, one bit per type (bit `t` for type `t`).
        public private(set) var typesSeen: UInt32 = 0
        private var inFragment = false
        private let output: UnsafeMutableRawBufferPointer?

        /// A writer into `output` (nil: count only). `output` must hold ``length`` of a counting run.
        public init(output: UnsafeMutableRawBufferPointer?) { self.output = output }

        /// Whether an IDR slice was seen.
        public var hasIDR: Bool { typesSeen & (1 << UInt32(H264NALType.idr)) != 0 }
        /// Whether both parameter sets were seen.
        public var hasParameterSets: Bool {
            typesSeen & (1 << UInt32(H264NALType.sps)) != 0 && typesSeen & (1 << UInt32(H264NALType.pps)) != 0
        }

        private mutating func put(_ bytes: UnsafeRawBufferPointer) {
            if let output, let dst = output.baseAddress, let src = bytes.baseAddress, !bytes.isEmpty {
                precondition(length + bytes.count <= output.count, "AnnexBWriter: output too small")
                (dst + length).copyMemory(from: src, byteCount: bytes.count)
            }
            length += bytes.count
        }

        private mutating func putByte(_ byte: UInt8) {
            if let output {
                precondition(length < output.count, "AnnexBWriter: output too small")
                output[length] = byte
            }
            length += 1
        }

        private mutating func startCode() {
            putByte(0)
            putByte(0)
            putByte(0)
            putByte(1)
        }

        /// Adds the whole NAL units in `bytes` (Annex B or one unit without start code is not
        /// accepted here: this is for parameter sets kept as Annex B).
        public mutating func appendAnnexB(_ bytes: UnsafeRawBufferPointer) {
            put(bytes)
            H264AnnexB.forEachUnit(bytes) { unit in typesSeen |= 1 << UInt32(unit[0] & 0x1F) }
        }

        /// Adds one RTP payload of the access unit.
        public mutating func append(_ p: UnsafeRawBufferPointer) {
            guard p.count >= 1, p[0] & 0x80 == 0 else { return }
            let type = p[0] & 0x1F
            switch type {
            case 1...23:
                closeFragment()
                startCode()
                put(p)
                typesSeen |= 1 << UInt32(type)
            case H264NALType.stapA:
                closeFragment()
                // Validate first, so a bad aggregate adds nothing rather than half of itself.
                var at = 1
                var valid = p.count > 1
                while at < p.count {
                    guard at + 2 <= p.count else {
                        valid = false
                        break
                    }
                    let n = Int(p[at]) << 8 | Int(p[at + 1])
                    guard n > 0, at + 2 + n <= p.count else {
                        valid = false
                        break
                    }
                    at += 2 + n
                }
                guard valid else {
                    sawNonContinuousFragment = true
                    return
                }
                at = 1
                while at < p.count {
                    let n = Int(p[at]) << 8 | Int(p[at + 1])
                    at += 2
                    startCode()
                    put(UnsafeRawBufferPointer(rebasing: p[at..<(at + n)]))
                    typesSeen |= 1 << UInt32(p[at] & 0x1F)
                    at += n
                }
            case H264NALType.fuA:
                guard p.count >= 3 else {
                    sawNonContinuousFragment = true
                    return
                }
                let fu = p[1]
                let data = UnsafeRawBufferPointer(rebasing: p[2...])
                if fu & 0x80 != 0 {
                    closeFragment()
                    startCode()
                    putByte(p[0] & 0xE0 | fu & 0x1F)
                    typesSeen |= 1 << UInt32(fu & 0x1F)
                    inFragment = true
                } else if !inFragment {
                    sawNonContinuousFragment = true
                    return
                }
                put(data)
                if fu & 0x40 != 0 { inFragment = false }
            default:
                sawNonContinuousFragment = true
            }
        }

        private mutating func closeFragment() {
            if inFragment {
                sawNonContinuousFragment = true
                inFragment = false
            }
        }

        /// Ends the access unit: a fragmented unit still open is damage.
        public mutating func finish() { closeFragment() }
    }

    /// Splits one Annex B access unit into RTP payloads of at most `maxPayloadSize` bytes
    /// (packetization mode 1): a NAL unit that fits is sent alone (a single NAL unit packet), a larger
    /// one as FU-A fragments. `emit` gets each payload (valid during the call) and whether it is the
    /// access unit's last (set the marker then). `scratch` is reused between calls.
    ///
    /// - Returns: the number of payloads emitted (0 when `maxPayloadSize` is below 3).
    @discardableResult
    public static func packetize(
        accessUnit: UnsafeRawBufferPointer, maxPayloadSize: Int, scratch: inout [UInt8],
        emit: (UnsafeRawBufferPointer, _ isLast: Bool) -> Void
    ) -> Int {
        guard maxPayloadSize >= 3 else { return 0 }
        if scratch.count < maxPayloadSize { scratch = [UInt8](repeating: 0, count: maxPayloadSize) }
        var last = -1
        H264AnnexB.forEachUnitRange(accessUnit) { last = $0.lowerBound }
        var emitted = 0
        H264AnnexB.forEachUnitRange(accessUnit) { unit in
            let isLastUnit = unit.lowerBound == last
            if unit.count <= maxPayloadSize {
                emit(UnsafeRawBufferPointer(rebasing: accessUnit[unit]), isLastUnit)
                emitted += 1
                return
            }
            // FU-A: the unit's header splits into the indicator (F, NRI) and the FU header (type).
            let header = accessUnit[unit.lowerBound]
            let room = maxPayloadSize - 2
            var at = unit.lowerBound + 1
            while at < unit.upperBound {
                let take = min(room, unit.upperBound - at)
                let first = at == unit.lowerBound + 1
                let final = at + take == unit.upperBound
                scratch.withUnsafeMutableBytes { out in
                    out[0] = header & 0xE0 | H264NALType.fuA
                    out[1] = (first ? 0x80 : 0) | (final ? 0x40 : 0) | header & 0x1F
                    UnsafeMutableRawBufferPointer(rebasing: out[2..<(2 + take)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: accessUnit[at..<(at + take)]))
                    emit(UnsafeRawBufferPointer(rebasing: out[0..<(2 + take)]), final && isLastUnit)
                }
                emitted += 1
                at += take
            }
        }
        return emitted
    }
}

/// Annex B byte streams: NAL units after start codes (`00 00 01` or `00 00 00 01`).
public enum H264AnnexB {
    /// Calls `body` with the byte range of each NAL unit (start code excluded, trailing zero bytes of
    /// the next start code excluded), in order. Empty units are skipped.
    public static func forEachUnitRange(_ b: UnsafeRawBufferPointer, _ body: (Range<Int>) -> Void) {
        let n = b.count
        var i = 0
        var unitStart = -1
        // Looks at the third byte of each candidate: above 1, no start code begins at i, i + 1 or
        // i + 2, so the scan moves three bytes at a time through slice data (recorders and the
        // packetizer scan every access unit).
        while i + 2 < n {
            let third = b[i + 2]
            if third > 1 {
                i += 3
            } else if third == 0 {
                i += 1
            } else if b[i] == 0, b[i + 1] == 0 {
                if unitStart >= 0 {
                    var end = i
                    while end > unitStart, b[end - 1] == 0 { end -= 1 }
                    if end > unitStart { body(unitStart..<end) }
                }
                i += 3
                unitStart = i
            } else {
                i += 3
            }
        }
        if unitStart >= 0, unitStart < n { body(unitStart..<n) }
    }

    /// Calls `body` with each NAL unit (header byte first).
    public static func forEachUnit(_ b: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        forEachUnitRange(b) { body(UnsafeRawBufferPointer(rebasing: b[$0])) }
    }
}
