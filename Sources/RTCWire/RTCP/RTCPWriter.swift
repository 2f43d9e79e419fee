/// Allocation-free RTCP writers for the send hot path.
///
/// Each function writes one packet into `buffer` starting at `offset` and returns the offset just
/// past it, so several calls build a compound packet. They throw ``RTCPError/bufferTooSmall`` when
/// the packet does not fit (nothing past `offset` should then be sent) or when a value cannot be
/// encoded (more than 31 report blocks, text longer than 255 bytes, an empty NACK list).
public enum RTCPWriter {
    // MARK: reports

    /// Writes a sender report with up to 31 report blocks.
    public static func writeSenderReport(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, ssrc: UInt32, ntpTimestamp: UInt64,
        rtpTimestamp: UInt32, packetCount: UInt32, octetCount: UInt32, reports: [RTCPReportBlock] = []
    ) throws(RTCPError) -> Int {
        let end = try report(
            buffer, offset, type: RTCPPacketType.senderReport, ssrc: ssrc, senderInfo: true, reports: reports)
        buffer.put64(ntpTimestamp, at: offset + 8)
        buffer.put32(rtpTimestamp, at: offset + 16)
        buffer.put32(packetCount, at: offset + 20)
        buffer.put32(octetCount, at: offset + 24)
        return end
    }

    /// Writes a receiver report with up to 31 report blocks.
    public static func writeReceiverReport(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, ssrc: UInt32,
        reports: [RTCPReportBlock] = []
    ) throws(RTCPError) -> Int {
        try report(buffer, offset, type: RTCPPacketType.receiverReport, ssrc: ssrc, senderInfo: false, reports: reports)
    }

    /// A sender or receiver report's header, SSRC and report blocks (behind the 20 bytes of sender
    /// info, which the caller writes, when `senderInfo`); returns the offset past the packet.
    private static func report(
        _ buffer: UnsafeMutableRawBufferPointer, _ offset: Int, type: UInt8, ssrc: UInt32, senderInfo: Bool,
        reports: [RTCPReportBlock]
    ) throws(RTCPError) -> Int {
        guard reports.count <= 31 else { throw .bufferTooSmall }
        let first = senderInfo ? 28 : 8
        try header(
            buffer, offset, count: reports.count, type: type, length: first + reports.count * RTCPReportBlock.size)
        buffer.put32(ssrc, at: offset + 4)
        var at = offset + first
        for r in reports { at = reportBlock(buffer, at, r) }
        return at
    }

    // MARK: SDES and BYE

    /// Writes an SDES packet with one chunk holding only a CNAME item (what every RTCP report carries).
    public static func writeSDESCNAME(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, ssrc: UInt32, cname: String
    ) throws(RTCPError) -> Int {
        let textLength = cname.utf8.count
        guard textLength <= 255 else { throw .bufferTooSmall }
        // header + ssrc + type + len + text + at least one null byte, padded to 4.
        let length = (4 + 4 + 2 + textLength + 1 + 3) & ~3
        try header(buffer, offset, count: 1, type: RTCPPacketType.sourceDescription, length: length)
        buffer.put32(ssrc, at: offset + 4)
        buffer[offset + 8] = SDESItem.cname
        buffer[offset + 9] = UInt8(textLength)
        let at = buffer.rtcpPutBytes(cname.utf8, offset + 10)
        return buffer.rtcpPad(at, to: offset + length)
    }

    /// Writes an SDES packet with up to 31 chunks.
    public static func writeSDES(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, chunks: [SDESChunk]
    ) throws(RTCPError) -> Int {
        guard chunks.count <= 31 else { throw .bufferTooSmall }
        var length = 4
        for chunk in chunks {
            var chunkLength = 4
            for item in chunk.items {
                guard item.text.utf8.count <= 255, item.type != 0 else { throw .bufferTooSmall }
                chunkLength += 2 + item.text.utf8.count
            }
            length += (chunkLength + 1 + 3) & ~3
        }
        try header(
            buffer, offset, count: chunks.count, type: RTCPPacketType.sourceDescription, length: length)
        var at = offset + 4
        for chunk in chunks {
            let chunkStart = at
            buffer.put32(chunk.ssrc, at: at)
            at += 4
            for item in chunk.items {
                buffer[at] = item.type
                buffer[at + 1] = UInt8(item.text.utf8.count)
                at += 2
                at = buffer.rtcpPutBytes(item.text.utf8, at)
            }
            at = buffer.rtcpPad(at, to: chunkStart + ((at - chunkStart + 1 + 3) & ~3))
        }
        return at
    }

    /// Writes a BYE for up to 31 sources with an optional reason of at most 255 bytes.
    public static func writeBYE(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, ssrcs: [UInt32],
        reason: String? = nil
    ) throws(RTCPError) -> Int {
        guard ssrcs.count <= 31 else { throw .bufferTooSmall }
        var length = 4 + ssrcs.count * 4
        if let reason {
            guard reason.utf8.count <= 255 else { throw .bufferTooSmall }
            length = (length + 1 + reason.utf8.count + 3) & ~3
        }
        try header(buffer, offset, count: ssrcs.count, type: RTCPPacketType.bye, length: length)
        var at = offset + 4
        for s in ssrcs {
            buffer.put32(s, at: at)
            at += 4
        }
        if let reason {
            buffer[at] = UInt8(reason.utf8.count)
            at = buffer.rtcpPad(buffer.rtcpPutBytes(reason.utf8, at + 1), to: offset + length)
        }
        return at
    }

    // MARK: feedback

    /// Writes a generic NACK, packing `lostSequenceNumbers` into PID+BLP pairs in the order given.
    ///
    /// A sequence number within 16 after the current PID joins its bitmask; any other starts a new
    /// pair, so a sorted list gives the fewest pairs.
    public static func writeNACK<Seqs: Collection<UInt16>>(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, senderSSRC: UInt32,
        mediaSSRC: UInt32,
        lostSequenceNumbers: Seqs
    ) throws(RTCPError) -> Int {
        guard !lostSequenceNumbers.isEmpty else { throw .bufferTooSmall }
        guard offset >= 0, offset <= buffer.count - 12 else { throw .bufferTooSmall }
        var fciAt = offset + 12 - 4  // position of the current pair; advanced before the first write
        var pid: UInt16 = 0
        var blp: UInt16 = 0
        var havePair = false
        for seq in lostSequenceNumbers {
            if havePair {
                let distance = seq &- pid
                if distance == 0 { continue }
                if distance <= 16 {
                    blp |= 1 << (distance - 1)
                    buffer.put16(blp, at: fciAt + 2)
                    continue
                }
            }
            fciAt += 4
            guard fciAt <= buffer.count - 4, fciAt - offset + 4 <= 65536 * 4 else {
                throw .bufferTooSmall
            }
            pid = seq
            blp = 0
            havePair = true
            buffer.put16(pid, at: fciAt)
            buffer.put16(0, at: fciAt + 2)
        }
        let end = fciAt + 4
        try header(
            buffer, offset, count: 1, type: RTCPPacketType.transportFeedback, length: end - offset)
        buffer.put32(senderSSRC, at: offset + 4)
        buffer.put32(mediaSSRC, at: offset + 8)
        return end
    }

    /// Writes a picture loss indication.
    public static func writePLI(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, senderSSRC: UInt32,
        mediaSSRC: UInt32
    ) throws(RTCPError) -> Int {
        try header(buffer, offset, count: 1, type: RTCPPacketType.payloadFeedback, length: 12)
        buffer.put32(senderSSRC, at: offset + 4)
        buffer.put32(mediaSSRC, at: offset + 8)
        return offset + 12
    }

    /// Writes a full intra request for one source.
    public static func writeFIR(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, senderSSRC: UInt32,
        mediaSSRC: UInt32,
        sequenceNumber: UInt8
    ) throws(RTCPError) -> Int {
        try header(buffer, offset, count: 4, type: RTCPPacketType.payloadFeedback, length: 20)
        buffer.put32(senderSSRC, at: offset + 4)
        buffer.put32(0, at: offset + 8)  // RFC 5104: media source SSRC unused, set to 0
        buffer.put32(mediaSSRC, at: offset + 12)
        buffer.put32(UInt32(sequenceNumber) << 24, at: offset + 16)
        return offset + 20
    }

    /// Writes a full intra request with several entries.
    public static func writeFIR(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, senderSSRC: UInt32,
        entries: [RTCPFIREntry]
    ) throws(RTCPError) -> Int {
        guard !entries.isEmpty else { throw .bufferTooSmall }
        try header(
            buffer, offset, count: 4, type: RTCPPacketType.payloadFeedback, length: 12 + entries.count * 8
        )
        buffer.put32(senderSSRC, at: offset + 4)
        buffer.put32(0, at: offset + 8)
        var at = offset + 12
        for e in entries {
            buffer.put32(e.ssrc, at: at)
            buffer.put32(UInt32(e.sequenceNumber) << 24, at: at + 4)
            at += 8
        }
        return at
    }

    /// Writes a REMB message; the bitrate is rounded down to an 18-bit mantissa and 6-bit exponent.
    public static func writeREMB(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, senderSSRC: UInt32, bitrate: UInt64,
        ssrcs: [UInt32]
    ) throws(RTCPError) -> Int {
        guard ssrcs.count <= 255 else { throw .bufferTooSmall }
        let length = 20 + ssrcs.count * 4
        try header(buffer, offset, count: 15, type: RTCPPacketType.payloadFeedback, length: length)
        buffer.put32(senderSSRC, at: offset + 4)
        buffer.put32(0, at: offset + 8)
        buffer[offset + 12] = 0x52  // "REMB"
        buffer[offset + 13] = 0x45
        buffer[offset + 14] = 0x4D
        buffer[offset + 15] = 0x42
        buffer[offset + 16] = UInt8(ssrcs.count)
        var exponent: UInt64 = 0
        var mantissa = bitrate
        while mantissa > 0x3FFFF {
            mantissa >>= 1
            exponent += 1
        }
        buffer[offset + 17] = UInt8(exponent << 2) | UInt8(truncatingIfNeeded: mantissa >> 16)
        buffer.put16(UInt16(truncatingIfNeeded: mantissa), at: offset + 18)
        var at = offset + 20
        for s in ssrcs {
            buffer.put32(s, at: at)
            at += 4
        }
        return at
    }

    /// Writes transport-cc feedback. Deltas are rounded toward zero to 250 µs units and clamped to
    /// the 16-bit signed range; more than 65535 statuses are cut.
    public static func writeTransportFeedback(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, _ feedback: RTCPTransportFeedback
    ) throws(RTCPError) -> Int {
        guard offset >= 0, offset <= buffer.count - 20 else { throw .bufferTooSmall }
        let packets = feedback.packets
        let statusCount = min(packets.count, 0xFFFF)
        buffer.put32(feedback.senderSSRC, at: offset + 4)
        buffer.put32(feedback.mediaSSRC, at: offset + 8)
        buffer.put16(feedback.baseSequenceNumber, at: offset + 12)
        buffer.put16(UInt16(statusCount), at: offset + 14)
        let reference = min(max(feedback.referenceTime, -0x80_0000), 0x7F_FFFF)
        buffer.put24(UInt32(bitPattern: reference), at: offset + 16)
        buffer[offset + 19] = feedback.feedbackPacketCount

        @inline(__always) func symbol(_ i: Int) -> UInt16 {
            let p = packets[i]
            guard p.received else { return 0 }
            let units = p.deltaMicros / 250
            return units >= 0 && units <= 255 ? 1 : 2
        }
        // Chunks: a run-length chunk for runs of 14 or more, else a 1-bit vector when the next 14
        // symbols need no large delta, else a 2-bit vector of 7.
        var at = offset + 20
        var i = 0
        while i < statusCount {
            let s = symbol(i)
            var run = 1
            while i + run < statusCount, run < 0x1FFF, symbol(i + run) == s { run += 1 }
            var chunk: UInt16
            var consumed: Int
            if run >= 14 {
                chunk = s << 13 | UInt16(run)
                consumed = run
            } else {
                consumed = min(14, statusCount - i)
                var oneBit = true
                for k in 0..<consumed where symbol(i + k) == 2 { oneBit = false }
                if oneBit {
                    chunk = 0x8000
                    for k in 0..<consumed { chunk |= symbol(i + k) << UInt16(13 - k) }
                } else {
                    consumed = min(7, statusCount - i)
                    chunk = 0xC000
                    for k in 0..<consumed { chunk |= symbol(i + k) << UInt16(12 - 2 * k) }
                }
            }
            guard at <= buffer.count - 2 else { throw .bufferTooSmall }
            buffer.put16(chunk, at: at)
            at += 2
            i += consumed
        }
        for k in 0..<statusCount where packets[k].received {
            let units = packets[k].deltaMicros / 250
            if units >= 0 && units <= 255 {
                guard at < buffer.count else { throw .bufferTooSmall }
                buffer[at] = UInt8(units)
                at += 1
            } else {
                guard at <= buffer.count - 2 else { throw .bufferTooSmall }
                let clamped = Int16(clamping: units)
                buffer.put16(UInt16(bitPattern: clamped), at: at)
                at += 2
            }
        }
        let end = offset + ((at - offset + 3) & ~3)
        guard end <= buffer.count else { throw .bufferTooSmall }
        _ = buffer.rtcpPad(at, to: end)
        try header(
            buffer, offset, count: 15, type: RTCPPacketType.transportFeedback, length: end - offset)
        return end
    }

    /// Writes a packet of any other type with the given body, zero-padded to 32 bits.
    public static func writeRaw(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, packetType: UInt8, count: UInt8,
        payload: [UInt8]
    ) throws(RTCPError) -> Int {
        let length = (4 + payload.count + 3) & ~3
        try header(buffer, offset, count: Int(count & 0x1F), type: packetType, length: length)
        let at = buffer.rtcpPutBytes(payload, offset + 4)
        return buffer.rtcpPad(at, to: offset + length)
    }

    // MARK: enum API

    /// Writes any ``RTCPPacket``; see ``RTCPCompound/serialize(_:)`` for how out-of-range values are clipped.
    public static func write(
        _ packet: RTCPPacket, into buffer: UnsafeMutableRawBufferPointer, at offset: Int
    ) throws(RTCPError) -> Int {
        switch packet {
        case .senderReport(let sr):
            return try writeSenderReport(
                into: buffer, at: offset, ssrc: sr.ssrc, ntpTimestamp: sr.ntpTimestamp,
                rtpTimestamp: sr.rtpTimestamp,
                packetCount: sr.packetCount, octetCount: sr.octetCount,
                reports: Array(sr.reports.prefix(31)))
        case .receiverReport(let rr):
            return try writeReceiverReport(
                into: buffer, at: offset, ssrc: rr.ssrc, reports: Array(rr.reports.prefix(31)))
        case .sourceDescription(let chunks):
            let clipped = chunks.prefix(31).map { chunk in
                SDESChunk(
                    ssrc: chunk.ssrc,
                    items: chunk.items.filter { $0.type != 0 }.map {
                        SDESItem(type: $0.type, text: clip255($0.text))
                    })
            }
            return try writeSDES(into: buffer, at: offset, chunks: clipped)
        case .bye(let ssrcs, let reason):
            return try writeBYE(
                into: buffer, at: offset, ssrcs: Array(ssrcs.prefix(31)), reason: reason.map { clip255($0) }
            )
        case .nack(let nack):
            return try writeNACK(
                into: buffer, at: offset, senderSSRC: nack.senderSSRC, mediaSSRC: nack.mediaSSRC,
                lostSequenceNumbers: nack.lostSequenceNumbers)
        case .pli(let sender, let media):
            return try writePLI(into: buffer, at: offset, senderSSRC: sender, mediaSSRC: media)
        case .fir(let sender, let entries):
            return try writeFIR(into: buffer, at: offset, senderSSRC: sender, entries: entries)
        case .remb(let sender, let bitrate, let ssrcs):
            return try writeREMB(
                into: buffer, at: offset, senderSSRC: sender, bitrate: bitrate, ssrcs: ssrcs)
        case .transportCC(let feedback):
            return try writeTransportFeedback(into: buffer, at: offset, feedback)
        case .unknown(let type, let count, let payload):
            return try writeRaw(
                into: buffer, at: offset, packetType: type, count: count, payload: payload)
        }
    }

    /// An upper bound on the bytes ``write(_:into:at:)`` needs for `packet`.
    public static func maximumLength(of packet: RTCPPacket) -> Int {
        switch packet {
        case .senderReport(let sr): return 28 + min(sr.reports.count, 31) * RTCPReportBlock.size
        case .receiverReport(let rr): return 8 + min(rr.reports.count, 31) * RTCPReportBlock.size
        case .sourceDescription(let chunks):
            var n = 4
            for c in chunks.prefix(31) {
                n += 8
                for item in c.items { n += 2 + min(item.text.utf8.count, 255) }
            }
            return n
        case .bye(let ssrcs, _): return 4 + min(ssrcs.count, 31) * 4 + 260
        case .nack(let nack): return 12 + 4 * nack.lostSequenceNumbers.count
        case .pli: return 12
        case .fir(_, let entries): return 12 + 8 * entries.count
        case .remb(_, _, let ssrcs): return 20 + 4 * ssrcs.count
        case .transportCC(let fb): return 24 + 4 * min(fb.packets.count, 0xFFFF)
        case .unknown(_, _, let payload): return 8 + payload.count
        }
    }

    // MARK: helpers

    /// Checks room for `length` bytes and writes the common header (length must be a multiple of 4).
    @inline(__always)
    static func header(
        _ buffer: UnsafeMutableRawBufferPointer, _ offset: Int, count: Int, type: UInt8, length: Int
    ) throws(RTCPError) {
        guard offset >= 0, length >= 4, length <= 65536 * 4, offset <= buffer.count - length else {
            throw .bufferTooSmall
        }
        buffer[offset] = 0x80 | UInt8(truncatingIfNeeded: count & 0x1F)
        buffer[offset + 1] = type
        buffer.put16(UInt16(truncatingIfNeeded: length / 4 - 1), at: offset + 2)
    }

    @inline(__always)
    static func reportBlock(_ buffer: UnsafeMutableRawBufferPointer, _ at: Int, _ r: RTCPReportBlock)
        -> Int
    {
        buffer.put32(r.ssrc, at: at)
        buffer[at + 4] = r.fractionLost
        let lost = min(max(r.cumulativeLost, -0x80_0000), 0x7F_FFFF)
        buffer.put24(UInt32(bitPattern: lost), at: at + 5)
        buffer.put32(r.highestSequence, at: at + 8)
        buffer.put32(r.jitter, at: at + 12)
        buffer.put32(r.lastSR, at: at + 16)
        buffer.put32(r.delaySinceLastSR, at: at + 20)
        return at + RTCPReportBlock.size
    }

    /// Cuts text to at most 255 UTF-8 bytes on a scalar boundary.
    static func clip255(_ text: String) -> String {
        if text.utf8.count <= 255 { return text }
        var result = ""
        var bytes = 0
        for scalar in text.unicodeScalars {
            let n = String(scalar).utf8.count
            if bytes + n > 255 { break }
            result.unicodeScalars.append(scalar)
            bytes += n
        }
        return result
    }
}
