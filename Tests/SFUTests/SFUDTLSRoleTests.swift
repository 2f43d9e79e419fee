import Foundation
import Media
import RTCWire
import TestSupport
import Testing

@testable import RTC
@testable import SFU

/// The SFU's DTLS roles (protocol.md §6a): it answers a publish offer `a=setup:active` and is the
/// DTLS client there, and offers `actpass` on the subscribe connection, where the client's `active`
/// answer makes it the DTLS server; a renegotiated publish offer keeps the role.
@Suite(.serialized) struct SFUDTLSRoleTests {
    @Test func theSFUIsTheDTLSClientOfPublishAndTheServerOfSubscribe() async throws {
        let sfu = SFU()
        let publisher = try SFUTestClient(name: "role-pub")
        let offer = try await publisher.makeSendOffer()
        #expect(offer.serialize().contains("a=setup:actpass"))
        let (answer, producers) = try await sfu.publish(participantID: "alice", offer: offer)
        let text = answer.serialize()
        #expect(text.contains("a=setup:active") && !text.contains("a=setup:passive"), "answer: \(text)")
        try await publisher.accept(answer: answer)
        try await publisher.connection.waitUntilConnected(timeout: 20)
        #expect(await publisher.loop.submit { publisher.connection.dtlsRole } == .server)
        let publishRole = await sfu.loop.submit {
            sfu.participants["alice"]?.publishConnection?.transport.dtls?.role
        }
        #expect(publishRole == .client)

        // A renegotiated publish offer (one more track) is answered `active` again.
        let pc = publisher.connection
        let second = try await publisher.loop.submit {
            _ = pc.addTransceiver(kind: .audio, direction: .sendonly)
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return o
        }
        let (secondAnswer, created) = try await sfu.publish(participantID: "alice", offer: second)
        #expect(secondAnswer.serialize().contains("a=setup:active"))
        #expect(created.count == 1)
        try await publisher.accept(answer: secondAnswer)
        #expect(await publisher.loop.submit { pc.state == .connected && pc.dtlsRole == .server })

        // Subscribe: the SFU offers actpass, the client answers active, the SFU is the DTLS server.
        let subscriber = try SFUTestClient(name: "role-sub")
        await subscriber.startReceiving()
        await publisher.startPump(layers: 1)
        for p in producers {
            _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: p.id) }
        }
        let subscribeOffer = try await sfu.onLoop { try $0.subscriberOfferOnLoop(participantID: "bob") }
        #expect(subscribeOffer.serialize().contains("a=setup:actpass"))
        let reply = try await subscriber.answer(subscribeOffer)
        #expect(reply.serialize().contains("a=setup:active"))
        try await sfu.onLoop { _ = try $0.subscriberAnswerOnLoop(participantID: "bob", answer: reply) }
        try await subscriber.connection.waitUntilConnected(timeout: 20)
        let subscribeRole = await sfu.loop.submit {
            sfu.participants["bob"]?.subscribeConnection?.transport.dtls?.role
        }
        #expect(subscribeRole == .server)
        // Media crosses both handshakes.
        try await subscriber.waitForFrames(video: 10, audio: 10, seconds: 30)
        await publisher.close()
        await subscriber.close()
        await sfu.shutdown()
    }
}
