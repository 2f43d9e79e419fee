import Testing

@testable import RTCWire

/// ``ReceiveQuality`` against hand-computed values, on a synthetic clock (nanoseconds).
struct ReceiveQualityTests {
    /// 30 fps at 90 kHz: 3000 ticks and 33,333,333 ns apart.
    private static let frameNanos: UInt64 = 33_333_333

    private func video(_ gaps: [UInt64], start: UInt64 = 7_000_000_000) -> ReceiveQuality {
        var q = ReceiveQuality(kind: .video, clockRate: 90_000)
        var now = start
        var timestamp: UInt32 = 12_345
        q.videoFrame(timestamp: timestamp, arrival: now)
        for gap in gaps {
            now += gap
            // The sender kept sending while frames were lost: media time moves with the gap.
            timestamp &+= UInt32((gap * 90_000 + 500_000_000) / 1_000_000_000)
            q.videoFrame(timestamp: timestamp, arrival: now)
        }
        return q
    }

    @Test func steadyThirtyFramesPerSecondHasNoFreezeAndNoBufferDelay() {
        let s = video(Array(repeating: Self.frameNanos, count: 90)).snapshot()
        #expect(s.frames == 91)
        // 90 gaps of 33.333333 ms: 2.99999997 s.
        #expect(abs(s.framesPerSecond - 30) < 0.001)
        #expect(s.freezeCount == 0)
        #expect(s.totalFreezesDurationMs == 0)
        #expect(s.pauseCount == 0)
        #expect(abs(s.maxFrameGapMs - 33.333333) < 0.0001)
        // Transit is constant (to rounding of 1 µs): nothing waits in the buffer.
        #expect(s.jitterBufferDelayMs < 0.002)
        #expect(s.mos == nil && s.concealedFrames == nil)
    }

    @Test func oneGapOf500MillisecondsIsOneFreezeOf500Milliseconds() {
        let gaps =
            Array(repeating: Self.frameNanos, count: 60) + [500_000_000]
            + Array(repeating: Self.frameNanos, count: 30)
        let s = video(gaps).snapshot()
        // Threshold: mean of the last 30 gaps with this one, (29 × 33.333 + 500) / 30 = 48.9 ms,
        // so max(3 × 48.9, 48.9 + 150) = 198.9 ms ≤ 500 ms.
        #expect(s.freezeCount == 1)
        #expect(s.totalFreezesDurationMs == 500)
        #expect(s.maxFrameGapMs == 500)
        #expect(s.pauseCount == 0)
        #expect(s.frames == 92)
    }

    @Test func freezeThresholdIsMaxOfThreeTimesMeanAndMeanPlus150() {
        let steady = Array(repeating: Self.frameNanos, count: 40)
        // 150 ms: mean (29 × 33.333 + 150) / 30 = 37.2 ms, threshold 187.2 ms: no freeze.
        #expect(video(steady + [150_000_000]).snapshot().freezeCount == 0)
        // 190 ms: mean 38.6 ms, threshold 188.6 ms: a freeze.
        #expect(video(steady + [190_000_000]).snapshot().freezeCount == 1)
        // Fewer than 5 gaps known: nothing is a freeze yet.
        #expect(video([Self.frameNanos, Self.frameNanos, 400_000_000]).snapshot().freezeCount == 0)
        // At 5 fps (200 ms frames) a 550 ms gap is below 3 × mean: (29 × 200 + 550) / 30 = 211.7, × 3 = 635.
        #expect(video(Array(repeating: 200_000_000, count: 40) + [550_000_000]).snapshot().freezeCount == 0)
    }

    @Test func aGapOfFiveSecondsOrMoreIsAPauseNotAFreeze() {
        let s = video(Array(repeating: Self.frameNanos, count: 30) + [6_000_000_000, Self.frameNanos]).snapshot()
        #expect(s.pauseCount == 1)
        #expect(s.totalPausesDurationMs == 6000)
        #expect(s.freezeCount == 0)
    }

    @Test func jitterBufferDelayOfAnAlternatingLatePattern() {
        // 25 fps (3600 ticks, 40 ms); every odd frame completes 10 ms late. Transits 0, 10, 0, 10…:
        // from frame 2 on, the slowest recent frame is 10 ms late, so each on-time frame waits 10 ms.
        var q = ReceiveQuality(kind: .video, clockRate: 90_000)
        for k in 0..<60 {
            let late: UInt64 = k % 2 == 1 ? 10_000_000 : 0
            q.videoFrame(timestamp: UInt32(k * 3600), arrival: 1_000_000_000 + UInt64(k) * 40_000_000 + late)
        }
        // 29 even frames (2, 4, … 58) wait 10 ms: 290 ms over 60 frames.
        #expect(abs(q.snapshot().jitterBufferDelayMs - 290.0 / 60) < 1e-9)
    }

    @Test func jitterBufferDelayMatchesABruteForceWindowOnRandomArrivals() {
        // The running maximum (searched again only when the slowest frame leaves the window) against
        // the definition computed directly: mean over frames of max(transit of the last 32) − transit.
        var rng = SplitMix64(seed: 36)
        var q = ReceiveQuality(kind: .video, clockRate: 90_000)
        var transits: [Int64] = []
        var hold: Int64 = 0
        for k in 0..<2000 {
            // Mostly small wobble, sometimes a late burst of up to 200 ms.
            let late = rng.next() % 10 == 0 ? Int64(rng.next() % 200_000) : Int64(rng.next() % 5_000)
            transits.append(late)
            q.videoFrame(
                timestamp: UInt32(k * 3600), arrival: 1_000_000_000 + UInt64(k) * 40_000_000 + UInt64(late) * 1000)
            let window = transits.suffix(32)
            hold += (window.max() ?? late) - late
        }
        #expect(abs(q.snapshot().jitterBufferDelayMs - Double(hold) / 2000 / 1000) < 1e-9)
    }

    private func audio(lost: Set<Int>, count: Int = 50) -> ReceiveQuality {
        var q = ReceiveQuality(kind: .audio, clockRate: 48_000)
        for i in 0..<count where !lost.contains(i) {
            q.audioPacket(
                sequence: 70_000 + Int64(i), timestamp: UInt32(i) * 960, arrival: 2_000_000_000 + UInt64(i) * 20_000_000
            )
        }
        return q
    }

    @Test func threeLostAudioPacketsAre60MillisecondsConcealed() {
        let s = audio(lost: [20, 21, 22]).snapshot()
        #expect(s.concealedFrames == 3)
        #expect(s.concealedMs == 60)
        #expect(s.frames == 47)
        #expect(abs((s.concealmentPercent ?? 0) - 6) < 1e-9)
        #expect(s.freezeCount == 0)
        #expect(s.layerSwitches == nil)
    }

    @Test func aTimestampJumpWithoutASequenceGapIsNotConcealment() {
        var q = ReceiveQuality(kind: .audio, clockRate: 48_000)
        q.audioPacket(sequence: 10, timestamp: 0, arrival: 1_000_000_000)
        q.audioPacket(sequence: 11, timestamp: 960, arrival: 1_020_000_000)
        // DTX: 400 ms of silence, one packet.
        q.audioPacket(sequence: 12, timestamp: 960 + 19_200, arrival: 1_420_000_000)
        // Then 2 lost 20 ms frames.
        q.audioPacket(sequence: 15, timestamp: 960 + 19_200 + 3 * 960, arrival: 1_480_000_000)
        let s = q.snapshot()
        #expect(s.concealedFrames == 2)
        #expect(s.concealedMs == 40)
    }

    @Test func eModelMatchesHandComputedValues() {
        // No loss, no delay: R = 93.2, MOS = 1 + 0.035 R + R (R − 60)(100 − R) 7e-6 = 4.4093.
        #expect(EModel.rFactor(oneWayDelayMs: 0, lossPercent: 0) == 93.2)
        #expect(abs(EModel.mos(rFactor: 93.2) - 4.409285824) < 1e-9)
        // 5 % loss: Ie,eff = 95 × 5 / (5 + 25.1) = 15.7807; R = 77.4193; MOS 3.9228.
        let r5 = EModel.rFactor(oneWayDelayMs: 0, lossPercent: 5)
        #expect(abs(r5 - (93.2 - 475.0 / 30.1)) < 1e-9)
        #expect(abs(EModel.mos(rFactor: r5) - 3.9228) < 0.0001)
        // 200 ms one way: Id = 0.024 × 200 + 0.11 × 22.7 = 7.297.
        #expect(abs(EModel.rFactor(oneWayDelayMs: 200, lossPercent: 0) - (93.2 - 7.297)) < 1e-9)
        #expect(EModel.mos(rFactor: -3) == 1)
        #expect(EModel.mos(rFactor: 120) == 4.5)
    }

    @Test func mosFallsAsLossRises() {
        var last = 5.0
        for lost in [Set<Int>(), [10], [10, 30], [5, 15, 25, 35, 45], Set(stride(from: 0, to: 100, by: 4))] {
            let s = audio(lost: lost, count: 100).snapshot()
            let mos = try! #require(s.mos)
            #expect(mos < last, "MOS \(mos) with \(lost.count) lost should be below \(last)")
            last = mos
        }
        #expect(last < 3.5)
        // No loss, a steady stream: the clean rating.
        #expect(abs((audio(lost: []).snapshot().mos ?? 0) - 4.409285824) < 1e-6)
    }

    @Test func keyFrameSizeChangesAreLayerSwitches() {
        var q = ReceiveQuality(kind: .video, clockRate: 90_000)
        q.keyframe(width: 320, height: 180)
        q.keyframe(width: 320, height: 180)
        q.keyframe(width: 0, height: 0)
        q.keyframe(width: 640, height: 360)
        q.keyframe(width: 320, height: 180)
        let s = q.snapshot()
        #expect(s.layerSwitches == 2)
        #expect(s.width == 320 && s.height == 180)
    }

    @Test func latencySamplesGiveMeanAndMaximum() {
        var q = ReceiveQuality(kind: .video, clockRate: 90_000)
        #expect(q.snapshot().latencyMs == nil)
        q.latency(40_000_000)
        q.latency(60_000_000)
        let s = q.snapshot()
        #expect(s.latencyMs == 50)
        #expect(s.latencyMaxMs == 60)
    }

    @Test func snapshotCarriesTheReceiverCountersAndLoss() {
        let s = ReceiveQuality(kind: .video, clockRate: 90_000).snapshot(
            packetsReceived: 95, packetsLost: 5, nacksSent: 3, plisSent: 2, firsSent: 1, jitterMilliseconds: 4)
        #expect(abs(s.lossPercent - 5) < 1e-9)
        #expect(s.nacksSent == 3 && s.plisSent == 2 && s.firsSent == 1 && s.jitterMs == 4)
    }

    @Test func theStateIsFixedSize() {
        // Two inline rings and counters: no heap storage that could grow per packet.
        #expect(MemoryLayout<ReceiveQuality>.size < 640)
    }
}
