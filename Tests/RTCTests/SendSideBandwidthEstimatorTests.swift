import RTCWire
import Testing

@testable import RTC

/// The whole estimator on a simulated path (``BandwidthLinkSimulator``): the receiver's real
/// feedback generator, a bottleneck queue, losses, reordering and lost feedback; synthetic clock.
@Suite struct SendSideBandwidthEstimatorTests {
    @Test func climbsToASteadyLinkAndStaysNearIt() {
        let sim = BandwidthLinkSimulator(capacity: 2_000_000)
        sim.run(seconds: 30)
        #expect(sim.estimator.estimate.source == .transportCC)
        #expect(sim.target > 1_300_000 && sim.target < 2_600_000, "\(sim.estimator.estimate)")
        sim.run(seconds: 20)
        #expect(sim.target > 1_300_000 && sim.target < 2_600_000, "\(sim.estimator.estimate)")
        #expect(sim.states.contains(.decreasing))  // it found the capacity by overusing it
        #expect(Double(sim.packetsDropped) < Double(sim.packetsSent) * 0.02)
    }

    @Test func followsAStepDownWithinSeconds() {
        let sim = BandwidthLinkSimulator(capacity: 2_000_000)
        sim.run(seconds: 25)
        #expect(sim.target > 1_300_000)
        sim.capacity = 500_000
        sim.run(seconds: 4)
        #expect(sim.target < 600_000, "\(sim.estimator.estimate)")
        sim.run(seconds: 10)
        #expect(sim.target > 250_000 && sim.target < 650_000, "\(sim.estimator.estimate)")
    }

    @Test func followsAStepUp() {
        let sim = BandwidthLinkSimulator(capacity: 500_000)
        sim.run(seconds: 20)
        #expect(sim.target < 650_000)
        sim.capacity = 2_500_000
        sim.run(seconds: 20)
        #expect(sim.target > 1_500_000, "\(sim.estimator.estimate)")
    }

    /// An SFU's subscriber: the estimate fell to a pit (a 100 kbit/s path), then the path is lifted and
    /// the SFU sends 1.5 Mbit/s (a probe's padding, or the layers it raised). What arrives without a
    /// queue building is the estimate within a couple of seconds, not after 8 % a second for 35 s.
    @Test func aCarriedRateAboveTheEstimateIsTheEstimateAtOnce() {
        let sim = BandwidthLinkSimulator(capacity: 100_000)
        sim.run(seconds: 15)
        #expect(sim.target < 150_000, "\(sim.estimator.estimate)")
        sim.capacity = 5_000_000
        sim.fixedRate = 1_500_000
        sim.run(seconds: 3)
        #expect(sim.target >= 1_200_000, "\(sim.estimator.estimate)")
        // A sender that then follows the estimate keeps it (no collapse back into the pit).
        sim.fixedRate = nil
        sim.run(seconds: 10)
        #expect(sim.target >= 1_200_000, "\(sim.estimator.estimate)")
    }

    /// The same pit, but the path is not lifted: sending 1.5 Mbit/s into 100 kbit/s builds a queue,
    /// and nothing of it is credited.
    @Test func aRateThatOnlyFillsTheQueueIsNotCredited() {
        let sim = BandwidthLinkSimulator(capacity: 100_000)
        sim.run(seconds: 15)
        sim.fixedRate = 1_500_000
        sim.run(seconds: 3)
        #expect(sim.target < 200_000, "\(sim.estimator.estimate)")
    }

    /// An SFU subscriber's path falls to a third of what is sent (the top layer keeps flowing until
    /// the allocator lowers it) into a short tail-drop queue: within half a second the estimate is
    /// what the path carries and says overload, not a GCC decrease to 0.85 × the rate from before.
    @Test func aPathThatFallsFarBelowWhatIsSentIsOverloadedWithinHalfASecond() {
        let sim = BandwidthLinkSimulator(capacity: 2_000_000)
        sim.maxQueueMs = 100
        sim.fixedRate = 1_500_000
        sim.run(seconds: 10)
        #expect(!sim.estimator.estimate.overloaded)
        sim.capacity = 500_000
        sim.run(seconds: 0.6)
        #expect(sim.estimator.estimate.overloaded, "\(sim.estimator.estimate)")
        #expect(sim.target < 500_000 && sim.target > 300_000, "\(sim.estimator.estimate)")
        // The sender drops to a layer that fits: the overload clears and the estimate still carries
        // that layer (no second cut for the same losses).
        sim.fixedRate = 250_000
        sim.run(seconds: 2)
        #expect(!sim.estimator.estimate.overloaded, "\(sim.estimator.estimate)")
        #expect(sim.target > 250_000, "\(sim.estimator.estimate)")
    }

    /// Random loss with no queue (a lossy radio) is never overload, however heavy.
    @Test func heavyRandomLossWithoutAQueueIsNotOverload() {
        let sim = BandwidthLinkSimulator(capacity: 50_000_000)
        sim.fixedRate = 1_500_000
        sim.run(seconds: 5)
        sim.randomLoss = 0.4
        sim.run(seconds: 3)
        #expect(!sim.estimator.estimate.overloaded, "\(sim.estimator.estimate)")
    }

    @Test func aLossBurstCutsTheRateAndItRecoversAfter() {
        let sim = BandwidthLinkSimulator(capacity: 50_000_000, configuration: .init(maxBitrate: 3_000_000))
        sim.run(seconds: 20)
        let before = sim.target
        #expect(before == 3_000_000)
        sim.randomLoss = 0.3
        sim.run(seconds: 4)
        // A cut by half the loss fraction per judged second: about 0.85⁴.
        #expect(sim.target < before * 6 / 10, "\(sim.estimator.estimate)")
        #expect(sim.estimator.estimate.lossFraction > 0.1)
        let low = sim.target
        sim.randomLoss = 0
        sim.run(seconds: 15)
        #expect(sim.target > low * 3 / 2, "\(sim.estimator.estimate)")
    }

    @Test func modestRandomLossDoesNotCollapseTheRate() {
        let sim = BandwidthLinkSimulator(capacity: 2_000_000)
        sim.randomLoss = 0.01
        sim.run(seconds: 30)
        #expect(sim.target > 1_000_000, "\(sim.estimator.estimate)")
    }

    /// The shaped interop path (`tbf rate 500kbit` with a short queue, plus 1 % random loss from
    /// nftables): the estimate settles near the rate and never collapses far below it, so that the
    /// SFU keeps a layer flowing.
    @Test func aShapedLinkWithRandomLossHoldsNearItsRate() {
        let sim = BandwidthLinkSimulator(capacity: 500_000)
        sim.maxQueueMs = 60
        sim.randomLoss = 0.01
        sim.run(seconds: 15)
        var lowest = Int.max
        var highest = 0
        for _ in 0..<45 {
            sim.run(seconds: 1)
            lowest = min(lowest, sim.target)
            highest = max(highest, sim.target)
        }
        #expect(lowest > 220_000, "fell to \(lowest): \(sim.estimator.estimate)")
        #expect(highest < 800_000, "\(sim.estimator.estimate)")
    }

    /// Loss comes in bursts on a tail-drop queue (a key frame into a full bucket): judged over a
    /// second, as libwebrtc judges a receiver report's fraction lost, a burst of 8 lost in a
    /// second of 100 packets holds the rate instead of cutting it.
    @Test func aShortLossBurstWithinASecondHolds() {
        var l = LossBasedController(startBitrate: 500_000, minBitrate: 10_000, maxBitrate: 10_000_000)
        var t: Int64 = 0
        // 20 packets every 200 ms; one feedback's worth of them loses 8 (40 %), the second 6.7 %.
        for i in 0...5 {
            l.update(received: i == 2 ? 12 : 20, lost: i == 2 ? 8 : 0, nowMicros: t)
            t += 200_000
        }
        #expect(abs(l.lossFraction - 8.0 / 120) < 1e-9, "judged once, over the whole second")
        #expect(!l.hasDecreased && l.bitrate >= 500_000, "\(l.bitrate) \(l.lossFraction)")
        // The same losses sustained over a whole second cut.
        for _ in 0..<6 {
            l.update(received: 12, lost: 8, nowMicros: t)
            t += 200_000
        }
        #expect(l.hasDecreased && l.bitrate < 500_000, "\(l.bitrate) \(l.lossFraction)")
    }

    @Test func reorderingOnThePathIsNotTakenForCongestion() {
        let sim = BandwidthLinkSimulator(capacity: 2_000_000)
        sim.reorderEvery = 25
        sim.reorderMs = 12
        sim.run(seconds: 30)
        #expect(sim.target > 1_200_000, "\(sim.estimator.estimate)")
        #expect(sim.estimator.grouper.reorderedGroups > 0)
    }

    @Test func lostFeedbackIsCountedAndTheEstimateStillConverges() {
        let sim = BandwidthLinkSimulator(capacity: 2_000_000)
        sim.feedbackLoss = 0.3
        sim.run(seconds: 30)
        #expect(sim.estimator.estimate.feedbackLost > 50)
        #expect(sim.target > 1_200_000 && sim.target < 2_700_000, "\(sim.estimator.estimate)")
    }

    @Test func feedbackThatStopsCutsTheRateStepByStep() {
        let sim = BandwidthLinkSimulator(capacity: 2_000_000)
        sim.run(seconds: 20)
        let before = sim.target
        let start = sim.now
        sim.feedbackBlackout = start..<(start + 3_600_000_000)
        sim.run(seconds: 3.5)
        // Cut after 1 s of silence, then again each further second: about 0.8³.
        #expect(sim.estimator.estimate.state == .decreasing)
        #expect(sim.target < before * 6 / 10 && sim.target > before * 4 / 10, "\(before) → \(sim.target)")
        sim.run(seconds: 15)
        #expect(sim.target > before / 2)
    }

    @Test func aSenderThatPausedIsNotCutWhenItResumes() {
        let sim = BandwidthLinkSimulator(capacity: 2_000_000)
        sim.run(seconds: 10)
        let before = sim.target
        sim.fixedRate = 0
        sim.run(seconds: 5)
        sim.fixedRate = nil
        sim.run(seconds: 0.3)
        #expect(
            sim.estimator.estimate.state != .decreasing || sim.target >= before * 8 / 10, "\(sim.estimator.estimate)")
        #expect(sim.target >= before * 85 / 100, "\(before) → \(sim.target)")
    }

    @Test func anApplicationLimitedSenderIsNotCreditedWithTheLink() {
        let sim = BandwidthLinkSimulator(capacity: 10_000_000)
        sim.fixedRate = 400_000
        sim.run(seconds: 20)
        #expect(sim.estimator.estimate.state == .applicationLimited)
        #expect(sim.target <= 700_000 && sim.target > 300_000, "\(sim.estimator.estimate)")
    }

    @Test func rembAloneIsTheEstimateAndCapsTransportCC() {
        let e = SendSideBandwidthEstimator()
        #expect(e.estimate.targetBitrate == 300_000 && e.estimate.state == .starting)
        #expect(e.handleREMB(1_200_000, now: 1_000_000_000))
        #expect(e.estimate.source == .remb && e.estimate.targetBitrate == 1_200_000)
        #expect(e.estimate.state == .increasing)
        #expect(e.handleREMB(400_000, now: 2_000_000_000))
        #expect(e.estimate.targetBitrate == 400_000 && e.estimate.state == .decreasing)
        let sim = BandwidthLinkSimulator(capacity: 5_000_000)
        sim.run(seconds: 10)
        sim.estimator.handleREMB(500_000, now: sim.now)
        #expect(sim.target == 500_000 && sim.estimator.estimate.source == .transportCC)
    }

    @Test func feedbackForNumbersNeverSentChangesNothing() throws {
        let e = SendSideBandwidthEstimator()
        let fb = RTCPTransportFeedback(
            senderSSRC: 1, mediaSSRC: 2, baseSequenceNumber: 100, referenceTime: 10, feedbackPacketCount: 0,
            packets: (0..<20).map { .init(sequenceNumber: 100 + $0, received: $0 % 2 == 0, deltaMicros: 1000) })
        var bytes = [UInt8](repeating: 0, count: 1500)
        let n = try bytes.withUnsafeMutableBytes { try RTCPWriter.writeTransportFeedback(into: $0, at: 0, fb) }
        var changed = true
        try bytes[0..<n].withUnsafeBytes { raw in
            try RTCPCompound.forEach(raw) { view throws(RTCPError) in
                changed = try e.handleTransportFeedback(view, now: 5_000_000_000)
            }
        }
        #expect(!changed)
        #expect(e.estimate.targetBitrate == 300_000 && e.estimate.feedbackReceived == 1)
    }
}
