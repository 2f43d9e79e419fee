import AgentTestSupport
import Foundation
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Agent

@Suite("Recording file names: one escaping, exclusive open", .serialized)
struct RecordingNameTests {
    /// A file that already exists keeps its bytes: the recorder takes the next free suffix.
    @Test func anExistingFileIsNeverTruncated() throws {
        let dir = try makeScratchDirectory("names")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Data("earlier".utf8).write(to: URL(fileURLWithPath: dir + "/cam_5Fa.webm"))
        let first = try AgentManifest.createRecordingFile(in: dir, for: "cam_a", ext: "webm")
        let second = try AgentManifest.createRecordingFile(in: dir, for: "cam_a", ext: "webm")
        #expect(first == dir + "/cam_5Fa.1.webm")
        #expect(second == dir + "/cam_5Fa.2.webm")
        #expect(try String(contentsOfFile: dir + "/cam_5Fa.webm", encoding: .utf8) == "earlier")
        #expect(try AgentManifest.createRecordingFile(in: dir, for: "cam.a", ext: "webm") == dir + "/cam_2Ea.webm")
        #expect(throws: (any Error).self) {
            try AgentManifest.createRecordingFile(in: dir + "/missing", for: "x", ext: "ogg")
        }
    }

    /// Issue 31 item 2: `cam.a` and `cam_a` used to share `cam_a.webm`, and the later joiner's
    /// recording truncated the earlier one's. Now each gets its own file, and both keep growing.
    @Test func participantsWhoseNamesLookAlikeRecordToTheirOwnFiles() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let dir = try makeScratchDirectory("names")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (first, _) = try await joinedRoom(
            server, room: "names", id: "cam.a", mode: .SEND_AND_RECV, mic: true, cam: true)
        let agent = try await startAgent(server, room: "names", id: "recorder") { $0.recordDirectory = dir }
        try await waitUntil("the first file has media", seconds: 30) {
            fileSize(dir + "/cam_2Ea.webm") > 20_000
        }
        let (second, _) = try await joinedRoom(
            server, room: "names", id: "cam_a", mode: .SEND_AND_RECV, mic: true, cam: true)
        try await waitUntil("the second file has media", seconds: 30) { fileSize(dir + "/cam_5Fa.webm") > 20_000 }
        let before = fileSize(dir + "/cam_2Ea.webm")
        try await waitUntil("the first file still grows", seconds: 30) {
            fileSize(dir + "/cam_2Ea.webm") > before + 5_000
        }
        #expect(agent.recordingPaths == ["cam.a": dir + "/cam_2Ea.webm", "cam_a": dir + "/cam_5Fa.webm"])
        await agent.stop()
        await first.leave()
        await second.leave()
        for path in [dir + "/cam_2Ea.webm", dir + "/cam_5Fa.webm"] {
            // -enc_time_base -1 (ffmpegDecodeErrors): without it, the null muxer's 1/fps time base
            // reports two frames that arrived within one frame interval as a repeated DTS.
            #expect(try ffmpegDecodeErrors(path) == "", "\(path)")
        }
    }
}

private func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
}
