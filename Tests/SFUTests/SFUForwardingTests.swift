import Foundation
import Media
import RTC
import RTCWire
import TestSupport
import Testing

@testable import SFU

/// Real connections over loopback: a Swift publisher sends the synthetic VP8/Opus loop into the SFU,
/// a Swift subscriber receives what the SFU forwards and records it; ffprobe/ffmpeg check the file.
@Suite(.serialized) struct SFUForwardingTests {
    @Test func publishedMediaIsForwardedAndRecordsCleanly() async throws {
        let sfu = SFU()
        let publisher = try SFUTestClient(name: "sfu-pub")
        let subscriber = try SFUTestClient(name: "sfu-sub")
        let producers = try await publisher.publish(to: sfu, participantID: "alice")
        #expect(producers.map(\.kind).sorted { $0.rawValue < $1.rawValue } == [.audio, .video])
        #expect(producers.first { $0.kind == .video }?.source == .webcam)
        #expect(producers.first { $0.kind == .audio }?.source == .microphone)
        await publisher.startPump(layers: 1)

        for p in producers {
            let info = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: p.id) }
            #expect(info.renegotiationNeeded)
            #expect(info.publisherID == "alice")
        }
        let path = temporaryPath("sfu.webm")
        let recording = try await subscriber.recordSubscription(with: sfu, participantID: "bob", path: path) {
            try await Task.sleep(for: .seconds(3))
        }

        let stats = await sfu.stats()
        #expect(stats.counters.packetsIn > 100)
        #expect(stats.counters.packetsOut > 100)
        #expect(stats.consumers.count == 2)
        let audioProducer = stats.producers.first { $0.kind == .audio }
        #expect(audioProducer?.audioLevel != nil, "the publisher's audio-level extension is exposed")
        #expect(recording.videoFrames >= 60, "video frames recorded: \(recording.videoFrames)")
        #expect(recording.audioFrames >= 100, "audio frames recorded: \(recording.audioFrames)")
        let probe = try runToolText(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", path,
            ])
        #expect(probe.contains("vp8"))
        #expect(probe.contains("opus"))
        let decode = try ffmpegDecodeErrors(path)
        #expect(decode.isEmpty, "ffmpeg reported decode errors: \(decode)")

        await publisher.close()
        await subscriber.close()
        await sfu.shutdown()
    }

    @Test func nothingFlowsBeforeConsumeAndStopsAfterStopConsuming() async throws {
        let sfu = SFU()
        let log = SFUFrameLog()
        sfu.onRenegotiationNeeded = { id in log.renegotiate(id) }
        let publisher = try SFUTestClient(name: "sfu-pub2")
        let subscriber = try SFUTestClient(name: "sfu-sub2")
        let producers = try await publisher.publish(to: sfu, participantID: "alice")
        await publisher.startPump(layers: 1)
        try await Task.sleep(for: .seconds(1))
        let idle = await sfu.stats().counters
        #expect(idle.packetsIn > 50, "the publisher's media reaches the SFU")
        #expect(idle.packetsOut == 0, "nothing is forwarded without a consumer")

        guard let video = producers.first(where: { $0.kind == .video }),
            let audio = producers.first(where: { $0.kind == .audio })
        else {
            Issue.record("expected an audio and a video producer")
            return
        }
        _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: video.id) }
        _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: audio.id) }
        #expect(log.renegotiationRequests.contains("bob"))
        let frames = subscriber.frames
        await subscriber.startReceiving()
        try await subscriber.negotiateSubscription(with: sfu, participantID: "bob")
        try await subscriber.connection.waitUntilConnected(timeout: 10)
        try await Task.sleep(for: .seconds(1.5))
        #expect(frames.videoFrames > 20)
        #expect(frames.audioFrames > 40)

        let before = log.renegotiationRequests.count
        try await sfu.onLoop { try $0.stopConsumingOnLoop(subscriber: "bob", producerID: video.id) }
        #expect(log.renegotiationRequests.count == before + 1)
        try await subscriber.negotiateSubscription(with: sfu, participantID: "bob")
        try await Task.sleep(for: .seconds(0.3))
        let videoAfterStop = frames.videoFrames
        let audioAfterStop = frames.audioFrames
        try await Task.sleep(for: .seconds(1))
        #expect(frames.videoFrames == videoAfterStop, "video stops after stopConsuming")
        #expect(frames.audioFrames > audioAfterStop + 20, "audio keeps flowing")
        await #expect(throws: SFUError.self) {
            try await sfu.onLoop { try $0.stopConsumingOnLoop(subscriber: "bob", producerID: video.id) }
        }

        await publisher.close()
        await subscriber.close()
        await sfu.shutdown()
    }

    @Test func simulcastLayerSwitchDecodesCleanlyAndChangesResolution() async throws {
        let setup = try await SFUForwardingSetup.start("sfu3", rids: ["q", "h", "f"], audio: false)
        let (sfu, subscriber) = (setup.sfu, setup.subscriber)
        let video = try #require(setup.producers.first)
        #expect(video.rids == ["q", "h", "f"])
        let path = temporaryPath("simulcast.webm")
        _ = try await subscriber.recordSubscription(with: sfu, participantID: "bob", path: path) {
            try await Task.sleep(for: .seconds(2))
            try await sfu.onLoop {
                try $0.setPreferredLayerOnLoop(subscriber: "bob", producerID: video.id, quality: .low)
            }
            try await Task.sleep(for: .seconds(2))
            try await sfu.onLoop {
                try $0.setViewportOnLoop(subscriber: "bob", producerID: video.id, width: 300, height: 170)
            }
            try await Task.sleep(for: .seconds(2))
        }

        let stats = await sfu.stats()
        let layers = stats.producers.first?.layers ?? []
        #expect(layers.count == 3)
        #expect(layers.allSatisfy { $0.packets > 0 }, "all three layers reach the SFU")
        let consumer = stats.consumers.first
        #expect((consumer?.layerSwitches ?? 0) >= 2, "switched high → low → medium")

        let frames = try runToolText(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-select_streams", "v", "-show_entries", "frame=width,height", "-of", "csv=p=0",
                path,
            ])
        var sizes: [String] = []
        for line in frames.split(separator: "\n") where sizes.last != String(line) { sizes.append(String(line)) }
        // Synthetic layers: 640x360, 320x180, 160x90.
        #expect(sizes == ["640,360", "160,90", "320,180"], "resolution sequence: \(sizes)")
        let decode = try ffmpegDecodeErrors(path)
        #expect(decode.isEmpty, "ffmpeg reported decode errors across the switch: \(decode)")

        await setup.close()
    }

    @Test func subscriberNACKsAreAnsweredByTheConsumer() async throws {
        let setup = try await SFUForwardingSetup.start("sfu4", audio: false)
        let (sfu, subscriber) = (setup.sfu, setup.subscriber)
        // 5 % seeded loss on everything the subscriber's socket receives (set before it opens).
        let loop = subscriber.loop
        await loop.submit { loop.impairment = Impairment(receiveDropRate: 0.05, seed: 7) }
        let path = temporaryPath("nack.webm")
        let recording = try await subscriber.recordSubscription(
            with: sfu, participantID: "bob", path: path, connectTimeout: 15
        ) { try await Task.sleep(for: .seconds(3)) }
        let pc = subscriber.connection

        let stats = await sfu.stats()
        let consumer = stats.consumers.first
        #expect((consumer?.nacksReceived ?? 0) > 0, "the subscriber NACKed the dropped packets")
        #expect((consumer?.retransmissions ?? 0) > 0, "the consumer resent them from its history")
        #expect(stats.counters.nacksReceived > 0)
        let repaired = await loop.submit { pc.receiverStats().reduce(0) { $0 + $1.stats.retransmissionsReceived } }
        #expect(repaired > 0, "retransmissions reached the subscriber")
        #expect(recording.videoFrames > 60)
        let decode = try ffmpegDecodeErrors(path)
        #expect(decode.isEmpty, "ffmpeg reported decode errors: \(decode)")

        await setup.close()
    }
    @Test func connectionsBindInsideTheConfiguredPortRange() async throws {
        let sfu = SFU(configuration: SFUConfiguration(portRange: 47810...47812))
        let publisher = try SFUTestClient(name: "sfu-pub5")
        _ = try await publisher.publish(to: sfu, participantID: "alice", audio: false)
        let remote = await sfu.loop.submit { [sfu] in
            sfu.participants["alice"]?.publishConnection?.localAddress?.port
        }
        #expect(remote.map { (47810...47812).contains($0) } == true, "SFU port \(String(describing: remote))")
        await publisher.close()
        await sfu.shutdown()
    }
    /// `--udp-port N`: every connection of every participant shares one port, demultiplexed by
    /// ICE ufrag and then by the validated source address; media still flows end to end.
    @Test func allConnectionsShareOnePort() async throws {
        let port: UInt16 = 47830
        let setup = try await SFUForwardingSetup.start(
            "sfu-mux", sfu: SFU(configuration: SFUConfiguration(portRange: port...port)))
        let (sfu, subscriber) = (setup.sfu, setup.subscriber)
        let frames = subscriber.frames
        await subscriber.startReceiving()
        try await subscriber.negotiateSubscription(with: sfu, participantID: "bob")
        try await subscriber.connection.waitUntilConnected(timeout: 10)
        try await Task.sleep(for: .seconds(2))
        await subscriber.stopReceiving()
        let ports = await sfu.loop.submit { [sfu] in
            [
                sfu.participants["alice"]?.publishConnection?.localAddress?.port,
                sfu.participants["bob"]?.subscribeConnection?.localAddress?.port,
            ]
        }
        #expect(ports == [port, port], "both server connections on the shared port: \(ports)")
        #expect(frames.videoFrames >= 30, "video frames through the shared port: \(frames.videoFrames)")
        #expect(frames.audioFrames >= 50, "audio frames through the shared port: \(frames.audioFrames)")
        await setup.close()
    }

    @Test func subscriberKeyframeRequestsReachThePublisherThrottled() async throws {
        let setup = try await SFUForwardingSetup.start("sfu6", audio: false)
        let (sfu, publisher, subscriber) = (setup.sfu, setup.publisher, setup.subscriber)
        try await subscriber.negotiateSubscription(with: sfu, participantID: "bob")
        try await subscriber.connection.waitUntilConnected(timeout: 10)
        try await Task.sleep(for: .seconds(1))
        let pub = publisher.connection
        let plisAtPublisherBefore = await publisher.loop.submit {
            pub.senderStats().reduce(0) { $0 + $1.stats.plisReceived }
        }
        // Ten requests in one instant, then one 600 ms later: two PLIs go upstream.
        let counts = await sfu.loop.submit { [sfu] () -> (before: UInt64, burst: UInt64, later: UInt64) in
            guard let consumer = sfu.participants["bob"]?.consumers.first else { return (0, 0, 0) }
            let before = consumer.producer.plisSent
            let t = EventLoop.now() + 10_000_000_000
            for _ in 0..<10 { consumer.keyframeRequested(now: t) }
            let burst = consumer.producer.plisSent
            consumer.keyframeRequested(now: t + 600_000_000)
            return (before, burst, consumer.producer.plisSent)
        }
        #expect(counts.burst == counts.before + 1, "a burst of requests sends one PLI")
        #expect(counts.later == counts.before + 2, "a request after the interval sends another")
        try await Task.sleep(for: .seconds(0.5))
        let plisAtPublisher = await publisher.loop.submit {
            pub.senderStats().reduce(0) { $0 + $1.stats.plisReceived }
        }
        #expect(plisAtPublisher > plisAtPublisherBefore, "the PLI reached the publisher")
        let stats = await sfu.stats()
        #expect(stats.consumers.first?.plisReceived == 11)

        await setup.close()
    }

    @Test func closingAPublisherRemovesItsProducersFromSubscribers() async throws {
        let sfu = SFU()
        let log = SFUFrameLog()
        let publisher = try SFUTestClient(name: "sfu-pub7")
        let producers = try await publisher.publish(to: sfu, participantID: "alice")
        for p in producers { _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: p.id) } }
        sfu.onRenegotiationNeeded = { id in log.renegotiate(id) }
        guard let audio = producers.first(where: { $0.kind == .audio }) else {
            Issue.record("no audio producer")
            return
        }
        try await sfu.closeProducer(audio.id)
        var stats = await sfu.stats()
        #expect(stats.producers.count == 1)
        #expect(stats.consumers.count == 1)
        #expect(log.renegotiationRequests == ["bob"])
        await #expect(throws: SFUError.self) {
            _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "carol", producerID: audio.id) }
        }

        await sfu.closeParticipant("alice")
        stats = await sfu.stats()
        #expect(stats.producers.isEmpty)
        #expect(stats.consumers.isEmpty)
        #expect(log.renegotiationRequests == ["bob", "bob"])
        let states = await sfu.connectionStates(participantID: "alice")
        #expect(states.publish == nil)

        await publisher.close()
        await sfu.shutdown()
    }

    /// The SFU reports each state change of a participant's connection, with its role: the room
    /// layer watches WHIP/WHEP transports by these events instead of polling.
    @Test func connectionStateChangesAreReportedPerParticipantAndRole() async throws {
        let sfu = SFU()
        final class Seen: @unchecked Sendable {
            let lock = NSLock()
            var events: [String] = []
        }
        let log = Seen()
        sfu.onConnectionStateChanged = { id, role, state in
            log.lock.withLock { log.events.append("\(id):\(role):\(state.rawValue)") }
        }
        let publisher = try SFUTestClient(name: "sfu-pub-state")
        _ = try await publisher.publish(to: sfu, participantID: "alice")
        try await waitUntil("alice's publish connection reported connected") {
            log.lock.withLock { log.events.contains("alice:publish:connected") }
        }
        await sfu.closeParticipant("alice")
        try await waitUntil("alice's publish connection reported closed") {
            log.lock.withLock { log.events.contains("alice:publish:closed") }
        }
        #expect(log.lock.withLock { log.events.allSatisfy { $0.hasPrefix("alice:publish:") } })
        await publisher.close()
        await sfu.shutdown()
    }

    /// protocol.md: the m-line of a closed producer stays in the session and is ignored, even when the
    /// client still offers it sendonly; only genuinely new m-lines become producers.
    @Test func aClosedProducersMLineNeverBecomesANewTrack() async throws {
        let sfu = SFU()
        let publisher = try SFUTestClient(name: "sfu-pub8")
        let producers = try await publisher.publish(to: sfu, participantID: "alice")
        let audio = try #require(producers.first { $0.kind == .audio })
        try await sfu.closeProducer(audio.id)
        let pc = publisher.connection
        let offer = try await publisher.loop.submit {
            _ = pc.addTransceiver(kind: .audio, direction: .sendonly)
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return o
        }
        let (answer, created) = try await sfu.publish(participantID: "alice", offer: offer)
        try await publisher.loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
        #expect(created.map(\.kind) == [.audio], "only the new m-line is a new producer: \(created)")
        #expect(created.first?.id != audio.id)
        let stats = await sfu.stats()
        #expect(stats.producers.count == 2)
        await publisher.close()
        await sfu.shutdown()
    }

    @Test func aClosedProducersReceiveStreamsAreFreedWhileItsConnectionStays() async throws {
        // A guest back in the audience keeps its publish connection; what its closed producers
        // received on must not stay behind (issue 11's memory over ten minutes of invites).
        let sfu = SFU()
        let publisher = try SFUTestClient(name: "sfu-pub9")
        let producers = try await publisher.publish(to: sfu, participantID: "alice")
        let video = try #require(producers.first { $0.kind == .video })
        await publisher.startPump(layers: 1)
        func streams() async -> (video: Int, audio: Int, unroutable: UInt64) {
            await sfu.loop.submit {
                guard let participant = sfu.participants["alice"], let pc = participant.publishConnection else {
                    return (0, 0, 0)
                }
                let count = { (kind: MediaKind) in
                    pc.transceivers.filter { $0.kind == kind }.reduce(0) {
                        $0 + pc.transport.receiverStats(on: $1).count
                    }
                }
                return (count(.video), count(.audio), pc.transport.counters.droppedUnroutable)
            }
        }
        var deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let now = await streams()
            if now.video > 0 && now.audio > 0 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let before = await streams()
        #expect(before.video == 1 && before.audio == 1, "both m-lines receive: \(before)")
        try await sfu.closeProducer(video.id)
        let after = await streams()
        #expect(after.video == 0 && after.audio == 1, "the video stream went, the audio one stays: \(after)")
        // The publisher still sends video; it is dropped, and no new stream takes its place.
        deadline = Date().addingTimeInterval(20)
        while await streams().unroutable < after.unroutable + 20, Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let later = await streams()
        #expect(later.unroutable >= after.unroutable + 20 && later.video == 0, "\(later)")
        let remaining = await sfu.stats().producers.map(\.kind)
        #expect(remaining == [.audio])
        await publisher.close()
        await sfu.shutdown()
    }
}
