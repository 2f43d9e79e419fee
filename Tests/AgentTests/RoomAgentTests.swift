import Agent
import AgentTestSupport
import Foundation
import Media
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
        let dir = try makeScratchDirectory("agent")
        defer { try? FileManager.default.removeItem(atPath: dir) }

        let (host, hostLog) = try await joinedRoom(
            server, room: "agent-stage", id: "host", mode: .SEND_AND_RECV, mic: true, cam: true)
        let agent = try await startAgent(server, room: "agent-stage", id: "agent1") {
            $0.consume = .stage
            $0.recordDirectory = dir
        }
        #expect(agent.room.localParticipant.mode == .RECV_ONLY)
        try await waitUntil("agent consumes the host", seconds: 15) { agent.consumedIds == ["host"] }
        let recordingPath = try #require(
            await {
                try? await waitUntil("recording opened", seconds: 15) { agent.recordingPaths["host"] != nil }
                return agent.recordingPaths["host"]
            }())
        // Let a few seconds of media (and at least one keyframe) arrive.
        try await Task.sleep(nanoseconds: 3_000_000_000)

        // Host invites the agent on stage (docs/spec/change-mode.md steps 1-2); the agent changes its own mode.
        try await waitUntil("host sees agent") { hostLog.has("pjoined:agent1") && agent.isListeningForInvites }
        let fromAgent = countFrames(in: host, from: "agent1")
        try await host.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_agent1", message: "SEND_AND_RECV")
        try await waitUntil("host sees the agent on stage", seconds: 15) { hostLog.has("mode:agent1:SEND_AND_RECV") }
        // The host may hear the broadcast before the agent's own room has applied its change.
        try await waitUntil("the agent's own mode", seconds: 15) { agent.room.localParticipant.mode == .SEND_AND_RECV }
        #expect(host.participants["agent1"]?.mode == .SEND_AND_RECV)
        // On stage the agent publishes its test pattern and tone, and the host (autoConsume) receives them.
        try await waitUntil("host receives the agent's media", seconds: 15) {
            fromAgent.videoFrames >= 30 && fromAgent.audioFrames >= 30
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
        let agent = try await startAgent(server, room: "agent-refuse", id: "agent2") {
            $0.acceptInvites = .from(["someone-else"])
        }
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
        let agent = try await startAgent(server, room: "agent-demote", id: "agent3") { $0.consume = .stage }
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
        let agent = try await startAgent(server, room: "agent-maxv", id: "agent4") {
            $0.consume = .stage
            $0.maxVideo = 1
        }
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
        let agent = try await startAgent(
            server, room: "agent-remove", id: "agent5",
            log: { line in lines.lock.withLock { lines.lines.append(line) } })
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
        let dir = try makeScratchDirectory("agent")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (host, _) = try await joinedRoom(
            server, room: "agent-ogg", id: "host", mode: .SEND_AND_RECV, mic: true, cam: true)
        let agent = try await startAgent(server, room: "agent-ogg", id: "agent6") {
            $0.recordDirectory = dir
            $0.recordFormat = .oggIVF
            $0.snapshotInterval = 0.5
        }
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
        // Quality per consumed track, labelled with its publisher and kind.
        #expect(metrics.contains("# TYPE understudy_agent_track_freezes_total counter"))
        #expect(metrics.contains("understudy_agent_track_freezes_total{kind=\"video\",participant=\"host\"} "))
        #expect(metrics.contains("understudy_agent_track_mos{kind=\"audio\",participant=\"host\"} "))
        #expect(!metrics.contains("understudy_agent_track_mos{kind=\"video\""))
        // The loss denominator (received + lost), and the layer's height for video only.
        #expect(metrics.contains("understudy_agent_track_packets_received_total{kind=\"audio\",participant=\"host\"} "))
        #expect(metrics.contains("understudy_agent_track_frame_height{kind=\"video\",participant=\"host\"} "))
        #expect(!metrics.contains("understudy_agent_track_frame_height{kind=\"audio\""))
        let fps = metrics.split(separator: "\n").first { $0.hasPrefix("understudy_agent_track_fps{kind=\"video\"") }
        #expect((fps?.split(separator: " ").last.flatMap { Double($0) } ?? 0) > 5, "\(fps ?? "no fps line")")
        // --snapshot-every: the webcam's current picture beside the recordings, a JPEG of the
        // pattern's 16:9 size.
        try await waitUntil("snapshot written", seconds: 30) {
            FileManager.default.fileExists(atPath: dir + "/host.jpg")
        }
        let snapshot = try #require(
            JPEGDecoder.size(of: [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/host.jpg")))))
        #expect(snapshot.width >= 160 && snapshot.width * 9 == snapshot.height * 16, "\(snapshot)")
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
        // Each consumed track's last quality reading, taken before the agent left.
        let tracks = try #require(manifest["tracks"] as? [[String: Any]])
        #expect(Set(tracks.compactMap { $0["kind"] as? String }) == ["audio", "video"])
        for t in tracks {
            #expect(t["participantId"] as? String == "host")
            let q = try #require(t["quality"] as? [String: Any])
            #expect((q["frames"] as? Int ?? 0) > 10, "\(q)")
            #expect(q["freezeCount"] != nil && q["jitterBufferDelayMs"] != nil)
            if t["kind"] as? String == "audio" { #expect(q["mos"] != nil) }
        }
    }

    /// `run(duration: nil)` ends on `requestStop()` (no polling loop to notice it) and leaves the room;
    /// a refused join throws the typed error with the SDK's cause.
    @Test func runEndsOnRequestStopAndAFailedJoinKeepsItsCause() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let agent = try await startAgent(server, room: "agent-stop", id: nil)
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

    /// `--relay`: the agent opens the relay before it joins and writes `relay.sdp` beside its
    /// recordings; a URL the relay refuses fails the start with the relay's typed error.
    @Test func relayStartWritesItsSessionDescriptionOrFailsWithTheRelaysError() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let dir = try makeScratchDirectory("agent-relay")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let agent = try await startAgent(server, room: "agent-relay", id: "agent8") {
            $0.recordDirectory = dir
            $0.rtpOutputURL = "rtp://127.0.0.1:47900"
        }
        let sdp = try String(contentsOfFile: dir + "/relay.sdp", encoding: .utf8)
        #expect(sdp.contains("m=video 47900 RTP/AVP 96"), "\(sdp)")
        #expect(sdp.contains("m=audio 47902 RTP/AVP 111"), "\(sdp)")
        await agent.stop()

        do {
            let refused = try await startAgent(server, room: "agent-relay", id: "agent9") {
                $0.rtpOutputURL = "rtp://example.com:5004"
            }
            Issue.record("a relay to a host name started")
            await refused.stop()
        } catch let error as RoomAgentError {
            guard case .rtpOutput(let url, let cause) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(url == "rtp://example.com:5004")
            #expect(cause as? RTPOutputError == .invalidHost("example.com"), "\(cause)")
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
