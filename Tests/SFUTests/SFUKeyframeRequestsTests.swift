import Testing

@testable import SFU

/// The producer's key-frame request manager alone, on a synthetic clock (ms → ns).
@Suite("SFU key-frame requests")
struct SFUKeyframeRequestsTests {
    let ms: UInt64 = 1_000_000

    @Test func requestsWhileOneIsRecentAreAbsorbedPerLayer() {
        var k = SFUKeyframeRequests(layers: 3, interval: 500 * ms)
        let sent1 = k.request(layer: 2, now: 1_000 * ms)
        #expect(sent1)
        for t in UInt64(1_001)..<1_010 {
            let sent2 = k.request(layer: 2, now: t * ms)
            #expect(!sent2)
        }
        #expect(k.absorbed == 9)
        let sent3 = k.request(layer: 0, now: 1_005 * ms)
        #expect(sent3, "another layer has its own throttle")
        let sent4 = k.request(layer: 2, now: 1_500 * ms)
        #expect(sent4, "after the interval a request goes out again")
        #expect(k.sent == 3)
        let sent5 = k.request(layer: 7, now: 2_000 * ms)
        #expect(!sent5, "an unknown layer is ignored")
    }

    @Test func aRequestResentOutsideTheScheduleRestartsTheInterval() {
        var k = SFUKeyframeRequests(layers: 3, interval: 500 * ms)
        let first = k.request(layer: 2, now: 0)
        #expect(first)
        // The layer's first packet arrives 100 ms later: the producer resends at once.
        k.resent(layer: 2, now: 100 * ms)
        #expect(k.sent == 2)
        let early = k.retryDue(now: 550 * ms)
        #expect(early == nil, "the interval counts from the resend")
        let retry = k.retryDue(now: 600 * ms)
        #expect(retry == 2)
        k.resent(layer: 1, now: 700 * ms)
        #expect(k.sent == 3, "a layer without a pending request is not resent")
    }

    @Test func aPendingRequestIsRetriedUntilItsKeyframeArrives() {
        var k = SFUKeyframeRequests(layers: 2, interval: 500 * ms)
        let sent6 = k.request(layer: 1, now: 0)
        #expect(sent6)
        #expect(k.hasPending && k.isPending(1))
        let retry7 = k.retryDue(now: 499 * ms)
        #expect(retry7 == nil)
        let retry8 = k.retryDue(now: 500 * ms)
        #expect(retry8 == 1, "no key frame within the interval: ask again")
        let retry9 = k.retryDue(now: 600 * ms)
        #expect(retry9 == nil, "the retry restarted the interval")
        // A key frame of the other layer answers nothing.
        k.keyframeArrived(layer: 0)
        #expect(k.isPending(1))
        k.keyframeArrived(layer: 1)
        #expect(!k.hasPending)
        let retry10 = k.retryDue(now: 5_000 * ms)
        #expect(retry10 == nil, "cleared: no more retries")
        #expect(k.retries == 1)
    }

    @Test func retriesStopAfterTheLimitAndANewRequestRestartsThem() {
        var k = SFUKeyframeRequests(layers: 1, interval: 100 * ms)
        let sent11 = k.request(layer: 0, now: 0)
        #expect(sent11)
        var t: UInt64 = 0
        var retried = 0
        while t < 10_000 * ms {
            t += 100 * ms
            if k.retryDue(now: t) != nil { retried += 1 }
        }
        #expect(retried == SFUKeyframeRequests.maxRetries)
        #expect(!k.hasPending, "a layer that never answers stops drawing PLIs")
        let sent12 = k.request(layer: 0, now: t + 100 * ms)
        #expect(sent12)
        let retry13 = k.retryDue(now: t + 200 * ms)
        #expect(retry13 == 0)
    }

    /// A ramp of joiners (one request every 20 ms for 3 s) against a simulated publisher 20 ms away:
    /// each joiner waits from its request to the next key frame that arrives. `gate`: the publisher
    /// ignores requests within that long of its last key frame (libwebrtc's is 300 ms; 0 answers all).
    func joinerWaits(interval: UInt64, gate: UInt64) -> (mean: Double, max: UInt64, keyframes: Int) {
        var k = SFUKeyframeRequests(layers: 1, interval: interval)
        let delay = 20 * ms
        var plisInFlight: [UInt64] = []  // arrival times at the publisher
        var keyframesInFlight: [UInt64] = []  // arrival times back at the SFU
        var lastKeyframeSent: UInt64?
        var waiting: [UInt64] = []
        var waits: [UInt64] = []
        var keyframes = 0
        var t: UInt64 = 0
        while t <= 4_000 * ms {
            if let at = keyframesInFlight.first, at <= t {
                keyframesInFlight.removeFirst()
                k.keyframeArrived(layer: 0)
                keyframes += 1
                waits += waiting.map { t - $0 }
                waiting.removeAll()
            }
            if let at = plisInFlight.first, at <= t {
                plisInFlight.removeFirst()
                if lastKeyframeSent.map({ t - $0 >= gate }) ?? true {
                    lastKeyframeSent = t
                    keyframesInFlight.append(t + delay)
                }
            }
            if t < 3_000 * ms, t % (20 * ms) == 0 {
                waiting.append(t)
                if k.request(layer: 0, now: t) { plisInFlight.append(t + delay) }
            }
            if k.retryDue(now: t) != nil { plisInFlight.append(t + delay) }
            t += ms
        }
        #expect(waiting.isEmpty, "every joiner got a key frame")
        let total = waits.reduce(0, +)
        return (Double(total) / Double(max(1, waits.count)) / Double(ms), waits.max() ?? 0, keyframes)
    }

    /// The interval is what a ramp of joiners waits for (the trade-off docs/load-testing.md measures):
    /// at most one interval and a round trip, half of it on average, with one key frame per interval.
    /// Against a publisher that ignores requests within 300 ms of its last key frame (libwebrtc), a
    /// shorter interval changes nothing: the ignored request stays pending and goes again.
    @Test func aRampWaitsForTheIntervalAndAGatedPublisherSetsItsOwnPace() {
        let at300 = joinerWaits(interval: 300 * ms, gate: 0)
        let at150 = joinerWaits(interval: 150 * ms, gate: 0)
        #expect(at300.max <= 300 * ms + 2 * 20 * ms + 2 * ms, "one interval and a round trip at most")
        #expect(at150.max <= 150 * ms + 2 * 20 * ms + 2 * ms)
        #expect(at150.mean < at300.mean * 0.7, "\(at150.mean) vs \(at300.mean) ms")
        #expect(at150.keyframes > at300.keyframes * 3 / 2, "the price: more key frames")
        let gated150 = joinerWaits(interval: 150 * ms, gate: 300 * ms)
        let gated300 = joinerWaits(interval: 300 * ms, gate: 300 * ms)
        #expect(gated150.max <= gated300.max, "\(gated150.max / ms) vs \(gated300.max / ms) ms")
        #expect(gated150.mean <= gated300.mean, "\(gated150.mean) vs \(gated300.mean) ms")
        #expect(gated150.keyframes <= gated300.keyframes + 1, "the gate, not the requests, sets the key-frame rate")
    }
}
