import Foundation
import Media
import RTCWire
import TestSupport
import Testing

@testable import RTC

/// Swift ↔ Swift over loopback UDP: what the sender sends carries transport-wide numbers, the
/// receiver's feedback reaches the sender's estimator, and the estimate is reported on the loop.
@Suite(.serialized) struct BandwidthEstimateLoopbackTests {
    final class Changes: @unchecked Sendable {
        let lock = NSLock()
        var seen: [BandwidthEstimate] = []
    }

    @Test func theReceiversFeedbackMovesTheSendersEstimate() async throws {
        let (tx, rx, video, audio) = try await connectedPair(name: "bwe")
        let changes = Changes()
        let before = await tx.loop.submit { tx.bandwidthEstimate }
        #expect(before?.source == BandwidthEstimate.Source.none && before?.targetBitrate == 300_000)
        let pump = MediaPump(
            connection: tx, video: video, audio: audio, sources: SyntheticMedia.shared(layers: 1).source)
        await tx.loop.submit {
            tx.onBandwidthEstimate = { e in changes.lock.withLock { changes.seen.append(e) } }
            pump.attach()
        }
        // Wait for the event (feedback taken in and the estimate reported), generously.
        var estimate: BandwidthEstimate?
        for _ in 0..<300 {
            try await Task.sleep(nanoseconds: 100_000_000)
            estimate = await tx.loop.submit { tx.bandwidthEstimate }
            if let estimate, estimate.source == .transportCC, estimate.acknowledgedBitrate > 0,
                changes.lock.withLock({ !changes.seen.isEmpty })
            {
                break
            }
        }
        await tx.loop.submit { pump.detach() }
        let counters = await tx.loop.submit { tx.counters }
        let sentFeedback = await rx.loop.submit { rx.counters.transportFeedbackSent }
        #expect(sentFeedback > 0)
        #expect(counters.transportFeedbackReceived > 0)
        let e = try #require(estimate)
        #expect(e.source == .transportCC, "\(e)")
        #expect(e.acknowledgedBitrate > 50_000, "\(e)")  // the test pattern and the tone were acknowledged
        #expect(e.feedbackReceived > 0 && e.lossFraction == 0, "\(e)")
        #expect(changes.lock.withLock { !changes.seen.isEmpty })
        await shutdown(tx, rx)
    }
}
