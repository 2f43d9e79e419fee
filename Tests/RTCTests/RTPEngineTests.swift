import RTCWire
import Testing

@testable import RTC

// MARK: - Fixtures

/// Hand-built VP8 frames (RFC 6386 §9.1): a key frame starts with a 3-byte frame tag whose bit 0 is 0,
/// then the start code 9d 01 2a and 14-bit width/height; a delta frame's tag has bit 0 set.
enum FakeVP8 {
    static func keyframe(index: Int, size: Int = 3000, width: UInt16 = 320, height: UInt16 = 240) -> [UInt8] {
        // tag: key (bit0=0), version 0, show_frame (bit4), first_part_size filler
        var bytes: [UInt8] = [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A]
        bytes += [UInt8(width & 0xFF), UInt8(width >> 8 & 0x3F), UInt8(height & 0xFF), UInt8(height >> 8 & 0x3F)]
        bytes += body(index: index, count: size - bytes.count)
        return bytes
    }

    static func delta(index: Int, size: Int = 2500) -> [UInt8] {
        [0x11, 0x01, 0x00] + body(index: index, count: size - 3)
    }

    private static func body(index: Int, count: Int) -> [UInt8] {
        (0..<max(count, 0)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7 &+ 1) }
    }

    /// Frame `index` of a 30 fps stream with a key frame every `gop` frames.
    static func frame(_ index: Int, gop: Int = 1000, keyAt: Set<Int> = []) -> EncodedFrame {
        let key = index % gop == 0 || keyAt.contains(index)
        return EncodedFrame(
            codec: .vp8, data: key ? keyframe(index: index) : delta(index: index), timestamp: UInt32(index) * 3000,
            isKeyframe: key)
    }
}

/// Sender → receiver in memory, with a clock the test drives.
final class Loopback {
    let sender: RTPSender
    let receiver: RTPReceiver
    var now: UInt64 = 5_000_000_000
    var delivered: [EncodedFrame] = []
    var timings: [FrameTiming] = []
    var rtcp: [[RTCPPacket]] = []
    /// Returns true to drop a packet; the flag says whether it is a retransmission.
    var drop: (_ header: RTPHeader, _ bytes: [UInt8], _ retransmission: Bool) -> Bool = { _, _, _ in false }
    var resent: [[UInt8]] = []
    var keyframeRequests = 0
    /// When set, ``tick()`` runs the receiver's timers only once this deadline is reached, and then
    /// moves it to the receiver's next timer: as a ``MediaTransport`` does.
    var deadline: TickDeadline? {
        didSet { receiver.tickDeadline = deadline }
    }
    /// How many times ``tick()`` ran the receiver's timers.
    var ticksRun = 0

    init(sender: RTPSender, receiver: RTPReceiver) {
        self.sender = sender
        self.receiver = receiver
        receiver.onFrame = { [unowned self] frame, timing in
            delivered.append(frame)
            timings.append(timing)
        }
        sender.onKeyframeRequest = { [unowned self] in keyframeRequests += 1 }
    }

    static func vp8(
        rtx: Bool = false, options: RTPReceiverOptions = RTPReceiverOptions(), firstSequence: UInt16? = nil,
        seed: UInt64 = 1
    ) -> Loopback {
        let sender = RTPSender(
            ssrc: 0x1111, payloadType: 96, codec: .vp8, rtx: rtx ? (97, 0x2222) : nil,
            extensions: RTPSendExtensions(mid: 1, rid: 2, repairedRID: 3, absSendTime: 4, transportWideCC: 5),
            mid: "0", rid: "f", cname: "sender-cname", initialSequenceNumber: firstSequence, seed: seed)
        let receiver = RTPReceiver(
            ssrc: 0x1111, codec: .vp8, payloadType: 96, rtxPayloadType: rtx ? 97 : nil, rtxSSRC: rtx ? 0x2222 : nil,
            localSSRC: 0x9999, options: options, seed: seed)
        return Loopback(sender: sender, receiver: receiver)
    }

    /// Packetizes a frame and returns its packets without delivering them.
    func packets(of frame: EncodedFrame) -> [[UInt8]] {
        var out: [[UInt8]] = []
        sender.send(frame, now: now) { buffer, length in
            #expect(buffer.count >= length + 16, "room for the SRTP trailer")
            out.append(Array(UnsafeRawBufferPointer(rebasing: buffer[0..<length])))
        }
        return out
    }

    func deliver(_ bytes: [UInt8], retransmission: Bool = false) throws {
        try bytes.withUnsafeBytes { p in
            let header = try RTPHeader.parse(p)
            if drop(header, bytes, retransmission) { return }
            receiver.receive(p, header: header, now: now)
        }
    }

    func send(_ frame: EncodedFrame) throws {
        for p in packets(of: frame) { try deliver(p) }
    }

    /// Runs the receiver's timers, checks each RTCP compound with the RTCWire parser and feeds it back to
    /// the sender; retransmissions are delivered at once.
    func tick() throws {
        if let deadline, now < deadline.at { return }
        ticksRun += 1
        var compounds: [[UInt8]] = []
        receiver.tick(now: now) { buffer, length in
            compounds.append(Array(UnsafeRawBufferPointer(rebasing: buffer[0..<length])))
        }
        deadline?.at = receiver.nextTimer
        for c in compounds {
            let parsed = try RTCPCompound.parse(c)
            guard case .receiverReport = parsed.first else {
                Issue.record("compound must start with RR: \(parsed)")
                continue
            }
            rtcp.append(parsed)
            var again: [[UInt8]] = []
            try c.withUnsafeBytes { p in
                try sender.handleRTCP(p, now: now) { buffer, length in
                    again.append(Array(UnsafeRawBufferPointer(rebasing: buffer[0..<length])))
                }
            }
            resent += again
            for r in again { try deliver(r, retransmission: true) }
        }
    }

    func advance(milliseconds: Int) throws {
        for _ in 0..<(milliseconds / 10) {
            now += 10_000_000
            try tick()
        }
    }

    var plis: Int { rtcp.reduce(0) { n, c in n + c.filter { if case .pli = $0 { true } else { false } }.count } }
    var nacks: [RTCPGenericNACK] {
        rtcp.flatMap { c in c.compactMap { if case .nack(let n) = $0 { n } else { nil } } }
    }

    /// Every delivered frame must equal the frame sent with the same timestamp.
    func expectDeliveredIntact(_ sent: [EncodedFrame]) {
        var byTimestamp: [UInt32: EncodedFrame] = [:]
        for f in sent { byTimestamp[sender.rtpTimestamp(for: f.timestamp)] = f }
        for f in delivered {
            guard let original = byTimestamp[f.timestamp] else {
                Issue.record("delivered a frame that was never sent: ts \(f.timestamp)")
                continue
            }
            #expect(f.data == original.data)
            #expect(f.isKeyframe == original.isKeyframe)
        }
    }
}

// MARK: - Tests

@Suite struct RTPEngineTests {
    @Test func loopbackDeliversEveryFrameIntact() throws {
        let link = Loopback.vp8()
        var sent: [EncodedFrame] = []
        for i in 0..<30 {
            let f = FakeVP8.frame(i, gop: 10)
            sent.append(f)
            let packets = link.packets(of: f)
            #expect(packets.count == 3)
            for p in packets { try link.deliver(p) }
            try link.advance(milliseconds: 30)
        }
        #expect(link.delivered.count == 30)
        #expect(link.delivered.map(\.timestamp) == sent.map { link.sender.rtpTimestamp(for: $0.timestamp) })
        link.expectDeliveredIntact(sent)
        #expect(link.receiver.stats.keyframesReceived == 3)
        #expect(link.receiver.stats.framesDropped == 0)
        #expect(link.plis == 0, "the first frame was a key frame")
        #expect(link.receiver.stats.packetsReceived == 90)
        #expect(link.sender.stats.packetsSent == 90)
        #expect(link.sender.stats.framesSent == 30)
        #expect(link.receiver.stats.receiverReportsSent >= 1)
    }

    @Test func packetsCarryMarkerDescriptorAndExtensions() throws {
        let link = Loopback.vp8()
        let packets = link.packets(of: FakeVP8.frame(0))
        for (k, p) in packets.enumerated() {
            try p.withUnsafeBytes { b in
                let h = try RTPHeader.parse(b)
                #expect(h.marker == (k == packets.count - 1))
                #expect(h.payloadType == 96 && h.ssrc == 0x1111)
                let mid = try #require(h.extensionElement(id: 1, in: b))
                #expect(RTPExtensions.identifier(b, mid) == "0")
                #expect(ridOf(b, header: h, ridExtensionID: 2) == "f")
                #expect(h.extensionElement(id: 5, in: b) != nil)
                let (d, _) = try VP8PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: b[h.payloadOffset...]))
                #expect(d.startOfPartition == (k == 0))
                #expect(d.pictureIDIs15Bit && d.pictureID != nil)
                #expect(h.payloadLength <= 1150)
            }
        }
    }

    @Test func reorderingWithinAWindowStillYieldsFramesInOrder() throws {
        let link = Loopback.vp8()
        var rng = SplitMix64(seed: 42)
        var sent: [EncodedFrame] = []
        var pending: [[UInt8]] = []
        for i in 0..<40 {
            let f = FakeVP8.frame(i, gop: 15)
            sent.append(f)
            pending += link.packets(of: f)
            if pending.count >= 8 {
                pending.shuffle(using: &rng)
                for p in pending { try link.deliver(p) }
                pending.removeAll()
            }
            try link.advance(milliseconds: 10)
        }
        for p in pending { try link.deliver(p) }
        try link.advance(milliseconds: 100)
        #expect(link.delivered.count == 40)
        #expect(link.delivered.map(\.timestamp) == sent.map { link.sender.rtpTimestamp(for: $0.timestamp) })
        link.expectDeliveredIntact(sent)
        #expect(link.receiver.stats.framesDropped == 0)
    }

    private func runLossyStream(rtx: Bool) throws -> Loopback {
        let link = Loopback.vp8(rtx: rtx, seed: 7)
        var rng = SplitMix64(seed: 2024)
        var dropped = 0
        link.drop = { _, _, retransmission in
            guard !retransmission else { return false }
            let lose = rng.next() % 100 < 5
            if lose { dropped += 1 }
            return lose
        }
        var sent: [EncodedFrame] = []
        // The first frame arrives whole so the stream starts on a key frame.
        let first = FakeVP8.frame(0)
        sent.append(first)
        for p in link.packets(of: first) {
            _ = try p.withUnsafeBytes { b in link.receiver.receive(b, header: try RTPHeader.parse(b), now: link.now) }
        }
        for i in 1..<100 {
            let f = FakeVP8.frame(i)
            sent.append(f)
            try link.send(f)
            try link.advance(milliseconds: 30)
        }
        // Trailing frames without loss reveal losses at the very end.
        link.drop = { _, _, _ in false }
        for i in 100..<103 {
            let f = FakeVP8.frame(i)
            sent.append(f)
            try link.send(f)
            try link.advance(milliseconds: 30)
        }
        try link.advance(milliseconds: 300)
        #expect(dropped > 5, "the seeded loss must actually lose packets")
        #expect(link.delivered.count == sent.count)
        link.expectDeliveredIntact(sent)
        #expect(link.receiver.stats.framesDropped == 0)
        #expect(link.plis == 0)
        #expect(!link.nacks.isEmpty)
        #expect(link.sender.stats.retransmissions >= UInt64(dropped))
        #expect(link.receiver.stats.retransmissionsReceived >= UInt64(dropped))
        #expect(link.receiver.stats.nacksSent == UInt64(link.nacks.count))
        return link
    }

    @Test func fivePercentLossIsRepairedByNACK() throws {
        let link = try runLossyStream(rtx: false)
        for r in link.resent {
            let ssrc = try r.withUnsafeBytes { b in try RTPHeader.parse(b).ssrc }
            #expect(ssrc == 0x1111)
        }
    }

    @Test func fivePercentLossIsRepairedByRTX() throws {
        let link = try runLossyStream(rtx: true)
        let nacked = Set(link.nacks.flatMap(\.lostSequenceNumbers))
        var lastRTXSeq: UInt16?
        for r in link.resent {
            try r.withUnsafeBytes { b in
                let h = try RTPHeader.parse(b)
                #expect(h.ssrc == 0x2222 && h.payloadType == 97)
                let osn = UInt16(b[h.payloadOffset]) << 8 | UInt16(b[h.payloadOffset + 1])
                #expect(nacked.contains(osn))
                let rrid = try #require(h.extensionElement(id: 3, in: b))
                #expect(RTPExtensions.identifier(b, rrid) == "f")
                #expect(h.extensionElement(id: 2, in: b) == nil, "RTX carries repaired-rid, not rid")
                if let last = lastRTXSeq { #expect(h.sequenceNumber == last &+ 1) }
                lastRTXSeq = h.sequenceNumber
            }
        }
    }

    /// Loses the first, a middle or the last (marker) packet of frame 5 and every resend of it.
    @Test(arguments: [0, 1, 2])
    func unrecoverableLossDropsFramesAndRequestsKeyframe(victimOffset: UInt16) throws {
        let link = Loopback.vp8(seed: 3)
        var sent: [EncodedFrame] = []
        var victim: UInt16?
        link.drop = { header, bytes, _ in
            header.sequenceNumber == victim
        }
        for i in 0..<5 {
            let f = FakeVP8.frame(i)
            sent.append(f)
            try link.send(f)
            try link.advance(milliseconds: 30)
        }
        #expect(link.delivered.count == 5)
        let f5 = FakeVP8.frame(5)
        sent.append(f5)
        victim = link.sender.nextSequenceNumber &+ victimOffset
        try link.send(f5)
        var firstPLIFrame: Int?
        for i in 6..<60 {
            let f = FakeVP8.frame(i, keyAt: firstPLIFrame.map { [$0] } ?? [])
            sent.append(f)
            try link.send(f)
            try link.advance(milliseconds: 30)
            if firstPLIFrame == nil, link.keyframeRequests > 0 { firstPLIFrame = i + 1 }
        }
        let keyIndex = try #require(firstPLIFrame, "the sender must be asked for a key frame")
        #expect(link.plis >= 1)
        #expect(link.sender.stats.plisReceived >= 1)
        #expect(!link.resent.isEmpty, "the lost packet was NACKed and resent (and lost again)")
        link.expectDeliveredIntact(sent)
        let deliveredIndices = link.delivered.map { Int(($0.timestamp &- link.sender.rtpTimestamp(for: 0)) / 3000) }
        #expect(deliveredIndices == Array(0..<5) + Array(keyIndex..<60))
        #expect(link.receiver.stats.framesDropped == UInt64(keyIndex - 5))
        #expect(link.receiver.stats.packetsGivenUp == 1)
        #expect(link.delivered[5].isKeyframe)
    }

    @Test func keyframeRequestsAreThrottled() throws {
        let link = Loopback.vp8(seed: 5)
        // Starting on a delta frame: it is dropped and a key frame is wanted.
        try link.send(FakeVP8.frame(1))
        link.receiver.requestKeyframe()
        try link.tick()
        link.now += 100_000_000
        link.receiver.requestKeyframe()
        try link.tick()
        link.now += 300_000_000
        try link.tick()
        #expect(link.plis == 1)
        #expect(link.receiver.stats.plisSent == 1)
        // Still no key frame after 500 ms: ask again.
        link.now += 150_000_000
        try link.tick()
        #expect(link.plis == 2)
        #expect(link.delivered.isEmpty)
        // The key frame stops the requests.
        try link.send(FakeVP8.frame(2, keyAt: [2]))
        link.now += 600_000_000
        try link.tick()
        #expect(link.plis == 2)
        #expect(link.delivered.count == 1)
    }

    @Test func aKeyframeRequestedNowSkipsTheReceiversOwnThrottle() throws {
        let link = Loopback.vp8(seed: 6)
        // Starting on a delta frame: a key frame is wanted and asked for.
        try link.send(FakeVP8.frame(1))
        link.receiver.requestKeyframe()
        try link.tick()
        #expect(link.plis == 1)
        // 100 ms later a caller with its own throttle (an SFU) asks: the PLI goes out with the next
        // tick, not when this receiver's 500 ms interval ends.
        link.now += 100_000_000
        link.receiver.requestKeyframeNow()
        try link.tick()
        #expect(link.plis == 2)
        // The plain request still waits for the interval.
        link.now += 100_000_000
        link.receiver.requestKeyframe()
        try link.tick()
        #expect(link.plis == 2)
    }

    @Test func sequenceNumbersWrapAround() throws {
        let link = Loopback.vp8(firstSequence: 65_528, seed: 11)
        var sent: [EncodedFrame] = []
        var lostOnce = Set<UInt16>([65_535, 0])
        link.drop = { header, _, retransmission in
            !retransmission && lostOnce.remove(header.sequenceNumber) != nil
        }
        for i in 0..<10 {
            let f = FakeVP8.frame(i)
            sent.append(f)
            try link.send(f)
            try link.advance(milliseconds: 30)
        }
        #expect(link.delivered.count == 10)
        link.expectDeliveredIntact(sent)
        #expect(Set(link.nacks.flatMap(\.lostSequenceNumbers)) == [65_535, 0])
        link.now += 2_000_000_000
        try link.tick()
        let rr = try #require(link.rtcp.last?.first)
        guard case .receiverReport(let report) = rr else {
            Issue.record("expected RR")
            return
        }
        let block = try #require(report.reports.first)
        #expect(block.highestSequence == 1 << 16 | UInt32(65_528 &+ 29 &- 65_536))
        #expect(block.cumulativeLost == 0)
        #expect(report.ssrc == 0x9999 && block.ssrc == 0x1111)
    }

    @Test func senderReportGivesLSRAndDLSRAndRTT() throws {
        let link = Loopback.vp8(seed: 13)
        try link.send(FakeVP8.frame(0))
        let srTime = link.now + 100_000_000
        let wall = NTPTime(seconds: 3_900_000_000, fraction: 0x4000_0000)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 8)
        defer { buffer.deallocate() }
        let end = link.sender.makeSenderReport(now: srTime, wallClock: wall, into: buffer, at: 0)
        let parsed = try RTCPCompound.parse(UnsafeRawBufferPointer(rebasing: buffer[0..<end]))
        guard case .senderReport(let sr) = parsed.first, case .sourceDescription(let chunks) = parsed.last else {
            Issue.record("expected SR + SDES, got \(parsed)")
            return
        }
        #expect(chunks.first?.items.first?.text == "sender-cname")
        #expect(sr.ssrc == 0x1111 && sr.ntpTimestamp == wall.value)
        #expect(sr.packetCount == 3)
        #expect(UInt64(sr.octetCount) == link.sender.stats.payloadBytesSent)
        // 100 ms after the frame: 9000 ticks at 90 kHz.
        #expect(sr.rtpTimestamp == link.sender.rtpTimestamp(for: 0) &+ 9000)

        link.receiver.handleSenderReport(ntp: sr.ntpTimestamp, rtpTimestamp: sr.rtpTimestamp, now: srTime + 5_000_000)
        link.now = srTime + 505_000_000
        var rr: [UInt8] = []
        // Force a report by waiting past the report interval.
        link.now += 1_500_000_000
        link.receiver.tick(now: link.now) { b, n in rr = Array(UnsafeRawBufferPointer(rebasing: b[0..<n])) }
        let reply = try RTCPCompound.parse(rr)
        guard case .receiverReport(let report) = reply.first, let block = report.reports.first else {
            Issue.record("expected RR")
            return
        }
        #expect(block.lastSR == wall.middle32)
        let delay = link.now - (srTime + 5_000_000)
        #expect(block.delaySinceLastSR == UInt32((delay << 16) / 1_000_000_000))
        // The RR reaches the sender 20 ms later: RTT = 5 ms + 20 ms, within DLSR rounding.
        try rr.withUnsafeBytes { p in try link.sender.handleRTCP(p, now: link.now + 20_000_000) { _, _ in } }
        let rtt = Int64(link.sender.stats.roundTripTime)
        #expect(abs(rtt - 25_000_000) < 100_000)

        // Frames now carry wall-clock time: one frame later (3000 ticks) ≈ SR time + 33.3 ms - 66.7 ms.
        try link.send(FakeVP8.frame(1))
        let timing = try #require(link.timings.last)
        let ntp = try #require(timing.ntpTime)
        let expected = Int64(wall.unixNanoseconds) + (3000 - 9000) * 1_000_000_000 / 90_000
        #expect(abs(Int64(ntp.unixNanoseconds) - expected) < 1000)
    }

    private func opusLink() -> (RTPSender, RTPReceiver) {
        let sender = RTPSender(
            ssrc: 0x5555, payloadType: 111, codec: .opus, extensions: RTPSendExtensions(audioLevel: 1), cname: "a",
            seed: 17)
        let receiver = RTPReceiver(ssrc: 0x5555, codec: .opus, payloadType: 111, localSSRC: 1, seed: 17)
        return (sender, receiver)
    }

    private func opusFrame(_ i: Int) -> EncodedFrame {
        // TOC 0x78: CELT fullband 20 ms, one frame.
        EncodedFrame(
            codec: .opus, data: [0x78] + (0..<60).map { UInt8(truncatingIfNeeded: $0 + i) },
            timestamp: UInt32(i) * 960, isKeyframe: true, duration: 960)
    }

    @Test func jitterIsZeroWhenPacedAndPositiveWhenNot() throws {
        for jittered in [false, true] {
            let (sender, receiver) = opusLink()
            var frames: [EncodedFrame] = []
            receiver.onFrame = { f, _ in frames.append(f) }
            var rng = SplitMix64(seed: 99)
            var now: UInt64 = 1_000_000_000
            for i in 0..<100 {
                let wobble = jittered ? rng.next() % 8_000_000 : 0
                sender.send(opusFrame(i), now: now) { b, n in
                    let p = UnsafeRawBufferPointer(rebasing: b[0..<n])
                    if let h = try? RTPHeader.parse(p) { receiver.receive(p, header: h, now: now + wobble) }
                }
                now += 20_000_000
            }
            #expect(frames.count == 100)
            #expect(frames.allSatisfy { $0.duration == 960 })
            if jittered {
                #expect(receiver.stats.jitter > 0.5)
            } else {
                #expect(receiver.stats.jitter == 0)
            }
        }
    }

    @Test func duplicatesAreCountedOnceAcrossTheWindowAndAfterJumps() throws {
        let (sender, receiver) = opusLink()
        var frames: [EncodedFrame] = []
        receiver.onFrame = { f, _ in frames.append(f) }
        var packets: [[UInt8]] = []
        var now: UInt64 = 1_000_000_000
        for i in 0..<2_000 {
            sender.send(opusFrame(i), now: now) { b, n in packets.append(Array(b[0..<n])) }
            now += 20_000_000
        }
        func deliver(_ index: Int) {
            packets[index].withUnsafeBytes { p in
                if let h = try? RTPHeader.parse(p) { receiver.receive(p, header: h, now: now) }
            }
        }
        for i in 0..<100 { deliver(i) }
        deliver(99)  // the newest again
        deliver(40)  // an older one again
        #expect(receiver.stats.packetsDuplicated == 2)
        for i in 100..<1_100 { deliver(i) }
        deliver(100)  // 999 behind the newest, still inside the 1,024-number window
        #expect(receiver.stats.packetsDuplicated == 3)
        deliver(1_099)
        #expect(receiver.stats.packetsDuplicated == 4)
        // A jump of more than the window: what was seen before it is forgotten, what follows is new.
        deliver(1_900)
        deliver(1_901)
        deliver(1_900)
        #expect(receiver.stats.packetsDuplicated == 5)
        #expect(receiver.stats.packetsReceived == 1_102)
        #expect(frames.count == 1_102)
    }

    @Test func opusLossIsSkippedWithoutPLI() throws {
        let (sender, receiver) = opusLink()
        var frames: [EncodedFrame] = []
        receiver.onFrame = { f, _ in frames.append(f) }
        var now: UInt64 = 1_000_000_000
        var rtcp: [[RTCPPacket]] = []
        for i in 0..<50 {
            sender.send(opusFrame(i), now: now) { b, n in
                guard i % 10 != 3 else { return }
                let p = UnsafeRawBufferPointer(rebasing: b[0..<n])
                if let h = try? RTPHeader.parse(p) { receiver.receive(p, header: h, now: now) }
            }
            now += 20_000_000
            receiver.tick(now: now) { b, n in
                if let c = try? RTCPCompound.parse(UnsafeRawBufferPointer(rebasing: b[0..<n])) { rtcp.append(c) }
            }
        }
        #expect(frames.count == 45)
        #expect(receiver.stats.packetsLost == 5 || receiver.stats.packetsLost == 4)
        #expect(!rtcp.isEmpty)
        #expect(rtcp.allSatisfy { c in c.allSatisfy { if case .receiverReport = $0 { true } else { false } } })
    }

    @Test func malformedPacketsAreCountedAndDropped() throws {
        let link = Loopback.vp8(seed: 19)
        var sent: [EncodedFrame] = []
        let f0 = FakeVP8.frame(0)
        sent.append(f0)
        let packets = link.packets(of: f0)
        // Truncated descriptors under the real packets' sequence numbers, before the real ones arrive.
        let truncatedPayloads: [[UInt8]] = [[0x80], [0x90, 0x80], [0x90, 0x80, 0x80], [0x10], []]
        for (k, payload) in truncatedPayloads.enumerated() where !payload.isEmpty {
            var bogus = Array(packets[k % packets.count][0..<12])
            bogus[0] = 0x80  // no extension
            try link.deliver(bogus + payload)
        }
        // An RTX packet too short to hold an original sequence number.
        link.receiver.setRTX(ssrc: 0x7777, payloadType: 97)
        var rtx: [UInt8] = [0x80, 97, 0, 1, 0, 0, 0, 0, 0, 0, 0x77, 0x77, 0x05]
        try link.deliver(rtx)
        rtx[1] = 98  // wrong payload type on the RTX SSRC
        try link.deliver(rtx)
        #expect(link.receiver.stats.packetsMalformed == 5)
        #expect(link.receiver.stats.packetsUnknown == 1)
        for p in packets { try link.deliver(p) }
        // Garbage arriving after the real packets: duplicates or malformed, never a frame.
        var rng = SplitMix64(seed: 77)
        for p in packets {
            var garbage = Array(p[0..<12])
            garbage[0] = 0x80
            garbage += (0..<40).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            try link.deliver(garbage)
        }
        for i in 1..<5 {
            let f = FakeVP8.frame(i)
            sent.append(f)
            try link.send(f)
        }
        #expect(link.delivered.count == 5)
        link.expectDeliveredIntact(sent)
        let s = link.receiver.stats
        #expect(s.packetsMalformed + s.packetsDuplicated >= 8)
        #expect(s.framesDropped == 0)
    }

    @Test func simulcastGroupSendsEachLayerWithItsRID() throws {
        let ext = RTPSendExtensions(mid: 1, rid: 2)
        let group = SimulcastSendGroup(
            rids: ["q", "h", "f"], ssrcs: [10, 20, 30], payloadType: 96, extensions: ext, mid: "1", cname: "c")
        var receivers: [String: RTPReceiver] = [:]
        var counts: [String: Int] = [:]
        for (rid, ssrc) in zip(["q", "h", "f"], [UInt32(10), 20, 30]) {
            let r = RTPReceiver(ssrc: ssrc, codec: .vp8, payloadType: 96, localSSRC: 1)
            r.onFrame = { _, _ in counts[rid, default: 0] += 1 }
            receivers[rid] = r
        }
        for i in 0..<3 {
            for layer in 0..<3 {
                group.send(layer: layer, frame: FakeVP8.frame(i), now: UInt64(i) * 33_000_000) { b, n in
                    let p = UnsafeRawBufferPointer(rebasing: b[0..<n])
                    guard let h = try? RTPHeader.parse(p), let rid = ridOf(p, header: h, ridExtensionID: 2) else {
                        Issue.record("packet without rid")
                        return
                    }
                    receivers[rid]?.receive(p, header: h, now: 0)
                }
            }
        }
        #expect(counts == ["q": 3, "h": 3, "f": 3])
        #expect(group.sender(ssrc: 20)?.rid == "h")
        #expect(group.rids == ["q", "h", "f"])
    }

    @Test func nackForTheSamePacketIsRateLimited() throws {
        let link = Loopback.vp8(seed: 23)
        let packets = link.packets(of: FakeVP8.frame(0))
        let seq = try packets[1].withUnsafeBytes { try RTPHeader.parse($0).sequenceNumber }
        var resent = 0
        // Answered at once, even right after the original was sent.
        link.sender.handleNACK(sequenceNumbers: [seq], now: link.now + 5_000_000) { _, _ in resent += 1 }
        #expect(resent == 1)
        link.sender.handleNACK(sequenceNumbers: [seq], now: link.now + 20_000_000) { _, _ in resent += 1 }
        #expect(resent == 1, "not twice within 50 ms")
        link.sender.handleNACK(sequenceNumbers: [seq], now: link.now + 60_000_000) { _, _ in resent += 1 }
        #expect(resent == 2)
        link.sender.handleNACK(sequenceNumbers: [seq], now: link.now + 70_000_000) { _, _ in resent += 1 }
        #expect(resent == 2)
        link.sender.handleNACK(sequenceNumbers: [seq &+ 1000], now: link.now + 300_000_000) { _, _ in resent += 1 }
        #expect(resent == 2)
        #expect(link.sender.stats.nackMisses == 1)
    }

    @Test func firIsDedupedBySequenceNumber() throws {
        let link = Loopback.vp8(seed: 29)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        for seq: UInt8 in [1, 1, 2] {
            let n = try RTCPWriter.writeFIR(into: buffer, at: 0, senderSSRC: 5, mediaSSRC: 0x1111, sequenceNumber: seq)
            try link.sender.handleRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), now: link.now) { _, _ in }
        }
        #expect(link.sender.stats.firsReceived == 2)
        #expect(link.keyframeRequests == 2)
    }

    /// A hand-made single-packet VP8 frame (or padding when `frame` is nil) with a 15-bit picture ID.
    private func craft(seq: UInt16, pictureID: UInt16, frame: [UInt8]?) throws -> [UInt8] {
        var packet = [UInt8](repeating: 0, count: 12 + 4 + (frame?.count ?? 0))
        try packet.withUnsafeMutableBytes { b in
            try RTPHeaderWriter.writeFixedHeader(
                into: b, marker: frame != nil, payloadType: 96, sequenceNumber: seq,
                timestamp: UInt32(pictureID) * 3000,
                ssrc: 0x4444)
            guard let frame else { return }
            let n = try VP8PayloadDescriptor(startOfPartition: true, pictureID: pictureID).write(
                into: UnsafeMutableRawBufferPointer(rebasing: b[12...]))
            for (k, v) in frame.enumerated() { b[12 + n + k] = v }
        }
        return frame == nil ? Array(packet[0..<12]) : packet
    }

    /// Whether a permanently lost packet broke a frame is told by the picture IDs around it.
    @Test(arguments: [false, true])
    func lostPaddingDoesNotBreakTheStreamButALostFrameDoes(lostIsFrame: Bool) throws {
        let receiver = RTPReceiver(
            ssrc: 0x4444, codec: .vp8, payloadType: 96, localSSRC: 1, options: RTPReceiverOptions(nack: false))
        var delivered: [UInt32] = []
        receiver.onFrame = { f, _ in delivered.append(f.timestamp / 3000) }
        var now: UInt64 = 1_000_000_000
        func feed(_ p: [UInt8]) throws {
            _ = try p.withUnsafeBytes { b in receiver.receive(b, header: try RTPHeader.parse(b), now: now) }
        }
        try feed(craft(seq: 100, pictureID: 0, frame: FakeVP8.keyframe(index: 0, size: 200)))
        try feed(craft(seq: 101, pictureID: 1, frame: FakeVP8.delta(index: 1, size: 200)))
        // seq 102 is lost: padding, or the frame with picture ID 2.
        let next: UInt16 = lostIsFrame ? 3 : 2
        try feed(craft(seq: 103, pictureID: next, frame: FakeVP8.delta(index: Int(next), size: 200)))
        #expect(delivered == [0, 1], "waits for the hole")
        var plis = 0
        for _ in 0..<10 {
            now += 10_000_000
            receiver.tick(now: now) { b, n in
                let c = (try? RTCPCompound.parse(UnsafeRawBufferPointer(rebasing: b[0..<n]))) ?? []
                plis += c.filter { if case .pli = $0 { true } else { false } }.count
            }
        }
        if lostIsFrame {
            #expect(delivered == [0, 1])
            #expect(receiver.stats.framesDropped == 2)
            #expect(plis == 1)
        } else {
            #expect(delivered == [0, 1, 2])
            #expect(receiver.stats.framesDropped == 0)
            #expect(plis == 0)
        }
        #expect(receiver.stats.packetsGivenUp == 1)
        // A padding packet that does arrive is consumed silently.
        try feed(craft(seq: 104, pictureID: 0, frame: nil))
        try feed(craft(seq: 105, pictureID: 4, frame: FakeVP8.keyframe(index: 4, size: 200)))
        #expect(delivered.last == 4)
    }

    /// Random packets on the stream's SSRC (media and RTX) must never trap or deliver a frame that was
    /// not a well-formed key frame first.
    @Test func randomPacketsNeverTrap() throws {
        let receiver = RTPReceiver(
            ssrc: 0x4444, codec: .vp8, payloadType: 96, rtxPayloadType: 97, rtxSSRC: 0x4545, localSSRC: 1,
            options: RTPReceiverOptions(bufferPackets: 32))
        var frames = 0
        receiver.onFrame = { f, _ in
            frames += 1
            #expect(!f.data.isEmpty)
        }
        var rng = SplitMix64(seed: 4242)
        var now: UInt64 = 1_000_000_000
        var packet = [UInt8](repeating: 0, count: 80)
        for n in 0..<20_000 {
            let length = 12 + Int(rng.next() % 68)
            for k in 0..<length { packet[k] = UInt8(truncatingIfNeeded: rng.next()) }
            packet[0] = 0x80
            let rtx = rng.next() % 4 == 0
            packet[1] = (packet[1] & 0x80) | (rtx ? 97 : 96)
            let ssrc: UInt32 = rtx ? 0x4545 : 0x4444
            for k in 0..<4 { packet[8 + k] = UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * UInt32(k))) }
            // Keep sequence numbers in a moving neighbourhood so the buffer logic is exercised.
            let seq = UInt16(truncatingIfNeeded: n / 2 + Int(rng.next() % 64))
            packet[2] = UInt8(seq >> 8)
            packet[3] = UInt8(seq & 0xFF)
            packet.withUnsafeBytes { all in
                let p = UnsafeRawBufferPointer(rebasing: all[0..<length])
                if let h = try? RTPHeader.parse(p) { receiver.receive(p, header: h, now: now) }
            }
            now += 1_000_000
            if n % 10 == 0 { receiver.tick(now: now) { _, _ in } }
        }
        let s = receiver.stats
        #expect(s.packetsMalformed + s.packetsDuplicated + s.packetsLate + s.packetsReceived > 0)
        #expect(UInt64(frames) == s.framesDecodable)
    }
}
