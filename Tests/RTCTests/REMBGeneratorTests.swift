import RTCWire
import Testing

@testable import RTC

/// REMB for a peer that negotiated only `goog-remb`, on a synthetic clock: the rate that arrived
/// over a second × 1.5 while loss stays under 2 %, the rate itself at 2–10 %, less above.
@Suite struct REMBGeneratorTests {
    private let ms: UInt64 = 1_000_000

    /// Runs the generator's timer at `now` and parses the REMB it sent (nil: none).
    private func remb(_ g: REMBGenerator, at now: UInt64) throws -> (bitrate: UInt64, ssrcs: [UInt32], sender: UInt32)?
    {
        var out: (UInt64, [UInt32], UInt32)?
        var parseError: Error?
        g.tick(now: now) { buffer, length in
            do {
                for packet in try RTCPCompound.parse(Array(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))) {
                    guard case .remb(let sender, let bitrate, let ssrcs) = packet else {
                        Issue.record("not REMB: \(packet)")
                        continue
                    }
                    out = (bitrate, ssrcs, sender)
                }
            } catch { parseError = error }
        }
        if let parseError { throw parseError }
        return out
    }

    /// Feeds one second of 1,000-byte packets, 100 a second on `ssrc` from sequence `first`,
    /// leaving out those in `lost`; returns the time after the last.
    @discardableResult
    private func feed(
        _ g: REMBGenerator, ssrc: UInt32, first: UInt16, from start: UInt64, lost: Set<Int> = [],
        order: [Int] = Array(0..<100)
    ) -> UInt64 {
        for (position, i) in order.enumerated() where !lost.contains(i) {
            g.record(ssrc: ssrc, sequence: first &+ UInt16(i), length: 1_000, now: start + UInt64(position) * 10 * ms)
        }
        return start + 1_000 * ms
    }

    @Test func steadyLinkReportsOneAndAHalfTimesTheRateWithItsSSRCs() throws {
        let g = REMBGenerator()
        g.senderSSRC = 0x55
        let start: UInt64 = 5_000 * ms
        #expect(g.nextTimer == .max)
        // 800 kbit/s of video through a sequence wrap, and a little audio.
        feed(g, ssrc: 0xA, first: 65500, from: start)
        for i in 0..<50 { g.record(ssrc: 0xB, sequence: UInt16(i), length: 100, now: start + UInt64(i) * 20 * ms) }
        #expect(g.nextTimer == start + 1_000 * ms)
        #expect(try remb(g, at: start + 999 * ms) == nil)  // not yet due
        let r = try #require(try remb(g, at: start + 1_000 * ms))
        #expect(r.sender == 0x55)
        #expect(Set(r.ssrcs) == [0xA, 0xB])
        // 840 kbit/s × 1.5, within the REMB mantissa's rounding.
        #expect(r.bitrate > 1_255_000 && r.bitrate <= 1_260_000)
        // Nothing more arrives: no REMB for the silent second, then no timer held.
        #expect(g.nextTimer == start + 2_000 * ms)
        #expect(try remb(g, at: start + 2_000 * ms) == nil)
        #expect(g.nextTimer == .max)
    }

    @Test func reorderingIsNotLoss() throws {
        let g = REMBGenerator()
        var order = Array(0..<100)
        for i in stride(from: 0, to: 98, by: 7) { order.swapAt(i, i + 2) }
        let next = feed(g, ssrc: 0xA, first: 10, from: 0, order: order)
        let r = try #require(try remb(g, at: next))
        #expect(r.bitrate > 1_190_000)  // 800 kbit/s × 1.5
    }

    @Test func lossLowersTheEstimateByTheRule() throws {
        // Three back-to-back seconds on one SSRC. 5 % loss: the rate that arrived (760 kbit/s).
        let g = REMBGenerator()
        let lost5 = Set(stride(from: 1, to: 100, by: 20))
        let r5 = try #require(try remb(g, at: feed(g, ssrc: 0xA, first: 0, from: 0, lost: lost5)))
        #expect(r5.bitrate > 755_000 && r5.bitrate <= 760_000)
        // 20 % loss: 640 kbit/s × 0.9.
        let lost20 = Set(stride(from: 0, to: 100, by: 5))
        let r20 = try #require(try remb(g, at: feed(g, ssrc: 0xA, first: 100, from: 1_000 * ms, lost: lost20)))
        #expect(r20.bitrate > 570_000 && r20.bitrate <= 576_000)
        // Losses at the start of an interval count too: 200...209 lost, 210...299 arrive (10 %).
        let r10 = try #require(try remb(g, at: feed(g, ssrc: 0xA, first: 200, from: 2_000 * ms, lost: Set(0..<10))))
        #expect(r10.bitrate > 715_000 && r10.bitrate <= 720_000)
    }

    @Test func aTrickleNeverGoesUnderTheFloor() throws {
        let g = REMBGenerator()
        g.record(ssrc: 1, sequence: 1, length: 50, now: 0)
        let r = try #require(try remb(g, at: 1_000 * ms))
        #expect(r.bitrate == REMBGenerator.minimumBitrate)
    }
}
