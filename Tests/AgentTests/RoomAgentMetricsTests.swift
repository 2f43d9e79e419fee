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

/// The value of the unlabelled sample `name` in a Prometheus exposition.
func metric(_ name: String, in text: String) -> Double? {
    text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.dropFirst(name.count + 1)) }
}

@Suite("Room agent metrics", .serialized)
struct RoomAgentMetricsTests {
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
