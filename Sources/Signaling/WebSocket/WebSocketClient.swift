import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Why a WebSocket client connection could not be opened.
public enum WebSocketError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidURL(String)
    case connectFailed(String)
    case timeout
    /// The server answered the handshake with something other than a valid 101.
    case handshakeFailed(status: Int, reason: String)
    case connectionClosed

    public var description: String {
        switch self {
        case .invalidURL(let u): return "invalid WebSocket URL: \(u)"
        case .connectFailed(let why): return "cannot connect: \(why)"
        case .timeout: return "WebSocket handshake timed out"
        case .handshakeFailed(let status, let reason): return "WebSocket handshake failed (\(status)): \(reason)"
        case .connectionClosed: return "connection closed during the WebSocket handshake"
        }
    }
}

extension WebSocketConnection {
    /// Opens a client connection to `ws://host:port/path?query` (`wss` is not supported).
    ///
    /// The TCP connect and the handshake run on a short-lived thread with `timeout`; afterwards the
    /// socket belongs to `reactor`. Set the callbacks on the returned connection, then call
    /// ``start()`` to begin receiving them.
    public static func connect(
        url: String, headers: HTTPHeaders = HTTPHeaders(), timeout: Double = 10,
        configuration: WebSocketConfiguration = WebSocketConfiguration(), reactor: Reactor = .shared
    ) async throws(WebSocketError) -> WebSocketConnection {
        try await onOwnThread { () throws(WebSocketError) in
            try connectBlocking(
                url: url, headers: headers, timeout: timeout, configuration: configuration, reactor: reactor)
        }
    }

    /// The blocking form of ``connect(url:headers:timeout:configuration:reactor:)``.
    public static func connectBlocking(
        url: String, headers: HTTPHeaders = HTTPHeaders(), timeout: Double = 10,
        configuration: WebSocketConfiguration = WebSocketConfiguration(), reactor: Reactor = .shared
    ) throws(WebSocketError) -> WebSocketConnection {
        guard url.lowercased().hasPrefix("ws://") else { throw .invalidURL(url) }
        let target: HTTPURL
        do {
            target = try HTTPURL("http://" + url.dropFirst(5))
        } catch {
            throw .invalidURL(url)
        }
        // The connect, the request and the whole response head share one deadline: a server that
        // drips its answer is given up on in `timeout`, not once per byte.
        let deadline = Deadline(seconds: timeout)
        let fd: Int32
        do {
            fd = try HTTPClient.connect(host: target.host, port: target.port, timeout: timeout)
        } catch {
            throw .connectFailed(error.description)
        }
        var keepSocket = false
        defer { if !keepSocket { Glibc.close(fd) } }

        let key = WebSocketHandshake.makeKey()
        var head = "GET \(target.target) HTTP/1.1\r\nHost: \(target.hostHeader)\r\n"
        head +=
            "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        head += "User-Agent: understudy\r\n"
        for (n, v) in headers { head += "\(n): \(v)\r\n" }
        head += "\r\n"
        do {
            try HTTPClient.writeAll(fd, Array(head.utf8), deadline: deadline)
        } catch {
            throw error == .timeout ? .timeout : .connectionClosed
        }

        // Read exactly up to the end of the response head; frames may follow in the same segment.
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var headEnd: Int?
        while headEnd == nil {
            do { try deadline.wait(fd, for: Int16(POLLIN)) } catch {
                throw error == .timeout ? .timeout : .connectionClosed
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                let searchFrom = max(0, received.count - 3)
                received.append(contentsOf: chunk[0..<n])
                var i = searchFrom
                while i + 3 < received.count {
                    if received[i] == 13 && received[i + 1] == 10 && received[i + 2] == 13 && received[i + 3] == 10 {
                        headEnd = i + 4
                        break
                    }
                    i += 1
                }
                if headEnd == nil && received.count > 16 * 1024 {
                    throw .handshakeFailed(status: 0, reason: "response head too large")
                }
            } else if n == 0 {
                throw .connectionClosed
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                throw .timeout
            } else {
                throw .connectionClosed
            }
        }
        guard let end = headEnd else { throw .connectionClosed }
        var parser = HTTPResponseParser()
        parser.noBody = true
        do {
            try parser.append(received[0..<end])
        } catch {
            throw .handshakeFailed(status: 0, reason: error.description)
        }
        guard parser.status == 101 else { throw .handshakeFailed(status: parser.status, reason: parser.reason) }
        guard parser.headers["Upgrade"]?.lowercased() == "websocket",
            parser.headers["Connection"]?.lowercased().split(separator: ",").contains(where: {
                $0.trimmingSpaces() == "upgrade"
            }) == true
        else { throw .handshakeFailed(status: 101, reason: "missing Upgrade/Connection headers") }
        guard parser.headers["Sec-WebSocket-Accept"] == WebSocketHandshake.acceptValue(forKey: key) else {
            throw .handshakeFailed(status: 101, reason: "wrong Sec-WebSocket-Accept")
        }

        keepSocket = true
        var noTimeout = timeval(tv_sec: 0, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &noTimeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &noTimeout, socklen_t(MemoryLayout<timeval>.size))
        configureStreamSocket(fd)
        let channel = StreamChannel(fd: fd, reactor: reactor, maxWriteBuffer: configuration.maxWriteBufferBytes)
        let connection = WebSocketConnection(
            channel: channel, reactor: reactor, isClient: true, requestTarget: target.target,
            configuration: configuration)
        let leftover = Array(received[end...])
        reactor.enqueue {
            channel.start(delegate: connection)
            connection.attach(initialBytes: leftover)
        }
        return connection
    }
}
