import Agent
import AgentTestSupport
import Foundation
import Media
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

/// `understudy join --video FILE --audio none`: on stage the agent publishes the file, not the test
/// pattern, and sends no audio; the host's recording of it is the file's picture size.
@Suite("Room agent sources", .serialized)
struct RoomAgentSourcesTests {
    @Test func onStageTheAgentPublishesItsVideoFileAndNoAudio() async throws {
        let dir = try makeScratchDirectory("agent-src")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A third-party encoder makes the file: 176x144, so it cannot be mistaken for the test pattern.
        let ivf = dir + "/clip.ivf"
        let (made, _, log) = try runTool(
            "ffmpeg",
            [
                "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=176x144:rate=30:duration=2",
                "-c:v", "libvpx", "-g", "30", "-b:v", "300k", ivf,
            ])
        try #require(made == 0, "ffmpeg: \(log)")

        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(
            server, room: "agent-src", id: "host", mode: .SEND_AND_RECV, mic: true, cam: true)
        let agent = try await startAgent(server, room: "agent-src", id: "agent-src") {
            $0.consume = .none
            $0.video = ivf
            $0.audio = "none"
        }
        try await waitUntil("agent listens for invites", seconds: 15) { agent.isListeningForInvites }

        let recordingPath = dir + "/agent-as-seen-by-host.webm"
        let recording = try Recording(path: recordingPath)
        final class Counts: @unchecked Sendable {
            let lock = NSLock()
            var video = 0
            var audio = 0
        }
        let counts = Counts()
        host.onFrame = { id, kind, frame, arrival in
            guard id == "agent-src" else { return }
            counts.lock.withLock {
                if kind == .video { counts.video += 1 } else { counts.audio += 1 }
                recording.write(frame, arrival: arrival)
            }
        }
        try await host.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_agent-src", message: "SEND_AND_RECV")
        try await waitUntil("agent on stage", seconds: 15) { hostLog.has("mode:agent-src:SEND_AND_RECV") }
        // Longer than the 2 s file: the source loops.
        try await waitUntil("host receives the file's video", seconds: 20) {
            counts.lock.withLock { counts.video >= 90 }
        }
        host.onFrame = nil
        #expect(agent.room.localParticipant.micOn == false)
        #expect(agent.room.localParticipant.webcamOn == true)
        let audioFrames = counts.lock.withLock { counts.audio }
        #expect(audioFrames == 0, "--audio none must send no audio, got \(audioFrames) frames")
        try counts.lock.withLock { try recording.close() }
        await agent.stop()
        await host.leave()

        let (status, probe, _) = try runTool(
            "ffprobe",
            [
                "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                "stream=codec_name,width,height,nb_read_frames", "-of", "csv=p=0", recordingPath,
            ])
        #expect(status == 0)
        let fields = probe.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").map(String.init)
        #expect(fields.count == 4, "\(probe)")
        if fields.count == 4 {
            #expect(fields[0] == "vp8")
            #expect(fields[1] == "176" && fields[2] == "144", "the file's size, not the test pattern's: \(probe)")
            #expect((Int(fields[3]) ?? 0) >= 60, "\(probe)")
        }
        let (decodeStatus, _, errors) = try runTool(
            "ffmpeg", ["-nostdin", "-v", "error", "-i", recordingPath, "-enc_time_base", "-1", "-f", "null", "-"])
        #expect(decodeStatus == 0 && errors.isEmpty, "\(errors)")
    }
}
