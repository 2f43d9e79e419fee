import RTCWire
import Testing

@testable import RTC

/// Transport-cc feedback as the sender will read it: every sequence number once, losses as
/// losses, and arrival times rebuilt from the deltas within 250 µs of the truth.
@Suite struct TransportFeedbackGeneratorTests {
    private let ms: UInt64 = 1_000_000

    /// Runs the generator's timer at `now` and parses what it sent.
    private func feedback(_ generator: TransportFeedbackGenerator, at now: UInt64) throws -> [RTCPTransportFeedback] {
        var out: [RTCPTransportFeedback] = []
        var parseError: Error?
        generator.tick(now: now) { buffer, length in
            do {
                for packet in try RTCPCompound.parse(Array(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))) {
                    guard case .transportCC(let fb) = packet else {
                        Issue.record("not transport-cc: \(packet)")
                        continue
                    }
                    out.append(fb)
                }
            } catch { parseError = error }
        }
        if let parseError { throw parseError }
        return out
    }

    /// Arrival times (µs from the reference) the sender rebuilds from one message.
    private func rebuiltArrivals(_ fb: RTCPTransportFeedback) -> [UInt16: Int64] {
        var t = fb.referenceTimeMicros
        var times: [UInt16: Int64] = [:]
        for p in fb.packets where p.received {
            t += Int64(p.deltaMicros)
            times[p.sequenceNumber] = t
        }
        return times
    }

    @Test func reportsEveryPacketWithLossesAndTimesWithinAQuantum() throws {
        let g = TransportFeedbackGenerator(interval: 50 * ms)
        g.senderSSRC = 0x1234
        let start: UInt64 = 7_000 * ms + 123_456
        // 40 packets 1.37 ms apart, sequence numbers wrapping through 0; 5 of them lost.
        let lost: Set<UInt16> = [65534, 2, 3, 17, 30]
        var sent: [(UInt16, UInt64)] = []
        for i in 0..<40 {
            let seq = UInt16(truncatingIfNeeded: 65530 + i)
            let at = start + UInt64(i) * 1_370_000
            sent.append((seq, at))
            if !lost.contains(seq) { g.record(seq, ssrc: 0xABCD, now: at) }
        }
        #expect(g.nextTimer == start + 50 * ms)
        #expect(try feedback(g, at: start + 49 * ms).isEmpty)  // not yet due
        let messages = try feedback(g, at: start + 60 * ms)
        #expect(messages.count == 1)
        let fb = try #require(messages.first)
        #expect(fb.senderSSRC == 0x1234 && fb.mediaSSRC == 0xABCD)
        #expect(fb.baseSequenceNumber == 65530)
        #expect(fb.packets.map(\.sequenceNumber) == sent.map(\.0))
        #expect(fb.packets.filter { !$0.received }.map(\.sequenceNumber).sorted() == lost.sorted())
        let times = rebuiltArrivals(fb)
        let firstReceived = try #require(sent.first { !lost.contains($0.0) })
        for (seq, at) in sent where !lost.contains(seq) {
            // Relative to the first received packet, the rebuilt time is within one 250 µs quantum.
            let truth = Int64(at - firstReceived.1) / 1000
            let rebuilt = try #require(times[seq]) - times[firstReceived.0]!
            #expect(abs(rebuilt - truth) < 250, "seq \(seq): \(rebuilt) vs \(truth)")
        }
        #expect(g.nextTimer == .max)  // nothing pending until the next packet
    }

    @Test func theNextReportStartsAfterTheLastAndCountsMessages() throws {
        let g = TransportFeedbackGenerator(interval: 50 * ms)
        for i in 0..<10 { g.record(UInt16(100 + i), ssrc: 1, now: 1_000 * ms + UInt64(i) * ms) }
        let first = try #require(try feedback(g, at: 1_100 * ms).first)
        // A late packet from the first report is not reported again.
        g.record(105, ssrc: 1, now: 1_101 * ms)
        #expect(g.nextTimer == .max)
        for i in 10..<20 { g.record(UInt16(100 + i), ssrc: 1, now: 1_110 * ms + UInt64(i) * ms) }
        let second = try #require(try feedback(g, at: 1_200 * ms).first)
        #expect(second.baseSequenceNumber == 110)
        #expect(second.packets.count == 10)
        #expect(second.feedbackPacketCount == first.feedbackPacketCount &+ 1)
        #expect(g.messagesSent == 2)
    }

    @Test func aBurstLargerThanOneMessageIsSplitAndEveryPacketIsReportedOnce() throws {
        let g = TransportFeedbackGenerator(interval: 50 * ms)
        for i in 0..<600 { g.record(UInt16(i), ssrc: 1, now: 500 * ms + UInt64(i) * 50_000) }
        let messages = try feedback(g, at: 600 * ms)
        #expect(messages.count == 3)
        let seqs = messages.flatMap { $0.packets.map(\.sequenceNumber) }
        #expect(seqs == (0..<600).map { UInt16($0) })
        #expect(messages.allSatisfy { $0.packets.count <= TransportFeedbackGenerator.maxStatusesPerMessage })
    }

    @Test func reorderedPacketsHaveNegativeDeltasAndAJumpStartsOver() throws {
        let g = TransportFeedbackGenerator(interval: 50 * ms)
        g.record(10, ssrc: 1, now: 100 * ms)
        g.record(12, ssrc: 1, now: 101 * ms)
        g.record(11, ssrc: 1, now: 102 * ms)  // arrived after 12
        let fb = try #require(try feedback(g, at: 200 * ms).first)
        #expect(fb.packets.map(\.received) == [true, true, true])
        let times = rebuiltArrivals(fb)
        #expect(times[11]! - times[12]! == 1000)
        #expect(fb.packets[2].deltaMicros == -1000)
        // A sender restart far ahead: the report starts at the new number.
        g.record(30_000, ssrc: 1, now: 300 * ms)
        g.record(30_001, ssrc: 1, now: 301 * ms)
        let after = try #require(try feedback(g, at: 400 * ms).first)
        #expect(after.baseSequenceNumber == 30_000 && after.packets.count == 2)
    }

    @Test func aGapLongerThanADeltaCanSayStartsANewMessage() throws {
        let g = TransportFeedbackGenerator(interval: 50 * ms)
        g.record(1, ssrc: 1, now: 1_000 * ms)
        g.record(2, ssrc: 1, now: 10_000 * ms)  // 9 s later, past a 16-bit delta of 250 µs units
        let messages = try feedback(g, at: 10_100 * ms)
        #expect(messages.map(\.baseSequenceNumber) == [1, 2])
        let times = messages.map(rebuiltArrivals)
        let gap = times[1][2]! - times[0][1]!
        #expect(abs(gap - 9_000_000) < 250)
    }
}
