import Foundation
import Media
import RTC
import RTCWire
import RoomServer
import Signaling
import TestSupport
import Testing

/// A room participant with real media: a signalling ``TestClient`` plus a publish and a subscribe
/// ``PeerConnection`` (each on its own loop), negotiated only through the room protocol.
final class RoomMediaPeer: @unchecked Sendable {
    let signaling: TestClient
    let publishConnection: PeerConnection
    let subscribeConnection: PeerConnection
    let frames = SFUFrameLog()
    private var pump: MediaPump?
    private var answerTask: Task<Void, Never>?
    private let lock = NSLock()
    private var answered: [Int] = []
    private var recording: Recording?

    init(signaling: TestClient, name: String) throws {
        self.signaling = signaling
        publishConnection = try PeerConnection(loop: EventLoop(name: "\(name)-pub"))
        subscribeConnection = try PeerConnection(loop: EventLoop(name: "\(name)-sub"))
    }

    /// Joins `room` as `participant` and starts answering `subscriberOffer`s.
    static func join(
        _ server: RoomServer, room: String, participant: String, mode: String = "SEND_AND_RECV",
        autoConsume: Bool = true
    ) async throws -> RoomMediaPeer {
        let (client, _) = try await TestClient.joined(
            server, room: room, participant: participant,
            extra: ["mode": .string(mode), "autoConsume": .bool(autoConsume)])
        let peer = try RoomMediaPeer(signaling: client, name: participant)
        await peer.installFrameSink()
        peer.startAnswering()
        return peer
    }

    /// Revisions of the subscribe offers this peer has answered successfully.
    var answeredRevisions: [Int] { lock.withLock { answered } }

    private func installFrameSink() async {
        let pc = subscribeConnection
        await pc.loop.submit { [self] in
            pc.onFrame = { [self] transceiver, _, frame, timing in
                frames.add(transceiver.kind)
                recording?.write(frame, arrival: timing.arrivalTime)
            }
        }
    }

    /// Records what arrives from now on (nil stops recording); loop-confined like the frame sink.
    func record(_ r: Recording?) async {
        await subscribeConnection.loop.submit { [self] in recording = r }
    }

    /// The `produce` request carrying the offer for webcam (VP8) and mic (Opus), or its error.
    func publishRequest(video: Bool = true, audio: Bool = true) async throws -> Result<JSONValue, SignalError> {
        let pc = publishConnection
        let offer = try await pc.loop.submit {
            if video { _ = pc.addTransceiver(kind: .video, direction: .sendonly) }
            if audio { _ = pc.addTransceiver(kind: .audio, direction: .sendonly) }
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return o
        }
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
        let answer = try SessionDescription.parse(sdp)
        let pc = publishConnection
        try await pc.loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
        try await pc.waitUntilConnected(timeout: 10)
        let (video, audio) = await pc.loop.submit {
            (
                pc.transceivers.first { $0.kind == .video }, pc.transceivers.first { $0.kind == .audio }
            )
        }
        let pump = MediaPump(
            connection: pc, video: video, audio: audio, sources: SyntheticMedia.shared(layers: 1).source)
        self.pump = pump
        await pc.loop.submit { pump.attach() }
        return response["producers"]?.arrayValue ?? []
    }

    /// Answers every `subscriberOffer` on the subscribe connection, in order.
    private func startAnswering() {
        let client = signaling
        let pc = subscribeConnection
        answerTask = Task { [weak self] in
            while !Task.isCancelled {
                guard
                    let offerData = try? await client.notification("subscriberOffer", seconds: 1),
                    let sdp = offerData["sdp"]?.stringValue, let revision = offerData["revision"]?.intValue,
                    let offer = try? SessionDescription.parse(sdp)
                else { continue }
                do {
                    let answer = try await pc.loop.submit {
                        try pc.setRemoteDescription(offer, type: .offer)
                        let a = try pc.createAnswer()
                        try pc.setLocalDescription(a)
                        return a
                    }
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

    /// Waits until `frames` reports at least the given counts.
    func waitForFrames(video: Int = 0, audio: Int = 0, seconds: Double = 10) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while frames.videoFrames < video || frames.audioFrames < audio {
            if Date() > deadline {
                throw Timeout(
                    what: "frames (video \(frames.videoFrames)/\(video), audio \(frames.audioFrames)/\(audio))")
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    func close() async {
        answerTask?.cancel()
        if let pump {
            await publishConnection.loop.submit { pump.detach() }
        }
        for pc in [publishConnection, subscribeConnection] {
            await pc.loop.submit { pc.close() }
            pc.loop.shutdown()
        }
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
