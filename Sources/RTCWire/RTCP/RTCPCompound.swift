/// The fixed fields of a sender report, without its report blocks (see ``RTCPPacketView/senderInfo()``).
public struct RTCPSenderInfo: Sendable, Equatable {
    public var ssrc: UInt32
    public var ntpTimestamp: UInt64
    public var rtpTimestamp: UInt32
    public var packetCount: UInt32
    public var octetCount: UInt32
}

/// A non-allocating view of one packet inside a compound RTCP packet, for the receive hot path.
///
/// The view borrows the caller's buffer and is valid only inside the ``RTCPCompound/forEach(_:_:)``
/// callback. Typed accessors (``forEachNACKSequence(_:)``, ``forEachReportBlock(_:)``, …) validate
/// what they read and throw on malformed content; ``parse()`` turns the view into an ``RTCPPacket``.
public struct RTCPPacketView {
    /// The packet from its header up to (not including) any padding.
    public let bytes: UnsafeRawBufferPointer
    /// Where the packet (header and padding included) sits in the compound buffer.
    public let range: Range<Int>

    /// The packet type (200 SR, 201 RR, 202 SDES, 203 BYE, 205 RTPFB, 206 PSFB, …).
    @inlinable public var packetType: UInt8 { bytes[1] }
    /// The 5-bit count field: report/source count, or the feedback message type (FMT).
    @inlinable public var count: UInt8 { bytes[0] & 0x1F }
    /// The first SSRC after the header (the sender's), or 0 when the packet has none.
    public var ssrc: UInt32 { bytes.count >= 8 ? bytes.rtcpU32(4) : 0 }
    /// For RTPFB/PSFB feedback: the media source SSRC; 0 when absent.
    public var mediaSSRC: UInt32 { bytes.count >= 12 ? bytes.rtcpU32(8) : 0 }

    public var isSenderReport: Bool { packetType == RTCPPacketType.senderReport }
    public var isReceiverReport: Bool { packetType == RTCPPacketType.receiverReport }
    public var isNACK: Bool { packetType == RTCPPacketType.transportFeedback && count == 1 }
    public var isTransportCC: Bool { packetType == RTCPPacketType.transportFeedback && count == 15 }
    public var isPLI: Bool { packetType == RTCPPacketType.payloadFeedback && count == 1 }
    public var isFIR: Bool { packetType == RTCPPacketType.payloadFeedback && count == 4 }
    /// True for a BYE (RFC 3550 §6.6).
    public var isBYE: Bool { packetType == RTCPPacketType.bye }
    /// True for a PSFB application-layer feedback carrying the "REMB" identifier.
    public var isREMB: Bool {
        packetType == RTCPPacketType.payloadFeedback && count == 15 && bytes.count >= 16
            && bytes[12] == 0x52 && bytes[13] == 0x45 && bytes[14] == 0x4D && bytes[15] == 0x42
    }

    /// The sender-info block of an SR.
    public func senderInfo() throws(RTCPError) -> RTCPSenderInfo {
        guard isSenderReport else { throw .badFCI }
        guard bytes.count >= 28 else { throw .tooShort }
        return RTCPSenderInfo(
            ssrc: bytes.rtcpU32(4), ntpTimestamp: bytes.rtcpU64(8), rtpTimestamp: bytes.rtcpU32(16),
            packetCount: bytes.rtcpU32(20), octetCount: bytes.rtcpU32(24))
    }

    /// Calls `body` for each report block of an SR or RR; does nothing for other types.
    public func forEachReportBlock(_ body: (RTCPReportBlock) throws(RTCPError) -> Void)
        throws(RTCPError)
    {
        let first: Int
        if isSenderReport { first = 28 } else if isReceiverReport { first = 8 } else { return }
        guard bytes.count >= first else { throw .tooShort }
        let n = Int(count)
        guard first + n * RTCPReportBlock.size <= bytes.count else { throw .countOverrun }
        for k in 0..<n { try body(Self.reportBlock(bytes, first + k * RTCPReportBlock.size)) }
    }

    /// Calls `body` for each lost sequence number of a generic NACK, expanding PID+BLP, without allocating.
    public func forEachNACKSequence(_ body: (UInt16) throws(RTCPError) -> Void) throws(RTCPError) {
        guard isNACK else { throw .badFCI }
        for k in 0..<(try fciEntries(size: 4)) {
            let at = 12 + k * 4
            let pid = bytes.rtcpU16(at)
            let blp = bytes.rtcpU16(at + 2)
            try body(pid)
            if blp != 0 {
                for bit in 0..<16 where blp & (1 << bit) != 0 { try body(pid &+ UInt16(bit + 1)) }
            }
        }
    }

    /// The number of `size`-byte entries in a feedback message's FCI (behind its 12-byte common
    /// part); a message with none is malformed.
    private func fciEntries(size: Int) throws(RTCPError) -> Int {
        guard bytes.count >= 12 else { throw .tooShort }
        let n = (bytes.count - 12) / size
        guard n > 0 else { throw .badFCI }
        return n
    }

    /// Calls `body` for each source a BYE says goodbye for (its optional reason is not read).
    public func forEachBYESource(_ body: (UInt32) throws(RTCPError) -> Void) throws(RTCPError) {
        guard isBYE else { throw .badFCI }
        let n = Int(count)
        guard 4 + n * 4 <= bytes.count else { throw .countOverrun }
        for k in 0..<n { try body(bytes.rtcpU32(4 + k * 4)) }
    }

    /// Calls `body` for each FIR entry.
    public func forEachFIREntry(_ body: (RTCPFIREntry) throws(RTCPError) -> Void) throws(RTCPError) {
        guard isFIR else { throw .badFCI }
        for k in 0..<(try fciEntries(size: 8)) {
            let at = 12 + k * 8
            try body(RTCPFIREntry(ssrc: bytes.rtcpU32(at), sequenceNumber: bytes[at + 4]))
        }
    }

    /// The REMB bitrate in bits per second and the number of SSRCs it applies to.
    public func rembBitrate() throws(RTCPError) -> (bitrate: UInt64, ssrcCount: Int) {
        guard isREMB else { throw .badFCI }
        guard bytes.count >= 20 else { throw .badFCI }
        let n = Int(bytes[16])
        guard 20 + n * 4 <= bytes.count else { throw .badFCI }
        let exponent = UInt64(bytes[17] >> 2)
        let mantissa = UInt64(bytes[17] & 0x03) << 16 | UInt64(bytes.rtcpU16(18))
        // An 18-bit mantissa shifted by up to 63 can overflow 64 bits: saturate.
        let bitrate: UInt64 =
            mantissa == 0
            ? 0 : (UInt64(mantissa.leadingZeroBitCount) < exponent ? .max : mantissa << exponent)
        return (bitrate, n)
    }

    /// Calls `body` for each sequence number described by a transport-cc feedback, without allocating.
    public func forEachTransportCCStatus(
        _ body: (RTCPTransportFeedback.PacketStatus) throws(RTCPError) -> Void
    ) throws(RTCPError) {
        guard isTransportCC else { throw .badFCI }
        guard bytes.count >= 20 else { throw .tooShort }
        let base = bytes.rtcpU16(12)
        let statusCount = Int(bytes.rtcpU16(14))
        // Pass 1: find where the chunks end (and so where the deltas start).
        var at = 20
        var described = 0
        while described < statusCount {
            guard at + 2 <= bytes.count else { throw .badFCI }
            described += Self.chunkSymbolCount(bytes.rtcpU16(at))
            at += 2
        }
        // Pass 2: walk the symbols again and read a delta for each received packet.
        var deltaAt = at
        var chunkAt = 20
        var index = 0
        while index < statusCount {
            let chunk = bytes.rtcpU16(chunkAt)
            chunkAt += 2
            let n = min(Self.chunkSymbolCount(chunk), statusCount - index)
            for k in 0..<n {
                let symbol = Self.chunkSymbol(chunk, k)
                let seq = base &+ UInt16(truncatingIfNeeded: index)
                switch symbol {
                case 0:
                    try body(.init(sequenceNumber: seq, received: false))
                case 1:
                    guard deltaAt + 1 <= bytes.count else { throw .badFCI }
                    try body(
                        .init(sequenceNumber: seq, received: true, deltaMicros: Int32(bytes[deltaAt]) * 250))
                    deltaAt += 1
                case 2:
                    guard deltaAt + 2 <= bytes.count else { throw .badFCI }
                    let delta = Int16(bitPattern: bytes.rtcpU16(deltaAt))
                    try body(.init(sequenceNumber: seq, received: true, deltaMicros: Int32(delta) * 250))
                    deltaAt += 2
                default:
                    throw .badFCI  // symbol 3 is reserved
                }
                index += 1
            }
        }
    }

    /// Number of status symbols a transport-cc packet chunk describes.
    @inline(__always)
    static func chunkSymbolCount(_ chunk: UInt16) -> Int {
        if chunk & 0x8000 == 0 { return Int(chunk & 0x1FFF) }  // run length
        return chunk & 0x4000 == 0 ? 14 : 7  // 1-bit or 2-bit status vector
    }

    /// Symbol `k` (0-based) of a chunk.
    @inline(__always)
    static func chunkSymbol(_ chunk: UInt16, _ k: Int) -> UInt16 {
        if chunk & 0x8000 == 0 { return (chunk >> 13) & 0x3 }
        if chunk & 0x4000 == 0 { return (chunk >> UInt16(13 - k)) & 0x1 }
        return (chunk >> UInt16(12 - 2 * k)) & 0x3
    }

    static func reportBlock(_ b: UnsafeRawBufferPointer, _ at: Int) -> RTCPReportBlock {
        let lostRaw = b.rtcpU24(at + 5)
        // Sign-extend the 24-bit cumulative loss.
        let lost = Int32(bitPattern: lostRaw << 8) >> 8
        return RTCPReportBlock(
            ssrc: b.rtcpU32(at), fractionLost: b[at + 4], cumulativeLost: lost,
            highestSequence: b.rtcpU32(at + 8),
            jitter: b.rtcpU32(at + 12), lastSR: b.rtcpU32(at + 16), delaySinceLastSR: b.rtcpU32(at + 20))
    }

    /// Decodes this packet into an ``RTCPPacket`` (allocates; for control code and tests).
    public func parse() throws(RTCPError) -> RTCPPacket {
        let b = bytes
        switch packetType {
        case RTCPPacketType.senderReport:
            let info = try senderInfo()
            var reports: [RTCPReportBlock] = []
            try forEachReportBlock { reports.append($0) }
            return .senderReport(
                RTCPSenderReport(
                    ssrc: info.ssrc, ntpTimestamp: info.ntpTimestamp, rtpTimestamp: info.rtpTimestamp,
                    packetCount: info.packetCount, octetCount: info.octetCount, reports: reports))
        case RTCPPacketType.receiverReport:
            guard b.count >= 8 else { throw .tooShort }
            var reports: [RTCPReportBlock] = []
            try forEachReportBlock { reports.append($0) }
            return .receiverReport(RTCPReceiverReport(ssrc: b.rtcpU32(4), reports: reports))
        case RTCPPacketType.sourceDescription:
            return .sourceDescription(try parseSDES())
        case RTCPPacketType.bye:
            return try parseBYE()
        case RTCPPacketType.transportFeedback where count == 1:
            var seqs: [UInt16] = []
            try forEachNACKSequence { seqs.append($0) }
            return .nack(
                RTCPGenericNACK(senderSSRC: ssrc, mediaSSRC: mediaSSRC, lostSequenceNumbers: seqs))
        case RTCPPacketType.transportFeedback where count == 15:
            var packets: [RTCPTransportFeedback.PacketStatus] = []
            try forEachTransportCCStatus { packets.append($0) }
            let ref = Int32(bitPattern: b.rtcpU24(16) << 8) >> 8
            return .transportCC(
                RTCPTransportFeedback(
                    senderSSRC: ssrc, mediaSSRC: mediaSSRC, baseSequenceNumber: b.rtcpU16(12),
                    referenceTime: ref,
                    feedbackPacketCount: b[19], packets: packets))
        case RTCPPacketType.payloadFeedback where count == 1:
            guard b.count >= 12 else { throw .tooShort }
            return .pli(senderSSRC: ssrc, mediaSSRC: mediaSSRC)
        case RTCPPacketType.payloadFeedback where count == 4:
            var entries: [RTCPFIREntry] = []
            try forEachFIREntry { entries.append($0) }
            return .fir(senderSSRC: ssrc, entries: entries)
        case RTCPPacketType.payloadFeedback where count == 15 && isREMB:
            let (bitrate, n) = try rembBitrate()
            var ssrcs: [UInt32] = []
            ssrcs.reserveCapacity(n)
            for k in 0..<n { ssrcs.append(b.rtcpU32(20 + k * 4)) }
            return .remb(senderSSRC: ssrc, bitrate: bitrate, ssrcs: ssrcs)
        default:
            return .unknown(packetType: packetType, count: count, payload: Array(b[4...]))
        }
    }

    private func parseSDES() throws(RTCPError) -> [SDESChunk] {
        let b = bytes
        var chunks: [SDESChunk] = []
        var at = 4
        for _ in 0..<Int(count) {
            guard at + 4 <= b.count else { throw .countOverrun }
            let ssrc = b.rtcpU32(at)
            at += 4
            var items: [SDESItem] = []
            while true {
                guard at < b.count else { throw .badItem }
                let type = b[at]
                if type == 0 {
                    // End of chunk: the null item plus padding up to the next 32-bit boundary.
                    at = (at + 4) & ~3
                    break
                }
                guard at + 2 <= b.count else { throw .badItem }
                let length = Int(b[at + 1])
                guard at + 2 + length <= b.count else { throw .badItem }
                items.append(
                    SDESItem(
                        type: type, text: String(decoding: b[(at + 2)..<(at + 2 + length)], as: UTF8.self)))
                at += 2 + length
            }
            chunks.append(SDESChunk(ssrc: ssrc, items: items))
        }
        return chunks
    }

    private func parseBYE() throws(RTCPError) -> RTCPPacket {
        let b = bytes
        let n = Int(count)
        guard 4 + n * 4 <= b.count else { throw .countOverrun }
        var ssrcs: [UInt32] = []
        ssrcs.reserveCapacity(n)
        for k in 0..<n { ssrcs.append(b.rtcpU32(4 + k * 4)) }
        let at = 4 + n * 4
        guard at < b.count else { return .bye(ssrcs: ssrcs, reason: nil) }
        let length = Int(b[at])
        guard at + 1 + length <= b.count else { throw .badItem }
        return .bye(
            ssrcs: ssrcs, reason: String(decoding: b[(at + 1)..<(at + 1 + length)], as: UTF8.self))
    }
}

/// Parsing and serialization of compound RTCP packets (RFC 3550 §6.1, reduced-size RFC 5506).
public enum RTCPCompound {
    /// Validates one packet header at `offset`; returns (total length including padding, length without padding).
    @inline(__always)
    static func packetBounds(_ bytes: UnsafeRawBufferPointer, _ offset: Int) throws(RTCPError) -> (
        Int, Int
    ) {
        let remaining = bytes.count - offset
        guard remaining >= 4 else { throw .tooShort }
        let b0 = bytes[offset]
        guard b0 >> 6 == 2 else { throw .badVersion(b0 >> 6) }
        let total = (Int(bytes.rtcpU16(offset + 2)) + 1) * 4
        guard total <= remaining else { throw .lengthOverrun }
        var content = total
        if b0 & 0x20 != 0 {
            let pad = Int(bytes[offset + total - 1])
            guard pad > 0, pad <= total - 4 else { throw .badPadding }
            content = total - pad
        }
        return (total, content)
    }

    /// Visits each packet of a compound packet without allocating.
    ///
    /// All packet headers are validated before the first callback, so a compound packet with a bad
    /// length field delivers nothing. Malformed content inside one packet surfaces only when the
    /// callback reads it through the view's accessors.
    public static func forEach(
        _ bytes: UnsafeRawBufferPointer, _ body: (RTCPPacketView) throws(RTCPError) -> Void
    ) throws(RTCPError) {
        guard !bytes.isEmpty else { throw .tooShort }
        var offset = 0
        while offset < bytes.count {
            let (total, _) = try packetBounds(bytes, offset)
            offset += total
        }
        offset = 0
        while offset < bytes.count {
            let (total, content) = try packetBounds(bytes, offset)
            let view = RTCPPacketView(
                bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + content)]),
                range: offset..<(offset + total))
            try body(view)
            offset += total
        }
    }

    /// Parses every packet of a compound packet.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(RTCPError) -> [RTCPPacket] {
        var packets: [RTCPPacket] = []
        try forEach(bytes) { view throws(RTCPError) in packets.append(try view.parse()) }
        return packets
    }

    /// Parses every packet of a compound packet held in an array.
    public static func parse(_ bytes: [UInt8]) throws(RTCPError) -> [RTCPPacket] {
        do {
            return try bytes.withUnsafeBytes { raw in try parse(raw) }
        } catch let error as RTCPError {
            throw error
        } catch {
            throw .tooShort  // unreachable: parse only throws RTCPError
        }
    }

    /// Serializes packets into one compound packet.
    ///
    /// Values the wire cannot carry are clipped rather than trapping: more than 31 report blocks,
    /// chunks or BYE sources are cut to 31, SDES/BYE text to 255 bytes, transport-cc to 65535
    /// statuses, and a packet that would exceed the 16-bit length field is left out.
    public static func serialize(_ packets: [RTCPPacket]) -> [UInt8] {
        var capacity = 0
        for p in packets { capacity += RTCPWriter.maximumLength(of: p) }
        var out = [UInt8](repeating: 0, count: capacity)
        let used = out.withUnsafeMutableBytes { buffer -> Int in
            var offset = 0
            for p in packets {
                if let next = try? RTCPWriter.write(p, into: buffer, at: offset) { offset = next }
            }
            return offset
        }
        out.removeSubrange(used...)
        return out
    }
}
