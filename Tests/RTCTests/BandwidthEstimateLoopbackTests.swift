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
        // A padding probe: RTX packets without payload, dropped by the receiver as padding (not
        // as malformed), acknowledged in its feedback.
        let malformedBefore = await rx.loop.submit { rx.counters.droppedMalformed }
        let feedbackBefore = await tx.loop.submit { tx.bandwidthEstimate?.feedbackReceived ?? 0 }
        let probed = await tx.loop.submit { tx.transport.sendPadding(on: video!, bytes: 20_000, now: EventLoop.now()) }
        #expect(probed >= 20_000)
        for _ in 0..<100 {
            try await Task.sleep(nanoseconds: 50_000_000)
            if await tx.loop.submit({ (tx.bandwidthEstimate?.feedbackReceived ?? 0) > feedbackBefore + 2 }) { break }
        }
        #expect(await rx.loop.submit { rx.counters.droppedMalformed } == malformedBefore)
        await shutdown(tx, rx)
    }

    @Test func aPaddingPacketIsAnRTXHeaderWithTheTransportNumberAndPaddingOnly() throws {
        var extensions = RTPSendExtensions()
        extensions.transportWideCC = 3
        let sender = RTPSender(
            ssrc: 0x1111, payloadType: 96, codec: .vp8, rtx: (97, 0x2222), extensions: extensions, cname: "c")
        var packets: [[UInt8]] = []
        let n = sender.sendPadding(bytes: 200, now: 1_000) { buffer, length in
            packets.append(Array(UnsafeRawBufferPointer(rebasing: buffer[0..<length])))
        }
        let packet = try #require(packets.first)
        #expect(n == packet.count)
        let header = try packet.withUnsafeBytes { try RTPHeader.parse($0) }
        #expect(header.ssrc == 0x2222 && header.payloadType == 97 && header.padding)
        #expect(header.paddingLength == 200 && header.payloadLength == 0)
        #expect(sender.stats.paddingPacketsSent == 1)
        let plain = RTPSender(ssrc: 0x3333, payloadType: 96, codec: .vp8, cname: "c")
        #expect(plain.sendPadding(bytes: 200, now: 1_000) { _, _ in } == 0)  // no RTX stream
    }
}
