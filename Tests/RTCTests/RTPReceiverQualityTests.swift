import RTCWire
import Testing

@testable import RTC

/// ``RTPReceiver`` feeds its ``ReceiveQuality`` at frame completion and playout: the numbers in
/// ``RTPReceiverStats/quality`` for packets sent through a real ``RTPSender``, on a synthetic clock.
struct RTPReceiverQualityTests {
    private static let unixBase: UInt64 = 1_780_000_000_000_000_000

    @Test func aVideoOutageOfHalfASecondIsOneFreezeAndTheLatencyIsMeasured() throws {
        let sender = RTPSender(
            ssrc: 0x1111, payloadType: 96, codec: .vp8, extensions: RTPSendExtensions(absCaptureTime: 7), cname: "c",
            seed: 3)
        sender.wallClock = { NTPTime(unixNanoseconds: Self.unixBase + $0) }
        // Without NACK a hole is given up after the 50 ms reordering wait.
        let receiver = RTPReceiver(
            ssrc: 0x1111, codec: .vp8, payloadType: 96, localSSRC: 9, options: RTPReceiverOptions(nack: false), seed: 3)
        receiver.captureTimeExtensionID = 7
        // The receiver's wall clock is 40 ms behind the sender's capture: 40 ms capture to arrival.
        receiver.wallClockNanoseconds = { Self.unixBase + $0 + 40_000_000 }
        let link = Loopback(sender: sender, receiver: receiver)
        // Frames 60…74 are lost (a 500 ms outage); 75 is a key frame of another size (a layer switch).
        for i in 0..<120 {
            let frame =
                i == 75
                ? EncodedFrame(
                    codec: .vp8, data: FakeVP8.keyframe(index: i, width: 640, height: 360),
                    timestamp: UInt32(i) * 3000, isKeyframe: true)
                : FakeVP8.frame(i)
            if !(60..<75).contains(i) { try link.send(frame) } else { _ = link.packets(of: frame) }
            link.now += 33_333_333
            try link.tick()
        }
        let q = receiver.stats.quality
        #expect(q.kind == "video")
        #expect(q.frames == 105)
        // Frame 75 arrives 16 frame times after 59; the hole before it is given up at the second tick
        // after that (33 ms is short of the 50 ms wait, 67 ms is not), so 75 completes 18 frame times
        // after 59.
        #expect(q.freezeCount == 1)
        #expect(abs(q.totalFreezesDurationMs - 18 * 33.333333) < 0.001)
        #expect(q.layerSwitches == 1)
        #expect(q.width == 640 && q.height == 360)
        let latency = try #require(q.latencyMs)
        #expect(abs(latency - 40) < 0.001)
        #expect(q.packetsLost > 0 && q.lossPercent > 0)
        #expect(q.plisSent == receiver.stats.plisSent)
    }

    private func opusLink() -> (RTPSender, RTPReceiver) {
        let sender = RTPSender(ssrc: 0x5555, payloadType: 111, codec: .opus, cname: "a", seed: 17)
        let receiver = RTPReceiver(ssrc: 0x5555, codec: .opus, payloadType: 111, localSSRC: 1, seed: 17)
        return (sender, receiver)
    }

    private func send(_ i: Int, _ sender: RTPSender, to receiver: RTPReceiver?, at now: UInt64, arrival: UInt64) {
        let frame = EncodedFrame(
            codec: .opus, data: [0x78] + (0..<60).map { UInt8(truncatingIfNeeded: $0 + i) },
            timestamp: UInt32(i) * 960, isKeyframe: true, duration: 960)
        sender.send(frame, now: now) { b, n in
            let p = UnsafeRawBufferPointer(rebasing: b[0..<n])
            if let receiver, let h = try? RTPHeader.parse(p) { receiver.receive(p, header: h, now: arrival) }
        }
    }

    @Test func jitterOfAnAlternatingPatternConvergesToTheSwing() {
        // 20 ms packets, every other one 4 ms late: each transit difference is 4 ms (192 ticks at
        // 48 kHz), so RFC 3550's J += (|D| − J) / 16 tends to 4 ms.
        let (sender, receiver) = opusLink()
        var now: UInt64 = 1_000_000_000
        for i in 0..<300 {
            send(i, sender, to: receiver, at: now, arrival: now + (i % 2 == 1 ? 4_000_000 : 0))
            now += 20_000_000
        }
        let q = receiver.stats.quality
        // 192 ticks × (1 − (15/16)^299), truncated to whole ticks: 191 or 192 → 3.979 or 4.000 ms.
        #expect(q.jitterMs >= 191.0 / 48 && q.jitterMs <= 4.0)
        #expect(q.jitterMs == receiver.stats.jitter)
        // Odd packets are 4 ms late: each on-time one after the first late one waits 4 ms.
        #expect(abs(q.jitterBufferDelayMs - 149.0 * 4 / 300) < 0.01)
    }

    @Test func threeLostAudioPacketsAreConcealedAndLowerTheMOS() throws {
        let (sender, receiver) = opusLink()
        var now: UInt64 = 1_000_000_000
        for i in 0..<100 {
            send(i, sender, to: [40, 41, 42].contains(i) ? nil : receiver, at: now, arrival: now)
            now += 20_000_000
        }
        let q = receiver.stats.quality
        #expect(q.kind == "audio")
        #expect(q.concealedFrames == 3)
        #expect(q.concealedMs == 60)
        #expect(q.packetsLost == 3)
        let mos = try #require(q.mos)
        // 3 % concealed: Ie,eff = 95 × 3 / 28.1 = 10.142, R = 83.058.
        let r = 93.2 - 95.0 * 3 / 28.1
        #expect(abs(mos - (1 + 0.035 * r + r * (r - 60) * (100 - r) * 7e-6)) < 1e-6)
        #expect(mos < 4.409)
    }
}
