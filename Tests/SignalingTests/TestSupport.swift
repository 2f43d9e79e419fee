import Foundation
import SystemCalls
import Testing

@testable import Signaling

#if canImport(Glibc)
    import Glibc
#endif

struct TestTimeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Events a WebSocket produced, readable in order from a test.
enum WSEvent: Equatable, Sendable {
    case text(String)
    case binary([UInt8])
    case pong([UInt8])
    case closed(UInt16, String)
}

/// Collects a connection's callbacks into a stream the test awaits with a generous deadline (the
/// deadline only keeps a broken build from hanging; no test asserts on timing).
final class WSProbe: Sendable {
    let connection: WebSocketConnection
    let events: AsyncStream<WSEvent>
    private let continuation: AsyncStream<WSEvent>.Continuation

    init(_ connection: WebSocketConnection, start: Bool = true) {
        self.connection = connection
        (events, continuation) = AsyncStream.makeStream(of: WSEvent.self)
        let c = continuation
        connection.onText = { c.yield(.text($0)) }
        connection.onBinary = { c.yield(.binary($0)) }
        connection.onPong = { c.yield(.pong($0)) }
        connection.onClose = { code, reason in
            c.yield(.closed(code, reason))
            c.finish()
        }
        if start { connection.start() }
    }

    func next(_ what: String = "event", seconds: Double = 10) async throws -> WSEvent {
        try await withDeadline(seconds, what) { [events] in
            var iterator = events.makeAsyncIterator()
            guard let e = await iterator.next() else { throw TestTimeout(what: "\(what) (stream ended)") }
            return e
        }
    }

    /// Waits for the close event, skipping anything before it.
    func closed(seconds: Double = 10) async throws -> (UInt16, String) {
        while true {
            if case .closed(let code, let reason) = try await next("close", seconds: seconds) { return (code, reason) }
        }
    }
}

func withDeadline<T: Sendable>(_ seconds: Double, _ what: String, _ body: @escaping @Sendable () async throws -> T)
    async throws -> T
{
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            throw TestTimeout(what: what)
        }
        guard let first = try await group.next() else { throw TestTimeout(what: what) }
        group.cancelAll()
        return first
    }
}

/// A server with an echo WebSocket at /echo (text "close:<code>" makes the server close with it).
func makeEchoServer(configuration: HTTPServerConfiguration = HTTPServerConfiguration()) throws -> HTTPServer {
    let server = HTTPServer(host: "127.0.0.1", port: 0, configuration: configuration)
    server.webSocket(path: "/echo") { request in
        if request.query("token") == "bad" { return .reject(.text("bad token\n", status: 401)) }
        return .accept(onOpen: { ws in
            ws.onText = { text in
                if text.hasPrefix("close:"), let code = UInt16(text.dropFirst(6)) {
                    ws.close(code: code, reason: "as requested")
                } else if text == "target?" {
                    ws.send(text: ws.requestTarget)
                } else {
                    ws.send(text: text)
                }
            }
            ws.onBinary = { ws.send(binary: $0) }
        })
    }
    try server.start()
    return server
}

/// A blocking TCP client for sending hand-made bytes (malformed requests, unmasked frames).
final class RawSocket: @unchecked Sendable {
    let fd: Int32

    init(port: UInt16) throws {
        fd = try HTTPClient.connect(host: "127.0.0.1", port: port, timeout: 10)
    }

    deinit { Glibc.close(fd) }

    func send(_ bytes: [UInt8]) throws {
        try HTTPClient.writeAll(fd, bytes)
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Reads until the peer closes (or the 10 s receive timeout).
    func readToEnd() -> [UInt8] {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return out }
            out.append(contentsOf: chunk[0..<n])
        }
    }

    /// Reads until `terminator` has been seen `count` times.
    func read(until terminator: String, count: Int = 1) -> String {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while String(decoding: out, as: UTF8.self).components(separatedBy: terminator).count - 1 < count {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Performs a WebSocket handshake by hand and returns the bytes after the 101 head.
    func handshake(path: String = "/echo") throws -> String {
        try send(
            "GET \(path) HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        return read(until: "\r\n\r\n")
    }
}

/// The Python interpreter of the project's venv, when present.
let venvPython: String? = {
    var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = dir.appendingPathComponent(".venv/bin/python").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    return nil
}()

let pythonWebsocketsAvailable: Bool = {
    guard let python = venvPython else { return false }
    guard
        let p = try? ChildProcess(
            python, ["-c", "import websockets.asyncio.server, websockets.asyncio.client"], standardOutput: .null,
            standardError: .null)
    else { return false }
    return p.wait() == 0
}()

let peersDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("peers")

/// Runs a Python program to completion and returns (status, stdout, stderr).
func runPython(_ arguments: [String]) throws -> (Int32, String, String) {
    guard let python = venvPython else { throw TestTimeout(what: "python venv") }
    let p = try ChildProcess(python, arguments, standardOutput: .pipe, standardError: .pipe)
    // stderr on a thread of its own, so a chatty program never blocks on a full pipe.
    let err = StandardErrorReader()
    Thread.detachNewThread {
        err.bytes = ChildProcess.readToEnd(p.standardError!)
        err.done.signal()
    }
    let outData = ChildProcess.readToEnd(p.standardOutput!)
    let status = p.wait()
    err.done.wait()
    return (status, String(decoding: outData, as: UTF8.self), String(decoding: err.bytes, as: UTF8.self))
}

// Safe: `bytes` is written before `done` is signalled and read after it is waited for.
private final class StandardErrorReader: @unchecked Sendable {
    var bytes: [UInt8] = []
    let done = DispatchSemaphore(value: 0)
}

/// A small seeded generator (SplitMix64) for the parsers' random-input tests.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
