import Agent
import Foundation
import Media
import SDKTestSupport
import TestSupport
import Testing

@testable import RoomServer
@testable import Understudy

@Suite("Agent manifest", .serialized)
struct RecordingManifestTests {
    /// The agent's audience is RECV_ONLY members only: a SIGNALLING_ONLY member is in neither list.
    @Test func theAgentDoesNotCountSignallingOnlyMembersAsAudience() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (watcher, _) = try await joinedRoom(server, room: "agent-lists", id: "watcher", mode: .SIGNALLING_ONLY)
        let (viewer, _) = try await joinedRoom(server, room: "agent-lists", id: "viewer", mode: .RECV_ONLY)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lists-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var options = RoomAgent.Options(
            roomId: "agent-lists", token: sdkToken(server, room: "agent-lists"), signalingURL: server.signalingURL)
        options.participantId = "agent"
        options.recordDirectory = dir
        let agent = try RoomAgent(options: options)
        try await agent.start()
        let manifest = try #require(agent.manifestPath)
        var audience: [String]?
        try await waitUntil("the manifest lists the audience", seconds: 15) {
            guard let data = FileManager.default.contents(atPath: manifest),
                let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { return false }
            audience = json["audience"] as? [String]
            return audience?.contains("viewer") == true
        }
        #expect(audience == ["agent", "viewer"])
        await agent.stop()
        await viewer.leave()
        await watcher.leave()
    }
}
