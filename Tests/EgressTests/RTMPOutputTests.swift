import Foundation
import Media
import SystemCalls
import TestSupport
import Testing

@testable import Egress

#if canImport(Glibc)
    import Glibc
#endif

/// RTMP push: bad URLs, a real server (`ffmpeg -listen 1`) that receives H.264 + AAC and is killed and
/// restarted mid-stream (the output reconnects and the second file plays), a server that answers the
/// handshake with garbage (a clear error and another attempt, no crash), and a queue that never blocks.
@Suite(.serialized) struct RTMPOutputTests {
    @Test func urlsAreParsedAndBadOnesRefusedClearly() async throws {
        let u = try RTMPURL("rtmp://live.example.com/app/key?x=1")
        #expect(u == (try RTMPURL("rtmp://live.example.com:1935/app/key?x=1")))
        #expect(u.app == "app" && u.stream == "key?x=1" && u.port == 1935)
        #expect(u.tcURL == "rtmp://live.example.com:1935/app")
        let v6 = try RTMPURL("rtmp://[::1]:1936/live/a/b")
        #expect(v6.host == "::1" && v6.port == 1936 && v6.stream == "a/b")
        for (url, why) in [
            ("http://x/a/b", "not an rtmp:// URL"), ("rtmps://x/a/b", "rtmps (TLS) is not supported"),
            ("rtmp://x", "no /app/stream path"), ("rtmp://x/app", "no stream key after the application"),
            ("rtmp://x:99999/a/b", "port 99999 out of range"), ("rtmp://x:ab/a/b", "port 'ab'"),
            ("rtmp:///a/b", "no host"), ("rtmp://x//b", "empty application name"),
        ] {
            #expect(throws: RTMPOutput.Failure.invalidURL("'\(url)': \(why)")) { try RTMPURL(url) }
            #expect(throws: RTMPOutput.Failure.self) { try RTMPOutput(destination: url) }
        }
    }

    @Test func amf0RoundTrips() async throws {
        var b: [UInt8] = []
        let values: [AMF0.Value] = [
            .string("_result"), .number(4), .null,
            .object([("level", .string("status")), ("code", .string("NetStream.Publish.Start")), ("n", .boolean(true))]
            ),
        ]
        for v in values { AMF0.append(v, to: &b) }
        #expect(try AMF0.decode(b[...]) == values)
        #expect(throws: AMF0.Malformed.self) { try AMF0.decode(b.dropLast(2)) }
    }

    /// ffmpeg as the server: the first file gets h264 + aac; after the server is killed, a new one on the
    /// same port gets a second stream that plays from its start, while the composite never stopped.
    @Test func aRealServerReceivesAndAReconnectFollowsItsRestart() async throws {
        let dir = scratchFolder("rtmp")
        let port = try freePort()
        let url = "rtmp://127.0.0.1:\(port)/live/room"
        let first = try listen(url, into: dir + "/first.flv")
        let lines = LogLines()
        let output = try RTMPOutput(
            destination: url, options: .init(reconnectDelay: 0.05, maxReconnectDelay: 0.5, keyframeIntervalSeconds: 1),
            log: { lines.add($0) })
        let feed = try CompositeFeed(keyframeSeconds: 1)
        try await feedPaced(feed, output, until: "60 video frames sent") { output.stats.sentVideoFrames >= 60 }
        #expect(output.stats.connections == 1)
        first.signal(SIGKILL)
        try await wait(first, "the first server to die")
        let sentBefore = output.stats.sentVideoFrames
        let second = try listen(url, into: dir + "/second.flv")
        try await feedPaced(feed, output, until: "a second publish and 90 more frames") {
            let s = output.stats
            return s.connections >= 2 && s.sentVideoFrames >= sentBefore + 90
        }
        try await onOwnThread { try output.finish() }
        try await wait(second, "the second server to end")
        let stats = output.stats
        #expect(stats.failures >= 1, "\(stats)")
        #expect(stats.lastError != nil)
        // The log tells an operator: the first publish, the loss, the new publish.
        let logged = lines.all
        #expect(logged.contains("RTMP output: publishing to 127.0.0.1:\(port)/live"), "\(logged)")
        #expect(logged.contains { $0.contains("connection lost") || $0.contains("cannot connect") }, "\(logged)")
        #expect(logged.contains { $0.hasSuffix("/live again (2)") }, "\(logged)")
        for file in ["first.flv", "second.flv"] {
            let probed = try await probe(dir + "/" + file)
            #expect(probed.codecs == ["aac", "h264"], "\(file): \(probed)")
        }
        let second2 = try await probe(dir + "/second.flv")
        #expect(second2.duration >= 2.5, "\(second2)")
        #expect(try await decodeErrors(dir + "/second.flv").isEmpty)
        // The second stream starts at a keyframe with timestamps from 0.
        let start = try await onOwnThread {
            try runToolText(
                "/usr/bin/ffprobe",
                ["-v", "error", "-show_entries", "format=start_time", "-of", "csv=p=0", dir + "/second.flv"])
        }
        #expect((Double(start) ?? 99) < 0.1, "start \(start)")
    }

    /// A server that completes the handshake and then sends bytes that are no chunk stream: the output
    /// records a protocol error and tries again; nothing crashes and the composite is never blocked.
    @Test func garbageAfterTheHandshakeIsAClearErrorAndAReconnect() async throws {
        let server = try GarbageServer()
        let output = try RTMPOutput(
            destination: "rtmp://127.0.0.1:\(server.port)/live/x",
            options: .init(reconnectDelay: 0.05, maxReconnectDelay: 0.2, ioTimeout: 5))
        let feed = try CompositeFeed()
        try await feedPaced(feed, output, until: "a second connection after the garbage") { server.accepted >= 2 }
        let stats = output.stats
        #expect(stats.connections == 0)
        guard case .protocolError(let why)? = stats.lastError else {
            Issue.record("last error \(String(describing: stats.lastError))")
            return
        }
        #expect(why.contains("chunk"), "\(why)")
        try await onOwnThread { try output.finish() }
        server.stop()
    }

    /// Nothing listening: the queue fills, whole GOPs are dropped and counted, writing never blocks, and
    /// finish returns.
    @Test func aFullQueueDropsWholeGOPsAndNeverBlocks() async throws {
        let port = try freePort()
        let output = try RTMPOutput(
            destination: "rtmp://127.0.0.1:\(port)/live/x",
            options: .init(maxQueuedBytes: 64 << 10, reconnectDelay: 0.05, maxReconnectDelay: 0.1))
        let feed = try CompositeFeed(keyframeSeconds: 1)
        try await feed.feed(seconds: 6, to: [output])
        let stats = output.stats
        #expect(stats.queueOverflows >= 1, "\(stats)")
        #expect(stats.droppedFrames > 0)
        #expect(stats.connections == 0)
        #expect(stats.failures >= 1)
        if case .connectFailed? = stats.lastError {
        } else {
            Issue.record("last error \(String(describing: stats.lastError))")
        }
        try await onOwnThread { try output.finish() }
    }

    // MARK: - Helpers

    /// Feeds 0.1 s at a time at about real time until `condition` holds (sleeping without holding a thread
    /// of the shared pool, which the suites' async tests need).
    func feedPaced(_ feed: CompositeFeed, _ output: RTMPOutput, until what: String, _ condition: () -> Bool)
        async throws
    {
        // Generous: ffmpeg itself may take seconds to listen on a loaded machine.
        let deadline = Date().addingTimeInterval(90)
        while !condition() {
            guard Date() < deadline else { throw WaitTimeout(what: what + " (\(output.stats))") }
            try await feed.feed(seconds: 0.1, to: [output])
            try await Task.sleep(nanoseconds: 100_000_000)
        }
    }

    func listen(_ url: String, into path: String) throws -> ChildProcess {
        try ChildProcess(
            "/usr/bin/ffmpeg",
            [
                "-nostdin", "-v", "error", "-analyzeduration", "1000000", "-listen", "1", "-i", url, "-c", "copy",
                "-flush_packets", "1", "-y", path,
            ], standardError: .null)
    }

    func wait(_ p: ChildProcess, _ what: String) async throws {
        let deadline = Date().addingTimeInterval(30)
        while !p.hasExited {
            guard Date() < deadline else {
                p.signal(SIGKILL)
                throw WaitTimeout(what: what)
            }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
    }
}

/// Lines a log closure heard, from any thread.
final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func add(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

/// A TCP port nothing listens on now.
func freePort() throws -> Int {
    let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(s) }
    var a = sockaddr_in()
    a.sin_family = sa_family_t(AF_INET)
    a.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &a) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, len) == 0 && getsockname(s, $0, &len) == 0 }
    }
    guard bound else { throw WaitTimeout(what: "a free port") }
    return Int(UInt16(bigEndian: a.sin_port))
}

/// Accepts connections, answers the RTMP handshake properly, then sends bytes that are no chunk stream.
final class GarbageServer: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    private let lock = NSLock()
    private var count = 0
    private var stopped = false
    var accepted: Int { lock.withLock { count } }

    init() throws {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(s, $0, len) == 0 && listen(s, 4) == 0 && getsockname(s, $0, &len) == 0
            }
        }
        guard ok else {
            close(s)
            throw WaitTimeout(what: "a listening socket")
        }
        fd = s
        port = Int(UInt16(bigEndian: a.sin_port))
        Thread { [self] in serve() }.start()
    }

    func stop() {
        lock.withLock { stopped = true }
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func serve() {
        while !lock.withLock({ stopped }) {
            let c = accept(fd, nil, nil)
            guard c >= 0 else { return }
            lock.withLock { count += 1 }
            var c1 = [UInt8](repeating: 0, count: 1537)
            var got = 0
            while got < c1.count {
                let n = c1.withUnsafeMutableBytes { recv(c, $0.baseAddress! + got, 1537 - got, 0) }
                if n <= 0 { break }
                got += n
            }
            var reply: [UInt8] = [3] + [UInt8](repeating: 7, count: 1536) + c1[1...]
            reply += [UInt8](repeating: 0xFF, count: 64)
            _ = reply.withUnsafeBytes { send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            Thread.sleep(forTimeInterval: 0.2)
            close(c)
        }
    }
}
