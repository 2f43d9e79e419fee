import Foundation
import Media
import RTC
import RTCWire
import Testing

@testable import SFU

/// A Swift client connection on its own loop, as a browser would be: publishing or subscribing.
final class SFUTestClient: @unchecked Sendable {
    let connection: PeerConnection
    var video: RTPTransceiver?
    var audio: RTPTransceiver?
    var pump: MediaPump?

    init(name: String) throws {
        connection = try PeerConnection(loop: EventLoop(name: name))
    }

    var loop: EventLoop { connection.loop }

    /// Publishes video (simulcast with `rids`) and audio into `sfu` and waits for the connection.
    func publish(to sfu: SFU, participantID: String, rids: [String] = [], audio wantAudio: Bool = true) async throws
        -> [ProducerInfo]
    {
        let pc = connection
        let offer = try await loop.submit { [self] in
            video = pc.addTransceiver(kind: .video, direction: .sendonly, sendRIDs: rids)
            if wantAudio { audio = pc.addTransceiver(kind: .audio, direction: .sendonly) }
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return o
        }
        let (answer, producers) = try await sfu.publish(participantID: participantID, offer: offer)
        try await loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
        try await pc.waitUntilConnected(timeout: 10)
        return producers
    }

    /// Starts sending the shared synthetic loop.
    func startPump(layers: Int) async {
        let media = SyntheticMedia.shared(layers: layers)
        let pump = MediaPump(connection: connection, video: video, audio: audio, sources: media.source)
        self.pump = pump
        await loop.submit { pump.attach() }
    }

    func stopPump() async {
        guard let pump else { return }
        await loop.submit { pump.detach() }
    }

    /// One subscribe round: the SFU offers, this client answers.
    func negotiateSubscription(with sfu: SFU, participantID: String) async throws {
        let offer = try await sfu.subscriberOffer(participantID: participantID)
        let pc = connection
        let answer = try await loop.submit {
            try pc.setRemoteDescription(offer, type: .offer)
            let a = try pc.createAnswer()
            try pc.setLocalDescription(a)
            return a
        }
        try await sfu.subscriberAnswer(participantID: participantID, answer: answer)
    }

    func close() async {
        let pc = connection
        await stopPump()
        await loop.submit { pc.close() }
        loop.shutdown()
    }
}

