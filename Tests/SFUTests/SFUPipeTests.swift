import Foundation
import Media
import RTC
import RTCWire
import TestSupport
import Testing

@testable import SFU

/// Two SFUs in one process joined by a pipe over loopback UDP: a Swift publisher sends the
/// synthetic simulcast VP8 and Opus loop to the origin, the origin pipes its producers to the edge,
/// and a Swift subscriber receives them from the edge's mirrored producers.
@Suite(.serialized) struct SFUPipeTests {
    /// Origin and edge with a connected pipe `p`, the publisher's producers piped and mirrored,
    /// and `bob` consuming every mirrored producer on the edge (not negotiated yet).
    struct Rig {
        let origin: SFU
        let edge: SFU
        let publisher: SFUTestClient
        let subscriber: SFUTestClient
        var originAddress = SocketAddress(ip: "127.0.0.1", port: 0)!
        var edgeAddress = SocketAddress(ip: "127.0.0.1", port: 0)!
        var producers: [ProducerInfo] = []

        static func start(_ name: String, rids: [String] = ["q", "h", "f"]) async throws -> Rig {
            let origin = SFU(configuration: SFUConfiguration(loopName: "\(name)-origin"))
            let edge = SFU(configuration: SFUConfiguration(loopName: "\(name)-edge"))
            let publisher = try SFUTestClient(name: "\(name)-pub")
            let subscriber = try SFUTestClient(name: "\(name)-sub")
            do {
                return try await connect(name, rids, origin, edge, publisher, subscriber)
            } catch {
                // An SFU dropped with its loop running crashes the whole test process later.
                await Rig(origin: origin, edge: edge, publisher: publisher, subscriber: subscriber).close()
                throw error
            }
        }

        /// Starts a rig, runs `body`, and closes the rig whether `body` succeeded or threw.
        static func run(_ name: String, rids: [String] = ["q", "h", "f"], _ body: (Rig) async throws -> Void)
            async throws
        {
            let rig = try await start(name, rids: rids)
            do { try await body(rig) } catch {
                await rig.close()
                throw error
            }
            await rig.close()
        }

        private static func connect(
            _ name: String, _ rids: [String], _ origin: SFU, _ edge: SFU, _ publisher: SFUTestClient,
            _ subscriber: SFUTestClient
        ) async throws -> Rig {
            let producers = try await publisher.publish(to: origin, participantID: "alice", rids: rids)
            await publisher.startPump(layers: max(1, rids.count))
            let originAddress = try await origin.onLoop { try $0.openPipeOnLoop(id: "p") }
            let edgeAddress = try await edge.onLoop { try $0.openPipeOnLoop(id: "p") }
            try await origin.onLoop { try $0.connectPipeOnLoop(id: "p", remote: edgeAddress) }
            try await edge.onLoop { try $0.connectPipeOnLoop(id: "p", remote: originAddress) }
            for p in producers {
                let description = try await origin.onLoop { try $0.pipeProducerOnLoop(pipeID: "p", producerID: p.id) }
                let mirrored = try await edge.onLoop { try $0.addPipedProducerOnLoop(pipeID: "p", description) }
                #expect(mirrored.id == p.id)
                #expect(mirrored.rids == p.rids)
                #expect(mirrored.participantID == "alice")
                _ = try await edge.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: p.id) }
            }
            return Rig(
                origin: origin, edge: edge, publisher: publisher, subscriber: subscriber, originAddress: originAddress,
                edgeAddress: edgeAddress, producers: producers)
        }

        var video: ProducerInfo { producers.first { $0.kind == .video }! }

        func pipeStats(_ sfu: SFU) async -> SFUPipeStats.Counters {
            await sfu.stats().pipes.first { $0.id == "p" }?.counters ?? .init()
        }

        /// Subscribes bob on the edge and waits for the connection.
        func receive() async throws {
            await subscriber.startReceiving()
            try await subscriber.negotiateSubscription(with: edge, participantID: "bob")
            try await subscriber.connection.waitUntilConnected(timeout: 30)
        }

        /// Waits for `more` video frames at bob; on a timeout, what the SFUs saw goes with the error.
        func waitForMoreVideo(_ more: Int) async throws {
            let frames = subscriber.frames.videoFrames
            do { try await subscriber.waitForFrames(video: frames + more, seconds: 30) } catch {
                let e = await edge.stats()
                let o = await origin.stats()
                Issue.record(
                    """
                    video stalled at \(subscriber.frames.videoFrames): edge pipe \(e.pipes.map(\.counters)), \
                    edge producers \(e.producers), edge consumers \(e.consumers), origin pipe \(o.pipes.map(\.counters)), \
                    origin producers \(o.producers)
                    """)
                throw error
            }
        }

        func close() async {
            await publisher.close()
            await subscriber.close()
            await edge.shutdown()
            await origin.shutdown()
        }
    }

    /// Waits up to 30 s for `condition`.
    static func eventually(_ what: String, _ condition: () async -> Bool) async throws {
        let deadline = Date().addingTimeInterval(30)
        while !(await condition()) {
            if Date() > deadline { throw WaitTimeout(what: what) }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test func everyLayerCrossesThePipeAndAnEdgeViewerDecodesIt() async throws {
        try await Rig.run("pipe1") { rig in
            // Packets the origin sent before the edge mirrored their producer carry an SSRC the edge
            // does not know yet: counted and dropped. From here on every SSRC is known.
            let unknownAtStart = await rig.pipeStats(rig.edge).droppedUnknownSSRC
            let path = temporaryPath("pipe.webm")
            let recording = try Recording(path: path)
            await rig.subscriber.record(recording)
            try await rig.receive()
            try await rig.subscriber.waitForFrames(video: 60, audio: 100, seconds: 30)
            // Down to the lowest layer: the edge switches on its own copy of that layer's key frame.
            try await rig.edge.onLoop {
                try $0.setPreferredLayerOnLoop(subscriber: "bob", producerID: rig.video.id, quality: .low)
            }
            // The lowest layer by resolution (the test publisher names its layers in offer order, so
            // the smallest is "f"; the SFU orders them by their key frames' size once each has shown one).
            do {
                try await Self.eventually("bob switched to the lowest layer on the edge") {
                    let stats = await rig.edge.stats()
                    let layers = stats.producers.first { $0.id == rig.video.id }?.layers ?? []
                    guard layers.allSatisfy({ $0.width > 0 }), let lowest = layers.min(by: { $0.width < $1.width })
                    else { return false }
                    return stats.consumers.first { $0.producerID == rig.video.id }?.currentRID == lowest.rid
                }
            } catch {
                let e = await rig.edge.stats()
                let o = await rig.origin.stats()
                let consumers = e.consumers.filter { $0.producerID == rig.video.id }
                let mirrored = e.producers.filter { $0.id == rig.video.id }
                let source = o.producers.filter { $0.id == rig.video.id }
                Issue.record(
                    "edge consumers \(consumers), edge producer \(mirrored), origin producer \(source), edge pipe \(e.pipes.map(\.counters)), origin pipe \(o.pipes.map(\.counters))"
                )
                throw error
            }
            let switched = rig.subscriber.frames.videoFrames
            try await rig.subscriber.waitForFrames(video: switched + 30, seconds: 30)
            await rig.subscriber.stopReceiving()
            try recording.close()

            let edgeStats = await rig.edge.stats()
            let mirrored = try #require(edgeStats.producers.first { $0.id == rig.video.id })
            #expect(mirrored.layers.map(\.rid) == ["q", "h", "f"])
            for layer in mirrored.layers {
                #expect(layer.packets > 20, "layer \(layer.rid ?? "-") crosses the pipe")
                #expect(layer.keyframes >= 1)
                #expect(layer.width > 0)
            }
            let originPipe = await rig.pipeStats(rig.origin)
            let edgePipe = await rig.pipeStats(rig.edge)
            #expect(originPipe.packetsSent > 300)
            #expect(edgePipe.packetsReceived >= originPipe.packetsSent / 2)
            #expect(edgePipe.droppedMalformed == 0 && edgePipe.droppedUnknownSSRC == unknownAtStart)
            #expect(edgePipe.droppedUnknownAddress == 0)
            // The totals `/metrics` reads: the origin's pipe sends count as forwarded packets too.
            let originCounters = await rig.origin.counterSnapshot()
            #expect(originCounters.pipes == 1)
            #expect(originCounters.pipePacketsSent >= originPipe.packetsSent)
            #expect(originCounters.packetsOut >= originCounters.pipePacketsSent)
            #expect(edgeStats.counters.pipePacketsReceived > 0)
            #expect(edgeStats.counters.pipeDatagramsDropped == unknownAtStart)
            // The origin forwards the publisher's sender reports: the edge lines layers up with them.
            let upstream = try await rig.edge.onLoop { sfu in
                try #require(sfu.producers[rig.video.id]).senderReport(layer: 0) != nil
            }
            #expect(upstream, "a sender report crossed the pipe")
            // With the publisher's own relation, moved forward to when it was relayed (within the
            // publisher's own jitter, should its next report have come since).
            let originReport = try await rig.origin.onLoop { sfu in
                try #require(sfu.producers[rig.video.id]?.senderReport(layer: 0))
            }
            let edgeReport = try await rig.edge.onLoop { sfu in
                try #require(sfu.producers[rig.video.id]?.senderReport(layer: 0))
            }
            let gap = edgeReport.ntp.nanosecondsSince1900 - originReport.ntp.nanosecondsSince1900
            let ticks = Int64(Int32(bitPattern: edgeReport.rtpTimestamp &- originReport.rtpTimestamp))
            #expect(abs(ticks - gap * 90_000 / 1_000_000_000) <= 900, "relayed \(edgeReport), origin's \(originReport)")
            #expect(recording.videoFrames >= 60)
            let decode = try ffmpegDecodeErrors(path)
            #expect(decode.isEmpty, "ffmpeg reported decode errors: \(decode)")

            // Closing the origin's producer stops the tap; closing the pipe closes the mirrors.
            try await rig.origin.closeProducer(rig.video.id)
            #expect(await rig.origin.stats().pipes.first?.sending.contains(rig.video.id) == false)
            try await rig.edge.onLoop { $0.closePipeOnLoop(id: "p") }
            let after = await rig.edge.stats()
            #expect(after.producers.isEmpty)
            #expect(after.pipes.isEmpty)
        }
    }

    /// The plan's tree (docs/cluster.md): origin → relay edge → edge. The relay edge pipes its
    /// mirrored producers on; the last edge's viewer decodes what the origin's publisher sent, and
    /// its key-frame requests climb both hops.
    @Test func aRelayEdgePipesItsMirrorsOn() async throws {
        try await Rig.run("pipe5", rids: ["q", "h"]) { rig in
            let last = SFU(configuration: SFUConfiguration(loopName: "pipe5-last"))
            let viewer = try SFUTestClient(name: "pipe5-viewer")
            func close() async {
                await viewer.close()
                await last.shutdown()
            }
            do {
                let relayAddress = try await rig.edge.onLoop { try $0.openPipeOnLoop(id: "down") }
                let lastAddress = try await last.onLoop { try $0.openPipeOnLoop(id: "up") }
                try await rig.edge.onLoop { try $0.connectPipeOnLoop(id: "down", remote: lastAddress) }
                try await last.onLoop { try $0.connectPipeOnLoop(id: "up", remote: relayAddress) }
                for p in rig.producers {
                    let description = try await rig.edge.onLoop {
                        try $0.pipeProducerOnLoop(pipeID: "down", producerID: p.id)
                    }
                    let mirrored = try await last.onLoop { try $0.addPipedProducerOnLoop(pipeID: "up", description) }
                    #expect(mirrored.id == p.id && mirrored.rids == p.rids)
                    _ = try await last.onLoop { try $0.consumeOnLoop(subscriber: "carol", producerID: p.id) }
                }
                await viewer.startReceiving()
                try await viewer.negotiateSubscription(with: last, participantID: "carol")
                try await viewer.connection.waitUntilConnected(timeout: 30)
                try await viewer.waitForFrames(video: 40, audio: 60, seconds: 30)
                let plisBefore = await rig.pipeStats(rig.origin).plisReceived
                let keyframesBefore =
                    await last.stats().producers.first { $0.id == rig.video.id }?.layers[1].keyframes ?? 0
                try await last.onLoop { sfu in
                    try #require(sfu.producers[rig.video.id]).requestKeyframe(layer: 1, now: EventLoop.now())
                }
                try await Self.eventually("a key frame asked for two hops down arrived") {
                    let k = await last.stats().producers.first { $0.id == rig.video.id }?.layers[1].keyframes ?? 0
                    return k > keyframesBefore
                }
                #expect(await rig.pipeStats(rig.origin).plisReceived > plisBefore)
                let relayDown = await rig.edge.stats().pipes.first { $0.id == "down" }
                #expect((relayDown?.counters.packetsSent ?? 0) > 100)
                #expect(relayDown?.sending.sorted() == rig.producers.map(\.id).sorted())
            } catch {
                await close()
                throw error
            }
            await close()
        }
    }

    @Test func keyframeRequestsOfManyEdgeViewersReachTheOriginAsOne() async throws {
        try await Rig.run("pipe2", rids: []) { rig in
            try await rig.receive()
            try await rig.subscriber.waitForFrames(video: 30, seconds: 30)
            // Twenty more viewers on the edge, each asking for a key frame at once.
            let viewers = (1...20).map { "viewer\($0)" }
            for v in viewers {
                _ = try await rig.edge.onLoop { try $0.consumeOnLoop(subscriber: v, producerID: rig.video.id) }
            }
            let before = await rig.pipeStats(rig.origin)
            let keyframesBefore =
                await rig.edge.stats().producers.first { $0.id == rig.video.id }?.layers[0].keyframes ?? 0
            let requested = try await rig.edge.onLoop { sfu in
                let producer = try #require(sfu.producers[rig.video.id])
                let now = EventLoop.now()
                for c in producer.consumers { c.keyframeRequested(now: now) }
                return producer.consumers.count
            }
            #expect(requested == 21)
            try await Self.eventually("the requested key frame reached the edge") {
                let k = await rig.edge.stats().producers.first { $0.id == rig.video.id }?.layers[0].keyframes ?? 0
                return k > keyframesBefore
            }
            let after = await rig.pipeStats(rig.origin)
            let plis = after.plisReceived - before.plisReceived
            #expect(plis >= 1, "the request went upstream")
            #expect(plis <= 3, "21 viewers' requests came to \(plis) PLIs on the pipe")
            let edgeConsumerPLIs = await rig.edge.stats().consumers.reduce(UInt64(0)) { $0 + $1.plisReceived }
            #expect(edgeConsumerPLIs >= 21)
        }
    }

    @Test func lossOnThePipeIsRepairedFromTheOriginsCopy() async throws {
        try await Rig.run("pipe3", rids: []) { rig in
            // 5 % of what the origin sends on the pipe is lost.
            try await rig.origin.onLoop { sfu in
                try #require(sfu.pipes["p"]).socket.impairment = Impairment(up: LinkImpairment(loss: 0.05), seed: 7)
            }
            try await rig.receive()
            try await rig.subscriber.waitForFrames(video: 90, audio: 100, seconds: 30)
            try await Self.eventually("NACKs answered on the pipe") {
                let o = await rig.pipeStats(rig.origin)
                return o.nacksReceived > 0 && o.retransmissions > 0
            }
            try await Self.eventually("repairs arrived at the edge") {
                await rig.pipeStats(rig.edge).repairsReceived > 0
            }
            let edgePipe = await rig.pipeStats(rig.edge)
            #expect(edgePipe.nacksSent > 0)
            let dropped = try await rig.origin.onLoop { try #require($0.pipes["p"]).socket.sendDroppedByImpairment }
            #expect(dropped > 0)
            // Audio is not repaired (as from a publisher): only its losses stay lost.
            #expect(
                edgePipe.packetsLost < Int64(dropped),
                "lost \(edgePipe.packetsLost) of \(dropped) dropped: repairs \(edgePipe.repairsReceived)")
            let mirrored = await rig.edge.stats().producers.first { $0.id == rig.video.id }
            // Repairs arrive as the lost packets themselves: the edge stores and forwards them.
            #expect((mirrored?.nacksSent ?? 0) > 0)
            let frames = rig.subscriber.frames.videoFrames
            try await rig.subscriber.waitForFrames(video: frames + 30, seconds: 30)
        }
    }

    @Test func badDatagramsOnThePipeAreCountedAndDropped() async throws {
        try await Rig.run("pipe4", rids: []) { rig in
            try await rig.receive()
            try await rig.subscriber.waitForFrames(video: 20, seconds: 30)
            let edgeAddress = rig.edgeAddress
            // From the origin's own pipe socket (the accepted address): garbage of every kind.
            let rtpUnknownSSRC: [UInt8] = [0x80, 100, 0, 1, 0, 0, 0, 1, 0xDE, 0xAD, 0xBE, 0xEF, 1, 2, 3]
            let csrcOverrun: [UInt8] = [0x8F, 100, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]
            let badRTCP: [UInt8] = [0x80, 200, 0xFF, 0xFF, 0, 0, 0, 1, 0, 0, 0, 0]
            let datagrams: [[UInt8]] = [
                [0], [0x80, 100], Array(repeating: 0x17, count: 40), rtpUnknownSSRC, csrcOverrun, badRTCP,
                (0..<1400).map { UInt8(truncatingIfNeeded: $0 &* 31) },
            ]
            let before = await rig.pipeStats(rig.edge)
            try await rig.origin.onLoop { sfu in
                let socket = try #require(sfu.pipes["p"]).socket
                for d in datagrams { socket.send(d, to: edgeAddress) }
            }
            // From a stranger: dropped before it is read.
            final class Ignore: DatagramHandler {
                func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {}
            }
            let strangerLoop = EventLoop(name: "pipe4-stranger")
            let stranger = try strangerLoop.openUDP(bindTo: SocketAddress(ip: "127.0.0.1", port: 0)!, handler: Ignore())
            await strangerLoop.submit {
                for d in datagrams { stranger.send(d, to: edgeAddress) }
            }
            try await Self.eventually("the bad datagrams counted") {
                let c = await rig.pipeStats(rig.edge)
                let bad =
                    (c.droppedMalformed - before.droppedMalformed) + (c.droppedUnknownSSRC - before.droppedUnknownSSRC)
                return bad >= UInt64(datagrams.count) && c.droppedUnknownAddress - before.droppedUnknownAddress >= 7
            }
            let after = await rig.pipeStats(rig.edge)
            #expect(after.droppedUnknownSSRC - before.droppedUnknownSSRC >= 1)
            // None of those touched a stream: media goes on.
            try await rig.waitForMoreVideo(20)

            // Seeded random datagrams that pass the address check, both ways: RTP on the pipe's own
            // SSRCs with random headers and payloads to the edge, random RTCP feedback (NACK, PLI, SR,
            // lengths) on those SSRCs to the origin. Read, counted or answered; never a crash.
            let ssrcs = try await rig.origin.onLoop { sfu in Array(try #require(sfu.pipes["p"]).outboundBySSRC.keys) }
            var random = SplitMix64(seed: 38)
            func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) } }
            func put(_ ssrc: UInt32, _ d: inout [UInt8], at i: Int) {
                for k in 0..<4 { d[i + k] = UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * UInt32(k))) }
            }
            var toEdge: [[UInt8]] = []
            var toOrigin: [[UInt8]] = []
            for i in 0..<600 {
                let ssrc = ssrcs[i % ssrcs.count]
                var rtp = bytes(12 + Int(random.next() % 1200))
                rtp[0] = 0x80 | (rtp[0] & 0x3F)
                if i % 2 == 0 { rtp[1] = (rtp[1] & 0x80) | SFUPipe.payloadType }
                put(ssrc, &rtp, at: 8)
                toEdge.append(rtp)
                var rtcp = bytes(12 + 4 * Int(random.next() % 8))
                rtcp[0] = 0x80 | (rtcp[0] & 0x3F)
                rtcp[1] = [200, 201, 205, 206][i % 4]
                if i % 3 != 0 {
                    rtcp[2] = 0
                    rtcp[3] = UInt8(rtcp.count / 4 - 1)
                }
                put(ssrc, &rtcp, at: 8)
                toOrigin.append(rtcp)
            }
            let (sentToEdge, sentToOrigin) = (toEdge, toOrigin)
            let originAddress = rig.originAddress
            try await rig.origin.onLoop { sfu in
                let socket = try #require(sfu.pipes["p"]).socket
                for d in sentToEdge { socket.send(d, to: edgeAddress) }
            }
            try await rig.edge.onLoop { sfu in
                let socket = try #require(sfu.pipes["p"]).socket
                for d in sentToOrigin { socket.send(d, to: originAddress) }
            }
            try await Self.eventually("the random datagrams read") {
                let e = await rig.pipeStats(rig.edge)
                let o = await rig.pipeStats(rig.origin)
                return e.packetsReceived - after.packetsReceived >= 300 && o.packetsReceived >= 300
            }
            // Both loops still run (random sequence numbers on a live stream may stall it, as they would
            // from a publisher: the pipe trusts what its connected origin sends about its own streams).
            #expect(await rig.edge.stats().pipes.count == 1)
            #expect(await rig.origin.stats().pipes.count == 1)
            stranger.close()
            strangerLoop.shutdown()

            // Bad control input: clear errors, nothing changes.
            await #expect(throws: SFUError.unknownPipe("nope")) {
                try await rig.edge.onLoop { try $0.connectPipeOnLoop(id: "nope", remote: rig.originAddress) }
            }
            await #expect(throws: SFUError.badPipedProducer(rig.video.id)) {
                let again = SFUPipedProducer(
                    producerID: rig.video.id, participantID: "alice", kind: .video, source: .webcam, codec: .vp8,
                    codecParameters: nil, rids: [], ssrcs: [5], mid: "0", audioLevelExtensionID: 0,
                    captureTimeExtensionID: 0)
                _ = try await rig.edge.onLoop { try $0.addPipedProducerOnLoop(pipeID: "p", again) }
            }
            await #expect(throws: SFUError.badPipedProducer("x")) {
                let mismatched = SFUPipedProducer(
                    producerID: "x", participantID: "alice", kind: .video, source: .webcam, codec: .vp8,
                    codecParameters: nil, rids: ["q", "h"], ssrcs: [5], mid: "0", audioLevelExtensionID: 0,
                    captureTimeExtensionID: 0)
                _ = try await rig.edge.onLoop { try $0.addPipedProducerOnLoop(pipeID: "p", mismatched) }
            }
        }
    }
}
