import Foundation
import RTC
import RTCWire
import TestSupport
import Testing

@testable import SFU

/// A live stream's guests come and go: the m-lines of the tracks a subscriber no longer receives carry
/// the next guest's tracks, so the subscribe offer stays the size of the stage.
@Suite("SFU m-line reuse")
struct SFUMLineReuseTests {
    /// Video frames per receiving mid of the subscriber.
    final class MidLog: @unchecked Sendable {
        private let lock = NSLock()
        private var frames: [String: Int] = [:]
        func add(_ mid: String?) { lock.withLock { frames[mid ?? "?", default: 0] += 1 } }
        func count(_ mid: String) -> Int { lock.withLock { frames[mid] ?? 0 } }
    }

    @Test func successiveGuestsReuseTheSubscribersMLinesAndTheirMediaFlows() async throws {
        let sfu = SFU()
        let subscriber = try SFUTestClient(name: "sfu-reuse-sub")
        let log = MidLog()
        let pc = subscriber.connection
        await subscriber.loop.submit { pc.onFrame = { t, _, _, _ in log.add(t.mid) } }
        var videoMids: [String] = []
        var audioMids: [String] = []
        var mediaSections: [Int] = []
        for round in 0..<4 {
            let guest = try SFUTestClient(name: "sfu-reuse-guest-\(round)")
            let producers = try await guest.publish(to: sfu, participantID: "guest-\(round)")
            await guest.startPump(layers: 1)
            var mids: [MediaKind: String] = [:]
            for p in producers { mids[p.kind] = try await sfu.consume(subscriber: "bob", producerID: p.id).mid }
            let offer = try await sfu.subscriberOffer(participantID: "bob")
            mediaSections.append(offer.media.count)
            let answer = try await subscriber.loop.submit {
                try pc.setRemoteDescription(offer, type: .offer)
                let a = try pc.createAnswer()
                try pc.setLocalDescription(a)
                return a
            }
            try await sfu.subscriberAnswer(participantID: "bob", answer: answer)
            try await pc.waitUntilConnected(timeout: 20)
            let video = try #require(mids[.video])
            let before = log.count(video)
            try await waitUntil("guest \(round)'s video on mid \(video)", seconds: 30) {
                log.count(video) > before + 10
            }
            videoMids.append(video)
            audioMids.append(try #require(mids[.audio]))

            // The guest leaves the stage: its m-lines go inactive at the next negotiation.
            await sfu.closeParticipant("guest-\(round)")
            await guest.close()
            try await subscriber.negotiateSubscription(with: sfu, participantID: "bob")
        }
        #expect(Set(videoMids).count == 1, "every guest's video on one m-line: \(videoMids)")
        #expect(Set(audioMids).count == 1, "every guest's audio on one m-line: \(audioMids)")
        #expect(mediaSections == [2, 2, 2, 2], "the offer does not grow with the guests")
        await subscriber.close()
        await sfu.shutdown()
    }

    @Test func anMLineIsReusedOnlyOnceTheSubscriberAgreedItIsInactive() async throws {
        let sfu = SFU()
        let subscriber = try SFUTestClient(name: "sfu-reuse-sub2")
        let first = try SFUTestClient(name: "sfu-reuse-first")
        let second = try SFUTestClient(name: "sfu-reuse-second")
        let a = try #require(try await first.publish(to: sfu, participantID: "a", audio: false).first)
        let b = try #require(try await second.publish(to: sfu, participantID: "b", audio: false).first)
        let consumerA = try await sfu.consume(subscriber: "bob", producerID: a.id)
        try await subscriber.negotiateSubscription(with: sfu, participantID: "bob")
        try await sfu.stopConsuming(subscriber: "bob", producerID: a.id)
        // Not yet answered: the m-line may still be receiving at the subscriber, so a new one is added.
        let consumerB = try await sfu.consume(subscriber: "bob", producerID: b.id)
        #expect(consumerB.mid != consumerA.mid)
        try await subscriber.negotiateSubscription(with: sfu, participantID: "bob")
        // Now agreed inactive: the next track takes it.
        try await sfu.stopConsuming(subscriber: "bob", producerID: b.id)
        let again = try await sfu.consume(subscriber: "bob", producerID: a.id)
        #expect(again.mid == consumerA.mid)
        let offer = try await sfu.subscriberOffer(participantID: "bob")
        #expect(offer.media.count == 2)
        await first.close()
        await second.close()
        await subscriber.close()
        await sfu.shutdown()
    }
}
