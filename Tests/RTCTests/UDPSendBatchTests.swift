import Glibc
import Testing

@testable import RTC

/// Keeps every datagram a socket receives (whole), on the loop thread.
private final class KeepingHandler: DatagramHandler, @unchecked Sendable {
    var datagrams: [[UInt8]] = []
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        datagrams.append(Array(data))
    }
}

private final class IgnoringHandler: DatagramHandler, @unchecked Sendable {
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {}
}

/// The send batch's grouping by destination and its UDP GSO messages, with real sockets on loopback.
@Suite struct UDPSendBatchTests {
    /// One datagram: its index in its destination's sequence (4 bytes), then a filler derived from it.
    static func datagram(index: Int, size: Int) -> [UInt8] {
        var bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }
        for k in 0..<min(4, size) { bytes[k] = UInt8(truncatingIfNeeded: index >> (8 * k)) }
        return bytes
    }

    /// Sizes to the first destination: runs of equal sizes, a shorter one ending a run, a larger one
    /// starting a new run, and tiny ones. GSO messages: [1000×10, 300], [1000×5], [1200, 50],
    /// [50, 50].
    static let sizesToFirst =
        Array(repeating: 1000, count: 10) + [300] + Array(repeating: 1000, count: 5) + [1200]
        + Array(repeating: 50, count: 3)
    /// Sizes to the second destination: more than 64 equal datagrams (two messages: 64 and 6).
    static let sizesToSecond = Array(repeating: 500, count: 70)
    /// From a second sending socket to the first destination: odd sizes, one message each, and one
    /// empty datagram.
    static let sizesFromOther = [700, 0, 333, 1400]

    struct Outcome: Sendable {
        var first: [[UInt8]]
        var second: [[UInt8]]
        var sentBySender: UInt64
        var sentByOther: UInt64
        var errors: UInt64
        var offloadAfter: Bool
        var statistics: EventLoopSendStatistics
        /// Messages the receiving sockets got coalesced (UDP GRO), and the datagrams in them.
        var coalescedMessages: UInt64
        var coalescedDatagrams: UInt64
    }

    /// Queues the burst (interleaved over both destinations and both sending sockets, in one loop
    /// turn, so one flush sends it) and waits until every datagram arrived.
    func sendBurst(refuseSegmentation: Bool) async throws -> Outcome {
        let loop = EventLoop(name: "gso-test")
        defer { loop.shutdown() }
        let firstSink = KeepingHandler()
        let secondSink = KeepingHandler()
        let first = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: firstSink)
        let second = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: secondSink)
        let sender = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: IgnoringHandler())
        let other = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: IgnoringHandler())
        let before = await loop.submit { () -> EventLoopSendStatistics in
            if refuseSegmentation {
                // SO_NO_CHECK: plain IPv4 datagrams go out without a checksum, but the kernel
                // refuses GSO messages on such a socket (EINVAL), as it would on a device without
                // checksum offload (EIO).
                var one: Int32 = 1
                _ = setsockopt(sender.fd, SOL_SOCKET, SO_NO_CHECK, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            return loop.sendStatisticsOnLoop
        }
        #expect(await loop.submit { sender.segmentationOffload } == UDPSendBatch.segmentationAllowed)
        loop.execute {
            let longest = max(Self.sizesToFirst.count, Self.sizesToSecond.count)
            for i in 0..<longest {
                if i < Self.sizesToSecond.count {
                    sender.send(Self.datagram(index: i, size: Self.sizesToSecond[i]), to: second.localAddress)
                }
                if i < Self.sizesToFirst.count {
                    sender.send(Self.datagram(index: i, size: Self.sizesToFirst[i]), to: first.localAddress)
                }
                if i < Self.sizesFromOther.count {
                    let index = 1000 + i
                    other.send(Self.datagram(index: index, size: Self.sizesFromOther[i]), to: first.localAddress)
                }
            }
        }
        let expectedAtFirst = Self.sizesToFirst.count + Self.sizesFromOther.count
        let arrived = await IOTestSupport.wait(loop, seconds: 20) {
            firstSink.datagrams.count >= expectedAtFirst && secondSink.datagrams.count >= Self.sizesToSecond.count
        }
        #expect(arrived)
        return await loop.submit {
            Outcome(
                first: firstSink.datagrams, second: secondSink.datagrams, sentBySender: sender.packetsSent,
                sentByOther: other.packetsSent, errors: sender.sendErrors + other.sendErrors,
                offloadAfter: sender.segmentationOffload,
                statistics: Self.difference(loop.sendStatisticsOnLoop, before),
                coalescedMessages: first.coalescedMessages + second.coalescedMessages,
                coalescedDatagrams: first.coalescedDatagrams + second.coalescedDatagrams)
        }
    }

    static func difference(_ a: EventLoopSendStatistics, _ b: EventLoopSendStatistics) -> EventLoopSendStatistics {
        var d = EventLoopSendStatistics()
        d.systemCalls = a.systemCalls - b.systemCalls
        d.messages = a.messages - b.messages
        d.datagrams = a.datagrams - b.datagrams
        d.segmentedMessages = a.segmentedMessages - b.segmentedMessages
        d.segmentedDatagrams = a.segmentedDatagrams - b.segmentedDatagrams
        d.segmentationRefusals = a.segmentationRefusals - b.segmentationRefusals
        return d
    }

    /// Every datagram arrived once, separately, with its size and bytes, in order per sender and
    /// destination.
    func expectComplete(_ outcome: Outcome) {
        let expectedSecond = Self.sizesToSecond.enumerated().map { Self.datagram(index: $0.offset, size: $0.element) }
        #expect(outcome.second == expectedSecond)
        let expectedFromSender = Self.sizesToFirst.enumerated().map {
            Self.datagram(index: $0.offset, size: $0.element)
        }
        let expectedFromOther = Self.sizesFromOther.enumerated().map {
            Self.datagram(index: 1000 + $0.offset, size: $0.element)
        }
        // Datagrams from the two sending sockets may interleave; each socket's keep their order.
        let fromOther = outcome.first.filter { candidate in expectedFromOther.contains(candidate) }
        let fromSender = outcome.first.filter { candidate in !expectedFromOther.contains(candidate) }
        #expect(fromSender == expectedFromSender)
        #expect(fromOther == expectedFromOther)
        let total = UInt64(Self.sizesToFirst.count + Self.sizesToSecond.count)
        #expect(outcome.sentBySender == total)
        #expect(outcome.sentByOther == UInt64(Self.sizesFromOther.count))
        #expect(outcome.errors == 0)
        #expect(outcome.statistics.datagrams == total + UInt64(Self.sizesFromOther.count))
    }

    @Test func runsToOneDestinationGoOutAsGSOMessagesAndArriveAsSeparateDatagramsInOrder() async throws {
        let outcome = try await sendBurst(refuseSegmentation: false)
        expectComplete(outcome)
        if UDPSendBatch.segmentationAllowed {
            // [1000×10, 300], [1000×5], [1200, 50], [50, 50] to the first destination, [500×64],
            // [500×6] to the second; the other socket's four datagrams go singly.
            #expect(outcome.statistics.segmentedMessages == 6)
            #expect(outcome.statistics.segmentedDatagrams == UInt64(Self.sizesToFirst.count + Self.sizesToSecond.count))
            #expect(outcome.statistics.messages == 10)
            #expect(outcome.statistics.segmentationRefusals == 0)
            #expect(outcome.offloadAfter)
            if EventLoop.coalescingAllowed {
                // The receivers asked for UDP GRO: each GSO message crossed loopback whole and was
                // split here (expectComplete checked every datagram's bytes and order).
                #expect(outcome.coalescedMessages == 6)
                #expect(outcome.coalescedDatagrams == outcome.statistics.segmentedDatagrams)
            }
        }
    }

    @Test func aSocketWhoseKernelRefusesGSOSendsEveryDatagramSinglyAndLosesNone() async throws {
        let outcome = try await sendBurst(refuseSegmentation: true)
        expectComplete(outcome)
        #expect(outcome.statistics.segmentedMessages == 0)
        #expect(outcome.statistics.messages == outcome.statistics.datagrams)
        #expect(outcome.coalescedMessages == 0)
        #expect(!outcome.offloadAfter)
        if UDPSendBatch.segmentationAllowed {
            #expect(outcome.statistics.segmentationRefusals == 1)
        }
    }

    @Test func aBurstLargerThanTheBatchGoesOutWhole() async throws {
        // Three batches' worth of datagrams to 50 destinations, queued in one loop turn: the batch
        // flushes when full and nothing is lost or reordered per destination.
        let loop = EventLoop(name: "gso-full")
        defer { loop.shutdown() }
        let sinks = (0..<50).map { _ in KeepingHandler() }
        let receivers = try sinks.map { try loop.openUDP(bindTo: IOTestSupport.loopback, handler: $0) }
        let sender = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: IgnoringHandler())
        let perDestination = 3 * EventLoop.sendBatchCapacity / receivers.count
        loop.execute {
            for i in 0..<perDestination {
                for r in receivers {
                    sender.send(Self.datagram(index: i, size: 200 + i % 3), to: r.localAddress)
                }
            }
        }
        #expect(
            await IOTestSupport.wait(loop, seconds: 20) { sinks.allSatisfy { $0.datagrams.count >= perDestination } })
        let expected = (0..<perDestination).map { Self.datagram(index: $0, size: 200 + $0 % 3) }
        let received = await loop.submit { sinks.map(\.datagrams) }
        #expect(received.allSatisfy { $0 == expected })
        #expect(await loop.submit { sender.packetsSent } == UInt64(perDestination * receivers.count))
    }
}
