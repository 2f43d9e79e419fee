import Foundation
import Media
import RTCWire
import TestSupport
import Testing

@testable import RTC

/// A transport runs its timers only when one is due (``TickDeadline``): a receive stream whose timers
/// run only at its deadline must send exactly the same feedback, at the same times, as one ticked
/// every 10 ms, and the deadline must let most ticks pass.
@Suite struct TickDeadlineTests {
    /// Sends `frames` VP8 frames at 30 ms with seeded loss, then idles for `idleMilliseconds`.
    private func lossyStream(
        gated: Bool, lossPercent: UInt64, frames: Int, idleMilliseconds: Int, rtx: Bool = false, lostForever: Bool
    ) throws -> Loopback {
        let link = Loopback.vp8(rtx: rtx, seed: 11)
        if gated { link.deadline = TickDeadline() }
        var rng = SplitMix64(seed: 99)
        link.drop = { _, _, retransmission in
            // Lost for good: no retransmission arrives, so frames break and PLIs follow.
            if retransmission { return lostForever }
            return rng.next() % 100 < lossPercent
        }
        try link.send(FakeVP8.frame(0))
        try link.advance(milliseconds: 30)
        var keyframeAsked = 0
        for i in 1..<frames {
            // A key frame answers each new PLI, as a sender would.
            let key = link.keyframeRequests > keyframeAsked
            keyframeAsked = link.keyframeRequests
            try link.send(FakeVP8.frame(i, keyAt: key ? [i] : []))
            try link.advance(milliseconds: 30)
        }
        link.drop = { _, _, _ in false }
        try link.advance(milliseconds: idleMilliseconds)
        return link
    }

    @Test(arguments: [(2, false), (5, false), (3, true)])
    func timersRunOnlyAtTheDeadlineSendTheSameFeedback(lossPercent: UInt64, lostForever: Bool) throws {
        let every = try lossyStream(
            gated: false, lossPercent: lossPercent, frames: 150, idleMilliseconds: 3000, lostForever: lostForever)
        let gated = try lossyStream(
            gated: true, lossPercent: lossPercent, frames: 150, idleMilliseconds: 3000, lostForever: lostForever)
        #expect(!every.nacks.isEmpty, "the seeded loss must open holes")
        if lostForever { #expect(every.plis > 0, "lost-for-good packets must break frames") }
        #expect(gated.receiver.stats == every.receiver.stats)
        #expect(gated.rtcp == every.rtcp, "the same RTCP compounds in the same order")
        #expect(gated.delivered.map(\.timestamp) == every.delivered.map(\.timestamp))
        #expect(gated.resent == every.resent)
        // 150 frames and 3 s idle are about 750 ticks; reports are about 1 s apart. Broken frames
        // keep a key frame wanted (a timer every tick) for much of the lost-for-good run.
        let bound = lostForever ? every.ticksRun * 3 / 4 : every.ticksRun / 2
        #expect(gated.ticksRun < bound, "ran \(gated.ticksRun) of \(every.ticksRun) ticks")
    }

    @Test func aQuietStreamWakesOnlyForItsReports() throws {
        let link = Loopback.vp8(seed: 4)
        link.deadline = TickDeadline()
        #expect(link.receiver.nextTimer == .max, "nothing to do before the first packet")
        try link.send(FakeVP8.frame(0))
        #expect(link.deadline?.at == 0, "the first packet makes a report due")
        try link.advance(milliseconds: 10)
        let report = try #require(link.deadline?.at)
        #expect(report > link.now && report <= link.now + 1_500_000_000, "next report within 1.5 s")
        // 10 s without packets: one tick per report, each report 0.5–1.5 s apart.
        let before = link.ticksRun
        try link.advance(milliseconds: 10_000)
        let ran = link.ticksRun - before
        #expect(ran >= 6 && ran <= 21, "\(ran) ticks in 10 s")
        #expect(link.receiver.stats.receiverReportsSent == UInt64(ran + 1))
        // A key-frame request wakes the timers at once.
        link.receiver.requestKeyframeNow()
        #expect(link.deadline?.at == 0)
        try link.advance(milliseconds: 10)
        #expect(link.plis == 1)
    }

    /// Two connections on loopback: once media settles, the receiving transport's next timer lies
    /// ahead (its ticks are skipped), reports still go out, and a key-frame request is sent at once.
    @Test func aConnectedTransportSkipsTicksAndStillReports() async throws {
        let (tx, rx, video, audio) = try await connectedPair(name: "deadline")
        let pump = MediaPump(
            connection: tx, video: video, audio: audio, sources: SyntheticMedia.shared(layers: 1).source)
        await tx.loop.submit { pump.attach() }
        // Wait (generously) for a moment where every stream is settled and the deadline is ahead.
        var ahead = false
        let until = Date().addingTimeInterval(20)
        while !ahead, Date() < until {
            ahead = await rx.loop.submit {
                rx.transport.listener.streams.count >= 2 && rx.transport.tickDeadline.at > EventLoop.now()
            }
            if !ahead { try await Task.sleep(nanoseconds: 20_000_000) }
        }
        #expect(ahead, "the receiving transport never had its timers settled")
        let reports = await rx.loop.submit { rx.receiverStats().map(\.stats.receiverReportsSent).reduce(0, +) }
        var later = reports
        let reportsUntil = Date().addingTimeInterval(20)
        while later < reports + 4, Date() < reportsUntil {
            try await Task.sleep(nanoseconds: 100_000_000)
            later = await rx.loop.submit { rx.receiverStats().map(\.stats.receiverReportsSent).reduce(0, +) }
        }
        #expect(later >= reports + 4, "receiver reports keep going out")
        let plis = await rx.loop.submit { () -> UInt64 in
            let before = rx.receiverStats().map(\.stats.plisSent).reduce(0, +)
            if let video = rx.transceivers.first(where: { $0.kind == .video }) {
                rx.requestKeyframeNow(on: video, rid: nil)
            }
            return before
        }
        var sent = plis
        let pliUntil = Date().addingTimeInterval(10)
        while sent == plis, Date() < pliUntil {
            try await Task.sleep(nanoseconds: 20_000_000)
            sent = await rx.loop.submit { rx.receiverStats().map(\.stats.plisSent).reduce(0, +) }
        }
        #expect(sent > plis, "a key-frame request goes out with the next tick")
        await tx.loop.submit { pump.detach() }
        await shutdown(tx, rx)
    }
}
