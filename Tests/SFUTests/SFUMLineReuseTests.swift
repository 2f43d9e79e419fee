import Foundation
import RTC
import RTCWire
import TestSupport
import Testing

@testable import SFU

/// A live stream's guests come and go: the m-lines of the tracks a subscriber no longer receives carry
/// the next guest's tracks, so the subscribe offer stays the size of the stage. They are recycled as
/// JSEP does (RFC 8829 §5.2.2): rejected (port 0) first, then taken over under a new mid, so every
/// stack sees a new transceiver (aiortc raises no new track for a mid that comes back, issue 32).
@Suite("SFU m-line reuse")
struct SFUMLineReuseTests {
    /// Video frames per receiving mid of the subscriber.
    final class MidLog: @unchecked Sendable {
        private let lock = NSLock()
        private var frames: [String: Int] = [:]
        func add(_ mid: String?) { lock.withLock { frames[mid ?? "?", default: 0] += 1 } }
        func count(_ mid: String) -> Int { lock.withLock { frames[mid] ?? 0 } }
    }

    @Test func successiveGuestsReuseTheSubscribersMLinesUnderNewMidsAndTheirMediaFlows() async throws {
        let sfu = SFU()
        let subscriber = try SFUTestClient(name: "sfu-reuse-sub")
        let log = MidLog()
        let pc = subscriber.connection
        await subscriber.loop.submit { pc.onFrame = { t, _, _, _ in log.add(t.mid) } }
        var mids: [String] = []
        var videoIndexes: [Int] = []
        var mediaSections: [Int] = []
        for round in 0..<4 {
            let guest = try SFUTestClient(name: "sfu-reuse-guest-\(round)")
            let producers = try await guest.publish(to: sfu, participantID: "guest-\(round)")
            await guest.startPump(layers: 1)
            var byKind: [MediaKind: String] = [:]
            for p in producers {
                byKind[p.kind] = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: p.id) }.mid
            }
            let offer = try await sfu.onLoop { try $0.subscriberOfferOnLoop(participantID: "bob") }
            mediaSections.append(offer.media.count)
            let answer = try await subscriber.loop.submit {
                try pc.setRemoteDescription(offer, type: .offer)
                let a = try pc.createAnswer()
                try pc.setLocalDescription(a)
                return a
            }
            try await sfu.onLoop { try $0.subscriberAnswerOnLoop(participantID: "bob", answer: answer) }
            try await pc.waitUntilConnected(timeout: 20)
            let video = try #require(byKind[.video])
            try await waitUntil("guest \(round)'s video on mid \(video)", seconds: 30) { log.count(video) > 10 }
            mids += [video, try #require(byKind[.audio])]
            videoIndexes.append(try #require(offer.media.firstIndex { $0.mid == video }))

            // The guest leaves the stage: its m-lines are rejected at the next negotiation (the
            // first m-line, the BUNDLE tag, only goes inactive).
            await sfu.closeParticipant("guest-\(round)")
            await guest.close()
            try await subscriber.negotiateSubscription(with: sfu, participantID: "bob")
        }
        #expect(Set(mids).count == mids.count, "every track on a new mid: \(mids)")
        #expect(Set(videoIndexes.dropFirst()).count == 1, "later guests' video on one m-line: \(videoIndexes)")
        #expect(mediaSections == [2, 3, 3, 3], "the offer does not grow past the stage and the first m-line")
        let transceivers = await subscriber.loop.submit { pc.transceivers.count }
        #expect(transceivers == 3, "the subscriber forgets the transceivers of recycled m-lines")
        await subscriber.close()
        await sfu.shutdown()
    }

    @Test func anMLineIsReusedUnderANewMidOnlyOnceTheSubscriberAnsweredItsRejection() async throws {
        let sfu = SFU()
        let subscriber = try SFUTestClient(name: "sfu-reuse-sub2")
        let first = try SFUTestClient(name: "sfu-reuse-first")
        let second = try SFUTestClient(name: "sfu-reuse-second")
        let a = try #require(try await first.publish(to: sfu, participantID: "a", audio: false).first)
        let b = try #require(try await second.publish(to: sfu, participantID: "b", audio: false).first)
        let consumerA = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: a.id) }
        let consumerB = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: b.id) }
        try await subscriber.negotiateSubscription(with: sfu, participantID: "bob")

        try await sfu.onLoop { try $0.stopConsumingOnLoop(subscriber: "bob", producerID: b.id) }
        // Not yet answered: the m-line may still be receiving at the subscriber, so a new one is added.
        let again = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: b.id) }
        #expect(again.mid != consumerB.mid)
        let offer = try await sfu.onLoop { try $0.subscriberOfferOnLoop(participantID: "bob") }
        #expect(offer.media.map(\.mid) == [consumerA.mid, consumerB.mid, again.mid])
        #expect(offer.media.map(\.isRejected) == [false, true, false])
        #expect(offer.bundleGroup == [consumerA.mid, again.mid], "a rejected m-line leaves BUNDLE")
        let answer = try await subscriber.answer(offer)
        try await sfu.onLoop { try $0.subscriberAnswerOnLoop(participantID: "bob", answer: answer) }

        // Answered: the next track takes the rejected m-line, under a mid never used before.
        try await sfu.onLoop { try $0.stopConsumingOnLoop(subscriber: "bob", producerID: a.id) }
        let third = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: a.id) }
        #expect(![consumerA.mid, consumerB.mid, again.mid].contains(third.mid))
        let recycled = try await sfu.onLoop { try $0.subscriberOfferOnLoop(participantID: "bob") }
        #expect(recycled.media.map(\.mid) == [consumerA.mid, third.mid, again.mid])
        #expect(recycled.media.map(\.isRejected) == [false, false, false])
        // The first m-line (the BUNDLE tag) is never rejected: it only goes inactive.
        #expect(recycled.media.first?.direction == .inactive)
        let reply = try await subscriber.answer(recycled)
        try await sfu.onLoop { try $0.subscriberAnswerOnLoop(participantID: "bob", answer: reply) }
        await first.close()
        await second.close()
        await subscriber.close()
        await sfu.shutdown()
    }
}
