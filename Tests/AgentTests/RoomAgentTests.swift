import Agent
import Foundation
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

@Suite("Room agent", .serialized)
struct RoomAgentTests {
    @Test func agentRecordsTheStageAndFollowsAStageInvite() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("agent-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }

        let (host, hostLog) = try await joinedRoom(
            server, room: "agent-stage", id: "host", mode: .SEND_AND_RECV, mic: true, cam: true)
        var options = RoomAgent.Options(
            roomId: "agent-stage", token: sdkToken(server, room: "agent-stage"), signalingURL: server.signalingURL)
        options.participantId = "agent1"
        options.consume = .stage
        options.recordDirectory = dir
        let agent = try RoomAgent(options: options)
        try await agent.start()
        #expect(agent.room.localParticipant.mode == .RECV_ONLY)
        try await waitUntil("agent consumes the host", seconds: 15) { agent.consumedIds == ["host"] }
        let recordingPath = try #require(
            await {
                try? await waitUntil("recording opened", seconds: 15) { agent.recordingPaths["host"] != nil }
                return agent.recordingPaths["host"]
            }())
        // Let a few seconds of media (and at least one keyframe) arrive.
        try await Task.sleep(nanoseconds: 3_000_000_000)

        // Host invites the agent on stage (seed 000 steps 1-2); the agent changes its own mode.
        try await waitUntil("host sees agent") { hostLog.has("pjoined:agent1") && agent.isListeningForInvites }
        final class FrameCount: @unchecked Sendable {
            let lock = NSLock()
            var video = 0
            var audio = 0
        }
        let fromAgent = FrameCount()
        host.onFrame = { id, kind, _, _ in
            guard id == "agent1" else { return }
            fromAgent.lock.withLock { if kind == .video { fromAgent.video += 1 } else { fromAgent.audio += 1 } }
        }
        try await host.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_agent1", message: "SEND_AND_RECV")
        try await waitUntil("host sees the agent on stage", seconds: 15) { hostLog.has("mode:agent1:SEND_AND_RECV") }
        // The host may hear the broadcast before the agent's own room has applied its change.
        try await waitUntil("the agent's own mode", seconds: 15) { agent.room.localParticipant.mode == .SEND_AND_RECV }
        #expect(host.participants["agent1"]?.mode == .SEND_AND_RECV)
        // On stage the agent publishes its test pattern and tone, and the host (autoConsume) receives them.
        try await waitUntil("host receives the agent's media", seconds: 15) {
            fromAgent.lock.withLock { fromAgent.video >= 30 && fromAgent.audio >= 30 }
        }
        host.onFrame = nil

        await agent.stop()
        await host.leave()
        print("agent recording: \(recordingPath)")

        // The recording holds VP8 and Opus and decodes cleanly.
        let (status, streams, _) = try runTool(
            "ffprobe",
            [
                "-v", "error", "-count_frames", "-show_entries", "stream=codec_name,nb_read_frames", "-of", "csv=p=0",
                recordingPath,
            ])
        #expect(status == 0)
        let rows = streams.split(separator: "\n").map { $0.split(separator: ",").map(String.init) }
        let vp8 = rows.first { $0.first == "vp8" }
        let opus = rows.first { $0.first == "opus" }
        #expect((vp8.flatMap { Int($0.last ?? "") } ?? 0) > 0, "\(streams)")
        #expect((opus.flatMap { Int($0.last ?? "") } ?? 0) > 0, "\(streams)")
        let (decodeStatus, _, decodeErrors) = try runTool(
            "ffmpeg", ["-v", "error", "-i", recordingPath, "-enc_time_base", "-1", "-f", "null", "-"])
        #expect(decodeStatus == 0)
        #expect(decodeErrors.isEmpty, "\(decodeErrors)")

        // The manifest lists the file and the agent's own mode change.
        let manifestData = try Data(contentsOf: URL(fileURLWithPath: try #require(agent.manifestPath)))
        let manifest = try #require(try JSONSerialization.jsonObject(with: manifestData) as? [String: Any])
        let files = try #require(manifest["files"] as? [[String: Any]])
        #expect(
            files.contains { ($0["participantId"] as? String) == "host" && ($0["path"] as? String) == recordingPath })
        let changes = try #require(manifest["modeChanges"] as? [[String: Any]])
        #expect(
            changes.contains {
                ($0["participantId"] as? String) == "agent1" && ($0["mode"] as? String) == "SEND_AND_RECV"
            })
    }

    @Test func refusedInvitesLeaveTheModeAlone() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(server, room: "agent-refuse", id: "host", mode: .SEND_AND_RECV)
        var options = RoomAgent.Options(
            roomId: "agent-refuse", token: sdkToken(server, room: "agent-refuse"), signalingURL: server.signalingURL)
        options.participantId = "agent2"
        options.acceptInvites = .from(["someone-else"])
        let agent = try RoomAgent(options: options)
        try await agent.start()
        try await waitUntil("agent subscribed") { agent.isListeningForInvites }
        try await host.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_agent2", message: "SEND_AND_RECV")
        try await waitUntil("invite refused") { agent.refusedInviteCount == 1 }
        #expect(agent.room.localParticipant.mode == .RECV_ONLY)
        await agent.stop()
        await host.leave()
    }

    @Test func stagePolicyStopsConsumingWhoeverLeavesTheStage() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(server, room: "agent-demote", id: "host", mode: .SEND_AND_RECV)
        let (viewer, _) = try await joinedRoom(server, room: "agent-demote", id: "viewer", mode: .RECV_ONLY)
        var options = RoomAgent.Options(
            roomId: "agent-demote", token: sdkToken(server, room: "agent-demote"), signalingURL: server.signalingURL)
        options.participantId = "agent3"
        options.consume = .stage
        let agent = try RoomAgent(options: options)
        try await agent.start()
        try await waitUntil("agent consumes only the stage") { agent.consumedIds == ["host"] }
        try await host.changeMode(.RECV_ONLY)
        try await waitUntil("agent drops the demoted host") { agent.consumedIds.isEmpty }
        try await viewer.changeMode(.SEND_AND_RECV)
        try await waitUntil("agent picks up the promoted viewer") { agent.consumedIds == ["viewer"] }
        await agent.stop()
        await host.leave()
        await viewer.leave()
    }

    @Test func maxVideoConsumesOneWebcamAndMovesOnWhenItsOwnerLeaves() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host1, _) = try await joinedRoom(server, room: "agent-maxv", id: "host1", mode: .SEND_AND_RECV)
        let (host2, _) = try await joinedRoom(server, room: "agent-maxv", id: "host2", mode: .SEND_AND_RECV)
        var options = RoomAgent.Options(
            roomId: "agent-maxv", token: sdkToken(server, room: "agent-maxv"), signalingURL: server.signalingURL)
        options.participantId = "agent4"
        options.consume = .stage
        options.maxVideo = 1
        let agent = try RoomAgent(options: options)
        try await agent.start()
        // Audio is not limited; the one webcam slot goes to the first in order.
        try await waitUntil("agent consumes both mics, one webcam") {
            agent.consumedIds == ["host1", "host2"] && agent.consumedVideoIds == ["host1"]
        }
        await host1.leave()
        try await waitUntil("the slot moves to host2") {
            agent.consumedIds == ["host2"] && agent.consumedVideoIds == ["host2"]
        }
        await agent.stop()
        await host2.leave()
    }

    @Test func removedAgentLogsTheLeaveReasonWithItsCode() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "agent-remove", id: "host", mode: .SEND_AND_RECV)
        final class Lines: @unchecked Sendable {
            let lock = NSLock()
            var lines: [String] = []
            func has(_ s: String) -> Bool { lock.withLock { lines.contains(s) } }
        }
        let lines = Lines()
        var options = RoomAgent.Options(
            roomId: "agent-remove", token: sdkToken(server, room: "agent-remove"), signalingURL: server.signalingURL)
        options.participantId = "agent5"
        let agent = try RoomAgent(options: options) { line in lines.lock.withLock { lines.lines.append(line) } }
        try await agent.start()
        try await waitUntil("host sees the agent") { hostLog.has("pjoined:agent5") }
        try await #require(host.participants["agent5"]).remove()
        try await waitUntil("agent removed") { agent.leaveReason != nil }
        #expect(agent.leaveReason == .REMOVE_PEER)
        #expect(lines.has("left room: REMOVE_PEER (1002)"))
        await agent.stop()
        await host.leave()
    }

    @Test func oggIVFRecordingAndMetricsText() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("agent-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (host, _) = try await joinedRoom(
            server, room: "agent-ogg", id: "host", mode: .SEND_AND_RECV, mic: true, cam: true)
        var options = RoomAgent.Options(
            roomId: "agent-ogg", token: sdkToken(server, room: "agent-ogg"), signalingURL: server.signalingURL)
        options.participantId = "agent6"
        options.recordDirectory = dir
        options.recordFormat = .oggIVF
        let agent = try RoomAgent(options: options)
        try await agent.start()
        try await waitUntil("both files open", seconds: 20) { agent.recordedFiles.count == 2 }
        try await waitUntil("frames recorded", seconds: 30) {
            agent.counters.framesRecorded(.video) >= 30 && agent.counters.framesRecorded(.audio) >= 50
        }
        let metrics = agent.metricsText()
        #expect(metrics.contains("understudy_agent_participants 1\n"))
        #expect(metrics.contains("understudy_agent_consumed_tracks{kind=\"video\"} 1\n"))
        #expect(metrics.contains("understudy_agent_mode{mode=\"RECV_ONLY\"} 1\n"))
        #expect(metrics.contains("# TYPE understudy_agent_frames_received_total counter"))
        #expect(!metrics.contains("understudy_agent_frames_recorded_total{kind=\"video\"} 0\n"))
        await agent.stop()
        await host.leave()
        #expect(agent.recordedFiles == [dir + "/host.ivf", dir + "/host.ogg"])
        for (path, codec) in [(dir + "/host.ivf", "vp8"), (dir + "/host.ogg", "opus")] {
            let (status, streams, _) = try runTool(
                "ffprobe",
                [
                    "-v", "error", "-count_frames", "-show_entries", "stream=codec_name,nb_read_frames", "-of",
                    "csv=p=0", path,
                ])
            #expect(status == 0)
            let row = streams.split(separator: "\n").first.map { $0.split(separator: ",").map(String.init) } ?? []
            #expect(row.first == codec, "\(streams)")
            #expect((Int(row.last ?? "") ?? 0) > 0, "\(streams)")
        }
        let manifestData = try Data(contentsOf: URL(fileURLWithPath: try #require(agent.manifestPath)))
        let manifest = try #require(try JSONSerialization.jsonObject(with: manifestData) as? [String: Any])
        let files = try #require(manifest["files"] as? [[String: Any]])
        #expect(Set(files.compactMap { $0["path"] as? String }) == [dir + "/host.ivf", dir + "/host.ogg"])
    }

    @Test func relayRoomRepublishesTheConsumedParticipant() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(
            server, room: "agent-src", id: "host", mode: .SEND_AND_RECV, mic: true, cam: true)
        var options = RoomAgent.Options(
            roomId: "agent-src", token: sdkToken(server, room: "agent-src"), signalingURL: server.signalingURL)
        options.participantId = "agent7"
        options.relayRoom = "agent-dst"
        options.relayRoomToken = sdkToken(server, room: "agent-dst")
        let agent = try RoomAgent(options: options)
        try await agent.start()
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
        #expect(agent.relayRoomParticipantIds == ["relay-host"])
        #expect(viewer.participants["relay-host"]?.mode == .SEND_AND_RECV)
        #expect(received.lock.withLock { received.keyframeFirst } == true)
        #expect(agent.metricsText().contains("understudy_agent_relay_room_participants 1\n"))
        viewer.onFrame = nil
        await agent.stop()
        await viewer.leave()
        await host.leave()
    }

    /// `run(duration: nil)` ends on `requestStop()` (no polling loop to notice it) and leaves the room;
    /// a refused join throws the typed error with the SDK's cause.
    @Test func runEndsOnRequestStopAndAFailedJoinKeepsItsCause() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let options = RoomAgent.Options(
            roomId: "agent-stop", token: sdkToken(server, room: "agent-stop"), signalingURL: server.signalingURL)
        let agent = try RoomAgent(options: options)
        try await agent.start()
        let running = Task { await agent.run(duration: nil) }
        agent.requestStop()
        await running.value
        #expect(agent.leaveReason == .MANUAL_LEAVE_CALLED)

        let refused = try RoomAgent(
            options: RoomAgent.Options(roomId: "agent-stop", token: "not-a-token", signalingURL: server.signalingURL))
        do {
            try await refused.start()
            Issue.record("a join with a bad token succeeded")
        } catch {
            guard case .joinFailed(let reason, let cause) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(reason == .JOIN_ROOM_FAILED && cause?.code == 4002, "\(error)")
        }
    }

    /// `run(until:)` ends when its stop event fires (the CLI's SIGTERM wait): the event itself wakes it.
    @Test func runEndsWhenItsStopEventFires() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let options = RoomAgent.Options(
            roomId: "agent-event", token: sdkToken(server, room: "agent-event"), signalingURL: server.signalingURL)
        let agent = try RoomAgent(options: options)
        try await agent.start()
        let (signal, fire) = AsyncStream<Void>.makeStream()
        let running = Task {
            await agent.run(duration: nil, until: { for await _ in signal { return } })
        }
        fire.yield()
        await running.value
        #expect(agent.leaveReason == .MANUAL_LEAVE_CALLED)
    }

    @Test func metricsAddressMustBeLoopback() throws {
        #expect(try RoomAgentMetricsServer.parseAddress("127.0.0.1:9100") == ("127.0.0.1", 9100))
        #expect(try RoomAgentMetricsServer.parseAddress("localhost:1") == ("127.0.0.1", 1))
        #expect(try RoomAgentMetricsServer.parseAddress("[::1]:0") == ("::1", 0))
        // Each refusal says which part is wrong (a typed error, not a sentence).
        let refusals: [(String, RoomAgentMetricsError)] = [
            ("0.0.0.0:9100", .notLoopback("0.0.0.0")), ("10.0.0.1:80", .notLoopback("10.0.0.1")),
            ("example.com:80", .notLoopback("example.com")), ("127.0.0.1", .notHostAndPort("127.0.0.1")),
            ("127.0.0.1:70000", .badPort("70000")), ("[::1]9", .notHostAndPort("[::1]9")),
        ]
        for (refused, expected) in refusals {
            #expect(throws: expected, "\(refused)") { _ = try RoomAgentMetricsServer.parseAddress(refused) }
        }
    }
}
