import Testing

@testable import SFU

/// The stream allocator alone, on a synthetic clock: fits, step down, step up after hold-down and
/// probe, pause/resume, priorities, and audio never paused.
@Suite("SFU stream allocator")
struct SFUStreamAllocatorTests {
    let ms: UInt64 = 1_000_000
    /// A webcam in three layers: 150, 500 and 1,500 kbit/s.
    let simulcast = SFUStreamAllocator.LayerRates([150_000, 500_000, 1_500_000])

    func allocator(_ tracks: [SFUStreamAllocator.Track], estimate: Int?, probing: Bool = true) -> SFUStreamAllocator {
        var configuration = SFUStreamAllocator.Configuration()
        configuration.probing = probing
        var a = SFUStreamAllocator(configuration: configuration)
        for t in tracks { a.add(t) }
        a.estimate = estimate
        return a
    }

    func targets(_ a: SFUStreamAllocator) -> [Int] { a.tracks.map(\.target) }

    @Test func withoutAnEstimateEveryTrackGetsWhatItAsksFor() {
        var a = allocator(
            [.init(key: 1, maxLayer: 2, rates: simulcast), .init(key: 2, maxLayer: 0, rates: simulcast)], estimate: nil)
        a.allocate(now: 0)
        #expect(targets(a) == [2, 0])
        #expect(a.probeRate == 0)
    }

    @Test func theLayersThatFitTheEstimate() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 2_000_000)
        a.allocate(now: 0)
        #expect(targets(a) == [2])
        var b = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 700_000)
        b.allocate(now: 0)
        #expect(targets(b) == [1], "1.5 Mbit/s does not fit 700 kbit/s, 500 kbit/s does")
        var c = allocator(
            [.init(key: 1, maxLayer: 2, rates: simulcast), .init(key: 2, maxLayer: 2, rates: simulcast)],
            estimate: 700_000)
        c.allocate(now: 0)
        #expect(targets(c) == [1, 0], "each gets its lowest layer first, then the first climbs: 500 + 150")
    }

    /// Overload (heavy loss on a full queue): no tolerance, the layer that fits the estimate itself.
    @Test func anOverloadedPathGetsTheLayerThatFitsWithoutTolerance() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 3_000_000)
        a.allocate(now: 0)
        #expect(targets(a) == [2])
        // 450 kbit/s: within the tolerance (+20 %) the 500 kbit/s layer would stay a candidate.
        a.estimate = 450_000
        a.congested = true
        a.allocate(now: 500 * ms)
        #expect(targets(a) == [1])
        var b = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 3_000_000)
        b.allocate(now: 0)
        b.estimate = 450_000
        b.congested = true
        b.overloaded = true
        b.allocate(now: 500 * ms)
        #expect(targets(b) == [0])
        // Overload lowers, it does not pause: far below the lowest layer, that layer stays.
        b.estimate = 60_000
        b.allocate(now: 1_000 * ms)
        #expect(targets(b) == [0])
        b.overloaded = false
        b.allocate(now: 1_500 * ms)
        #expect(targets(b) == [-1], "a plain decrease that far still pauses")
    }

    @Test func anOverloadNeverPausesATrackThatHasNotStartedEither() {
        // A starved receiver's socket drops read as overload at the start of a run: the tracks it just
        // subscribed get their lowest layer, not a pause that a tiny estimate would keep for seconds.
        var a = allocator(
            [.init(key: 1, maxLayer: 2, rates: simulcast), .init(key: 2, maxLayer: 2, rates: simulcast)],
            estimate: 60_000)
        a.overloaded = true
        a.allocate(now: 0)
        #expect(targets(a) == [0, 0])
        var b = allocator(
            [.init(key: 1, maxLayer: 2, rates: simulcast), .init(key: 2, maxLayer: 2, rates: simulcast)],
            estimate: 60_000)
        b.allocate(now: 0)
        #expect(targets(b) == [-1, -1], "without overload a budget that small pauses")
    }

    @Test func theSubscribersChoiceIsTheUpperBound() {
        var a = allocator([.init(key: 1, maxLayer: 0, rates: simulcast)], estimate: 10_000_000)
        a.allocate(now: 0)
        #expect(targets(a) == [0])
        // A layer the publisher stopped sending is never chosen.
        var stopped = simulcast
        stopped[2] = 0
        var b = allocator([.init(key: 1, maxLayer: 2, rates: stopped)], estimate: 10_000_000)
        b.allocate(now: 0)
        #expect(targets(b) == [1])
    }

    @Test func oneMildDecreaseMovesNothingARealBottleneckDoes() {
        let two = SFUStreamAllocator.LayerRates([200_000, 1_000_000])
        var a = allocator([.init(key: 1, maxLayer: 1, rates: two)], estimate: 3_000_000)
        a.allocate(now: 0)
        #expect(targets(a) == [1])
        // A GCC decrease to 0.85 of what is sent: within the tolerance, the top layer stays.
        a.estimate = 850_000
        a.allocate(now: 500 * ms)
        #expect(targets(a) == [1])
        // Decrease after decrease: down to the layer that fits.
        a.estimate = 800_000
        a.allocate(now: 1_000 * ms)
        #expect(targets(a) == [0])
    }

    @Test func aTrackOfOneLayerIsNeverPaused() {
        let one = SFUStreamAllocator.LayerRates([1_000_000])
        var a = allocator(
            [.init(key: 1, maxLayer: 0, rates: one), .init(key: 2, maxLayer: 2, rates: simulcast)],
            estimate: 3_000_000, probing: false)
        a.allocate(now: 0)
        #expect(targets(a) == [0, 2])
        // Far below what the single layer needs: it keeps flowing, and is charged first, so the
        // simulcast track pauses (it could go lower, the single layer could not).
        a.estimate = 300_000
        a.allocate(now: 500 * ms)
        #expect(targets(a) == [0, -1])
    }

    @Test func stepsDownAtOnceWhenTheEstimateFalls() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 3_000_000)
        a.allocate(now: 0)
        #expect(targets(a) == [2])
        a.estimate = 600_000
        let changed = a.allocate(now: 500 * ms)
        #expect(changed)
        #expect(targets(a) == [1])
        #expect(a.decreases == 1)
        a.estimate = 200_000
        a.allocate(now: 1_000 * ms)
        #expect(targets(a) == [0])
    }

    @Test func pausesVideoWhenNothingFitsAndResumesAfterTheHoldDown() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 1_000_000, probing: false)
        a.allocate(now: 0)
        #expect(targets(a) == [1])
        a.estimate = 60_000
        a.allocate(now: 500 * ms)
        #expect(targets(a) == [-1], "not even half of 150 kbit/s fits 60 kbit/s (+20 %): paused")
        a.estimate = 1_000_000
        for t in stride(from: UInt64(1_000), to: 2_500, by: 500) {
            a.allocate(now: t * ms)
            #expect(targets(a) == [-1], "still within the 2 s hold-down at \(t) ms")
        }
        a.allocate(now: 2_500 * ms)
        #expect(targets(a) == [1], "after the hold-down: as high as the estimate makes room for (90 %)")
    }

    /// Pause hysteresis: a forwarding track keeps its lowest layer while the budget covers half of
    /// it (a dip of the estimate is no freeze), pauses below, and resumes only when it all fits.
    @Test func aForwardingTrackKeepsItsLowestLayerUntilLessThanHalfOfItFits() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 1_000_000, probing: false)
        a.audioRate = 40_000
        a.allocate(now: 0)
        #expect(targets(a) == [1])
        // The estimator's cut to 0.85 × what a 500 kbit/s path acknowledged, then a deeper dip.
        a.estimate = 170_000
        a.allocate(now: 500 * ms)
        #expect(targets(a) == [0], "130 kbit/s left: the lowest layer (150) stays")
        a.estimate = 110_000
        a.allocate(now: 1_000 * ms)
        #expect(targets(a) == [0], "70 kbit/s left, with the 20 % tolerance 84: more than half of 150")
        a.estimate = 90_000
        a.allocate(now: 1_500 * ms)
        #expect(targets(a) == [-1], "50 kbit/s left (60 with the tolerance): less than half, paused")
        // Paused, it comes back only when the whole layer fits (after the hold-down).
        a.estimate = 170_000
        a.allocate(now: 5_000 * ms)
        #expect(targets(a) == [-1], "130 kbit/s does not hold all of 150")
        a.estimate = 240_000
        a.allocate(now: 5_500 * ms)
        #expect(targets(a) == [0])
    }

    /// An estimate that fell far below what the path carries (a GCC cut to 0.85 × a small
    /// acknowledged rate, again and again on key-frame bursts) pauses nothing while the subscriber
    /// acknowledges nearly all that is sent; a path that does not carry it pauses.
    @Test func aTrackThePathCarriesIsNotPausedOnALowEstimate() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 1_000_000, probing: false)
        a.audioRate = 40_000
        a.allocate(now: 0)
        a.estimate = 170_000
        a.allocate(now: 500 * ms)
        #expect(targets(a) == [0])
        a.estimate = 60_000
        a.acknowledgedRate = 185_000  // 150 + 40 sent, 97 % of it acknowledged
        a.allocate(now: 1_000 * ms)
        #expect(targets(a) == [0], "the path carries the lowest layer: kept")
        a.acknowledgedRate = 120_000
        a.allocate(now: 1_500 * ms)
        #expect(targets(a) == [-1], "63 % acknowledged and less than half fits: paused")
    }

    @Test func audioIsNeverPausedItsRateComesOffTheTop() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 180_000)
        a.audioRate = 64_000
        a.allocate(now: 0)
        #expect(targets(a) == [-1], "180 - 64 kbit/s (+20 % tolerance) leaves less than the lowest layer")
        #expect(a.allocatedRate == 64_000, "the audio stays")
        a.audioRate = 40_000
        a.estimate = 240_000
        a.allocate(now: 10_000 * ms)
        #expect(targets(a) == [0])
    }

    @Test func screenSharePinnedAndSpeakerComeFirst() {
        let rates = simulcast
        var a = allocator(
            [
                .init(key: 1, priority: .normal, maxLayer: 2, rates: rates),
                .init(key: 2, priority: .speaker, maxLayer: 2, rates: rates),
                .init(key: 3, priority: .pinned, maxLayer: 2, rates: rates),
                .init(key: 4, priority: .screen, maxLayer: 2, rates: rates),
            ], estimate: 2_000_000)
        a.allocate(now: 0)
        // Lowest layers first (4 × 150), then the screen share climbs to the top (+1,350), the pinned
        // track gets what is left (50 kbit/s: no climb).
        #expect(targets(a) == [0, 0, 0, 2])
        // Less: the normal track pauses first, then the speaker (each once less than half of its
        // lowest layer is left for it).
        a.estimate = 400_000
        a.allocate(now: 500 * ms)
        #expect(targets(a) == [-1, 0, 0, 0])
        a.estimate = 280_000
        a.allocate(now: 1_000 * ms)
        #expect(targets(a) == [-1, -1, 0, 0])
    }

    @Test func stepsUpOnlyAfterAProbeProvesTheNextLayer() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 700_000)
        a.allocate(now: 0)
        #expect(targets(a) == [1])
        // Held below its choice from the start: no probe within the hold-down.
        a.allocate(now: 1_500 * ms)
        #expect(a.probe == nil)
        // The hold-down has passed, and the 1.5 Mbit/s layer does not fit: a probe is asked for.
        a.allocate(now: 2_000 * ms)
        #expect(a.probe != nil)
        #expect(a.probes == 1)
        // Padding up to 1.5 Mbit/s + 25 % minus the 500 kbit/s sent.
        #expect(a.probeRate == 1_875_000 - 500_000)
        #expect(targets(a) == [1], "no raise before the estimate makes room")
        // The estimator follows the probe: the raise is committed and the probe ends.
        a.estimate = 1_800_000
        a.allocate(now: 3_000 * ms)
        #expect(targets(a) == [2])
        #expect(a.probe == nil)
        #expect(a.probeRate == 0)
        #expect(a.raises == 1)
    }

    @Test func aFailedProbeDoublesTheHoldDown() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 700_000)
        a.allocate(now: 0)
        a.allocate(now: 2_100 * ms)
        #expect(a.probe != nil)
        // The estimate never follows: after 2.5 s the probe fails.
        a.allocate(now: 4_500 * ms)
        #expect(a.probe != nil)
        a.allocate(now: 4_700 * ms)
        #expect(a.probe == nil)
        #expect(a.failedProbes == 1)
        #expect(a.probeRate == 0)
        // Then no probe for 4 s (the 2 s hold-down doubled).
        for t in stride(from: UInt64(5_000), to: 8_700, by: 500) {
            a.allocate(now: t * ms)
            #expect(a.probe == nil, "at \(t) ms")
        }
        a.allocate(now: 8_800 * ms)
        #expect(a.probe != nil)
    }

    @Test func aProbeGoesOnWhileTheEstimateClimbs() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 700_000)
        a.allocate(now: 0)
        a.allocate(now: 2_100 * ms)
        #expect(a.probe != nil)
        // The estimator rises 4 % per half second: the probe outlives its 2.5 s window.
        var estimate = 700_000
        var t: UInt64 = 2_600
        while estimate * 90 / 100 < 1_500_000 {
            estimate = estimate * 104 / 100
            a.estimate = estimate
            a.allocate(now: t * ms)
            if a.tracks[0].target < 2 { #expect(a.probe != nil, "at \(t) ms, estimate \(estimate)") }
            t += 500
        }
        #expect(t > 5_000, "the climb took longer than one probe window")
        a.allocate(now: t * ms)
        #expect(targets(a) == [2])
        #expect(a.failedProbes == 0)
    }

    @Test func aProbeWhosePaddingIsAcknowledgedRaisesBeforeTheEstimateCatchesUp() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 700_000)
        a.allocate(now: 0)
        a.allocate(now: 2_100 * ms)
        #expect(a.probe != nil)
        // Half a second in, the acknowledged rate is not counted yet.
        a.acknowledgedRate = 1_800_000
        a.allocate(now: 2_600 * ms)
        #expect(targets(a) == [1])
        // After a second of padding, 1.8 Mbit/s acknowledged without congestion: the raise is proven.
        a.allocate(now: 3_200 * ms)
        #expect(targets(a) == [2])
        #expect(a.probe == nil)
        #expect(a.provenRate == 1_800_000)
        // The estimate lags (still 700 kbit/s): the proven rate keeps the layer...
        a.allocate(now: 3_700 * ms)
        #expect(targets(a) == [2])
        // ...until the estimator reports congestion.
        a.congested = true
        a.allocate(now: 4_200 * ms)
        #expect(targets(a) == [1])
        #expect(a.provenRate == 0)
    }

    @Test func paddingThatIsNotAcknowledgedProvesNothing() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 700_000)
        a.allocate(now: 0)
        a.allocate(now: 2_100 * ms)
        // A shaped path: 600 kbit/s acknowledged of the 1.7 Mbit/s sent.
        a.acknowledgedRate = 600_000
        for t in stride(from: UInt64(2_600), to: 4_600, by: 500) {
            a.allocate(now: t * ms)
            #expect(targets(a) == [1], "at \(t) ms")
        }
        #expect(a.provenRate == 0)
    }

    @Test func aDecreaseDuringAProbeEndsIt() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 700_000)
        a.allocate(now: 0)
        a.allocate(now: 2_100 * ms)
        #expect(a.probe != nil)
        a.estimate = 400_000  // the padding built a queue
        a.allocate(now: 2_600 * ms)
        #expect(a.probe == nil)
        #expect(a.probeRate == 0)
        #expect(targets(a) == [0])
        #expect(a.failedProbes == 1)
    }

    /// An estimate in a pit (200 kbit/s, the lowest layer flowing) and a path that was lifted: the
    /// raise to the top layer is shown in steps of at most 3× the budget, each proven step the base
    /// of the next, and no step doubles the hold-down.
    @Test func aRaiseFarAboveTheBudgetIsProbedInSteps() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 200_000)
        a.allocate(now: 0)
        #expect(targets(a) == [0])
        var now: UInt64 = 2_100 * ms
        a.allocate(now: now)
        let first = try! #require(a.probe)
        #expect(first.step > 0 && first.step <= 600_000, "\(first)")
        #expect(a.probeRate == first.step - 150_000)
        while targets(a) != [2], now < 30_000 * ms {
            // The lifted path carries whatever is sent: media plus padding.
            a.acknowledgedRate = a.allocatedRate + a.probeRate
            now += 500 * ms
            a.allocate(now: now)
        }
        #expect(targets(a) == [2], "on the top layer \(Double(now) / 1e9) s in")
        #expect(now <= 12_000 * ms, "on the top layer \(Double(now) / 1e9) s in")
        #expect(a.probes >= 2, "one probe of 3x cannot show 1.5 Mbit/s from 200 kbit/s")
        #expect(a.failedProbes == 0)
    }

    /// Padding that makes the estimator report congestion stops on that run, not at the probe's end.
    @Test func aProbeThatCongestsThePathStopsAtOnce() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 700_000)
        a.allocate(now: 0)
        a.allocate(now: 2_100 * ms)
        #expect(a.probe != nil && a.probeRate > 0)
        a.congested = true  // the estimate itself has not fallen yet
        a.allocate(now: 2_300 * ms)
        #expect(a.probe == nil)
        #expect(a.probeRate == 0)
        #expect(a.failedProbes == 1)
        #expect(targets(a) == [1])
    }

    @Test func theSubscriberLoweringItsChoiceIsNoCongestion() {
        var a = allocator([.init(key: 1, maxLayer: 2, rates: simulcast)], estimate: 3_000_000)
        a.allocate(now: 0)
        a.update(0, priority: .normal, maxLayer: 0, rates: simulcast)
        a.allocate(now: 100 * ms)
        #expect(targets(a) == [0])
        #expect(a.decreases == 0)
        // Raising it again is a raise: it waits for the step interval only, not a hold-down.
        a.update(0, priority: .normal, maxLayer: 2, rates: simulcast)
        a.allocate(now: 1_200 * ms)
        #expect(targets(a) == [2])
    }

    @Test func anUnmeasuredProducerCostsNothingYet() {
        var a = allocator(
            [.init(key: 1, maxLayer: 2, rates: .init([0, 0, 0])), .init(key: 2, maxLayer: 2, rates: simulcast)],
            estimate: 600_000)
        a.allocate(now: 0)
        #expect(targets(a) == [2, 1])
    }

    @Test func removingATrackKeepsTheOthersAndEndsItsProbe() {
        var a = allocator(
            [.init(key: 1, maxLayer: 2, rates: simulcast), .init(key: 2, maxLayer: 0, rates: simulcast)],
            estimate: 800_000)
        a.allocate(now: 0)
        #expect(targets(a) == [1, 0])
        a.allocate(now: 2_100 * ms)
        #expect(a.probe?.track == 0)
        a.remove(key: 1)
        #expect(a.probe == nil)
        #expect(a.tracks.map(\.key) == [2])
        #expect(a.index(key: 2) == 0)
    }
}

@Suite("SFU stream allocator, media probes")
struct SFUStreamAllocatorMediaProbeTests {
    let ms: UInt64 = 1_000_000
    let simulcast = SFUStreamAllocator.LayerRates([150_000, 500_000, 1_500_000])

    /// A paused track with nothing to pad with (every video paused) resumes at its lowest layer after
    /// the hold-down; the estimate never makes room, so it is paused again after the probe time and
    /// the next try waits twice as long.
    @Test func withoutPaddingTheResumeIsTheProbe() {
        var a = SFUStreamAllocator()
        a.add(.init(key: 1, maxLayer: 2, rates: simulcast))
        a.estimate = 100_000
        a.paddingAvailable = false
        a.allocate(now: 0)
        #expect(a.tracks[0].target == -1)
        a.allocate(now: 2_000 * ms)
        #expect(a.tracks[0].target == 0, "resumed at the lowest layer: the media is the probe")
        #expect(a.probe?.media == true)
        a.allocate(now: 2_500 * ms)
        #expect(a.tracks[0].target == 0, "held while the estimate does not fall")
        a.allocate(now: 4_600 * ms)
        #expect(a.tracks[0].target == -1, "the estimate never made room: paused again")
        #expect(a.failedProbes == 1)
        for t in stride(from: UInt64(5_000), to: 8_600, by: 500) {
            a.allocate(now: t * ms)
            #expect(a.tracks[0].target == -1, "4 s hold-down, at \(t) ms")
        }
        a.allocate(now: 8_700 * ms)
        #expect(a.tracks[0].target == 0)
        // This time the estimate follows (the media itself was acknowledged): the layer stays.
        a.estimate = 400_000
        a.allocate(now: 9_200 * ms)
        #expect(a.probe == nil)
        #expect(a.tracks[0].target == 0)
        a.allocate(now: 12_000 * ms)
        #expect(a.tracks[0].target >= 0)
    }

    @Test func aMediaProbeWhoseLayerIsAcknowledgedIsProven() {
        var a = SFUStreamAllocator()
        a.add(.init(key: 1, maxLayer: 2, rates: simulcast))
        a.estimate = 30_000
        a.audioRate = 40_000
        a.paddingAvailable = false
        a.allocate(now: 0)
        a.allocate(now: 2_000 * ms)
        #expect(a.tracks[0].target == 0)
        #expect(a.probe?.media == true)
        // The subscriber acknowledges the 150 kbit/s layer and the audio: proven, and (nothing to pad
        // with) the next media probe tries the middle layer.
        a.acknowledgedRate = 190_000
        a.allocate(now: 3_100 * ms)
        #expect(a.provenRate == 190_000)
        #expect(a.probe?.layer == 1)
        #expect(a.failedProbes == 0)
        // The middle layer is not acknowledged: it fails, and the proven rate still holds the lowest
        // layer above the 30 kbit/s estimate.
        a.allocate(now: 5_700 * ms)
        #expect(a.failedProbes == 1)
        #expect(a.tracks[0].target == 0)
    }

    @Test func aMediaProbeEndsWhenTheEstimateFalls() {
        var a = SFUStreamAllocator()
        a.add(.init(key: 1, maxLayer: 2, rates: simulcast))
        a.estimate = 100_000
        a.paddingAvailable = false
        a.allocate(now: 0)
        a.allocate(now: 2_000 * ms)
        #expect(a.tracks[0].target == 0)
        a.estimate = 80_000
        a.allocate(now: 2_500 * ms)
        #expect(a.tracks[0].target == -1)
        #expect(a.failedProbes == 1)
    }
}
