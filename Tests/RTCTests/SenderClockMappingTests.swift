import RTCWire
import Testing

@testable import RTC

/// The sender's clock through its reports' least delay.
@Suite("Sender clock mapping")
struct SenderClockMappingTests {
    @Test func theLeastRecentDelayMapsEveryReportAndAStepStartsOver() {
        var mapping = SenderClockMapping()
        let base = NTPTime(seconds: 3_900_000_000, fraction: 0)
        #expect(mapping.localTime(of: base) == nil)
        // Reports a second apart with 20, 26, 21 ms of delay: the floor is 20 ms.
        for (i, delay) in [20, 26, 21].enumerated() {
            mapping.add(
                ntp: base.adding(nanoseconds: Int64(i) * 1_000_000_000),
                arrival: 1_000_000_000 + UInt64(i) * 1_000_000_000 + UInt64(delay) * 1_000_000)
        }
        #expect(mapping.localTime(of: base.adding(nanoseconds: 2_000_000_000)) == 3_020_000_000)
        // The 20 ms sample leaves the window after eight more reports at 22 ms.
        for i in 3..<11 {
            mapping.add(
                ntp: base.adding(nanoseconds: Int64(i) * 1_000_000_000),
                arrival: 1_000_000_000 + UInt64(i) * 1_000_000_000 + 22_000_000)
        }
        #expect(mapping.localTime(of: base.adding(nanoseconds: 10_000_000_000)) == 11_022_000_000)
        // The sender's clock steps back 5 s: the next report starts the floor again.
        mapping.add(ntp: base.adding(nanoseconds: 6_000_000_000), arrival: 12_022_000_000)
        #expect(mapping.localTime(of: base.adding(nanoseconds: 6_000_000_000)) == 12_022_000_000)
    }

    @Test func aReferenceFarFromTheLastFrameIsNotBelieved() {
        var reports = SenderReports(
            ssrc: 1, clockRate: 90_000, cname: "x", initialTimestamp: 0, random: SplitMix64(seed: 1))
        let packet = [UInt8](repeating: 0, count: 112)
        packet.withUnsafeBytes { raw in
            reports.sent(
                RTPSentPacket(packet: raw, sequenceNumber: 1, timestamp: 90_000, payloadOffset: 12), now: 1_000_000_000)
        }
        #expect(reports.rtpTime(now: 1_500_000_000) == 135_000, "no reference: the last frame, extrapolated")
        reports.reference = (rtpTimestamp: 99_000, localTime: 1_000_000_000)
        #expect(reports.rtpTime(now: 1_500_000_000) == 144_000, "the source's reference, extrapolated")
        reports.reference = (rtpTimestamp: 90_000 &+ 90_000 * 60, localTime: 1_000_000_000)
        #expect(reports.rtpTime(now: 1_500_000_000) == 135_000, "a minute off: the last frame again")
    }
}
