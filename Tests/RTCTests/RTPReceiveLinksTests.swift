import RTCWire
import Testing

@testable import RTC

/// The receive-side feature links alone, with synthetic sequence numbers and a synthetic clock
/// (as pion's generator interceptor tests do).
@Suite("RTP receive links")
struct RTPReceiveLinksTests {
    let ms: UInt64 = 1_000_000

    func generator(
        nack: Bool = true, capacity: Int = 8, retries: Int = 3, age: UInt64 = 1_000_000_000
    ) -> NACKGenerator {
        NACKGenerator(
            options: RTPReceiverOptions(
                nack: nack, maxNACKRetries: retries, maxNACKAge: age, reorderWait: 50_000_000,
                nackInterval: 20_000_000),
            capacity: capacity)
    }

    @Test func holesAreNACKedOncePerRTTUntilTheyArriveOrRunOutOfRetries() {
        var g = generator()
        var givenUp: [Int64] = []
        g.gap(from: 10, to: 13, now: 0) { givenUp.append($0) }  // 10, 11, 12 missing
        var count = g.due(now: 1 * ms, roundTripTime: 30 * ms)
        #expect(Array(g.items[0..<count]) == [10, 11, 12])
        g.sent(now: 1 * ms)
        let early = g.due(now: 10 * ms, roundTripTime: 30 * ms)
        #expect(early == 0, "NACK interval not reached")
        let withinRTT = g.due(now: 25 * ms, roundTripTime: 30 * ms)
        #expect(withinRTT == 0, "interval passed, but not one RTT per item")
        let filled = g.received(11)
        #expect(filled, "11 arrived (a repair)")
        let again = g.received(11)
        #expect(!again, "and is no longer missing")
        count = g.due(now: 40 * ms, roundTripTime: 30 * ms)
        #expect(Array(g.items[0..<count]) == [10, 12])
        g.sent(now: 40 * ms)
        count = g.due(now: 80 * ms, roundTripTime: 30 * ms)
        #expect(count == 2, "third and last try")
        g.sent(now: 80 * ms)
        let exhausted = g.due(now: 200 * ms, roundTripTime: 30 * ms)
        #expect(exhausted == 0, "out of retries")
        let expired = g.expire(now: 200 * ms, roundTripTime: 30 * ms) { givenUp.append($0) }
        #expect(expired)
        #expect(givenUp == [10, 12])
        #expect(g.isEmpty)
    }

    @Test func tooManyHolesGiveUpTheOldestAndOldHolesExpire() {
        var g = generator(capacity: 4, retries: 100, age: 500 * 1_000_000)
        var givenUp: [Int64] = []
        g.gap(from: 100, to: 110, now: 0) { givenUp.append($0) }
        #expect(givenUp == Array(100..<106), "only the newest 4 fit")
        #expect(g.missing.map(\.ext) == Array(106..<110))
        g.gap(from: 111, to: 112, now: 0) { givenUp.append($0) }
        #expect(givenUp.last == 106, "a new hole pushes out the oldest")
        let young = g.expire(now: 400 * ms, roundTripTime: 0) { givenUp.append($0) }
        #expect(!young)
        let old = g.expire(now: 501 * ms, roundTripTime: 0) { givenUp.append($0) }
        #expect(old)
        #expect(g.isEmpty)
        // Without NACK, a hole only waits for reordering.
        var plain = generator(nack: false)
        plain.gap(from: 1, to: 2, now: 0) { _ in }
        let plainDue = plain.due(now: 30 * ms, roundTripTime: 0)
        #expect(plainDue == 0)
        let reordered = plain.expire(now: 50 * ms, roundTripTime: 0) { _ in }
        #expect(reordered)
    }

    @Test func forgettingAndResetDropHolesWithoutGivingUp() {
        var g = generator()
        g.gap(from: 1, to: 6, now: 0) { _ in }
        g.forget(before: 4)
        #expect(g.missing.map(\.ext) == [4, 5])
        g.reset()
        #expect(g.isEmpty)
    }

    @Test func theKeyframeRequesterRepeatsUntilSatisfied() {
        var k = KeyframeRequester(enabled: true, interval: 500 * ms)
        #expect(!k.isDue(now: 0), "nothing wanted")
        k.want()
        #expect(k.isDue(now: 0))
        k.sent(now: 0)
        #expect(!k.isDue(now: 499 * ms))
        #expect(k.isDue(now: 500 * ms), "still no key frame: ask again")
        k.satisfied()
        #expect(!k.isDue(now: 2_000 * ms))
        var off = KeyframeRequester(enabled: false, interval: 0)
        off.want()
        #expect(!off.isDue(now: 1))
    }

    @Test func jitterFollowsTransitTimeVariation() {
        var steady = JitterEstimator(clockRate: 90_000)
        var bumpy = JitterEstimator(clockRate: 90_000)
        for i in 0..<200 {
            let timestamp = UInt32(i * 3000)  // 30 fps
            steady.received(timestamp: timestamp, sinceStart: UInt64(i) * 33_333_333)
            // Every other frame 10 ms late.
            bumpy.received(timestamp: timestamp, sinceStart: UInt64(i) * 33_333_333 + (i % 2 == 0 ? 0 : 10 * ms))
        }
        #expect(steady.jitter <= 1)
        // |D| = 900 ticks each step; J converges to 900.
        #expect(bumpy.jitter > 850 && bumpy.jitter <= 900)
        #expect(bumpy.milliseconds > 9 && bumpy.milliseconds <= 10)
    }
}
