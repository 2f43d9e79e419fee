import AgentTestSupport
import Dispatch
import Foundation
import Media
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Agent
@testable import Understudy

@Suite("ParticipantRecorder: naming, opening off the loop, the manifest", .serialized)
struct ParticipantRecorderTests {
    static func opus(_ n: Int) -> EncodedFrame {
        EncodedFrame(
            codec: .opus, data: [0xF8, 0xFF, 0xFE], timestamp: UInt32(960 * n), isKeyframe: true, duration: 960)
    }

    final class Seen: @unchecked Sendable {
        let lock = NSLock()
        var opened: [String] = []
        var onRecorderQueue: [Bool] = []
    }

    /// The caller (the media loop) only hands frames over: with the recorder's queue held, the
    /// slot takes them and no file exists yet; once the queue runs, the file opens there and holds
    /// every frame, in order.
    @Test func filesOpenOnTheRecordersQueueAndTheLoopNeverWaits() async throws {
        let dir = try makeScratchDirectory("recorder") + "/sub"
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let recorder = ParticipantRecorder(
            directory: dir, format: .oggIVF, writesManifest: true,
            manifest: RecordingManifest(room: "r", recordFormat: "ogg+ivf"), log: { _ in })
        let seen = Seen()
        var hooks = ParticipantRecorder.Hooks()
        hooks.opened = { [queue = recorder.queue] _, path in
            let onQueue = DispatchQueue.getSpecific(key: ParticipantRecorder.queueKey) == ObjectIdentifier(queue)
            seen.lock.withLock {
                seen.opened.append(path)
                seen.onRecorderQueue.append(onQueue)
            }
        }
        recorder.observe(hooks)

        recorder.queue.suspend()
        let key = recorder.key(participantId: "cam.a", kind: .audio)
        #expect(key == ParticipantRecorder.Key(participantId: "cam.a", kind: .audio))
        let slot = try #require(recorder.slot(key, name: "cam.a"))
        for n in 0..<50 { slot.write(Self.opus(n), arrival: UInt64(n) * 20_000_000) }
        // Nothing touched the disk on this thread: not even the directory exists.
        #expect(!FileManager.default.fileExists(atPath: dir))
        #expect(recorder.recording(key) == nil)
        #expect(recorder.slot(key, name: "cam.a") === slot)
        recorder.queue.resume()

        try await waitUntil("the file is open", seconds: 30) { recorder.recording(key) != nil }
        for n in 50..<100 { slot.write(Self.opus(n), arrival: UInt64(n) * 20_000_000) }
        let closed = await recorder.close()
        let rec = try #require(closed[key])
        #expect(rec.path == dir + "/cam_2Ea.ogg")
        #expect(rec.audioFrames == 100)
        #expect(slot.droppedBeforeOpen == 0)
        #expect(seen.lock.withLock { seen.opened } == [dir + "/cam_2Ea.ogg"])
        #expect(seen.lock.withLock { seen.onRecorderQueue } == [true])
        // A closed slot takes no more frames; a new slot for the key gets a new file.
        slot.write(Self.opus(100), arrival: 0)
        let again = try #require(recorder.slot(key, name: "cam.a"))
        #expect(again !== slot)
        again.write(Self.opus(0), arrival: 0)
        try await waitUntil("the second file is open", seconds: 30) { recorder.recording(key) != nil }
        await recorder.close()
        #expect(recorder.manifest.files.map(\.path) == [dir + "/cam_2Ea.ogg", dir + "/cam_2Ea.1.ogg"])
    }

    /// The manifest is a `Codable` type whose JSON keeps the keys readers use (interop tests, docs).
    @Test func theManifestRoundTripsWithItsKeys() async throws {
        let dir = try makeScratchDirectory("recorder")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var start = RecordingManifest(room: "r1", recordFormat: "webm")
        (start.audience, start.modeChanges, start.refusedInvites, start.tracks) = ([], [], 0, [])
        let recorder = ParticipantRecorder(
            directory: dir, format: .webm, writesManifest: true, manifest: start, log: { _ in })
        var hooks = ParticipantRecorder.Hooks()
        hooks.beforeManifestWrite = { m in
            m.participantId = "agent"
            m.mode = "RECV_ONLY"
            m.stage = ["p1"]
        }
        recorder.observe(hooks)
        recorder.update { m in
            m.participants.append(.init(id: "p1", name: "P One", mode: "SEND_AND_RECV", joinedAt: "t0"))
            m.modeChanges?.append(.init(participantId: "p1", mode: "SEND_AND_RECV", at: "t1"))
        }
        let key = recorder.key(participantId: "p1", kind: .audio)
        #expect(key.kind == nil)
        let slot = try #require(recorder.slot(key, name: "p1"))
        for n in 0..<10 { slot.write(Self.opus(n), arrival: UInt64(n) * 20_000_000) }
        await recorder.close()
        await recorder.flush()

        let path = try #require(recorder.manifestPath)
        #expect(path == dir + "/manifest.json")
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let decoded = try JSONDecoder().decode(RecordingManifest.self, from: data)
        var expected = recorder.manifest
        expected.participantId = "agent"
        expected.mode = "RECV_ONLY"
        expected.stage = ["p1"]
        #expect(decoded == expected)
        #expect(decoded.files.count == 1)
        #expect(decoded.files.first?.audioFrames == 10)
        #expect(decoded.files.first?.complete == true)

        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(
            Set(json.keys) == [
                "room", "participantId", "mode", "recordFormat", "files", "participants", "stage", "audience",
                "modeChanges", "refusedInvites", "tracks",
            ])
        let file = try #require((json["files"] as? [[String: Any]])?.first)
        #expect(
            Set(file.keys) == [
                "participantId", "path", "format", "startedAt", "kinds", "audioCodec", "videoFrames", "audioFrames",
                "droppedFrames", "framesNotWritten", "complete",
            ])
        #expect(file["kinds"] as? [String] == ["audio", "video"])
        #expect(file["format"] as? String == "webm")
        let participant = try #require((json["participants"] as? [[String: Any]])?.first)
        #expect(Set(participant.keys) == ["id", "name", "mode", "joinedAt"])
    }

    /// A file opens with its first frame (audio, usually), but its video starts at the first key
    /// frame, which a new subscriber waits for: the log says when, once, so a reader of the log (the
    /// interop tests' frame counts) knows from when the publisher's frames can be in the file.
    @Test func theLogSaysWhenTheVideoStarts() async throws {
        let dir = try makeScratchDirectory("recorder")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let lines = Seen()
        let recorder = ParticipantRecorder(
            directory: dir, format: .webm, writesManifest: false,
            manifest: RecordingManifest(room: "r", recordFormat: "webm"),
            log: { line in lines.lock.withLock { lines.opened.append(line) } })
        let key = recorder.key(participantId: "cam", kind: .video)
        let slot = try #require(recorder.slot(key, name: "cam"))
        let started = "recording cam: vp8 video from its first key frame"
        let videoLines = { lines.lock.withLock { lines.opened.filter { $0 == started } } }
        for n in 0..<10 { slot.write(Self.opus(n), arrival: UInt64(n) * 20_000_000) }
        try await waitUntil("the file is open", seconds: 30) { recorder.recording(key) != nil }
        // A delta frame before any key frame cannot start the video.
        slot.write(
            EncodedFrame(codec: .vp8, data: [0x11, 0x01, 0x00, 1, 2, 3], timestamp: 0, isKeyframe: false),
            arrival: 200_000_000)
        #expect(videoLines().isEmpty)
        let key320: [UInt8] = [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x40, 0x01, 0xF0, 0x00, 1, 2, 3]
        for n in 0..<3 {
            let frame = EncodedFrame(
                codec: .vp8, data: n == 0 ? key320 : [0x11, 0x01, 0x00, 4, 5, 6], timestamp: UInt32(3000 * (n + 1)),
                isKeyframe: n == 0)
            slot.write(frame, arrival: UInt64(220_000_000 + 33_000_000 * n))
        }
        #expect(videoLines() == [started])
        let closed = await recorder.close()
        #expect(closed[key]?.videoFrames == 3)
        #expect(recorder.manifest.files.first?.videoCodec == "vp8")
    }

    /// A file that cannot be opened is reported, and its slot drops frames instead of holding them.
    @Test func aFileThatCannotOpenIsReported() async throws {
        let dir = try makeScratchDirectory("recorder")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A file where the directory should be.
        let blocked = dir + "/file"
        try Data().write(to: URL(fileURLWithPath: blocked))
        let recorder = ParticipantRecorder(
            directory: blocked, format: .webm, writesManifest: false,
            manifest: RecordingManifest(room: "r", recordFormat: "webm"), log: { _ in })
        let seen = Seen()
        var hooks = ParticipantRecorder.Hooks()
        hooks.cannotOpen = { key, _ in seen.lock.withLock { seen.opened.append(key.participantId) } }
        recorder.observe(hooks)
        let slot = try #require(recorder.slot(.init(participantId: "x", kind: nil), name: "x"))
        try await waitUntil("the failure is reported", seconds: 30) { seen.lock.withLock { seen.opened } == ["x"] }
        slot.write(Self.opus(0), arrival: 0)
        #expect(slot.droppedBeforeOpen == 1)
        #expect(await recorder.close().isEmpty)
        // Not recording: no slot at all.
        let none = ParticipantRecorder(
            directory: nil, format: .webm, writesManifest: true,
            manifest: RecordingManifest(room: "r", recordFormat: "webm"), log: { _ in })
        #expect(none.slot(.init(participantId: "x", kind: nil), name: "x") == nil)
        #expect(none.manifestPath == nil)
    }
}

@Suite("Recording file names: one escaping, exclusive open", .serialized)
struct RecordingNameTests {
    /// A file that already exists keeps its bytes: the recorder takes the next free suffix.
    @Test func anExistingFileIsNeverTruncated() throws {
        let dir = try makeScratchDirectory("names")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Data("earlier".utf8).write(to: URL(fileURLWithPath: dir + "/cam_5Fa.webm"))
        let first = try RecordingFiles.create(in: dir, for: "cam_a", ext: "webm")
        let second = try RecordingFiles.create(in: dir, for: "cam_a", ext: "webm")
        #expect(first == dir + "/cam_5Fa.1.webm")
        #expect(second == dir + "/cam_5Fa.2.webm")
        #expect(try String(contentsOfFile: dir + "/cam_5Fa.webm", encoding: .utf8) == "earlier")
        #expect(try RecordingFiles.create(in: dir, for: "cam.a", ext: "webm") == dir + "/cam_2Ea.webm")
        #expect(throws: (any Error).self) {
            try RecordingFiles.create(in: dir + "/missing", for: "x", ext: "ogg")
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
