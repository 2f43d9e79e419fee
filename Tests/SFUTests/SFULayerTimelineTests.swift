import RTC
import RTCWire
import Testing

@testable import SFU

/// Timestamp continuity at a simulcast switch, from the publisher's sender reports.
@Suite("SFU layer timeline")
struct SFULayerTimelineTests {
    /// Two layers captured together, with unrelated RTP origins: each layer's SR says which RTP time
    /// was sent at the same wall-clock instant.
    let wall = NTPTime(seconds: 3_900_000_000, fraction: 0x8000_0000)  // …:00.5
    var low: SFULayerTimeline.SenderReport { (wall, 1_000_000, 0) }
    var high: SFULayerTimeline.SenderReport { (wall, 4_000_000_000, 0) }

    @Test func theGapIsTheCaptureTimeBetweenTheTwoPacketsByTheSenderReports() {
        // Last low packet: 2 frames (6000 ticks) after the SR; the high key frame: 5 frames after.
        let ticks = SFULayerTimeline.ticks(
            from: 1_006_000, low, to: 4_000_015_000, high, clockRate: 90_000)
        #expect(ticks == 9_000)
        let advance = SFULayerTimeline.advance(
            from: 1_006_000, low, to: 4_000_015_000, high, elapsed: 999_000_000, clockRate: 90_000)
        #expect(advance == 9_000, "the reports win over the loop clock (a late packet, a slow loop)")
        // Across the 32-bit wrap of the new layer's timestamps.
        let wrapped: SFULayerTimeline.SenderReport = (wall, UInt32.max - 1_000, 0)
        #expect(SFULayerTimeline.ticks(from: 1_006_000, low, to: 2_000, wrapped, clockRate: 90_000) == 3_001 - 6_000)
    }

    @Test func aKeyFrameOfTheSameInstantStillMovesTimeForward() {
        let advance = SFULayerTimeline.advance(
            from: 1_006_000, low, to: 4_000_006_000, high, elapsed: 0, clockRate: 90_000)
        #expect(advance == 1)
        // An older one too (the new layer's key frame captured before the last frame sent).
        let older = SFULayerTimeline.advance(
            from: 1_006_000, low, to: 4_000_003_000, high, elapsed: 0, clockRate: 90_000)
        #expect(older == 1)
    }

    @Test func withoutReportsOrWithAStaleOneTheLoopClockStandsIn() {
        // No report for the new layer: 40 ms of loop time at 90 kHz.
        #expect(
            SFULayerTimeline.advance(from: 1, low, to: 2, nil, elapsed: 40_000_000, clockRate: 90_000) == 3_600)
        // Too little loop time: at least one 30 fps frame; for Opus in its own 48 kHz clock.
        #expect(SFULayerTimeline.advance(from: 1, nil, to: 2, nil, elapsed: 1_000, clockRate: 90_000) == 3_000)
        #expect(SFULayerTimeline.advance(from: 1, nil, to: 2, nil, elapsed: 20_000_000, clockRate: 48_000) == 1_600)
        // A report a minute apart from the other is not believed.
        let stale: SFULayerTimeline.SenderReport = (
            NTPTime(seconds: 3_900_000_060, fraction: 0), 4_000_000_000, 60_000_000_000
        )
        #expect(SFULayerTimeline.ticks(from: 1_000_000, low, to: 4_000_000_000, stale, clockRate: 90_000) == nil)
    }
}
