import Foundation
import Media
import RTC
import RTCWire
import TestSupport
import Testing

@testable import SFU

@Suite(.serialized) struct SFUH264Tests {
    /// A publisher that negotiated H.264 only: its offer lists H.264 alone.
    private static func publishH264(_ client: SFUTestClient, to sfu: SFU) async throws -> ProducerInfo {
        let pc = client.connection
        let (offer, _) = try await client.loop.submit { () throws -> (SessionDescription, RTPTransceiver) in
            let t = pc.addTransceiver(kind: .video, direction: .sendonly)
            t.setCodecPreferences([.h264])
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return (o, t)
        }
        let (answer, producers) = try await sfu.publish(participantID: "alice", offer: offer)
        try await client.accept(answer: answer)
        try await pc.waitUntilConnected(timeout: 20)
        return try #require(producers.first)
    }

    @Test func anH264ProducerIsForwardedAndRecordedAsMatroska() async throws {
        let frames = try x264AccessUnits(seconds: 2)
        #expect(frames.count == 60 && frames[0].isKeyframe)
        let sfu = SFU()
        let publisher = try SFUTestClient(name: "h264-pub")
        let subscriber = try SFUTestClient(name: "h264-sub")
        let refused = RefusedLog()
        sfu.onConsumerRefused = { _, producer, _ in refused.add(producer) }
        let producer = try await Self.publishH264(publisher, to: sfu)
        #expect(producer.codec == .h264)
        _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: producer.id) }
        let path = temporaryPath("sfu-h264.mkv")
        defer { unlink(path) }
        let pc = publisher.connection
        let recording = try await subscriber.recordSubscription(with: sfu, participantID: "bob", path: path) {
            // The clip twice (a key frame every 30 frames), paced at 30 fps.
            for (i, frame) in (frames + frames).enumerated() {
                var next = frame
                next.timestamp = UInt32(i) * 3000
                let f = next
                await pc.loop.submit {
                    if let t = pc.transceivers.first(where: { $0.kind == .video }) { pc.send(f, on: t) }
                }
                try await Task.sleep(nanoseconds: 33_000_000)
            }
            try await subscriber.waitForFrames(video: 60, seconds: 20)
        }
        #expect(recording.videoCodec == .h264)
        #expect(recording.path.hasSuffix(".mkv"))
        let counts = try probeFrameCounts(recording.path)
        #expect(counts["h264"] ?? 0 >= 60, "\(counts)")
        #expect(try ffmpegDecodeErrors(recording.path) == "")
        #expect(refused.producers.isEmpty)
        await publisher.close()
        await subscriber.close()
        await sfu.shutdown()
    }

    @Test func aSubscriberWithoutH264RefusesAndIsReported() async throws {
        let sfu = SFU()
        let publisher = try SFUTestClient(name: "h264-pub2")
        let subscriber = try SFUTestClient(name: "h264-sub2")
        let refused = RefusedLog()
        sfu.onConsumerRefused = { subscriberID, producer, codec in
            refused.add("\(subscriberID) \(producer) \(codec)")
        }
        let producer = try await Self.publishH264(publisher, to: sfu)
        _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: producer.id) }
        // Bob takes VP8 only.
        let spc = subscriber.connection
        await subscriber.loop.submit {
            spc.addTransceiver(kind: .video, direction: .recvonly).setCodecPreferences([.vp8])
        }
        let offer = try await sfu.onLoop { try $0.subscriberOfferOnLoop(participantID: "bob") }
        let video = offer.media.first { $0.kind == .video }
        #expect(video?.codecs.compactMap(\.mediaCodec) == [.h264])
        let answer = try await subscriber.answer(offer)
        try await sfu.onLoop { try $0.subscriberAnswerOnLoop(participantID: "bob", answer: answer) }
        #expect(refused.producers == ["bob \(producer.id) h264"])
        #expect(await sfu.loop.submit { sfu.counters.consumersRefused } == 1)
        await publisher.close()
        await subscriber.close()
        await sfu.shutdown()
    }
}

private final class RefusedLog: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ s: String) { lock.withLock { items.append(s) } }
    var producers: [String] { lock.withLock { items } }
}
