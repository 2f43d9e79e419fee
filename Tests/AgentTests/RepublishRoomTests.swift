import Agent
import AgentTestSupport
import Foundation
import Media
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

/// The test pattern, counting the keyframe requests that reach it (publish loop thread).
private final class CountingVideoSource: MediaSource {
    let inner = SyntheticVideoSource(media: SyntheticMedia.shared(layers: 1), layers: 1)
    let requests: KeyframeRequestCount
    var kind: MediaKind { inner.kind }
    var layerCount: Int { inner.layerCount }
    init(requests: KeyframeRequestCount) { self.requests = requests }
    func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void) {
        inner.pull(elapsedNanos: elapsedNanos, emit: emit)
    }
    func requestKeyframe() {
        requests.add()
        inner.requestKeyframe()
    }
    func close() { inner.close() }
}

private final class KeyframeRequestCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

@Suite("Room agent: the republish room", .serialized)
struct RepublishRoomTests {
    @Test func relayRoomKeyframeRequestReachesTheOriginalPublisher() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let requests = KeyframeRequestCount()
        let host = try makeRoom(server, room: "kf-src", id: "host", mode: .SEND_AND_RECV, mic: true, cam: true)
        host.mediaSourceFactory = { kind, _ -> MediaSource in
            if kind == .video { return CountingVideoSource(requests: requests) }
            return SyntheticAudioSource(media: SyntheticMedia.shared(layers: 1))
        }
        let hostLog = EventLog()
        host.addEventListener(hostLog)
        await host.join()
        try await waitUntil("host joined") { hostLog.has("joined") }

        let agent = try await startAgent(server, room: "kf-src", id: "agent-kf") {
            $0.republishRoom = "kf-dst"
            $0.republishRoomToken = sdkToken(server, room: "kf-dst")
        }

        let viewer = try makeRoom(server, room: "kf-dst", id: "viewer", mode: .RECV_ONLY)
        let received = countFrames(in: viewer, from: "relay-host")
        await viewer.join()
        try await waitUntil("viewer receives the relayed host", seconds: 30) { received.videoFrames >= 30 }

        // Steady state: the start-up keyframe requests are behind us. Ask the stand-in for a keyframe
        // until the host's source hears of it (the PLIs are throttled along the way, so repeat).
        let before = requests.value
        let relayed = try #require(viewer.participants["relay-host"])
        let deadline = Date().addingTimeInterval(20)
        while requests.value == before && Date() < deadline {
            relayed.requestWebcamKeyframe()
            try await Task.sleep(nanoseconds: 300_000_000)
        }
        #expect(requests.value > before, "the republish-room request never reached the host's source")
        let metrics = agent.metricsText()
        #expect((metric("understudy_agent_relay_room_keyframe_requests_total", in: metrics) ?? 0) > 0, "\(metrics)")

        viewer.onFrame = nil
        await agent.stop()
        await viewer.leave()
        await host.leave()
    }

    @Test func relayRoomRepublishesTheConsumedParticipant() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(
            server, room: "agent-src", id: "host", mode: .SEND_AND_RECV, mic: true, cam: true)
        let agent = try await startAgent(server, room: "agent-src", id: "agent7") {
            $0.republishRoom = "agent-dst"
            $0.republishRoomToken = sdkToken(server, room: "agent-dst")
        }
        final class FrameCount: @unchecked Sendable {
            let lock = NSLock()
            var video = 0
            var audio = 0
            var keyframeFirst: Bool?
        }
        let received = FrameCount()
        let viewer = try makeRoom(server, room: "agent-dst", id: "viewer", mode: .RECV_ONLY)
        viewer.onFrame = { id, kind, frame, _ in
            guard id == "relay-host" else { return }
            received.lock.withLock {
                if kind == .video {
                    if received.keyframeFirst == nil { received.keyframeFirst = frame.isKeyframe }
                    received.video += 1
                } else {
                    received.audio += 1
                }
            }
        }
        await viewer.join()
        try await waitUntil("viewer receives the relayed host", seconds: 30) {
            received.lock.withLock { received.video >= 30 && received.audio >= 50 }
        }
        #expect(agent.republishParticipantIds == ["relay-host"])
        #expect(viewer.participants["relay-host"]?.mode == .SEND_AND_RECV)
        #expect(received.lock.withLock { received.keyframeFirst } == true)
        #expect(agent.metricsText().contains("understudy_agent_relay_room_participants 1\n"))
        viewer.onFrame = nil
        await agent.stop()
        await viewer.leave()
        await host.leave()
    }
}
