import Foundation
import Testing

@testable import Signaling

/// Interop with the Python `websockets` package (a real, independent RFC 6455 implementation).
@Suite(
    "WebSocket foreign peer",
    .enabled(
        if: pythonWebsocketsAvailable, "needs /work/main/.venv with the websockets package (pip install websockets)"))
struct ForeignPeerTests {
    @Test func pythonClientTalksToOurServer() async throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        let url = "ws://127.0.0.1:\(server.port)/echo?token=abc"
        let (status, out, err) = try await withDeadline(60, "python client") {
            try runPython([peersDirectory.appendingPathComponent("ws_client.py").path, url])
        }
        #expect(status == 0, "stdout: \(out)\nstderr: \(err)")
        #expect(out.contains("RESULT ok"))
        #expect(out.contains("CLOSE 1000"))
    }

    @Test func ourClientTalksToPythonServer() async throws {
        let python = try #require(venvPython)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [peersDirectory.appendingPathComponent("ws_echo_server.py").path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.standardError
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let handle = out.fileHandleForReading
        let portLine = try await withDeadline(30, "python server port") {
            var line = [UInt8]()
            while true {
                let byte = handle.readData(ofLength: 1)
                if byte.isEmpty || byte.first == 10 { break }
                line.append(contentsOf: byte)
            }
            return String(decoding: line, as: UTF8.self)
        }
        let port = try #require(UInt16(portLine.replacingOccurrences(of: "PORT ", with: "")), "got '\(portLine)'")

        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(port)/room?token=t%2B1")
        let probe = WSProbe(ws)
        ws.send(text: "path?")
        #expect(try await probe.next() == .text("/room?token=t%2B1"))
        ws.send(text: "héllo ✓")
        #expect(try await probe.next() == .text("héllo ✓"))
        let big = (0..<(200 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        ws.send(binary: big)
        #expect(try await probe.next("big echo") == .binary(big))
        ws.sendFragmented(text: String(repeating: "frag✓", count: 100), fragmentSize: 10)
        #expect(try await probe.next() == .text(String(repeating: "frag✓", count: 100)))
        ws.sendPing([1, 2, 3])
        #expect(try await probe.next() == .pong([1, 2, 3]))
        ws.send(text: "close:4321")
        let (code, reason) = try await probe.closed()
        #expect(code == 4321)
        #expect(reason == "bye from python")
    }
}
