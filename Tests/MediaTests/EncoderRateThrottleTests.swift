import Media
import Testing

/// When a live encoder follows the estimate: throttled, with a dead band, urgent cuts at once.
@Suite struct EncoderRateThrottleTests {
    private let ms: UInt64 = 1_000_000

    @Test func followsOnlyChangesOverTenPercentAtMostEveryHalfSecond() {
        var t = EncoderRateThrottle(initial: 600_000)
        #expect(t.next(estimate: 640_000, now: 0) == nil)  // +6.7 %: inside the dead band
        #expect(t.next(estimate: 700_000, now: 10 * ms) == 700_000)
        #expect(t.next(estimate: 800_000, now: 200 * ms) == nil)  // too soon
        #expect(t.next(estimate: 800_000, now: 520 * ms) == 800_000)
        #expect(t.next(estimate: 700_000, now: 600 * ms) == nil)  // -12.5 %, not urgent, too soon
        #expect(t.next(estimate: 400_000, now: 700 * ms) == 400_000)  // -50 %: at once
        #expect(t.next(estimate: 10_000_000, now: 2_000 * ms) == 2_500_000)  // bounded
        #expect(t.applied == 2_500_000)
    }

    @Test func aLiveVP8EncoderTakesTheNewRate() throws {
        let encoder = try VP8Encoder(width: 320, height: 240, bitrate: 600_000)
        var picture = I420Image(width: 320, height: 240)
        let pattern = TestPatternSource(width: 320, height: 240)
        var before = 0
        for i in 0..<30 {
            pattern.render(i, into: &picture)
            before += try encoder.encode(i420: picture).reduce(0) { $0 + $1.data.count }
        }
        try encoder.setTargetBitrate(100_000)
        #expect(encoder.targetBitrate == 100_000)
        var after = 0
        for i in 30..<90 {
            pattern.render(i, into: &picture)
            let bytes = try encoder.encode(i420: picture).reduce(0) { $0 + $1.data.count }
            if i >= 60 { after += bytes }
        }
        #expect(after < before, "30 frames at 100 kbit/s: \(after) bytes, at 600 kbit/s: \(before)")
        #expect(throws: (any Error).self) { try encoder.setTargetBitrate(0) }
    }
}
