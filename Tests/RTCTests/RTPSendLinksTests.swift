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
}
