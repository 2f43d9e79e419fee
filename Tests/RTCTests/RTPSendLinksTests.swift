import RTCWire
import Testing

@testable import RTC

/// The send-side feature links alone, with synthetic packets and a synthetic clock.
@Suite("RTP send links")
struct RTPSendLinksTests {
    let ms: UInt64 = 1_000_000

    func packet(_ seq: UInt16, size: Int = 40) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: Int(seq) &* 7 &+ $0) }
    }

    func resent(_ b: RetransmissionBuffer, _ seq: UInt16, now: UInt64) -> [UInt8]? {
        if case .resend(let p, let offset) = b.resend(seq, now: now, minimumInterval: 50 * ms) {
            #expect(offset == 12)
            return Array(p)
        }
        return nil
    }

    @Test func theBufferAnswersOncePerIntervalUntilTheSlotIsReused() {
        let b = RetransmissionBuffer(capacity: 4, slotBytes: 64)
        for seq in UInt16(65_534)...UInt16(65_535) {
            packet(seq).withUnsafeBytes { b.store(seq, packet: $0, payloadOffset: 12) }
        }
        for seq in UInt16(0)..<2 { packet(seq).withUnsafeBytes { b.store(seq, packet: $0, payloadOffset: 12) } }
        #expect(resent(b, 65_535, now: 1 * ms) == packet(65_535), "kept across the wrap")
        guard case .tooSoon = b.resend(65_535, now: 20 * ms, minimumInterval: 50 * ms) else {
            Issue.record("a repeat within the interval must wait")
            return
        }
        #expect(resent(b, 65_535, now: 60 * ms) == packet(65_535))
        packet(2).withUnsafeBytes { b.store(2, packet: $0, payloadOffset: 12) }  // reuses 65_534's slot
        guard case .missing = b.resend(65_534, now: 100 * ms, minimumInterval: 50 * ms) else {
            Issue.record("an overwritten packet is gone")
            return
        }
        // A packet larger than a slot is not kept (and does not leave a stale one behind).
        packet(6, size: 65).withUnsafeBytes { b.store(6, packet: $0, payloadOffset: 12) }
        guard case .missing = b.resend(6, now: 200 * ms, minimumInterval: 50 * ms) else {
            Issue.record("too large to keep")
            return
        }
    }

    @Test func aBufferOfNoCapacityKeepsNothing() {
        let b = RetransmissionBuffer(capacity: 0, slotBytes: 64)
        packet(1).withUnsafeBytes { b.store(1, packet: $0, payloadOffset: 12) }
        guard case .missing = b.resend(1, now: 1, minimumInterval: 0) else {
            Issue.record("nothing is kept")
            return
        }
    }

    @Test func roundTripTimeComesFromTheReportBlockThatAnswersAnSR() {
        var clock = SenderReportClock(random: SplitMix64(seed: 1))
        let ntp = NTPTime(seconds: 3_900_000_000, fraction: 0x4000_0000)
        #expect(clock.isDue(now: 0), "the first SR goes out soon after the first packet")
        clock.sent(ntp: ntp, now: 1_000 * ms)
        clock.scheduleNext(now: 1_000 * ms, interval: 1_000 * ms)
        #expect(!clock.isDue(now: 1_499 * ms))
        #expect(clock.isDue(now: 2_500 * ms))
        // The receiver held the SR for 250 ms (DLSR in 1/65536 s) and its RR arrived 330 ms after the SR.
        let rtt = clock.roundTripTime(lastSR: ntp.middle32, delaySinceLastSR: 65_536 / 4, now: 1_330 * ms)
        #expect(rtt == 80 * ms)
        #expect(clock.roundTripTime(lastSR: ntp.middle32 &+ 1, delaySinceLastSR: 0, now: 1_330 * ms) == nil)
        #expect(clock.roundTripTime(lastSR: 0, delaySinceLastSR: 0, now: 1_330 * ms) == nil)
        #expect(
            clock.roundTripTime(lastSR: ntp.middle32, delaySinceLastSR: 65_536, now: 1_330 * ms) == nil,
            "a delay longer than the elapsed time is inconsistent")
    }

    // MARK: - Send links as a chain

    /// A built packet: 12-byte header then `payload` bytes.
    func built(_ seq: UInt16, timestamp: UInt32, payload: Int = 100) -> [UInt8] {
        var b = [UInt8](repeating: 0, count: 12 + payload)
        b[0] = 0x80
        b[2] = UInt8(seq >> 8)
        b[3] = UInt8(seq & 0xFF)
        b[4] = UInt8(timestamp >> 24)
        b[5] = UInt8(timestamp >> 16 & 0xFF)
        b[6] = UInt8(timestamp >> 8 & 0xFF)
        b[7] = UInt8(timestamp & 0xFF)
        return b
    }

    func send<Link: RTPSendLink>(_ link: inout Link, _ seq: UInt16, timestamp: UInt32, now: UInt64) {
        built(seq, timestamp: timestamp).withUnsafeBytes { p in
            link.sent(RTPSentPacket(packet: p, sequenceNumber: seq, timestamp: timestamp, payloadOffset: 12), now: now)
        }
    }

    func writeRTCP<Link: RTPSendLink>(_ link: inout Link, now: UInt64, wallClock: NTPTime) throws -> [RTCPPacket] {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 8)
        defer { buffer.deallocate() }
        var out = RTCPOutput(buffer: buffer, end: 0, localSSRC: 7, mediaSSRC: 7)
        try link.writeRTCP(&out, RTPSendClock(now: now, wallClock: wallClock))
        guard out.end > 0 else { return [] }
        return try RTCPCompound.parse(Array(UnsafeRawBufferPointer(rebasing: buffer[0..<out.end])))
    }

    @Test func senderReportsCountPacketsExtrapolateRTPTimeAndMeasureRTT() throws {
        var reports = SenderReports(
            ssrc: 7, clockRate: 90_000, cname: "c", initialTimestamp: 500, random: SplitMix64(seed: 3))
        let early = reports.tick(now: 0)
        #expect(!early, "nothing to report before the first packet")
        send(&reports, 10, timestamp: 9000, now: 1_000 * ms)
        send(&reports, 11, timestamp: 9000, now: 1_000 * ms)
        let first = reports.tick(now: 1_000 * ms)
        #expect(first, "the first SR follows the first packet")
        let wall = NTPTime(seconds: 3_900_000_000, fraction: 0)
        // 100 ms after the last frame: the SR's RTP time moves on by 9000 ticks of 90 kHz.
        let compound = try writeRTCP(&reports, now: 1_100 * ms, wallClock: wall)
        guard case .senderReport(let sr) = compound.first else {
            Issue.record("an SR opens the compound: \(compound)")
            return
        }
        #expect(sr.ssrc == 7 && sr.packetCount == 2 && sr.octetCount == 200)
        #expect(sr.rtpTimestamp == 18_000 && sr.ntpTimestamp == wall.value)
        #expect(compound.count == 2, "SDES CNAME follows")
        let soon = reports.tick(now: 1_200 * ms)
        #expect(!soon, "the next SR waits about an interval")
        let later = reports.tick(now: 2_700 * ms)
        #expect(later)
        // The receiver held our SR 250 ms and its report arrived 280 ms after we sent it.
        reports.handleRTCP(
            .reportBlock(
                RTCPReportBlock(
                    ssrc: 7, fractionLost: 0, cumulativeLost: 3, highestSequence: 11, jitter: 900,
                    lastSR: wall.middle32, delaySinceLastSR: 65_536 / 4)),
            now: 1_380 * ms)
        #expect(reports.roundTripTime == 30 * ms)
        #expect(reports.reportedPacketsLost == 3 && reports.reportedJitter == 0.01)
    }

    @Test func theCaptureTimeStampIsPerFrameForwardedOrNone() {
        var stamper = AbsCaptureTimeStamper(enabled: true)
        func chosen(_ kind: RTPOutgoingKind) -> UInt64? {
            var e = RTPOutgoingExtensions(kind: kind)
            stamper.prepare(&e, now: 0)
            return e.captureTime
        }
        #expect(chosen(.ownFrame) == nil, "no frame begun")
        stamper.beginFrame(captureTime: 42)
        #expect(chosen(.ownFrame) == 42 && chosen(.ownFrame) == 42, "every packet of the frame")
        #expect(chosen(.retransmission) == nil)
        stamper.endFrame()
        #expect(chosen(.ownFrame) == nil)
        stamper.forwarded = 77
        #expect(chosen(.forwarded) == 77)
        var off = AbsCaptureTimeStamper(enabled: false)
        off.beginFrame(captureTime: 42)
        off.forwarded = 77
        var e = RTPOutgoingExtensions(kind: .ownFrame)
        off.prepare(&e, now: 0)
        #expect(e.captureTime == nil, "not negotiated: never written")
    }

    @Test func everyPLIButOnlyANewFIRIsAKeyframeRequest() {
        var filter = KeyframeRequestFilter()
        var taken = filter.takeRequest()
        #expect(!taken)
        filter.handleRTCP(.pictureLoss, now: 0)
        filter.handleRTCP(.pictureLoss, now: 0)
        taken = filter.takeRequest()
        let again = filter.takeRequest()
        #expect(taken && !again)
        filter.handleRTCP(.fullIntraRequest(sequenceNumber: 4), now: 0)
        taken = filter.takeRequest()
        #expect(taken)
        filter.handleRTCP(.fullIntraRequest(sequenceNumber: 4), now: 0)
        taken = filter.takeRequest()
        #expect(!taken, "a repeated FIR is the same request")
        filter.handleRTCP(.fullIntraRequest(sequenceNumber: 5), now: 0)
        taken = filter.takeRequest()
        #expect(taken)
        #expect(filter.plisReceived == 2 && filter.firsReceived == 2)
    }

    @Test func theChainKeepsCountsAndReportsEachPacketOnce() throws {
        var links = RTPSenderLinks(
            captureTime: AbsCaptureTimeStamper(enabled: true),
            retransmissions: RetransmissionResponder(capacity: 8, slotBytes: 200),
            reports: SenderReports(
                ssrc: 7, clockRate: 48_000, cname: "c", initialTimestamp: 0, random: SplitMix64(seed: 1)),
            keyframes: KeyframeRequestFilter())
        links.captureTime.forwarded = 9
        var e = RTPOutgoingExtensions(kind: .forwarded)
        links.prepare(&e, now: 0)
        #expect(e.captureTime == 9)
        for seq in UInt16(65_534)...UInt16(65_535) { send(&links, seq, timestamp: 960, now: 10 * ms) }
        send(&links, 0, timestamp: 1920, now: 30 * ms)
        #expect(links.reports.packetsSent == 3 && links.reports.payloadBytesSent == 300)
        guard case .resend(let p, _) = links.retransmissions.buffer.resend(65_535, now: 40 * ms, minimumInterval: 0)
        else {
            Issue.record("the buffer link kept the packet")
            return
        }
        #expect(Array(p) == built(65_535, timestamp: 960))
        links.handleRTCP(.fullIntraRequest(sequenceNumber: 1), now: 40 * ms)
        let requested = links.keyframes.takeRequest()
        #expect(requested)
        let due = links.tick(now: 40 * ms)
        #expect(due)
        let compound = try writeRTCP(&links, now: 40 * ms, wallClock: NTPTime(seconds: 1, fraction: 0))
        guard case .senderReport(let sr) = compound.first else {
            Issue.record("SR expected: \(compound)")
            return
        }
        #expect(sr.packetCount == 3 && sr.rtpTimestamp == 1920 + 480, "10 ms after the last frame at 48 kHz")
        let dueAgain = links.tick(now: 41 * ms)
        #expect(!dueAgain)
        let nothing = try writeRTCP(&links, now: 41 * ms, wallClock: NTPTime(seconds: 1, fraction: 0))
        #expect(nothing.isEmpty)
    }

    @Test func anOwnFramesPacketsCarryOneCaptureTimeAndItsResendsNone() throws {
        let sender = RTPSender(
            ssrc: 0x1111, payloadType: 96, codec: .vp8, rtx: (97, 0x2222),
            extensions: RTPSendExtensions(absCaptureTime: 6), cname: "c", seed: 1)
        let wall = NTPTime(seconds: 3_900_000_000, fraction: 0x8000_0000)
        sender.wallClock = { _ in wall }
        var packets: [[UInt8]] = []
        sender.send(FakeVP8.frame(0), now: 1_000 * ms) { b, n in
            packets.append(Array(UnsafeRawBufferPointer(rebasing: b[0..<n])))
        }
        #expect(packets.count == 3)
        func captureTime(_ bytes: [UInt8]) throws -> UInt64? {
            try bytes.withUnsafeBytes { b in
                let h = try RTPHeader.parse(b)
                return h.extensionElement(id: 6, in: b).flatMap { AbsCaptureTime.captureTime(b, $0) }
            }
        }
        for p in packets { #expect(try captureTime(p) == wall.value) }
        let seq = try packets[1].withUnsafeBytes { try RTPHeader.parse($0).sequenceNumber }
        var resent: [[UInt8]] = []
        sender.handleNACK(sequenceNumbers: [seq], now: 1_010 * ms) { b, n in
            resent.append(Array(UnsafeRawBufferPointer(rebasing: b[0..<n])))
        }
        #expect(resent.count == 1)
        #expect(try captureTime(resent[0]) == nil, "a resend carries no capture time")
        sender.forwardedCaptureTime = 1234
        var forwarded: [UInt8] = []
        _ = [UInt8](repeating: 0x10, count: 20).withUnsafeBytes { payload in
            sender.sendForwarded(payload: payload, marker: true, timestamp: 1, sequenceNumber: 5000, now: 1_020 * ms) {
                b, n in forwarded = Array(UnsafeRawBufferPointer(rebasing: b[0..<n]))
            }
        }
        #expect(try captureTime(forwarded) == 1234)
        #expect(sender.stats.packetsSent == 4)
    }
}
