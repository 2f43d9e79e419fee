import Foundation
import SystemCalls
import Testing

@testable import Signaling

@Suite("WebSocket")
struct WebSocketConnectionTests {
    @Test func acceptValueMatchesRFCExample() {
        // RFC 6455 §1.3.
        #expect(WebSocketHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func frameCodecRoundTripsAllLengthForms() throws {
        for size in [0, 1, 125, 126, 65535, 65536, 70000] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            for key: UInt32? in [nil, 0xA1B2_C3D4] {
                let bytes = WebSocketFrameCodec.encode(opcode: .binary, payload: payload, maskKey: key)
                let decoded = try bytes.withUnsafeBytes { raw in
                    try WebSocketFrameCodec.decode(raw, expectMasked: key != nil, maxPayload: 1 << 20)
                }
                #expect(decoded?.0.payload == payload)
                #expect(decoded?.1 == bytes.count)
                // Every strict prefix is "need more bytes", never an error or a frame.
                if bytes.count > 1 {
                    let partial = try bytes.withUnsafeBytes { raw in
                        try WebSocketFrameCodec.decode(
                            UnsafeRawBufferPointer(rebasing: raw[0..<(bytes.count - 1)]), expectMasked: key != nil,
                            maxPayload: 1 << 20)
                    }
                    #expect(partial == nil)
                }
            }
        }
    }

    @Test func frameCodecRejectsViolations() {
        func violation(_ bytes: [UInt8], masked: Bool = false, max: Int = 1000) -> UInt16? {
            bytes.withUnsafeBytes { raw in
                do throws(WebSocketProtocolViolation) {
                    _ = try WebSocketFrameCodec.decode(raw, expectMasked: masked, maxPayload: max)
                    return nil
                } catch { return error.code }
            }
        }
        #expect(violation([0xC1, 0x00]) == 1002)  // RSV1
        #expect(violation([0x83, 0x00]) == 1002)  // reserved opcode
        #expect(violation([0x09, 0x00]) == 1002)  // fragmented ping
        #expect(violation([0x89, 126, 0, 200]) == 1002)  // control frame > 125
        #expect(violation([0x81, 0x80, 0, 0, 0, 0]) == 1002)  // masked frame to a client
        #expect(violation([0x81, 0x00], masked: true) == 1002)  // unmasked frame to a server
        #expect(violation([0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0]) == 1002)  // 64-bit length with high bit
        #expect(violation([0x82, 126, 0x10, 0x00], max: 1000) == 1009)  // 4096 > limit
    }

    @Test func echoTextAndBinary() async throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo")
        let probe = WSProbe(ws)
        ws.send(text: "hello ✓")
        #expect(try await probe.next() == .text("hello ✓"))
        ws.send(binary: [0, 1, 2, 255])
        #expect(try await probe.next() == .binary([0, 1, 2, 255]))
        ws.send(text: "")
        #expect(try await probe.next() == .text(""))
        ws.close()
        let (code, _) = try await probe.closed()
        #expect(code == 1000)
    }

    @Test func upgradeHandlerSeesPathAndQueryAndCanRefuse() async throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo?token=abc%20d&x=1")
        let probe = WSProbe(ws)
        ws.send(text: "target?")
        #expect(try await probe.next() == .text("/echo?token=abc%20d&x=1"))
        ws.close()
        _ = try await probe.closed()

        await #expect(throws: WebSocketError.handshakeFailed(status: 401, reason: "Unauthorized")) {
            _ = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo?token=bad")
        }
        await #expect(throws: WebSocketError.handshakeFailed(status: 404, reason: "Not Found")) {
            _ = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/nowhere")
        }
    }

    @Test func fragmentedMessageIsReassembled() async throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo")
        let probe = WSProbe(ws)
        let text = String(repeating: "fragmented ünïcode ", count: 50)
        // 7-byte fragments split multi-byte characters across frames; only the whole must be UTF-8.
        ws.sendFragmented(text: text, fragmentSize: 7)
        #expect(try await probe.next() == .text(text))
        ws.close()
        _ = try await probe.closed()
    }

    @Test func largeMessageRoundTrips() async throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo")
        let probe = WSProbe(ws)
        let big = (0..<(200 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        ws.send(binary: big)
        #expect(try await probe.next("200 KiB echo") == .binary(big))
        ws.close()
        _ = try await probe.closed()
    }

    @Test func pingIsAnsweredWithPong() async throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo")
        let probe = WSProbe(ws)
        ws.sendPing([9, 8, 7])
        #expect(try await probe.next() == .pong([9, 8, 7]))
        ws.close()
        _ = try await probe.closed()
    }

    @Test func serverInitiatedCloseCarriesCodeAndReason() async throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo")
        let probe = WSProbe(ws)
        ws.send(text: "close:4001")
        let (code, reason) = try await probe.closed()
        #expect(code == 4001)
        #expect(reason == "as requested")
        #expect(!ws.isOpen)
    }

    @Test func clientCloseCodeReachesServer() async throws {
        let server = HTTPServer(host: "127.0.0.1", port: 0)
        let (stream, cont) = AsyncStream.makeStream(of: WSEvent.self)
        server.webSocket(path: "/ws") { _ in
            .accept(onOpen: { ws in ws.onClose = { cont.yield(.closed($0, $1)) } })
        }
        try server.start()
        defer { server.stop() }
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/ws")
        let probe = WSProbe(ws)
        ws.close(code: 4100, reason: "leaving")
        let serverSide = try await withDeadline(10, "server close") {
            var it = stream.makeAsyncIterator()
            return await it.next()
        }
        #expect(serverSide == .closed(4100, "leaving"))
        // The server echoes the code back.
        #expect(try await probe.closed().0 == 4100)
    }

    @Test func oversizeMessageClosesWith1009() async throws {
        var config = HTTPServerConfiguration()
        config.webSocket.maxMessageBytes = 64 * 1024
        let server = try makeEchoServer(configuration: config)
        defer { server.stop() }
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo")
        let probe = WSProbe(ws)
        ws.send(text: String(repeating: "a", count: 64 * 1024))  // exactly the limit: accepted
        #expect(try await probe.next() == .text(String(repeating: "a", count: 64 * 1024)))
        ws.send(binary: [UInt8](repeating: 1, count: 64 * 1024 + 1))
        #expect(try await probe.closed().0 == 1009)
    }

    @Test func fragmentedOversizeClosesWith1009() async throws {
        var config = HTTPServerConfiguration()
        config.webSocket.maxMessageBytes = 1000
        let server = try makeEchoServer(configuration: config)
        defer { server.stop() }
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo")
        let probe = WSProbe(ws)
        ws.sendFragmented(text: String(repeating: "b", count: 1500), fragmentSize: 400)
        #expect(try await probe.closed().0 == 1009)
    }

    @Test func unmaskedClientFrameClosesWith1002() throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        let head = try raw.handshake()
        #expect(head.hasPrefix("HTTP/1.1 101"))
        #expect(head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
        try raw.send(WebSocketFrameCodec.encode(opcode: .text, payload: Array("hi".utf8), maskKey: nil))
        let reply = raw.readToEnd()
        // A server close frame: 0x88, length, code 1002 (0x03EA).
        #expect(reply.count >= 4)
        #expect(Array(reply.prefix(4)) == [0x88, reply.count >= 2 ? reply[1] : 0, 0x03, 0xEA])
    }

    @Test func invalidUTF8ClosesWith1007() throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        _ = try raw.handshake()
        try raw.send(
            WebSocketFrameCodec.encode(opcode: .text, payload: [0x68, 0xC3, 0x28, 0xFF], maskKey: 0x0102_0304))
        let reply = raw.readToEnd()
        #expect(reply.count >= 4)
        #expect(reply.first == 0x88)
        #expect(reply.count >= 4 && reply[2] == 0x03 && reply[3] == 0xEF)  // 1007
    }

    @Test func reservedBitsCloseWith1002() throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        _ = try raw.handshake()
        var frame = WebSocketFrameCodec.encode(opcode: .text, payload: Array("x".utf8), maskKey: 0x0102_0304)
        frame[0] |= 0x40
        try raw.send(frame)
        let reply = raw.readToEnd()
        #expect(reply.count >= 4 && reply[0] == 0x88 && reply[2] == 0x03 && reply[3] == 0xEA)
    }

    @Test func badHandshakesGet400Or426() throws {
        let server = try makeEchoServer()
        defer { server.stop() }
        func statusLine(_ request: String) throws -> String {
            let raw = try RawSocket(port: server.port)
            try raw.send(request)
            return String(decoding: raw.readToEnd(), as: UTF8.self).components(separatedBy: "\r\n").first ?? ""
        }
        let base = "Host: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        // Missing key.
        #expect(
            try statusLine("GET /echo HTTP/1.1\r\n\(base)Sec-WebSocket-Version: 13\r\n\r\n")
                == "HTTP/1.1 400 Bad Request")
        // Key that is not 16 bytes of base64.
        #expect(
            try statusLine("GET /echo HTTP/1.1\r\n\(base)Sec-WebSocket-Key: abc\r\nSec-WebSocket-Version: 13\r\n\r\n")
                == "HTTP/1.1 400 Bad Request")
        // Wrong version.
        #expect(
            try statusLine(
                "GET /echo HTTP/1.1\r\n\(base)Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n"
            ).hasPrefix("HTTP/1.1 426"))
        // Not an upgrade at all.
        #expect(try statusLine("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n").hasPrefix("HTTP/1.1 426"))
        // POST.
        #expect(
            try statusLine(
                "POST /echo HTTP/1.1\r\n\(base)Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n"
            ) == "HTTP/1.1 400 Bad Request")
        // Connection header without Upgrade.
        #expect(
            try statusLine(
                "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ) == "HTTP/1.1 400 Bad Request")
    }

    @Test func stopClosesOpenWebSockets() async throws {
        let server = try makeEchoServer()
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo")
        let probe = WSProbe(ws)
        ws.send(text: "ping")
        #expect(try await probe.next() == .text("ping"))
        server.stop()
        #expect(try await probe.closed().0 == 1001)
    }

    @Test func framesSentRightAfterHandshakeAreNotLost() throws {
        // Handshake and first frame in one TCP write: the server must parse the frame from the
        // bytes left over after the HTTP head.
        let server = try makeEchoServer()
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        var bytes = Array(
            "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
                .utf8)
        bytes += WebSocketFrameCodec.encode(opcode: .text, payload: Array("early".utf8), maskKey: 0x5555_AAAA)
        try raw.send(bytes)
        let reply = raw.read(until: "early")
        #expect(reply.hasSuffix("early"))
    }
}

@Suite("WebSocket backpressure")
struct WebSocketBackpressureTests {
    @Test func slowConsumerPausesReadingWithoutLosingMessages() async throws {
        // The server's handler is slow and the undelivered-bytes bound is tiny, so the server must
        // stop and restart reading many times; every message must still arrive, in order.
        var config = HTTPServerConfiguration()
        config.webSocket.maxUndeliveredBytes = 16 * 1024
        let server = HTTPServer(host: "127.0.0.1", port: 0, configuration: config)
        let serverSide = LockedBox<WebSocketConnection?>(nil)
        server.webSocket(path: "/slow") { _ in
            .accept(onOpen: { ws in
                serverSide.value = ws
                ws.onBinary = { bytes in
                    usleep(200)
                    ws.send(text: "\(bytes.count):\(bytes.first ?? 0)")
                }
            })
        }
        try server.start()
        defer { server.stop() }
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/slow")
        let probe = WSProbe(ws)
        let count = 300
        for i in 0..<count { ws.send(binary: [UInt8](repeating: UInt8(i % 251), count: 8 * 1024)) }
        var mismatches = 0
        for i in 0..<count where try await probe.next("reply \(i)", seconds: 30) != .text("8192:\(i % 251)") {
            mismatches += 1
        }
        #expect(mismatches == 0)
        #expect((serverSide.value?.readPauseCount ?? 0) > 0)
        ws.close()
        #expect(try await probe.closed().0 == 1000)
    }
}

@Suite("WebSocket keepalive")
struct WebSocketKeepaliveTests {
    @Test func silentPeerIsPingedThenDropped() throws {
        var config = HTTPServerConfiguration()
        config.webSocket.idlePingSeconds = 0.2
        let server = try makeEchoServer(configuration: config)
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        _ = try raw.handshake()
        // Never answer: the server pings (unmasked, empty payload), then gives up and closes.
        let bytes = raw.readToEnd()
        #expect(Array(bytes.prefix(2)) == [0x89, 0x00])
    }

    @Test func answeringPeerStaysConnected() async throws {
        var config = HTTPServerConfiguration()
        config.webSocket.idlePingSeconds = 0.3
        let server = try makeEchoServer(configuration: config)
        defer { server.stop() }
        // Our client answers pings automatically, so several ping intervals pass without a drop.
        let ws = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/echo")
        let probe = WSProbe(ws)
        try await Task.sleep(nanoseconds: 1_200_000_000)
        ws.send(text: "still here")
        #expect(try await probe.next() == .text("still here"))
        ws.close()
        #expect(try await probe.closed().0 == 1000)
    }
}

/// Interop with the Python `websockets` package (a real, independent RFC 6455 implementation).
@Suite(
    "WebSocket foreign peer",
    .enabled(
        if: pythonWebsocketsAvailable, "needs /work/main/.venv with the websockets package (pip install websockets)"))
struct WebSocketForeignPeerTests {
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
        let process = try ChildProcess(
            python, [peersDirectory.appendingPathComponent("ws_echo_server.py").path], standardOutput: .pipe)
        defer { process.signal(SIGTERM) }
        let handle = FileHandle(fileDescriptor: process.standardOutput!, closeOnDealloc: false)
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
