import Foundation
import RoomServer
import Signaling
import SystemCalls
import Testing

/// A client nobody here wrote: Python's `websockets` library joins, hears a Swift participant
/// arrive, exchanges PubSub messages with it and leaves.
@Suite("RoomServer foreign client")
struct ForeignClientTests {
    static let python = "/work/main/.venv/bin/python"

    static let script = #"""
        import asyncio, json, sys
        import websockets

        async def main(url, token):
            async with websockets.connect(url + "?token=" + token) as ws:
                async def call(id, method, data):
                    await ws.send(json.dumps({"id": id, "method": method, "data": data}))
                    while True:
                        msg = json.loads(await ws.recv())
                        print(json.dumps(msg), flush=True)
                        if msg.get("id") == id:
                            assert msg["ok"], msg
                            return msg
                await call("j1", "join", {"protocolVersion": 1, "roomId": "py-room", "participantId": "python",
                                          "name": "Py", "mode": "RECV_ONLY"})
                await call(2, "subscribe", {"topic": "hello"})
                await call(3, "publish", {"topic": "ready", "message": "ready", "persist": True})
                while True:
                    msg = json.loads(await ws.recv())
                    print(json.dumps(msg), flush=True)
                    if msg.get("method") == "pubsubMessage":
                        break
                await call(4, "leave", {})

        # Generous: on a loaded machine the Swift side may be slow to answer; it has its own deadline.
        asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2]), 110))
        """#

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: python)))
    func pythonWebsocketsClientJoinsAndReceivesNotifications() async throws {
        let server = try startServer()
        defer { server.stop() }
        let process = try ChildProcess(
            Self.python, ["-c", Self.script, server.signalingURL, token(server, room: "py-room")],
            standardOutput: .pipe, standardError: .standardOutput)
        defer { process.signal(SIGTERM) }
        let out = FileHandle(fileDescriptor: process.standardOutput!, closeOnDealloc: false)

        let (swift, _) = try await TestClient.joined(server, room: "py-room", participant: "swift")
        _ = try await swift.request("subscribe", ["topic": "ready"]).get()
        // The Python side's "ready" arrives live or, if it came first, as persisted history. Python's
        // start-up (interpreter, websockets import) can take tens of seconds on a loaded machine.
        let deadline = Date().addingTimeInterval(120)
        while swift.notifications("pubsubMessage").isEmpty && swift.notifications("pubsubHistory").isEmpty {
            guard Date() < deadline, !process.hasExited || !swift.notifications("pubsubHistory").isEmpty else {
                let state = process.hasExited ? "exited" : "still running"
                process.signal(SIGTERM)
                let output = String(decoding: out.readDataToEndOfFile(), as: UTF8.self)
                throw Timeout(what: "python ready (python \(state); its output: \(output.suffix(2000)))")
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        _ = try await swift.request("publish", ["topic": "hello", "message": "hi from swift", "payload": ["n": 1]])
            .get()
        let left = try await swift.notification("participantLeft", seconds: 20)
        #expect(left["participantId"] == "python")
        #expect(left["reason"]?.intValue == 1101)

        while !process.hasExited {
            guard Date() < deadline else { throw Timeout(what: "python exit") }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        let output = String(decoding: out.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.wait() == 0, "python output:\n\(output)")
        let messages = output.split(separator: "\n").compactMap { try? JSONValue.parse(String($0)) }
        #expect(messages.contains { $0["method"] == "participantJoined" && $0["data"]?["participantId"] == "swift" })
        let hello = messages.first { $0["method"] == "pubsubMessage" }
        #expect(hello?["data"]?["message"] == "hi from swift")
        #expect(hello?["data"]?["payload"] == ["n": 1])
        #expect(messages.contains { $0["id"] == "j1" && $0["data"]?["protocolVersion"] == 1 })
    }
}
