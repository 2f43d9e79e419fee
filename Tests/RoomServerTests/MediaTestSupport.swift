import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol
import RoomServer
import Signaling
import TestSupport
import Testing

/// A room participant with real media: a signalling ``TestClient`` plus a publishing and a
/// subscribing ``SFUTestClient`` (each on its own loop), negotiated only through the room protocol.
final class RoomMediaPeer: @unchecked Sendable {
    let signaling: TestClient
    let publisher: SFUTestClient
    let subscriber: SFUTestClient
    private var answerTask: Task<Void, Never>?
    private let lock = NSLock()
    private var answered: [Int] = []

    init(signaling: TestClient, name: String) throws {
        self.signaling = signaling
        publisher = try SFUTestClient(name: "\(name)-pub")
        subscriber = try SFUTestClient(name: "\(name)-sub")
    }

    var publishConnection: PeerConnection { publisher.connection }
    var subscribeConnection: PeerConnection { subscriber.connection }
    /// What the subscribe connection received.
    var frames: SFUFrameLog { subscriber.frames }

    /// Joins `room` as `participant` and starts answering `subscriberOffer`s.
    static func join(
        _ server: RoomServer, room: String, participant: String, mode: String = "SEND_AND_RECV",
        autoConsume: Bool = true
    ) async throws -> RoomMediaPeer {
        let (client, _) = try await TestClient.joined(
            server, room: room, participant: participant,
            extra: ["mode": .string(mode), "autoConsume": .bool(autoConsume)])
        let peer = try RoomMediaPeer(signaling: client, name: participant)
        await peer.subscriber.startReceiving()
        peer.startAnswering()
        return peer
    }

    /// Revisions of the subscribe offers this peer has answered successfully.
    var answeredRevisions: [Int] { lock.withLock { answered } }

    /// Records what arrives from now on (nil stops recording).
    func record(_ r: Recording?) async { await subscriber.record(r) }

    /// The `produce` request carrying the offer for webcam (VP8) and mic (Opus), or its error.
    func publishRequest(video: Bool = true, audio: Bool = true) async throws -> Result<JSONValue, RoomError> {
        let offer = try await publisher.makeSendOffer(video: video, audio: audio)
        var tracks: [JSONValue] = []
        if video { tracks.append(["kind": "webcam"]) }
        if audio { tracks.append(["kind": "mic"]) }
        return try await signaling.request(
            "produce", ["tracks": .array(tracks), "sdp": .string(offer.serialize())])
    }

    /// Publishes webcam + mic through `produce`, applies the answer and starts the synthetic pump.
    @discardableResult
    func publish() async throws -> [JSONValue] {
        let response = try await publishRequest().get()
        guard let sdp = response["sdp"]?.stringValue else { throw Timeout(what: "an sdp answer") }
        try await publisher.accept(answer: try SessionDescription.parse(sdp))
        try await publishConnection.waitUntilConnected(timeout: 10)
        await publisher.startPump(layers: 1)
        return response["producers"]?.arrayValue ?? []
    }

    /// Answers every `subscriberOffer` on the subscribe connection, in order.
    private func startAnswering() {
        let client = signaling
        let subscriber = self.subscriber
        answerTask = Task { [weak self] in
            while !Task.isCancelled {
                guard
                    let offerData = try? await client.notification("subscriberOffer", seconds: 1),
                    let sdp = offerData["sdp"]?.stringValue, let revision = offerData["revision"]?.intValue,
                    let offer = try? SessionDescription.parse(sdp)
                else { continue }
                do {
                    let answer = try await subscriber.answer(offer)
                    let result = try await client.request(
                        "subscriberAnswer",
                        ["sdp": .string(answer.serialize()), "revision": .number(Double(revision))])
                    if case .success = result { self?.lock.withLock { self?.answered.append(revision) } }
                } catch is CancellationError {
                    return  // the client is shutting down; an offer in flight is moot
                } catch {
                    if Task.isCancelled { return }
                    Issue.record("answering subscriberOffer \(revision) failed: \(error)")
                }
            }
        }
    }

    /// Waits until at least `count` subscribe offers have been answered.
    func waitForAnswers(_ count: Int, seconds: Double = 10) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while answeredRevisions.count < count {
            if Date() > deadline { throw Timeout(what: "\(count) subscribe answers (have \(answeredRevisions))") }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    /// Waits until the subscribe connection has received at least the given counts.
    func waitForFrames(video: Int = 0, audio: Int = 0, seconds: Double = 10) async throws {
        try await subscriber.waitForFrames(video: video, audio: audio, seconds: seconds)
    }

    func close() async {
        answerTask?.cancel()
        await publisher.close()
        await subscriber.close()
        signaling.close()
    }
}

/// The value of a Prometheus sample line `name value` in `/metrics` (nil when absent).
func metricValue(_ server: RoomServer, _ name: String) async throws -> Int? {
    let text = try await http(server, "GET", "/metrics").text
    for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
        return Int(line.split(separator: " ").last ?? "")
    }
    return nil
}
