import Testing

@testable import RTCWire

private func parseRTCP(_ bytes: [UInt8]) throws(RTCPError) -> [RTCPPacket] {
    try RTCPCompound.parse(bytes)
}

private func rtcpError(_ bytes: [UInt8]) -> RTCPError? {
    do {
        _ = try RTCPCompound.parse(bytes)
        return nil
    } catch {
        return error
    }
}

/// Writes with one RTCPWriter call into a fresh buffer and returns the bytes written.
private func written(
    capacity: Int = 1500, _ body: (UnsafeMutableRawBufferPointer) throws(RTCPError) -> Int
) throws(RTCPError) -> [UInt8] {
    var buf = [UInt8](repeating: 0xEE, count: capacity)
    var result: Result<Int, RTCPError> = .success(0)
    buf.withUnsafeMutableBytes { raw in
        do throws(RTCPError) { result = .success(try body(raw)) } catch { result = .failure(error) }
    }
    let end = try result.get()
    return Array(buf[0..<end])
}

/// Hand-built packets, byte by byte.
enum Vectors {
    static let reportBlock: [UInt8] = [
        0xAA, 0xBB, 0xCC, 0xDD,  // ssrc
        0x40, 0xFF, 0xFF, 0xFE,  // fraction 64/256, cumulative lost -2
        0x00, 0x01, 0x00, 0x05,  // extended highest seq: 1 cycle, seq 5
        0x00, 0x00, 0x00, 0x20,  // jitter 32
        0x1C, 0x2D, 0x80, 0x00,  // LSR
        0x00, 0x01, 0x00, 0x00,  // DLSR: 1 s
    ]
    static let block = RTCPReportBlock(
        ssrc: 0xAABB_CCDD, fractionLost: 0x40, cumulativeLost: -2, highestSequence: 0x0001_0005,
        jitter: 32,
        lastSR: 0x1C2D_8000, delaySinceLastSR: 0x0001_0000)

    static let senderReport: [UInt8] =
        [
            0x81, 0xC8, 0x00, 0x0C,  // V=2 RC=1 PT=200 length=12 (52 bytes)
            0x11, 0x22, 0x33, 0x44,  // ssrc
            0xE8, 0x7B, 0x1C, 0x2D, 0x80, 0x00, 0x00, 0x00,  // NTP
            0x00, 0x01, 0xE2, 0x40,  // RTP timestamp 123456
            0x00, 0x00, 0x00, 0x64,  // packets 100
            0x00, 0x00, 0x3E, 0x80,  // octets 16000
        ] + reportBlock
    static let receiverReport: [UInt8] =
        [0x81, 0xC9, 0x00, 0x07, 0x11, 0x22, 0x33, 0x44] + reportBlock
    static let sdes: [UInt8] = [
        0x81, 0xCA, 0x00, 0x03,  // SC=1 PT=202 length=3 (16 bytes)
        0x11, 0x22, 0x33, 0x44,
        0x01, 0x03, 0x61, 0x62, 0x63,  // CNAME "abc"
        0x00, 0x00, 0x00,  // null item + padding
    ]
    static let bye: [UInt8] = [
        0x81, 0xCB, 0x00, 0x02, 0x11, 0x22, 0x33, 0x44, 0x03, 0x62, 0x79, 0x65,
    ]
    static let nack: [UInt8] = [
        0x81, 0xCD, 0x00, 0x04,  // FMT=1 PT=205 length=4
        0x00, 0x00, 0x00, 0x01,  // sender
        0x11, 0x22, 0x33, 0x44,  // media
        0x00, 0x64, 0x00, 0x05,  // PID 100, BLP bits 0 and 2 -> 101, 103
        0xFF, 0xFF, 0x00, 0x01,  // PID 65535, BLP bit 0 -> 0 (wraps)
    ]
    static let pli: [UInt8] = [
        0x81, 0xCE, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x11, 0x22, 0x33, 0x44,
    ]
    static let fir: [UInt8] = [
        0x84, 0xCE, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x11, 0x22, 0x33, 0x44, 0x07, 0x00, 0x00, 0x00,
    ]
    static let remb: [UInt8] = [
        0x8F, 0xCE, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x52, 0x45, 0x4D, 0x42,  // "REMB"
        0x01, 0x0B, 0xD0, 0x90,  // 1 ssrc, exp 2, mantissa 250000 -> 1_000_000 bps
        0x11, 0x22, 0x33, 0x44,
    ]
    /// transport-cc feedback shaped like Chrome's: a run-length chunk, a 2-bit status vector and a
    /// 1-bit status vector whose unused symbols are ignored.
    static let transportCC: [UInt8] = [
        0x8F, 0xCD, 0x00, 0x0A,  // FMT=15 PT=205 length=10 (44 bytes)
        0x00, 0x00, 0x00, 0x01,  // sender
        0x11, 0x22, 0x33, 0x44,  // media
        0x01, 0x00,  // base seq 256
        0x00, 0x14,  // status count 20
        0x00, 0x12, 0x34,  // reference time 4660 * 64 ms
        0x05,  // feedback packet count
        0x20, 0x0C,  // run length: symbol 1 (small delta) x 12
        0xE1, 0x41,  // 2-bit vector: large, not, small, small, not, not, small
        0xA0, 0x00,  // 1-bit vector: received (13 unused symbols)
        0x04, 0x04, 0x08, 0x00, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0xFF,  // 12 small deltas
        0xFF, 0x9C,  // large delta -100 (-25 ms)
        0x10, 0x14, 0x01,  // small deltas
        0x02,  // small delta of the last packet
    ]
    static var transportCCStatuses: [RTCPTransportFeedback.PacketStatus] {
        let small: [Int32] = [4, 4, 8, 0, 4, 4, 4, 4, 4, 4, 4, 255]
        var out = small.enumerated().map {
            RTCPTransportFeedback.PacketStatus(
                sequenceNumber: UInt16(256 + $0.offset), received: true, deltaMicros: $0.element * 250)
        }
        out.append(.init(sequenceNumber: 268, received: true, deltaMicros: -25_000))
        out.append(.init(sequenceNumber: 269, received: false))
        out.append(.init(sequenceNumber: 270, received: true, deltaMicros: 4_000))
        out.append(.init(sequenceNumber: 271, received: true, deltaMicros: 5_000))
        out.append(.init(sequenceNumber: 272, received: false))
        out.append(.init(sequenceNumber: 273, received: false))
        out.append(.init(sequenceNumber: 274, received: true, deltaMicros: 250))
        out.append(.init(sequenceNumber: 275, received: true, deltaMicros: 500))
        return out
    }
}

@Suite struct RTCPParseTests {
    @Test func senderReport() throws {
        let packets = try parseRTCP(Vectors.senderReport)
        #expect(
            packets == [
                .senderReport(
                    RTCPSenderReport(
                        ssrc: 0x1122_3344, ntpTimestamp: 0xE87B_1C2D_8000_0000, rtpTimestamp: 123_456,
                        packetCount: 100,
                        octetCount: 16000, reports: [Vectors.block]))
            ])
        if case .senderReport(let sr) = packets[0] { #expect(sr.compactNTP == 0x1C2D_8000) }
    }

    @Test func receiverReport() throws {
        #expect(
            try parseRTCP(Vectors.receiverReport) == [
                .receiverReport(RTCPReceiverReport(ssrc: 0x1122_3344, reports: [Vectors.block]))
            ])
    }

    @Test func sourceDescription() throws {
        #expect(
            try parseRTCP(Vectors.sdes) == [
                .sourceDescription([SDESChunk(ssrc: 0x1122_3344, items: [SDESItem(type: 1, text: "abc")])])
            ])
    }

    @Test func bye() throws {
        #expect(try parseRTCP(Vectors.bye) == [.bye(ssrcs: [0x1122_3344], reason: "bye")])
        #expect(
            try parseRTCP([0x81, 0xCB, 0x00, 0x01, 1, 2, 3, 4]) == [
                .bye(ssrcs: [0x0102_0304], reason: nil)
            ])
    }

    @Test func nackExpandsPIDAndBLP() throws {
        #expect(
            try parseRTCP(Vectors.nack) == [
                .nack(
                    RTCPGenericNACK(
                        senderSSRC: 1, mediaSSRC: 0x1122_3344, lostSequenceNumbers: [100, 101, 103, 65535, 0]))
            ])
    }

    @Test func pliFirRemb() throws {
        #expect(try parseRTCP(Vectors.pli) == [.pli(senderSSRC: 1, mediaSSRC: 0x1122_3344)])
        #expect(
            try parseRTCP(Vectors.fir) == [
                .fir(senderSSRC: 1, entries: [RTCPFIREntry(ssrc: 0x1122_3344, sequenceNumber: 7)])
            ])
        #expect(
            try parseRTCP(Vectors.remb) == [
                .remb(senderSSRC: 1, bitrate: 1_000_000, ssrcs: [0x1122_3344])
            ])
    }

    @Test func transportCC() throws {
        let packets = try parseRTCP(Vectors.transportCC)
        guard case .transportCC(let fb) = try #require(packets.first) else {
            Issue.record("not transport-cc: \(packets)")
            return
        }
        #expect(fb.senderSSRC == 1)
        #expect(fb.mediaSSRC == 0x1122_3344)
        #expect(fb.baseSequenceNumber == 256)
        #expect(fb.referenceTime == 0x1234)
        #expect(fb.referenceTimeMicros == 0x1234 * 64_000)
        #expect(fb.feedbackPacketCount == 5)
        #expect(fb.packets == Vectors.transportCCStatuses)
    }

    @Test func negativeReferenceTimeIsSignExtended() throws {
        var b = Vectors.transportCC
        b[16] = 0xFF
        b[17] = 0xFF
        b[18] = 0xFE
        guard case .transportCC(let fb) = try parseRTCP(b)[0] else {
            Issue.record("not transport-cc")
            return
        }
        #expect(fb.referenceTime == -2)
    }

    @Test func unknownTypesArePreserved() throws {
        let app: [UInt8] = [0x82, 0xCC, 0x00, 0x02, 1, 2, 3, 4, 0x41, 0x42, 0x43, 0x44]
        #expect(
            try parseRTCP(app) == [
                .unknown(packetType: 204, count: 2, payload: [1, 2, 3, 4, 0x41, 0x42, 0x43, 0x44])
            ])
        // PSFB fmt 15 that is not REMB is unknown, not an error.
        var afb = Vectors.remb
        afb[12] = 0x58
        #expect(try parseRTCP(afb).first.map { if case .unknown = $0 { true } else { false } } == true)
    }

    @Test func compoundPacketWithPadding() throws {
        // RR + SDES, the SDES carrying 4 bytes of RTP-style padding (P bit, count in the last byte).
        var sdes = Vectors.sdes + [0, 0, 0, 4]
        sdes[0] |= 0x20
        sdes[3] = 0x04
        let compound = Vectors.receiverReport + sdes
        let packets = try parseRTCP(compound)
        #expect(packets.count == 2)
        #expect(
            packets[1]
                == .sourceDescription([
                    SDESChunk(ssrc: 0x1122_3344, items: [SDESItem(type: 1, text: "abc")])
                ]))
    }

    @Test func viewAPIVisitsWithoutParsing() throws {
        let compound = Vectors.senderReport + Vectors.nack + Vectors.pli + Vectors.transportCC
        var types: [UInt8] = []
        var lost: [UInt16] = []
        lost.reserveCapacity(16)
        var reportSSRCs: [UInt32] = []
        var ranges: [Range<Int>] = []
        var received = 0
        try compound.withUnsafeBytes { raw in
            try RTCPCompound.forEach(raw) { view throws(RTCPError) in
                types.append(view.packetType)
                ranges.append(view.range)
                if view.isSenderReport {
                    #expect(try view.senderInfo().packetCount == 100)
                    try view.forEachReportBlock { reportSSRCs.append($0.ssrc) }
                }
                if view.isNACK {
                    #expect(view.mediaSSRC == 0x1122_3344)
                    try view.forEachNACKSequence { lost.append($0) }
                }
                if view.isPLI { #expect(view.ssrc == 1) }
                if view.isTransportCC {
                    try view.forEachTransportCCStatus { if $0.received { received += 1 } }
                }
            }
        }
        #expect(types == [200, 205, 206, 205])
        #expect(lost == [100, 101, 103, 65535, 0])
        #expect(reportSSRCs == [0xAABB_CCDD])
        #expect(received == 17)
        #expect(ranges.first == 0..<52)
        #expect(ranges.last?.upperBound == compound.count)
    }
}

@Suite struct RTCPMalformedTests {
    @Test func tooShortAndBadVersion() {
        #expect(rtcpError([]) == .tooShort)
        #expect(rtcpError([0x80, 0xC9, 0x00]) == .tooShort)
        var rr = Vectors.receiverReport
        rr[0] = 0x41
        #expect(rtcpError(rr) == .badVersion(1))
    }

    @Test func lengthClaimsMoreThanBuffer() {
        var rr = Vectors.receiverReport
        rr[2] = 0xFF
        rr[3] = 0xFF
        #expect(rtcpError(rr) == .lengthOverrun)
        #expect(rtcpError(Array(Vectors.senderReport.dropLast(4))) == .lengthOverrun)
        // A valid first packet followed by trailing garbage is rejected as a whole.
        #expect(rtcpError(Vectors.pli + [0x80]) == .tooShort)
    }

    @Test func forEachDeliversNothingWhenALaterHeaderIsBad() {
        var visited = 0
        let bytes = Vectors.pli + [0x81, 0xCE, 0x00, 0x09]
        let error = bytes.withUnsafeBytes { raw -> RTCPError? in
            do throws(RTCPError) {
                try RTCPCompound.forEach(raw) { _ in visited += 1 }
                return nil
            } catch { return error }
        }
        #expect(error == .lengthOverrun)
        #expect(visited == 0)
    }

    @Test func badPadding() {
        var pli = Vectors.pli
        pli[0] |= 0x20
        pli[11] = 0  // zero padding count
        #expect(rtcpError(pli) == .badPadding)
        pli[11] = 13  // longer than the packet body
        #expect(rtcpError(pli) == .badPadding)
    }

    @Test func reportCountOverrun() {
        var sr = Vectors.senderReport
        sr[0] = 0x82  // claims two blocks, carries one
        #expect(rtcpError(sr) == .countOverrun)
        #expect(rtcpError([0x80, 0xC8, 0x00, 0x01, 0, 0, 0, 1]) == .tooShort)  // SR without sender info
    }

    @Test func feedbackFCI() {
        #expect(rtcpError(Array(Vectors.nack.prefix(12)).with(2, 0x00).with(3, 0x02)) == .badFCI)  // NACK without FCI
        #expect(rtcpError(Array(Vectors.fir.prefix(12)).with(3, 0x02)) == .badFCI)
        #expect(rtcpError(Vectors.remb.with(16, 9)) == .badFCI)  // 9 SSRCs claimed, 1 present
        #expect(rtcpError([0x81, 0xCE, 0x00, 0x01, 0, 0, 0, 1]) == .tooShort)  // PLI without media SSRC
    }

    @Test func transportCCMalformed() {
        // More statuses than the chunks describe.
        #expect(rtcpError(Vectors.transportCC.with(15, 0xFF)) == .badFCI)
        // Reserved symbol 3 in a run-length chunk.
        #expect(rtcpError(Vectors.transportCC.with(20, 0x60)) == .badFCI)
        // Deltas run out: turn the last 1-bit vector into "all 14 received" with status count 33.
        var b = Vectors.transportCC.with(24, 0xBF).with(25, 0xFF).with(15, 33)
        #expect(rtcpError(b) == .badFCI)
        b = Array(b.prefix(20)).with(3, 0x04)
        #expect(rtcpError(b) == .badFCI)  // status count with no chunks at all
    }

    @Test func sdesAndByeOverruns() {
        #expect(rtcpError(Vectors.sdes.with(9, 0x20)) == .badItem)  // item length past the end
        #expect(rtcpError(Vectors.sdes.with(0, 0x82)) == .countOverrun)  // two chunks claimed
        #expect(rtcpError(Vectors.bye.with(8, 0x09)) == .badItem)  // reason length past the end
        #expect(rtcpError(Vectors.bye.with(0, 0x85)) == .countOverrun)
    }
}

@Suite struct RTCPWriterTests {
    @Test func writersReproduceTheVectors() throws {
        #expect(
            try written { buf throws(RTCPError) in
                try RTCPWriter.writeSenderReport(
                    into: buf, at: 0, ssrc: 0x1122_3344, ntpTimestamp: 0xE87B_1C2D_8000_0000,
                    rtpTimestamp: 123_456,
                    packetCount: 100, octetCount: 16000, reports: [Vectors.block])
            } == Vectors.senderReport)
        #expect(
            try written { buf throws(RTCPError) in
                try RTCPWriter.writeReceiverReport(
                    into: buf, at: 0, ssrc: 0x1122_3344, reports: [Vectors.block])
            } == Vectors.receiverReport)
        #expect(
            try written { buf throws(RTCPError) in
                try RTCPWriter.writeSDESCNAME(into: buf, at: 0, ssrc: 0x1122_3344, cname: "abc")
            } == Vectors.sdes)
        #expect(
            try written { buf throws(RTCPError) in
                try RTCPWriter.writeBYE(into: buf, at: 0, ssrcs: [0x1122_3344], reason: "bye")
            } == Vectors.bye)
        #expect(
            try written { buf throws(RTCPError) in
                try RTCPWriter.writeNACK(
                    into: buf, at: 0, senderSSRC: 1, mediaSSRC: 0x1122_3344,
                    lostSequenceNumbers: [100, 101, 103, 65535, 0])
            } == Vectors.nack)
        #expect(
            try written { buf throws(RTCPError) in
                try RTCPWriter.writePLI(into: buf, at: 0, senderSSRC: 1, mediaSSRC: 0x1122_3344)
            }
                == Vectors.pli)
        #expect(
            try written { buf throws(RTCPError) in
                try RTCPWriter.writeFIR(
                    into: buf, at: 0, senderSSRC: 1, mediaSSRC: 0x1122_3344, sequenceNumber: 7)
            } == Vectors.fir)
        #expect(
            try written { buf throws(RTCPError) in
                try RTCPWriter.writeREMB(
                    into: buf, at: 0, senderSSRC: 1, bitrate: 1_000_000, ssrcs: [0x1122_3344])
            } == Vectors.remb)
    }

    @Test func writersChainIntoACompoundPacket() throws {
        let bytes = try written { buf throws(RTCPError) in
            var at = try RTCPWriter.writeReceiverReport(into: buf, at: 0, ssrc: 9)
            at = try RTCPWriter.writeSDESCNAME(into: buf, at: at, ssrc: 9, cname: "understudy")
            return try RTCPWriter.writePLI(into: buf, at: at, senderSSRC: 9, mediaSSRC: 10)
        }
        #expect(
            try parseRTCP(bytes) == [
                .receiverReport(RTCPReceiverReport(ssrc: 9)),
                .sourceDescription([SDESChunk(ssrc: 9, items: [SDESItem(type: 1, text: "understudy")])]),
                .pli(senderSSRC: 9, mediaSSRC: 10),
            ])
    }

    @Test func nackPacksSequencesIntoPairs() throws {
        let seqs: [UInt16] = [10, 11, 26, 27, 100]  // 27 is 17 after 10: new pair
        let bytes = try written { buf throws(RTCPError) in
            try RTCPWriter.writeNACK(
                into: buf, at: 0, senderSSRC: 1, mediaSSRC: 2, lostSequenceNumbers: seqs)
        }
        #expect(bytes.count == 12 + 3 * 4)
        #expect(
            Array(bytes[12...]) == [
                0x00, 0x0A, 0x80, 0x01, 0x00, 0x1B, 0x00, 0x00, 0x00, 0x64, 0x00, 0x00,
            ])
        #expect(
            try parseRTCP(bytes) == [
                .nack(RTCPGenericNACK(senderSSRC: 1, mediaSSRC: 2, lostSequenceNumbers: seqs))
            ])
    }

    @Test func writersThrowWhenTheBufferIsTooSmall() {
        #expect(throws: RTCPError.bufferTooSmall) {
            try written(capacity: 51) { buf throws(RTCPError) in
                try RTCPWriter.writeSenderReport(
                    into: buf, at: 0, ssrc: 1, ntpTimestamp: 0, rtpTimestamp: 0, packetCount: 0,
                    octetCount: 0,
                    reports: [Vectors.block])
            }
        }
        #expect(throws: RTCPError.bufferTooSmall) {
            try written(capacity: 20) { buf throws(RTCPError) in
                try RTCPWriter.writePLI(into: buf, at: 10, senderSSRC: 1, mediaSSRC: 2)
            }
        }
        #expect(throws: RTCPError.bufferTooSmall) {
            try written(capacity: 15) { buf throws(RTCPError) in
                try RTCPWriter.writeNACK(
                    into: buf, at: 0, senderSSRC: 1, mediaSSRC: 2, lostSequenceNumbers: [1, 100])
            }
        }
        #expect(throws: RTCPError.bufferTooSmall) {
            try written { buf throws(RTCPError) in
                try RTCPWriter.writeNACK(
                    into: buf, at: 0, senderSSRC: 1, mediaSSRC: 2, lostSequenceNumbers: [UInt16]())
            }
        }
    }

    @Test func compoundRoundTripOfEveryType() throws {
        let packets: [RTCPPacket] = [
            .senderReport(
                RTCPSenderReport(
                    ssrc: 1, ntpTimestamp: 0x0102_0304_0506_0708, rtpTimestamp: 9, packetCount: 10,
                    octetCount: 11,
                    reports: [
                        Vectors.block,
                        RTCPReportBlock(
                            ssrc: 5, fractionLost: 0, cumulativeLost: 0x7F_FFFF, highestSequence: 0, jitter: 0,
                            lastSR: 0,
                            delaySinceLastSR: 0),
                    ])),
            .receiverReport(RTCPReceiverReport(ssrc: 2, reports: [])),
            .sourceDescription([
                SDESChunk(
                    ssrc: 3, items: [SDESItem(type: 1, text: "a"), SDESItem(type: 6, text: "Understudy 1.0")]),
                SDESChunk(ssrc: 4, items: []),
            ]),
            .bye(ssrcs: [1, 2], reason: "shutting down"),
            .bye(ssrcs: [], reason: nil),
            .nack(
                RTCPGenericNACK(senderSSRC: 1, mediaSSRC: 2, lostSequenceNumbers: [65530, 65535, 3, 9])),
            .pli(senderSSRC: 5, mediaSSRC: 6),
            .fir(
                senderSSRC: 5,
                entries: [
                    RTCPFIREntry(ssrc: 6, sequenceNumber: 1), RTCPFIREntry(ssrc: 7, sequenceNumber: 255),
                ]),
            .remb(senderSSRC: 5, bitrate: 3 << 20, ssrcs: [6, 7, 8]),
            .transportCC(
                RTCPTransportFeedback(
                    senderSSRC: 1, mediaSSRC: 2, baseSequenceNumber: 256, referenceTime: 0x1234,
                    feedbackPacketCount: 5,
                    packets: Vectors.transportCCStatuses)),
            .unknown(packetType: 204, count: 3, payload: [0, 0, 0, 1, 0x61, 0x62, 0x63, 0x64]),
        ]
        let bytes = RTCPCompound.serialize(packets)
        #expect(bytes.count % 4 == 0)
        #expect(try parseRTCP(bytes) == packets)
    }

    @Test func transportCCRoundTripsLongRunsAndLargeDeltas() throws {
        var statuses: [RTCPTransportFeedback.PacketStatus] = []
        // 40 received with small deltas (run-length), a gap of 100 lost, then alternating large deltas.
        for i in 0..<40 {
            statuses.append(
                .init(
                    sequenceNumber: UInt16(truncatingIfNeeded: 65500 + i), received: true, deltaMicros: 1000))
        }
        for i in 40..<140 {
            statuses.append(.init(sequenceNumber: UInt16(truncatingIfNeeded: 65500 + i), received: false))
        }
        for i in 140..<150 {
            statuses.append(
                .init(
                    sequenceNumber: UInt16(truncatingIfNeeded: 65500 + i), received: true,
                    deltaMicros: i % 2 == 0 ? -750 : 70_000))
        }
        let fb = RTCPTransportFeedback(
            senderSSRC: 1, mediaSSRC: 2, baseSequenceNumber: 65500, referenceTime: -5,
            feedbackPacketCount: 255,
            packets: statuses)
        let bytes = RTCPCompound.serialize([.transportCC(fb)])
        #expect(try parseRTCP(bytes) == [.transportCC(fb)])
        // 40 small, 100 lost: two run-length chunks, then vectors for the 10 large deltas.
        #expect(bytes.count < 20 + 2 * 2 + 2 * 2 + 40 + 20 + 4)
    }

    @Test func rembBitrateRoundsDown() throws {
        let bytes = RTCPCompound.serialize([.remb(senderSSRC: 1, bitrate: 1_000_003, ssrcs: [])])
        #expect(try parseRTCP(bytes) == [.remb(senderSSRC: 1, bitrate: 1_000_000, ssrcs: [])])
        // Exponent 63 with a non-zero mantissa saturates instead of overflowing.
        var big = bytes
        big[17] = 0xFF
        #expect(try parseRTCP(big) == [.remb(senderSSRC: 1, bitrate: .max, ssrcs: [])])
    }
}

extension Array where Element == UInt8 {
    /// A copy with byte `index` replaced.
    func with(_ index: Int, _ value: UInt8) -> [UInt8] {
        var copy = self
        copy[index] = value
        return copy
    }
}
