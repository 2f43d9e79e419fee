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

/// The value of the unlabelled sample `name` in a Prometheus exposition.
private func metric(_ name: String, in text: String) -> Double? {
    text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.dropFirst(name.count + 1)) }
}

@Suite("Room agent follow-ups", .serialized)
struct RoomAgentFollowupTests {
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
            $0.relayRoom = "kf-dst"
            $0.relayRoomToken = sdkToken(server, room: "kf-dst")
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
        #expect(requests.value > before, "the relay-room request never reached the host's source")
        let metrics = agent.metricsText()
        #expect((metric("understudy_agent_relay_room_keyframe_requests_total", in: metrics) ?? 0) > 0, "\(metrics)")

        viewer.onFrame = nil
        await agent.stop()
        await viewer.leave()
        await host.leave()
    }

    @Test func metricsCountThePLIsAndNACKsSent() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(
            server, room: "fb-src", id: "host", mode: .SEND_AND_RECV, mic: false, cam: true)
        var options = RoomAgent.Options(
            roomId: "fb-src", token: sdkToken(server, room: "fb-src"), signalingURL: server.signalingURL)
        options.participantId = "agent-fb"
        let agent = try RoomAgent(options: options)
        #expect(agent.room.subscribeFeedbackSent.plis == 0)
        try await agent.start()
        try await waitUntil("webcam frames received", seconds: 30) { agent.counters.framesReceived(.video) >= 10 }
        // The SFU starts the stream at a keyframe, so a PLI may not have been needed yet: ask for one.
        try #require(agent.room.participants["host"]).requestWebcamKeyframe()
        try await waitUntil("a PLI went out", seconds: 15) { agent.room.subscribeFeedbackSent.plis > 0 }
        let metrics = agent.metricsText()
        #expect(metrics.contains("# TYPE understudy_agent_plis_sent_total counter\n"))
        #expect((metric("understudy_agent_plis_sent_total", in: metrics) ?? 0) > 0, "\(metrics)")
        #expect(metrics.contains("# TYPE understudy_agent_nacks_sent_total counter\n"))
        #expect(metric("understudy_agent_nacks_sent_total", in: metrics) != nil, "\(metrics)")
        await agent.stop()
        await host.leave()
    }
}
