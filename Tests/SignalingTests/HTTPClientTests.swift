import Dispatch
import Foundation
import Testing

@testable import Signaling

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP server on 127.0.0.1 that reads a request and then drips `answer` one byte every
/// `interval` seconds, for at most `lifetime` seconds, then closes. Each byte comes well within any
/// per-read timeout, so only a deadline on the whole exchange ends the client's wait.
final class DrippingServer: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private let lock = NSLock()
    private var stopped = false

    init(answer: String, interval: Double = 0.25, lifetime: Double = 40) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            close(fd)
            throw HTTPError.connectFailed("cannot listen")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        let listener = self.listener
        let bytes = Array(answer.utf8)
        Thread { [self] in
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            defer { close(client) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            _ = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            let end = DispatchTime.now().uptimeNanoseconds + UInt64(lifetime * 1e9)
            for byte in bytes {
                if isStopped || DispatchTime.now().uptimeNanoseconds > end { return }
                var b = byte
                if send(client, &b, 1, Int32(MSG_NOSIGNAL)) != 1 { return }
                usleep(UInt32(interval * 1e6))
            }
        }.start()
    }

    private var isStopped: Bool { lock.withLock { stopped } }

    func stop() {
        lock.withLock { stopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

/// Issue 31 item 15: `understudy whip` hung against an endpoint that drips its answer. Every client
/// request has a deadline on the whole exchange (WHIP/WHEP, Janus, the cluster proxy and the
/// WebSocket handshake all go through these two).
@Suite("Client deadlines against a dripping server")
struct HTTPClientTests {
    /// A head that promises a long body, so the response is never complete before the drip ends.
    static let answer =
        "HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\nContent-Length: 400\r\n\r\n"
        + String(repeating: "v", count: 400)

    @Test func anHTTPRequestGivesUpAtItsDeadline() async throws {
        let server = try DrippingServer(answer: Self.answer)
        defer { server.stop() }
        let started = DispatchTime.now().uptimeNanoseconds
        var failure: HTTPError?
        do {
            _ = try await HTTPClient.request(
                "POST", HTTPURL("http://127.0.0.1:\(server.port)/whip/r"), body: Array("v=0\r\n".utf8), timeout: 2)
        } catch { failure = error }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        #expect(failure == .timeout, "got \(String(describing: failure)) after \(seconds) s")
        // 2 s asked. The bound is generous because this time includes resuming the test's task, which
        // waits for a free cooperative thread on a busy machine (23 s seen at a load average of 13);
        // without a deadline the request would last the drip's whole 40 s.
        #expect(seconds >= 1.9 && seconds < 35, "the request took \(seconds) s")
    }

    @Test func aWebSocketHandshakeGivesUpAtItsDeadline() async throws {
        let server = try DrippingServer(
            answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "X-Filler: " + String(repeating: "x", count: 300) + "\r\n\r\n")
        defer { server.stop() }
        let started = DispatchTime.now().uptimeNanoseconds
        var failure: WebSocketError?
        do {
            _ = try await WebSocketConnection.connect(url: "ws://127.0.0.1:\(server.port)/v1/rtc", timeout: 2)
        } catch { failure = error }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        #expect(failure == .timeout, "got \(String(describing: failure)) after \(seconds) s")
        #expect(seconds >= 1.9 && seconds < 35, "the handshake took \(seconds) s")  // as above
    }

    @Test func aPromptServerIsUnaffected() throws {
        let deadline = Deadline(seconds: 5)
        #expect(deadline.remainingMilliseconds > 4000 && deadline.remainingMilliseconds <= 5000)
        #expect(Deadline(seconds: 0).remainingMilliseconds == 0)
        #expect(Deadline(seconds: .infinity).remainingMilliseconds > 0)
    }
}
