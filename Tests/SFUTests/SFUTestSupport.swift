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
        let offer = try await sfu.subscriberOffer(participantID: participantID)
        try await sfu.subscriberAnswer(participantID: participantID, answer: try await answer(offer))
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
