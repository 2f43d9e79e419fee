import Foundation
import RTC
import RTCWire
import Testing

/// ``ImpairedLink`` on a synthetic clock: every datagram carries its index, and the harness notes
/// when (and how often) each comes out.
struct ImpairedLinkHarness {
    struct Output: Equatable {
        var index: Int
        var sent: UInt64
        var released: UInt64
    }

    static let address = SocketAddress(ip: "127.0.0.1", port: 9)!
    static let ms: UInt64 = 1_000_000

    /// Sends `count` datagrams of `size` bytes every `interval` ns from t = 1 s, polling the link
    /// every `step` ns (and at each send), until everything is out.
    static func run(
        _ link: ImpairedLink, count: Int, size: Int = 200, interval: UInt64, step: UInt64 = ms
    ) -> (outputs: [Output], dropped: Int) {
        var outputs: [Output] = []
        var sentAt = [UInt64](repeating: 0, count: count)
        var dropped = 0
        var buffer = [UInt8](repeating: 0, count: max(size, 8))
        let start: UInt64 = 1_000_000_000
        var now = start
        var next = 0
        let collect: (UnsafeMutableRawBufferPointer, SocketAddress) -> Void = { data, from in
            #expect(from == address)
            let index = Int(data.loadUnaligned(as: UInt64.self))
            outputs.append(Output(index: index, sent: sentAt[index], released: now))
        }
        while next < count || link.pending > 0 {
            while next < count, start + UInt64(next) * interval <= now {
                sentAt[next] = now
                buffer.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(next), as: UInt64.self) }
                let verdict = buffer.withUnsafeBytes {
                    link.admit(UnsafeRawBufferPointer(rebasing: $0[0..<size]), to: address, now: now)
                }
                switch verdict {
                case .pass: outputs.append(Output(index: next, sent: now, released: now))
                case .drop: dropped += 1
                case .held: break
                }
                next += 1
            }
            link.release(now: now) { data, from in collect(data, from) }
            now += step
        }
        return (outputs, dropped)
    }
}

@Suite struct ImpairedLinkTests {
    typealias H = ImpairedLinkHarness
    let ms = ImpairedLinkHarness.ms

    @Test func fixedDelayHoldsEachDatagramExactly() {
        let link = ImpairedLink(LinkImpairment(delayMs: 50), seed: 1)
        let (out, dropped) = H.run(link, count: 100, interval: 20 * ms)
        #expect(dropped == 0)
        #expect(out.map(\.index) == Array(0..<100))
        #expect(out.allSatisfy { $0.released - $0.sent == 50 * ms })
    }

    @Test func rateLimitHoldsTheRateQueuesAndDropsTheTail() {
        // 1000-byte datagrams at 2 Mbit/s into a 1 Mbit/s link with a 200 ms queue, for 5 s.
        let settings = LinkImpairment(rateKbps: 1000, bucketBytes: 3000, queueMs: 200)
        let (out, dropped) = H.run(ImpairedLink(settings, seed: 1), count: 1250, size: 1000, interval: 4 * ms)
        #expect(out.map(\.index) == out.map(\.index).sorted())
        #expect(dropped > 500 && dropped < 700)
        // What came out over the middle seconds ran at the rate (125 datagrams of 1000 bytes per s).
        let middle = out.filter { $0.released >= 2_000_000_000 && $0.released < 5_000_000_000 }
        #expect(abs(middle.count - 375) <= 5)
        // Nothing waited longer than the queue allows (plus a poll step).
        #expect(out.allSatisfy { $0.released - $0.sent <= 201 * ms })
        #expect(out.contains { $0.released - $0.sent >= 150 * ms })
    }

    @Test func trafficBelowTheRatePassesUndelayed() {
        let settings = LinkImpairment(rateKbps: 1000, bucketBytes: 3000)
        let (out, dropped) = H.run(ImpairedLink(settings, seed: 1), count: 500, size: 1000, interval: 10 * ms)
        #expect(dropped == 0 && out.count == 500)
        #expect(out.allSatisfy { $0.released == $0.sent })
    }

    @Test func jitterWithoutReorderingKeepsOrderWithinItsRange() {
        let link = ImpairedLink(LinkImpairment(delayMs: 40, jitterMs: 20), seed: 3)
        let (out, _) = H.run(link, count: 2000, interval: 5 * ms)
        #expect(out.count == 2000)
        #expect(out.map(\.index) == Array(0..<2000))
        let delays = out.map { $0.released - $0.sent }
        #expect(delays.allSatisfy { $0 >= 20 * ms && $0 <= 61 * ms })
        #expect(Set(delays.map { $0 / ms }).count > 15)
    }

    @Test func jitterThatMayReorderDoesWithinItsRange() {
        let link = ImpairedLink(LinkImpairment(delayMs: 40, jitterMs: 20, jitterReorders: true), seed: 3)
        let (out, _) = H.run(link, count: 2000, interval: 5 * ms)
        #expect(out.count == 2000)
        #expect(Set(out.map(\.index)) == Set(0..<2000))
        let inversions = zip(out, out.dropFirst()).filter { $0.index > $1.index }.count
        #expect(inversions > 200)
        let delays = out.map { Double($0.released - $0.sent) / Double(ms) }
        #expect(delays.allSatisfy { $0 >= 20 && $0 <= 61 })
        let mean = delays.reduce(0, +) / Double(delays.count)
        #expect(abs(mean - 40.5) < 1.5)
    }

    @Test func reorderingHoldsTheGivenShareBack() {
        let link = ImpairedLink(LinkImpairment(reorder: 0.1, reorderMs: 20), seed: 5)
        let (out, dropped) = H.run(link, count: 5000, interval: 5 * ms)
        #expect(dropped == 0 && out.count == 5000)
        let late = out.filter { $0.released - $0.sent == 20 * ms }.count
        #expect(late == Int(link.reordered))
        #expect(abs(Double(late) / 5000 - 0.1) < 0.015)
        // A held datagram is overtaken by the ones sent in the next 20 ms (two held in a row count once).
        let inversions = zip(out, out.dropFirst()).filter { $0.index > $1.index }.count
        #expect(inversions <= late && inversions >= late * 9 / 10)
    }

    @Test func duplicationDeliversTheShareTwice() {
        let link = ImpairedLink(LinkImpairment(duplicate: 0.2), seed: 9)
        let (out, dropped) = H.run(link, count: 5000, interval: 2 * ms)
        #expect(dropped == 0)
        #expect(out.count == 5000 + Int(link.duplicated))
        #expect(abs(Double(link.duplicated) / 5000 - 0.2) < 0.02)
        var seen = [Int](repeating: 0, count: 5000)
        for o in out { seen[o.index] += 1 }
        #expect(seen.allSatisfy { $0 == 1 || $0 == 2 })
        #expect(seen.filter { $0 == 2 }.count == Int(link.duplicated))
    }

    @Test func randomLossDropsTheShare() {
        let link = ImpairedLink(LinkImpairment(loss: 0.05), seed: 11)
        let (out, dropped) = H.run(link, count: 20_000, interval: ms)
        #expect(out.count + dropped == 20_000)
        #expect(abs(Double(dropped) / 20_000 - 0.05) < 0.005)
    }

    @Test func gilbertElliottBurstsMatchTheory() {
        // Bad 1/11 of the time, bad spells of 10 datagrams on average, all lost.
        let model = GilbertElliott(p: 0.01, r: 0.1)
        let link = ImpairedLink(LinkImpairment(burst: model), seed: 21)
        let count = 200_000
        var lost = [Bool]()
        lost.reserveCapacity(count)
        var byte: UInt8 = 0
        for i in 0..<count {
            let verdict = withUnsafeBytes(of: &byte) { link.admit($0, to: H.address, now: UInt64(i)) }
            lost.append(verdict == .drop)
        }
        let rate = Double(lost.filter { $0 }.count) / Double(count)
        #expect(abs(rate - model.meanLoss) / model.meanLoss < 0.1)
        var bursts: [Int] = []
        var run = 0
        for l in lost {
            if l {
                run += 1
            } else if run > 0 {
                bursts.append(run)
                run = 0
            }
        }
        let meanBurst = Double(bursts.reduce(0, +)) / Double(bursts.count)
        #expect(abs(meanBurst - 10) < 1)
        // Partial loss in the bad state thins the bursts: loss = p·lossBad / (p + r).
        let thin = ImpairedLink(LinkImpairment(burst: GilbertElliott(p: 0.01, r: 0.1, lossBad: 0.5)), seed: 22)
        var thinLost = 0
        for i in 0..<count {
            if withUnsafeBytes(of: &byte, { thin.admit($0, to: H.address, now: UInt64(i)) }) == .drop { thinLost += 1 }
        }
        #expect(abs(Double(thinLost) / Double(count) - 0.5 / 11) < 0.006)
    }

    @Test func theSameSeedGivesTheSameOutcome() {
        let settings = LinkImpairment(
            rateKbps: 800, delayMs: 30, jitterMs: 15, jitterReorders: true, loss: 0.02,
            burst: GilbertElliott(p: 0.02, r: 0.3), reorder: 0.05, duplicate: 0.05)
        let first = H.run(ImpairedLink(settings, seed: 77), count: 3000, size: 400, interval: 3 * ms)
        let second = H.run(ImpairedLink(settings, seed: 77), count: 3000, size: 400, interval: 3 * ms)
        let other = H.run(ImpairedLink(settings, seed: 78), count: 3000, size: 400, interval: 3 * ms)
        #expect(first.outputs == second.outputs && first.dropped == second.dropped)
        #expect(first.outputs != other.outputs)
    }

    @Test func aFullRingDropsAndWrapsWithoutCorruption() {
        // A ring of 4 KB holds 20 datagrams of 200 bytes: 100 ms delay at one per 2 ms needs 50.
        let small = ImpairedLink(LinkImpairment(delayMs: 100), seed: 1, ringBytes: 4096)
        let (out, dropped) = H.run(small, count: 2000, interval: 2 * ms)
        #expect(dropped > 0 && out.count + dropped == 2000)
        #expect(Int(small.ringDrops) == dropped)
        #expect(out.map(\.index) == out.map(\.index).sorted())
        // With room, the ring wraps many times and every datagram comes out intact, in order.
        let roomy = ImpairedLink(
            LinkImpairment(delayMs: 100, jitterMs: 30, jitterReorders: true), seed: 1, ringBytes: 24_000)
        let wrapped = H.run(roomy, count: 5000, size: 150, interval: 2 * ms)
        #expect(wrapped.dropped == 0)
        #expect(Set(wrapped.outputs.map(\.index)) == Set(0..<5000))
    }
}

@Suite struct ImpairmentParsingTests {
    @Test func presetsParseAndDiffer() throws {
        #expect(try Impairment.parse("none").isNone)
        for name in Impairment.presetNames.dropFirst() {
            let impairment = try Impairment.parse(name)
            #expect(!impairment.isNone, "\(name)")
        }
        #expect(try Impairment.parse("3g").down.rateKbps == 1600)
        #expect(try Impairment.parse(" lossy-wifi\n").down.burst != nil)
    }

    @Test func theJSONFormSetsEachField() throws {
        let text = """
            {"down": {"rateKbps": 500, "bucketBytes": 4000, "queueMs": 250, "delayMs": 80, "jitterMs": 10,
                      "jitterReorders": true, "loss": 0.02, "burst": {"p": 0.01, "r": 0.2, "lossBad": 0.8},
                      "reorder": 0.01, "reorderMs": 15, "duplicate": 0.03},
             "up": {"delayMs": 20}, "seed": 42}
            """
        let i = try Impairment.parse(text)
        #expect(i.seed == 42)
        #expect(
            i.down
                == LinkImpairment(
                    rateKbps: 500, bucketBytes: 4000, queueMs: 250, delayMs: 80, jitterMs: 10, jitterReorders: true,
                    loss: 0.02, burst: GilbertElliott(p: 0.01, r: 0.2, lossBad: 0.8), reorder: 0.01, reorderMs: 15,
                    duplicate: 0.03))
        #expect(i.up == LinkImpairment(delayMs: 20))
    }

    @Test(
        arguments: [
            ("wifi", nil, "unknown preset 'wifi'"),
            ("{\"down\": ", nil, "not valid JSON"),
            ("[1]", nil, "expected a JSON object"),
            ("{\"sideways\": {}}", "sideways", "unknown field"),
            ("{\"down\": 3}", "down", "expected a JSON object"),
            ("{\"down\": {\"loss\": 1.5}}", "down.loss", "expected a number in [0, 1], found 1.5"),
            ("{\"down\": {\"loss\": \"5%\"}}", "down.loss", "expected a number"),
            ("{\"up\": {\"delayMs\": -1}}", "up.delayMs", "expected a number in [0, 60000], found -1"),
            ("{\"up\": {\"delayMs\": true}}", "up.delayMs", "expected a number"),
            ("{\"up\": {\"jitterReorders\": 1}}", "up.jitterReorders", "expected true or false"),
            ("{\"up\": {\"burst\": {\"p\": 0.1}}}", "up.burst", "expected both 'p' and 'r'"),
            ("{\"up\": {\"burst\": {\"p\": 0.1, \"r\": 0.2, \"h\": 1}}}", "up.burst.h", "unknown field"),
            ("{\"seed\": 1.5}", "seed", "expected a whole number, found 1.5"),
        ] as [(String, String?, String)])
    func badInputIsRefusedClearly(text: String, field: String?, message: String) {
        #expect {
            _ = try Impairment.parse(text)
        } throws: { error in
            guard let error = error as? ImpairmentError else { return false }
            return error.field == field && error.message.hasPrefix(message)
        }
    }
}

/// Notes each datagram's first byte and when it arrived.
private final class TimingHandler: DatagramHandler, @unchecked Sendable {
    var arrivals: [(byte: UInt8, at: UInt64)] = []
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        arrivals.append((data.first ?? 0, EventLoop.now()))
    }
}

@Suite struct SocketImpairmentTests {
    /// Both directions on real sockets: the sender's up link delays by 80 ms, the receiver's down
    /// link loses a tenth; the loop's timer releases what is held.
    @Test func socketsDelayOnSendAndDropOnReceive() async throws {
        let loop = EventLoop(name: "impaired")
        defer { loop.shutdown() }
        let sink = TimingHandler()
        let receiver = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: sink)
        let sender = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: TimingHandler())
        let sentAt = await loop.submit { () -> UInt64 in
            sender.impairment = Impairment(up: LinkImpairment(delayMs: 80))
            receiver.impairment = Impairment(down: LinkImpairment(loss: 0.1), seed: 4)
            let now = EventLoop.now()
            for i in 0..<200 { sender.send([UInt8(truncatingIfNeeded: i)], to: receiver.localAddress) }
            return now
        }
        #expect(
            await IOTestSupport.wait(loop, seconds: 30) {
                receiver.packetsReceived + receiver.droppedByImpairment == 200
            })
        let (arrivals, dropped) = await loop.submit { (sink.arrivals, receiver.droppedByImpairment) }
        #expect(dropped > 5 && dropped < 40)
        #expect(arrivals.count == 200 - Int(dropped))
        #expect(arrivals.allSatisfy { $0.at >= sentAt + 80_000_000 })
        #expect(arrivals.map(\.byte) == arrivals.map(\.byte).sorted())
        // Taking the impairment away restores the plain path at once.
        await loop.submit {
            sender.impairment = nil
            receiver.impairment = Impairment()
            #expect(receiver.impairment == nil)
            sender.send([255], to: receiver.localAddress)
        }
        #expect(await IOTestSupport.wait(loop, seconds: 30) { sink.arrivals.last?.byte == 255 })
    }
}
