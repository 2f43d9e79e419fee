import Testing

@testable import RTC

/// Each part of the send-side estimator alone, on made-up numbers.
@Suite struct BandwidthEstimatorPartsTests {
    @Test func sendHistoryGivesEachNumberOnceAndForgetsOverwrittenOnes() {
        var h = TransportSendHistory()
        defer { h.release() }
        #expect(h.take(5) == nil)  // nothing sent yet, nothing allocated
        for i in 0..<10 {
            h.record(UInt16(truncatingIfNeeded: 65_530 + i), size: 1000 + i, nowMicros: 1_000_000 + Int64(i) * 100)
        }
        #expect(h.isPending(65_535))
        #expect(h.take(65_535) == .init(sendMicros: 1_000_500, size: 1005))
        #expect(h.take(65_535) == nil)  // once
        #expect(h.take(3) == .init(sendMicros: 1_000_900, size: 1009))  // across the wrap
        // A number a full ring later, past the growth horizon, overwrites its slot: the old one is gone.
        #expect(h.capacity == TransportSendHistory.initialCapacity)
        h.record(UInt16(truncatingIfNeeded: 65_531 + h.capacity), size: 1, nowMicros: 3_000_000)
        #expect(h.take(65_531) == nil)
        #expect(h.capacity == TransportSendHistory.initialCapacity)
    }

    @Test func sendHistoryGrowsRatherThanOverwriteWhatFeedbackMayStillReport() {
        var h = TransportSendHistory()
        defer { h.release() }
        // 600 packets 1 ms apart, none reported yet: the ring doubles twice and keeps them all.
        for i in 0..<600 {
            h.record(UInt16(truncatingIfNeeded: 65_000 + i), size: 100 + i % 50, nowMicros: Int64(i) * 1000)
        }
        #expect(h.capacity == 4 * TransportSendHistory.initialCapacity)
        for i in 0..<600 {
            #expect(
                h.take(UInt16(truncatingIfNeeded: 65_000 + i)) == .init(sendMicros: Int64(i) * 1000, size: 100 + i % 50)
            )
        }
        // Reported entries, and unreported ones older than the horizon, are overwritten without growing.
        for i in 600..<1_800 { h.record(UInt16(truncatingIfNeeded: 65_000 + i), size: 100, nowMicros: Int64(i) * 1000) }
        #expect(h.capacity == 4 * TransportSendHistory.initialCapacity)
        // It never passes the maximum: at 10 µs apart the oldest unreported numbers are overwritten.
        for i in 0..<5_000 { h.record(UInt16(truncatingIfNeeded: i), size: 100, nowMicros: 2_000_000 + Int64(i) * 10) }
        #expect(h.capacity == TransportSendHistory.maxCapacity)
        #expect(h.take(0) == nil)
        #expect(h.take(4_999) == .init(sendMicros: 2_000_000 + 49_990, size: 100))
    }

    @Test func groupsBySendTimeAndReportsDeltasBetweenGroups() {
        var g = InterArrivalGrouper()
        // Frames every 33 ms, 3 packets 1 ms apart each; the path adds 2 ms per frame.
        var deltas: [InterArrivalGrouper.Delta] = []
        for frame in 0..<5 {
            for p in 0..<3 {
                let send = Int64(frame * 33_000 + p * 1_000)
                let arrival = send + 50_000 + Int64(frame * 2_000)
                if let d = g.add(sendMicros: send, arrivalMicros: arrival, size: 1000) { deltas.append(d) }
            }
        }
        // Groups 0..3 are complete once the next one starts; deltas for 1, 2, 3.
        #expect(deltas.count == 3)
        for d in deltas {
            #expect(d.sendDeltaMs == 33)
            #expect(d.arrivalDeltaMs == 35)
            #expect(d.sizeDelta == 0)
        }
    }

    @Test func reorderedGroupsAreSkippedAndThreeInARowReset() {
        var g = InterArrivalGrouper()
        _ = g.add(sendMicros: 0, arrivalMicros: 100_000, size: 100)
        _ = g.add(sendMicros: 10_000, arrivalMicros: 110_000, size: 100)
        #expect(g.add(sendMicros: 20_000, arrivalMicros: 105_000, size: 100) != nil)  // closes group 2
        // The group sent at 20 ms arrived before the one sent at 10 ms: reordered, no delta.
        #expect(g.add(sendMicros: 30_000, arrivalMicros: 130_000, size: 100) == nil)
        #expect(g.reorderedGroups == 1)
        // A packet sent before the current group is ignored outright.
        #expect(g.add(sendMicros: 1_000, arrivalMicros: 140_000, size: 100) == nil)
        for k in 0..<4 {
            _ = g.add(sendMicros: 40_000 + Int64(k) * 10_000, arrivalMicros: 90_000 - Int64(k) * 1_000, size: 100)
        }
        #expect(g.resets >= 1)
    }

    @Test func trendlineIsPositiveWhileQueuesBuildAndNegativeWhileTheyDrain() {
        var t = TrendlineFilter()
        var trend = 0.0
        for k in 0..<40 {
            trend = t.update(.init(sendDeltaMs: 20, arrivalDeltaMs: 22, arrivalTimeMs: Double(k * 22), sizeDelta: 0))
        }
        #expect(trend > 12.5)  // 2 ms more per 22 ms: well past the initial threshold
        for k in 40..<80 {
            trend = t.update(
                .init(sendDeltaMs: 20, arrivalDeltaMs: 18, arrivalTimeMs: 880 + Double((k - 40) * 18), sizeDelta: 0))
        }
        #expect(trend < -12.5)
    }

    @Test func detectorNeedsSustainedOveruseAndItsThresholdAdapts() {
        var d = OveruseDetector()
        // One group above the threshold is not overuse; the second (trend not falling) is.
        #expect(d.detect(trend: 20, sendDeltaMs: 10, nowMs: 0) == .normal)
        #expect(d.detect(trend: 21, sendDeltaMs: 10, nowMs: 10) == .overusing)
        #expect(d.detect(trend: -30, sendDeltaMs: 10, nowMs: 20) == .underusing)
        // A trend that stays near the threshold pulls it up (slowly) or down (faster).
        var up = OveruseDetector()
        for k in 0..<200 { _ = up.detect(trend: 20, sendDeltaMs: 10, nowMs: Double(k * 10)) }
        #expect(up.threshold > 19)
        var down = OveruseDetector()
        for k in 0..<200 { _ = down.detect(trend: 0, sendDeltaMs: 10, nowMs: Double(k * 10)) }
        #expect(down.threshold == OveruseDetector.minThreshold)
    }

    @Test func aimdStartsFastThenGrowsEightPercentASecondAndCutsBelowTheAcknowledgedRate() {
        var r = AIMDRateController(startBitrate: 1_000_000, minBitrate: 10_000, maxBitrate: 10_000_000)
        var t: Int64 = 0
        r.update(usage: .normal, acknowledged: nil, nowMicros: t)
        for _ in 0..<10 {
            t += 100_000
            r.update(usage: .normal, acknowledged: nil, nowMicros: t)
        }
        // Start phase: 60 % in a second.
        #expect(r.bitrate > 1_590_000 && r.bitrate < 1_615_000, "\(r.bitrate)")
        t += 100_000
        r.update(usage: .overusing, acknowledged: 800_000, nowMicros: t)
        #expect(r.bitrate == 680_000)
        #expect(r.decreased && r.phase == .hold)
        #expect(r.linkCapacity == 800_000)
        // A second overuse signal within 200 ms does not cut again.
        t += 50_000
        r.update(usage: .overusing, acknowledged: 600_000, nowMicros: t)
        #expect(r.bitrate == 680_000)
        // Underuse holds; normal resumes the increase, now 8 % a second.
        t += 50_000
        r.update(usage: .underusing, acknowledged: 600_000, nowMicros: t)
        #expect(r.bitrate == 680_000)
        for _ in 0..<10 {
            t += 100_000
            r.update(usage: .normal, acknowledged: nil, nowMicros: t)
        }
        #expect(r.bitrate > 680_000 * 1.07 && r.bitrate < 680_000 * 1.10, "\(r.bitrate)")
    }

    @Test func aimdDoesNotGrowPastWhatAnApplicationLimitedSenderShowed() {
        var r = AIMDRateController(startBitrate: 1_000_000, minBitrate: 10_000, maxBitrate: 10_000_000)
        var t: Int64 = 0
        for _ in 0..<100 {
            r.update(usage: .normal, acknowledged: 200_000, nowMicros: t)
            t += 100_000
        }
        #expect(r.bitrate == 1_000_000)  // above the cap already: held, never cut by it
        #expect(r.applicationLimited)
        var low = AIMDRateController(startBitrate: 100_000, minBitrate: 10_000, maxBitrate: 10_000_000)
        for _ in 0..<300 {
            low.update(usage: .normal, acknowledged: 200_000, nowMicros: t)
            t += 100_000
        }
        #expect(low.bitrate == 310_000)
    }

    @Test func lossBasedHoldsBetweenTwoAndTenPercentAndCutsAbove() {
        var l = LossBasedController(startBitrate: 1_000_000, minBitrate: 10_000, maxBitrate: 10_000_000)
        l.rttMs = 900
        l.update(received: 0, lost: 0, nowMicros: 0)  // the first feedback opens the window
        l.update(received: 95, lost: 5, nowMicros: 500_000)  // half a second: not judged yet
        #expect(l.lossFraction == 0)
        l.update(received: 0, lost: 0, nowMicros: 1_000_000)
        #expect(l.bitrate == 1_000_000 && abs(l.lossFraction - 0.05) < 1e-9)
        l.update(received: 75, lost: 25, nowMicros: 2_000_000)
        #expect(l.bitrate == 875_000 && l.decreased)
        // A second burst within 300 ms + RTT of the cut is the same event.
        l.update(received: 75, lost: 25, nowMicros: 3_000_000)
        #expect(l.bitrate == 875_000)
        l.update(received: 10, lost: 0, nowMicros: 4_000_000)  // too few packets to judge
        #expect(l.lossFraction == 0.25)
        l.update(received: 100, lost: 0, nowMicros: 5_000_000)
        #expect(l.bitrate > 875_000)
    }

    @Test func acknowledgedRateCountsOnlyTheTimeTheFeedbackCovers() {
        var a = AckedBitrateEstimator()
        #expect(a.bitrate == nil)
        // 5 packets of 1,000 bytes per 50 ms message (800 kbit/s) for 2 s, every third message lost.
        var t: Int64 = 5_000_000
        var contiguous = false
        for m in 0..<40 {
            if m % 3 == 2 {
                contiguous = false
            } else {
                a.add(bytes: 5_000, firstSize: 1_000, firstArrival: t, lastArrival: t + 40_000, contiguous: contiguous)
                contiguous = true
            }
            t += 50_000
        }
        let rate = try! #require(a.bitrate)
        #expect(rate > 760_000 && rate < 840_000, "\(rate)")
    }

    @Test func overloadIsTwoHeavyWindowsInARowOnAQueueThatFilled() {
        var d = OverloadDetector()
        var t: Int64 = 0
        // One feedback message of 20 packets per 160 ms window (the first one opens it).
        let opened = d.update(received: 20, lost: 0, overuse: false, nowMicros: t)
        #expect(!opened)
        func window(lost: Int, overuse: Bool = false) -> Bool {
            t += 160_000
            return d.update(received: 20 - lost, lost: lost, overuse: overuse, nowMicros: t)
        }
        let w1 = window(lost: 0)
        #expect(!w1)
        // One burst (a key frame into a full tail-drop queue) is one heavy window: not overload.
        let w2 = window(lost: 8, overuse: true)
        #expect(!w2)
        let w3 = window(lost: 0)
        #expect(!w3)
        #expect(!d.overloaded)
        // Heavy loss with no queue seen filling for a second (random loss on a radio link): not overload.
        for _ in 0..<7 {
            let quiet = window(lost: 0)
            #expect(!quiet)
        }
        let w4 = window(lost: 8)
        #expect(!w4)
        let w5 = window(lost: 8)
        #expect(!w5)
        #expect(!d.overloaded)
        // Sustained and the delay detector saw the queue fill: overload, every heavy window after.
        let w6 = window(lost: 0)
        #expect(!w6)
        let w7 = window(lost: 8, overuse: true)
        #expect(!w7)
        let w8 = window(lost: 8)
        #expect(w8)
        #expect(d.overloaded)
        let w9 = window(lost: 9)
        #expect(w9)
        // Back below 10 %: cleared, once it held for half a second.
        let w10 = window(lost: 1)
        #expect(!w10)
        #expect(d.overloaded, "a burst's quiet window does not clear it at once")
        for _ in 0..<3 {
            let calm = window(lost: 1)
            #expect(!calm)
        }
        #expect(!d.overloaded)
        // 60 % or more lost in one window, the queue seen filling: at once.
        let w11 = window(lost: 12, overuse: true)
        #expect(w11)
        #expect(d.overloaded)
        // Twice in a row 60 % or more, whatever the delay said (a busy machine's detector may not see
        // a short queue fill).
        for _ in 0..<10 {
            let calm = window(lost: 0)
            #expect(!calm)
        }
        #expect(!d.overloaded)
        let w12 = window(lost: 13)
        #expect(!w12)
        let w13 = window(lost: 13)
        #expect(w13)
    }
}
