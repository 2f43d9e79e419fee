import Glibc
import Synchronization
import Testing

@testable import RTC

/// Records what a socket receives; touched only on the loop thread.
private final class CollectingHandler: DatagramHandler, @unchecked Sendable {
    var payloads: [[UInt8]] = []
    var sources: [SocketAddress] = []
    var sizes: [Int] = []

    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        sizes.append(data.count)
        payloads.append(Array(data.prefix(8)))
        sources.append(from)
    }
}

/// Records, for each datagram, when the kernel received it and when the loop handed it over.
private final class ArrivalHandler: DatagramHandler, @unchecked Sendable {
    var arrivals: [(kernel: UInt64, handed: UInt64)] = []

    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        arrivals.append((socket.kernelArrival, EventLoop.now()))
    }
}

/// Takes 30 ms over each datagram (an SFU's fan-out) and records the `now` it was handed.
private final class SlowHandler: DatagramHandler, @unchecked Sendable {
    var times: [UInt64] = []

    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {}
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64) {
        times.append(now)
        usleep(30_000)
    }
}

/// Logs datagrams by their first byte; the first one queues loop work that logs too.
private final class InterleavingHandler: DatagramHandler, @unchecked Sendable {
    let loop: EventLoop
    var log: [String] = []
    init(loop: EventLoop) { self.loop = loop }

    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        log.append("d\(data.first ?? 0)")
        if log.count == 1 { loop.execute { [self] in log.append("work") } }
    }
}

private final class CountingTicker: EventLoopTicker, @unchecked Sendable {
    var times: [UInt64] = []
    func tick(now: UInt64) { times.append(now) }
}

/// Records the `now` the loop hands with each datagram, and the clock read when it arrives.
private final class ClockHandler: DatagramHandler, @unchecked Sendable {
    var batchTimes: [UInt64] = []
    var handledAt: [UInt64] = []
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        Issue.record("the loop should pass its batch clock")
    }
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64) {
        batchTimes.append(now)
        handledAt.append(EventLoop.now())
    }
}

/// Helpers shared by the I/O and ICE tests.
enum IOTestSupport {
    /// 127.0.0.1 with an ephemeral port.
    static let loopback = SocketAddress(ip: "127.0.0.1", port: 0)!

    /// Polls `condition` on the loop until it holds or `seconds` pass; returns whether it held.
    static func wait(_ loop: EventLoop, seconds: Double = 5, _ condition: @escaping @Sendable () -> Bool) async -> Bool
    {
        let deadline = EventLoop.now() + UInt64(seconds * 1e9)
        while EventLoop.now() < deadline {
            if await loop.submit(condition) { return true }
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return await loop.submit(condition)
    }
}

@Suite struct SocketAddressTests {
    @Test func parsesAndPrintsIPv4AndIPv6() throws {
        let v4 = try #require(SocketAddress(ip: "192.0.2.7", port: 5004))
        #expect(v4.ip == "192.0.2.7")
        #expect(v4.port == 5004)
        #expect(v4.description == "192.0.2.7:5004")
        #expect(!v4.isIPv6)
        let v6 = try #require(SocketAddress(ip: "2001:db8::1", port: 443))
        #expect(v6.ip == "2001:db8::1")
        #expect(v6.description == "[2001:db8::1]:443")
        #expect(v6.isIPv6)
        #expect(SocketAddress(ip: "example.local", port: 1) == nil)
        #expect(SocketAddress(ip: "300.1.1.1", port: 1) == nil)
        #expect(SocketAddress(ip: "10.0.0.1", port: 1) == SocketAddress(ip: "10.0.0.1", port: 1))
        #expect(SocketAddress(ip: "10.0.0.1", port: 1) != SocketAddress(ip: "10.0.0.1", port: 2))
        #expect(Set([v4, v4, v6]).count == 2)
    }

    @Test func convertsToAndFromSTUNAddress() throws {
        let v6 = try #require(SocketAddress(ip: "2001:db8:1234:5678:11:2233:4455:6677", port: 32853))
        let stun = try #require(v6.stunAddress)
        #expect(SocketAddress(stun) == v6)
        let v4 = try #require(SocketAddress(ip: "127.0.0.1", port: 9))
        #expect(v4.stunAddress?.address == [127, 0, 0, 1])
    }
}

@Suite struct EventLoopTests {
    @Test func twoSocketsExchangeAThousandDatagrams() async throws {
        let loop = EventLoop(name: "io-test")
        defer { loop.shutdown() }
        let handlerA = CollectingHandler()
        let handlerB = CollectingHandler()
        let a = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: handlerA)
        let b = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: handlerB)
        #expect(a.localAddress.port != 0)
        #expect(a.localAddress != b.localAddress)

        // Ten rounds of 100 each way, so that the kernel buffers never overflow.
        for round in 0..<10 {
            loop.execute {
                for i in 0..<100 {
                    var value = UInt32(round * 100 + i)
                    withUnsafeBytes(of: &value) {
                        a.send($0, to: b.localAddress)
                        b.send($0, to: a.localAddress)
                    }
                }
            }
            let expected = (round + 1) * 100
            #expect(
                await IOTestSupport.wait(loop) { handlerA.sizes.count >= expected && handlerB.sizes.count >= expected })
        }
        let (receivedByB, sourcesAtB, sentByA, errors) = await loop.submit {
            (
                handlerB.payloads.map { $0.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) } },
                Set(handlerB.sources), a.packetsSent, a.sendErrors + b.sendErrors
            )
        }
        #expect(receivedByB == (0..<1000).map { UInt32($0) })
        #expect(sourcesAtB == [a.localAddress])
        #expect(sentByA == 1000)
        #expect(errors == 0)
        let counters = await loop.submit { (b.packetsReceived, b.bytesReceived) }
        #expect(counters.0 == 1000)
        #expect(counters.1 == 4000)
    }

    @Test func workQueuedDuringABurstRunsBeforeTheRestOfTheBurst() async throws {
        // An SFU datagram can fan out to a thousand sends; a room's control call queued meanwhile
        // must not wait for the whole burst of 256.
        let loop = EventLoop(name: "interleave")
        defer { loop.shutdown() }
        let handler = InterleavingHandler(loop: loop)
        let receiver = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: handler)
        let sender = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: CollectingHandler())
        // Sent in one batch at the end of this loop turn, so they are all queued before the next read.
        loop.execute {
            for i in 1...10 { sender.send([UInt8(i)], to: receiver.localAddress) }
        }
        #expect(await IOTestSupport.wait(loop) { handler.log.count >= 11 })
        #expect(await loop.submit { handler.log } == ["d1", "work"] + (2...10).map { "d\($0)" })
    }

    /// Blocks `receiver`'s loop while `sender` (on another loop) sends `datagrams`, then for another
    /// `blockMilliseconds`, so that they wait at least that long in the kernel's receive queue however
    /// late the threads get scheduled.
    private static func sendWhileBlocked(
        _ datagrams: [[UInt8]], from sender: UDPSocket, to receiver: UDPSocket, blockMilliseconds: UInt32
    ) async {
        let blocked = Atomic<Bool>(false)
        let sent = Atomic<Bool>(false)
        receiver.loop.execute {
            blocked.store(true, ordering: .releasing)
            while !sent.load(ordering: .acquiring) { usleep(1000) }
            usleep(blockMilliseconds * 1000)
        }
        while !blocked.load(ordering: .acquiring) { try? await Task.sleep(nanoseconds: 1_000_000) }
        await sender.loop.submit {
            for d in datagrams { sender.send(d, to: receiver.localAddress) }
        }
        // The sends are flushed at the end of the loop turn that queued them: one more turn.
        await sender.loop.submit {}
        sent.store(true, ordering: .releasing)
    }

    /// Turns on `receiver`'s queue measurement and waits until the kernel stamps arrivals: the first
    /// socket of the system to ask turns the stamping on a moment later (a deferred static key), and
    /// until then a datagram is stamped when it is read. Returns the counters to compare with.
    private static func startMeasuring(
        _ receiver: UDPSocket, shedMediaOlderThan limit: UInt64, sender: UDPSocket, sink: CollectingHandler
    ) async -> (over100ms: UInt64, count: UInt64, sum: UInt64) {
        await receiver.loop.submit { receiver.measureReceiveQueue(shedMediaOlderThan: limit) }
        for _ in 0..<100 {
            await sendWhileBlocked([[0x01, 0x01, 0, 0]], from: sender, to: receiver, blockMilliseconds: 20)
            _ = await IOTestSupport.wait(receiver.loop) { sink.payloads.count >= 1 }
            let stamped = await receiver.loop.submit {
                sink.payloads = []
                return receiver.takeLongestWaits().stun >= 15_000_000
            }
            if stamped { break }
        }
        return await receiver.loop.submit {
            (receiver.queueDelayedOver100ms, receiver.queueDelayCount, receiver.queueDelaySum)
        }
    }

    @Test func mediaThatWaitedPastTheLimitInTheReceiveQueueIsDroppedButHandshakesGoThrough() async throws {
        // A starved SFU reads its shared port seconds late: media that old is dropped unread, while
        // connectivity checks (STUN) and DTLS still reach their connections.
        let loop = EventLoop(name: "stale-rx")
        let senderLoop = EventLoop(name: "stale-tx")
        defer {
            loop.shutdown()
            senderLoop.shutdown()
        }
        let sink = CollectingHandler()
        let receiver = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: sink)
        let sender = try senderLoop.openUDP(bindTo: IOTestSupport.loopback, handler: CollectingHandler())
        let before = await Self.startMeasuring(receiver, shedMediaOlderThan: 100_000_000, sender: sender, sink: sink)
        #expect(await loop.submit { receiver.measuresReceiveQueue })
        let srtp: [UInt8] = [0x80, 111, 0, 1]
        let srtcp: [UInt8] = [0x81, 201, 0, 1]
        let stun: [UInt8] = [0x00, 0x01, 0, 0]
        let dtls: [UInt8] = [0x16, 0xFE, 0xFD, 0]
        await Self.sendWhileBlocked(
            [srtp, stun, srtcp, dtls, srtp], from: sender, to: receiver, blockMilliseconds: 300)
        #expect(await IOTestSupport.wait(loop) { sink.payloads.count >= 2 && receiver.droppedStale >= 3 })
        #expect(await loop.submit { sink.payloads } == [stun, dtls])
        // Fresh media goes through.
        await senderLoop.submit { sender.send(srtp, to: receiver.localAddress) }
        #expect(await IOTestSupport.wait(loop) { sink.payloads.count == 3 })
        let figures = await loop.submit {
            (receiver.droppedStale, receiver.queueDelayedOver100ms, receiver.takeLongestWaits().stun)
        }
        #expect(figures.0 == 3)
        #expect(figures.1 - before.over100ms == 5)
        #expect(figures.2 >= 300_000_000)
    }

    @Test func aDatagramArrivedWhenTheKernelGotItNotWhenABusyLoopReadIt() async throws {
        // A receiver whose thread was busy must not report its own delay as the network's to the
        // sender's bandwidth estimator: the loop hands over the kernel's arrival time.
        let loop = EventLoop(name: "arrival-rx")
        let senderLoop = EventLoop(name: "arrival-tx")
        defer {
            loop.shutdown()
            senderLoop.shutdown()
        }
        let sink = ArrivalHandler()
        let receiver = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: sink)
        let sender = try senderLoop.openUDP(bindTo: IOTestSupport.loopback, handler: CollectingHandler())
        #expect(await loop.submit { receiver.stampsArrivals })
        // The first socket of the system to ask turns the kernel's stamping on a moment later; until
        // then the kernel stamps a datagram when it is read.
        var waited: UInt64?
        for _ in 0..<50 {
            await Self.sendWhileBlocked([[0x80, 111, 0, 1]], from: sender, to: receiver, blockMilliseconds: 200)
            #expect(await IOTestSupport.wait(loop) { !sink.arrivals.isEmpty })
            let last = await loop.submit {
                defer { sink.arrivals = [] }
                return sink.arrivals.last
            }
            if let last, last.kernel != 0 {
                waited = last.handed - last.kernel
                if waited! >= 190_000_000 { break }
            }
        }
        #expect(
            (waited ?? 0) >= 190_000_000,
            "the datagram waited the 200 ms the loop was blocked: \(String(describing: waited))")
    }

    @Test func eachDatagramOfABatchIsHandedTheTimeItsHandlingStarts() async throws {
        // The sends of a fan-out are stamped with this time (transport-cc): one time for a whole
        // batch would make the later datagrams' sends look early by the work before them.
        let loop = EventLoop(name: "batch-now-rx")
        let senderLoop = EventLoop(name: "batch-now-tx")
        defer {
            loop.shutdown()
            senderLoop.shutdown()
        }
        let sink = SlowHandler()
        let receiver = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: sink)
        let sender = try senderLoop.openUDP(bindTo: IOTestSupport.loopback, handler: CollectingHandler())
        // Held while the loop is blocked, so that the three arrive in one receive batch.
        await Self.sendWhileBlocked(
            [[0x80, 111, 0, 1], [0x80, 111, 0, 2], [0x80, 111, 0, 3]], from: sender, to: receiver,
            blockMilliseconds: 20)
        #expect(await IOTestSupport.wait(loop) { sink.times.count == 3 })
        let times = await loop.submit { sink.times }
        #expect(times.count == 3)
        if times.count == 3 {
            #expect(times[1] - times[0] >= 30_000_000)
            #expect(times[2] - times[1] >= 30_000_000)
        }
    }

    @Test func withoutALimitEveryDatagramGoesThroughAndItsWaitIsMeasured() async throws {
        let loop = EventLoop(name: "measure-rx")
        let senderLoop = EventLoop(name: "measure-tx")
        defer {
            loop.shutdown()
            senderLoop.shutdown()
        }
        let sink = CollectingHandler()
        let receiver = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: sink)
        let sender = try senderLoop.openUDP(bindTo: IOTestSupport.loopback, handler: CollectingHandler())
        let before = await Self.startMeasuring(receiver, shedMediaOlderThan: 0, sender: sender, sink: sink)
        await Self.sendWhileBlocked(
            [[0x80, 111], [0x00, 0x01], [0x80, 111]], from: sender, to: receiver, blockMilliseconds: 200)
        #expect(await IOTestSupport.wait(loop) { sink.payloads.count == 3 })
        let figures = await loop.submit {
            (receiver.droppedStale, receiver.queueDelayCount, receiver.queueDelaySum, receiver.takeLongestWaits())
        }
        #expect(figures.0 == 0)
        #expect(figures.1 - before.count == 3)
        #expect(figures.2 - before.sum >= 3 * 200_000_000)
        #expect(figures.3.any >= 200_000_000 && figures.3.stun >= 200_000_000)
        #expect(await loop.submit { receiver.takeLongestWaits().any } == 0)
    }

    @Test func executeRunsInOrderOnTheLoopThread() async {
        let loop = EventLoop(name: "order")
        defer { loop.shutdown() }
        #expect(!loop.isInLoop)
        let log = Mutex<[Int]>([])
        let onLoop = Mutex<Bool>(true)
        for i in 0..<200 {
            loop.execute {
                if !loop.isInLoop { onLoop.withLock { $0 = false } }
                log.withLock { $0.append(i) }
            }
        }
        _ = await loop.submit { 0 }
        #expect(log.withLock { $0 } == Array(0..<200))
        #expect(onLoop.withLock { $0 })
    }

    @Test func tickersRunUntilRemoved() async {
        let loop = EventLoop(name: "ticks")
        defer { loop.shutdown() }
        let ticker = CountingTicker()
        loop.addTicker(ticker)
        #expect(await IOTestSupport.wait(loop) { ticker.times.count >= 5 })
        let times = await loop.submit { ticker.times }
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 })
        loop.removeTicker(ticker)
        let countAfterRemoval = await loop.submit { ticker.times.count }
        try? await Task.sleep(nanoseconds: 50_000_000)
        #expect(await loop.submit { ticker.times.count } == countAfterRemoval)
    }

    @Test func handlersGetTheBatchClockOfTheirDatagrams() async throws {
        let loop = EventLoop(name: "clock")
        defer { loop.shutdown() }
        let handler = ClockHandler()
        let receiver = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: handler)
        let sender = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: CollectingHandler())
        let before = EventLoop.now()
        loop.execute {
            for i in 0..<40 { sender.send([UInt8(i)], to: receiver.localAddress) }
        }
        #expect(await IOTestSupport.wait(loop, seconds: 30) { handler.batchTimes.count == 40 })
        let (times, handled) = await loop.submit { (handler.batchTimes, handler.handledAt) }
        #expect(times.allSatisfy { $0 >= before })
        // Read when the batch was received: never after the datagram was handled.
        #expect(zip(times, handled).allSatisfy { $0 <= $1 })
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 })
    }

    /// Sends 1000 datagrams to a socket impaired with `seed`; returns (delivered, dropped).
    func runImpaired(seed: UInt64) async throws -> (Int, UInt64) {
        let loop = EventLoop(name: "impair")
        defer { loop.shutdown() }
        let sink = CollectingHandler()
        let receiver = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: sink)
        let sender = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: CollectingHandler())
        await loop.submit { receiver.impairment = Impairment(receiveDropRate: 0.05, seed: seed) }
        for _ in 0..<10 {
            loop.execute {
                for i in 0..<100 { sender.send([UInt8(truncatingIfNeeded: i)], to: receiver.localAddress) }
            }
            _ = await IOTestSupport.wait(loop) { receiver.packetsReceived + receiver.droppedByImpairment >= 100 }
        }
        #expect(await IOTestSupport.wait(loop) { Int(receiver.packetsReceived + receiver.droppedByImpairment) == 1000 })
        return await loop.submit { (sink.sizes.count, receiver.droppedByImpairment) }
    }

    @Test func impairmentDropsAboutFivePercentDeterministically() async throws {
        let first = try await runImpaired(seed: 42)
        let second = try await runImpaired(seed: 42)
        #expect(first.0 + Int(first.1) == 1000)
        #expect(first.1 > 20 && first.1 < 90)
        #expect(first == second)
        let other = try await runImpaired(seed: 7)
        #expect(other.0 + Int(other.1) == 1000)
    }

    @Test func emptyAndOversizedDatagramsDoNotCrash() async throws {
        let loop = EventLoop(name: "sizes")
        defer { loop.shutdown() }
        let sink = CollectingHandler()
        let receiver = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: sink)
        let sender = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: CollectingHandler())
        loop.execute {
            sender.send([], to: receiver.localAddress)
            sender.send([UInt8](repeating: 7, count: 65_000), to: receiver.localAddress)
            sender.send([1, 2, 3], to: receiver.localAddress)
        }
        #expect(await IOTestSupport.wait(loop) { sink.sizes.count >= 2 })
        let (sizes, truncated, sent) = await loop.submit { (sink.sizes, receiver.droppedTruncated, sender.packetsSent) }
        #expect(sizes == [0, 3])
        #expect(truncated == 1)
        #expect(sent == 3)
    }

    @Test func ipv6LoopbackWorksWhenAvailable() async throws {
        let loop = EventLoop(name: "v6")
        defer { loop.shutdown() }
        let sink = CollectingHandler()
        let any6 = try #require(SocketAddress(ip: "::1", port: 0))
        // Some sandboxes have no IPv6 loopback; then there is nothing to test.
        guard let receiver = try? loop.openUDP(bindTo: any6, handler: sink),
            let sender = try? loop.openUDP(bindTo: any6, handler: CollectingHandler())
        else { return }
        #expect(receiver.localAddress.isIPv6 && receiver.localAddress.ip == "::1")
        loop.execute { sender.send([9, 9], to: receiver.localAddress) }
        #expect(await IOTestSupport.wait(loop) { sink.sizes == [2] })
        #expect(await loop.submit { sink.sources } == [sender.localAddress])
    }

    @Test func closedSocketStopsReceivingAndShutdownJoins() async throws {
        let loop = EventLoop(name: "close")
        let sink = CollectingHandler()
        let receiver = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: sink)
        let sender = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: CollectingHandler())
        receiver.close()
        loop.execute { sender.send([1], to: receiver.localAddress) }
        #expect(await IOTestSupport.wait(loop) { sender.packetsSent + sender.sendErrors >= 1 })
        #expect(await loop.submit { receiver.isClosed && sink.sizes.isEmpty })
        loop.shutdown()
        #expect(throws: SocketError.loopClosed) { try loop.openUDP(bindTo: IOTestSupport.loopback, handler: sink) }
    }
}
