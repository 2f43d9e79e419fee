import Media
import RTC
import TestSupport

@testable import SFU

/// The SFU's own offer/answer steps for a ``SFUTestClient`` talking to an `SFU` directly.
extension SFUTestClient {
    /// Publishes video (simulcast with `rids`) and audio into `sfu` and waits for the connection.
    func publish(to sfu: SFU, participantID: String, rids: [String] = [], audio wantAudio: Bool = true) async throws
        -> [ProducerInfo]
    {
        let offer = try await makeSendOffer(rids: rids, audio: wantAudio)
        let (answer, producers) = try await sfu.publish(participantID: participantID, offer: offer)
        try await accept(answer: answer)
        try await connection.waitUntilConnected(timeout: 10)
        return producers
    }

    /// One subscribe round: the SFU offers, this client answers.
    func negotiateSubscription(with sfu: SFU, participantID: String) async throws {
        let offer = try await sfu.onLoop { try $0.subscriberOfferOnLoop(participantID: participantID) }
        let reply = try await answer(offer)
        try await sfu.onLoop { try $0.subscriberAnswerOnLoop(participantID: participantID, answer: reply) }
    }

    /// Subscribes (one round with `sfu`), records what arrives to `path` once connected while `body`
    /// runs, and returns the closed recording.
    func recordSubscription(
        with sfu: SFU, participantID: String, path: String, connectTimeout: Double = 10,
        while body: () async throws -> Void
    ) async throws -> Recording {
        let recording = try Recording(path: path)
        await startReceiving()
        await record(recording)
        try await negotiateSubscription(with: sfu, participantID: participantID)
        try await connection.waitUntilConnected(timeout: connectTimeout)
        try await body()
        await stopReceiving()
        try recording.close()
        return recording
    }
}

/// The start of most forwarding tests: `alice` publishes into an SFU (video, with simulcast `rids`
/// when given, and audio when asked) and pumps the synthetic loop; `bob` consumes every producer.
/// Bob's subscription is not negotiated yet.
struct SFUForwardingSetup {
    let sfu: SFU
    let publisher: SFUTestClient
    let subscriber: SFUTestClient
    let producers: [ProducerInfo]

    /// The clients' loops are named `name-pub` and `name-sub`.
    static func start(
        _ name: String, sfu: SFU = SFU(), rids: [String] = [], audio: Bool = true
    ) async throws -> SFUForwardingSetup {
        let publisher = try SFUTestClient(name: "\(name)-pub")
        let subscriber = try SFUTestClient(name: "\(name)-sub")
        let producers = try await publisher.publish(to: sfu, participantID: "alice", rids: rids, audio: audio)
        await publisher.startPump(layers: max(1, rids.count))
        for p in producers { _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: p.id) } }
        return SFUForwardingSetup(sfu: sfu, publisher: publisher, subscriber: subscriber, producers: producers)
    }

    func close() async {
        await publisher.close()
        await subscriber.close()
        await sfu.shutdown()
    }
}
