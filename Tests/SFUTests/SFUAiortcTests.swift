import Foundation
import Media
import RTC
import RTCWire
import SystemCalls
import TestSupport
import Testing

@testable import SFU

/// The repository root, found from this file (through a symlinked test copy too).
private let sfuRepoRoot: URL = {
    if let root = ProcessInfo.processInfo.environment["UNDERSTUDY_REPO"] { return URL(fileURLWithPath: root) }
    return URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}()

private let aiortcPython = sfuRepoRoot.appendingPathComponent(".venv/bin/python").path

/// An aiortc process publishing through the SFU: the non-Swift peer proof.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: aiortcPython)))
struct SFUAiortcTests {
    /// A child process spoken to with JSON lines.
    final class JSONLinePeer: @unchecked Sendable {
        let process: ChildProcess
        private let input: FileHandle
        private let output: FileHandle
        private var buffer: [UInt8] = []

        init(script: String) throws {
            var env = ProcessInfo.processInfo.environment
            env["PYTHONPATH"] = sfuRepoRoot.appendingPathComponent("Tests/Interop").path
            env["PYTHONUNBUFFERED"] = "1"
            process = try ChildProcess(
                aiortcPython, [script], environment: env, standardInput: .pipe, standardOutput: .pipe,
                standardError: .null)
            input = FileHandle(fileDescriptor: process.standardInput!, closeOnDealloc: false)
            output = FileHandle(fileDescriptor: process.standardOutput!, closeOnDealloc: false)
        }

        /// The next JSON object printed by the peer (blocking; call off the cooperative pool).
        func readMessage() -> [String: Any]? {
            while true {
                if let newline = buffer.firstIndex(of: 10) {
                    let line = Array(buffer[..<newline])
                    buffer.removeSubrange(...newline)
                    if let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] {
                        return object
                    }
                    continue
                }
                let chunk = output.availableData
                if chunk.isEmpty { return nil }
                buffer.append(contentsOf: chunk)
            }
        }

        func send(_ object: [String: Any]) throws {
            var data = try JSONSerialization.data(withJSONObject: object)
            data.append(10)
            try input.write(contentsOf: data)
        }

        func stop() {
            try? send(["stop": true])
            process.closeStandardInput()
            process.wait()
        }
    }

    @Test func aiortcPublisherReachesASwiftSubscriber() async throws {
        let script = sfuRepoRoot.appendingPathComponent("Tests/Interop/sfu_aiortc_publisher.py").path
        let peer = try JSONLinePeer(script: script)
        defer { peer.stop() }
        let offer: String? = await Task.detached { peer.readMessage()?["offer"] as? String }.value
        guard let offerText = offer else {
            Issue.record("aiortc printed no offer")
            return
        }
        let sfu = SFU()
        let (answer, producers) = try await sfu.publish(
            participantID: "aiortc", offer: try SessionDescription.parse(offerText))
        #expect(Set(producers.map(\.kind)) == [.audio, .video])
        try peer.send(["answer": answer.serialize()])

        let subscriber = try SFUTestClient(name: "sfu-sub-aiortc")
        for p in producers { _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: p.id) } }
        let path = temporaryPath("aiortc.webm")
        let recording = try await subscriber.recordSubscription(with: sfu, participantID: "bob", path: path) {
            try await Task.sleep(for: .seconds(4))
        }

        let stats = await sfu.stats()
        #expect(stats.counters.packetsIn > 100, "aiortc's media reached the SFU")
        // aiortc negotiates goog-remb and no transport-cc: the SFU answers it and sends REMB, one a second.
        #expect(answer.serialize().contains("goog-remb"))
        #expect(stats.counters.rembSent >= 2, "REMBs sent to aiortc: \(stats.counters.rembSent)")
        #expect(recording.videoFrames >= 30, "video frames: \(recording.videoFrames)")
        #expect(recording.audioFrames >= 50, "audio frames: \(recording.audioFrames)")
        let probe = try runToolText(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", path,
            ])
        #expect(probe.contains("vp8,320,240"), "ffprobe: \(probe)")
        #expect(probe.contains("opus"))
        let decode = try ffmpegDecodeErrors(path)
        #expect(decode.isEmpty, "ffmpeg reported decode errors: \(decode)")

        await subscriber.close()
        await sfu.shutdown()
    }
}
