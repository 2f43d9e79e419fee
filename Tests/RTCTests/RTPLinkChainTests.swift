import RTCWire
import Testing

@testable import RTC

/// The receive link chain and its statistics link alone: synthetic events, a synthetic clock, and the
/// compound RTCP it writes taken apart again.
@Suite("RTP receive link chain")
struct RTPLinkChainTests {
    let ms: UInt64 = 1_000_000
    let base: Int64 = 0x1_0000 + 100

    func links(cname: String = "") -> RTPReceiverLinks {
        RTPReceiverLinks(
            statistics: ReceiveStatistics(
                ssrc: 0xAAAA, clockRate: 90_000, cname: cname, reportInterval: 1_000 * ms, seed: 7),
            nack: NACKGenerator(
                options: RTPReceiverOptions(nackInterval: 20 * ms), capacity: 64, tracksHoles: true),
            keyframes: KeyframeRequester(enabled: true, interval: 500 * ms))
    }

    /// Feeds extended sequence numbers in arrival order, 10 ms apart, 3000 ticks per packet.
    func feed(_ chain: inout RTPReceiverLinks, _ exts: [Int64], highest: inout Int64, now: inout UInt64) {
        for ext in exts {
            let previous = highest
            highest = max(highest, ext)
            chain.received(
                RTPReceiveEvent(
                    ext: ext, previousHighest: previous, timestamp: UInt32(truncatingIfNeeded: (ext - base) * 3000),
                    isRepair: false, sinceStart: now, resynced: false),
                now: now)
            now += 10 * ms
        }
    }

    /// The packet types of one compound, in order.
    func types(_ bytes: [UInt8]) throws -> [UInt8] {
        var out: [UInt8] = []
        try bytes.withUnsafeBytes { raw in try RTCPCompound.forEach(raw) { view in out.append(view.packetType) } }
        return out
    }

    func tick(_ chain: inout RTPReceiverLinks, now: UInt64, highest: Int64) -> [UInt8]? {
        let clock = RTPLinkClock(now: now, roundTripTime: 30 * ms, baseExt: base, highestExt: highest)
        guard chain.tick(clock) else { return nil }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { buffer.deallocate() }
        var out = RTCPOutput(buffer: buffer, end: 0, localSSRC: 1, mediaSSRC: 0xAAAA)
        try? chain.writeRTCP(&out, clock)
        return Array(buffer[0..<out.end])
    }

    @Test func aGapIsNACKedBehindTheReceiverReportAndAKeyframeRequestFollows() throws {
        var chain = links(cname: "me")
        var highest = base
        var now: UInt64 = 0
        feed(&chain, [base, base + 1, base + 4], highest: &highest, now: &now)  // +2, +3 missing
        chain.keyframes.want()
        let first = try #require(tick(&chain, now: now, highest: highest))
        let firstTypes = try types(first)
        #expect(
            firstTypes
                == [
                    RTCPPacketType.receiverReport, RTCPPacketType.sourceDescription,
                    RTCPPacketType.transportFeedback, RTCPPacketType.payloadFeedback,
                ])
        #expect(chain.nack.nacksSent == 1 && chain.nack.nackedSequenceNumbers == 2)
        #expect(chain.keyframes.plisSent == 1)
        #expect(chain.statistics.receiverReportsSent == 1)

        // 5 ms later nothing is due: no compound at all.
        let quiet = tick(&chain, now: now + 5 * ms, highest: highest)
        #expect(quiet == nil)

        // One hole is filled; the next NACK (after the interval and one RTT) asks for the other only,
        // and a report without SDES opens the compound because only NACK is due.
        feed(&chain, [base + 2], highest: &highest, now: &now)
        let second = try #require(tick(&chain, now: now + 40 * ms, highest: highest))
        let secondTypes = try types(second)
        #expect(secondTypes == [RTCPPacketType.receiverReport, RTCPPacketType.transportFeedback])
        #expect(chain.nack.nackedSequenceNumbers == 3)
        #expect(chain.nack.holesFilled == 1)
    }

    @Test func statisticsCountLossAndMapSenderReports() throws {
        var chain = links()
        var highest = base
        var now: UInt64 = 0
        feed(&chain, [base, base + 1, base + 3, base + 4], highest: &highest, now: &now)
        #expect(chain.statistics.packetsReceived == 4)
        #expect(chain.statistics.packetsLost(baseExt: base, highestExt: highest) == 1)

        let ntp = NTPTime(value: 0x0000_1234_5678_0000)
        chain.handleSenderReport(ntp: ntp, rtpTimestamp: 9000, now: now)
        // 90 000 ticks after the report's RTP time is one second after its NTP time.
        let later = try #require(chain.statistics.ntpTime(of: 99_000, clockRate: 90_000))
        #expect(later == ntp.adding(nanoseconds: 1_000_000_000))

        let clock = RTPLinkClock(now: now + 500 * ms, roundTripTime: 0, baseExt: base, highestExt: highest)
        var statistics = chain.statistics
        let block = statistics.reportBlock(clock)
        #expect(block.cumulativeLost == 1)
        #expect(block.fractionLost == UInt8((1 << 8) / 5))
        #expect(block.lastSR == ntp.middle32)
        #expect(block.delaySinceLastSR == 0x8000, "half a second in 1/65536 s")
        #expect(block.highestSequence == UInt32(highest - 0x1_0000))
        let next = statistics.reportBlock(clock)
        #expect(next.fractionLost == 0, "a new interval starts after each block")
    }

    @Test func aResyncForgetsHolesAndAudioTracksNone() {
        var chain = links()
        chain.received(
            RTPReceiveEvent(
                ext: base + 5, previousHighest: base, timestamp: 0, isRepair: false, sinceStart: 0, resynced: false),
            now: 0)
        #expect(chain.nack.missing.count == 4)
        chain.received(
            RTPReceiveEvent(
                ext: base + 5000, previousHighest: base + 5, timestamp: 0, isRepair: false, sinceStart: 0,
                resynced: true),
            now: 0)
        #expect(chain.nack.isEmpty)

        var audio = NACKGenerator(options: RTPReceiverOptions(), capacity: 1, tracksHoles: false)
        audio.received(
            RTPReceiveEvent(
                ext: base + 9, previousHighest: base, timestamp: 0, isRepair: false, sinceStart: 0, resynced: false),
            now: 0)
        #expect(audio.isEmpty)
        let clock = RTPLinkClock(now: 100 * ms, roundTripTime: 0, baseExt: base, highestExt: base + 9)
        let audioDue = audio.tick(clock)
        #expect(!audioDue)
    }
}
