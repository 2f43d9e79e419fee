import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A parsed `http://host:port/path?query` URL.
public struct HTTPURL: Sendable, Equatable {
    public var host: String
    public var port: UInt16
    /// Path plus query, always starting with "/".
    public var target: String

    /// Parses an absolute http URL.
    public init(_ string: String) throws(HTTPError) {
        guard let url = URL(string: string), let scheme = url.scheme?.lowercased() else {
            throw .invalidURL(string)
        }
        guard scheme == "http" else { throw .unsupportedScheme(scheme) }
        guard let host = url.host, !host.isEmpty else { throw .invalidURL(string) }
        self.host = host
        let port = url.port ?? 80
        guard (1...65535).contains(port) else { throw .invalidURL(string) }
        self.port = UInt16(port)
        var path = url.path.isEmpty ? "/" : url.path
        if let q = url.query { path += "?" + q }
        self.target = path
    }

    /// Resolves a `Location` header value (absolute or relative) against this URL.
    public func resolving(_ location: String) throws(HTTPError) -> HTTPURL {
        if location.hasPrefix("http://") || location.hasPrefix("https://") { return try HTTPURL(location) }
        var copy = self
        if location.hasPrefix("/") {
            copy.target = location
        } else {
            let base = target.split(separator: "?").first.map(String.init) ?? "/"
            let dir = base.hasSuffix("/") ? base : String(base[..<(base.lastIndex(of: "/") ?? base.startIndex)]) + "/"
            copy.target = dir + location
        }
        return copy
    }

    public var hostHeader: String { port == 80 ? host : "\(host):\(port)" }
}

/// A minimal HTTP/1.1 client over POSIX sockets: one request per connection, `http` only.
///
/// WHIP/WHEP need only a handful of requests, so each runs on its own blocking socket on a
/// background thread with a deadline; nothing here is on a media path.
public enum HTTPClient {
    /// Sends one request and returns the response.
    public static func request(
        _ method: String, _ url: HTTPURL, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [],
        timeout: Double = 10
    ) async throws(HTTPError) -> HTTPResponse {
        try await onOwnThread { () throws(HTTPError) in
            try requestBlocking(method, url, headers: headers, body: body, timeout: timeout)
        }
    }

    /// The blocking form of ``request(_:_:headers:body:timeout:)``.
    ///
    /// `timeout` bounds the whole exchange (connect, send and the complete response), not each
    /// read: a server that drips its answer a byte at a time gets ``HTTPError/timeout`` when the
    /// time is up, however steadily the bytes come.
    public static func requestBlocking(
        _ method: String, _ url: HTTPURL, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [],
        timeout: Double = 10
    ) throws(HTTPError) -> HTTPResponse {
        let deadline = Deadline(seconds: timeout)
        let fd = try connect(host: url.host, port: url.port, timeout: timeout)
        defer { close(fd) }
        var head = "\(method) \(url.target) HTTP/1.1\r\nHost: \(url.hostHeader)\r\nConnection: close\r\n"
        head += "User-Agent: understudy\r\n"
        for (n, v) in headers { head += "\(n): \(v)\r\n" }
        if !body.isEmpty || method == "POST" || method == "PATCH" || method == "PUT" {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        var out = Array(head.utf8)
        out.append(contentsOf: body)
        try writeAll(fd, out, deadline: deadline)
        var parser = HTTPResponseParser()
        parser.noBody = method == "HEAD"
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while !parser.isComplete {
            try deadline.wait(fd, for: Int16(POLLIN))
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                try parser.append(chunk[0..<n])
            } else if n == 0 {
                try parser.finish()
            } else {
                if errno == EAGAIN || errno == EWOULDBLOCK { throw .timeout }
                if errno == EINTR { continue }
                throw .connectionClosed
            }
        }
        return HTTPResponse(status: parser.status, reason: parser.reason, headers: parser.headers, body: parser.body)
    }

    static func connect(host: String, port: UInt16, timeout: Double) throws(HTTPError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var res: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &res)
        guard rc == 0, let first = res else {
            throw .connectFailed("cannot resolve \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(res) }
        var lastError = "no address"
        var ai: UnsafeMutablePointer<addrinfo>? = first
        while let a = ai {
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype, a.pointee.ai_protocol)
            if fd >= 0 {
                var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                if Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 { return fd }
                lastError = String(cString: strerror(errno))
                close(fd)
            }
            ai = a.pointee.ai_next
        }
        throw .connectFailed("\(host):\(port): \(lastError)")
    }

    /// Sends all of `bytes`; with a `deadline`, a peer that does not take them in time gets
    /// ``HTTPError/timeout``.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8], deadline: Deadline? = nil) throws(HTTPError) {
        var sent = 0
        while sent < bytes.count {
            if let deadline { try deadline.wait(fd, for: Int16(POLLOUT)) }
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN { throw .timeout }
                throw .connectionClosed
            }
            sent += n
        }
    }
}

/// A point on the monotonic clock that a blocking exchange must finish by (client requests and
/// handshakes): every wait for the socket takes only the time left, so the total is bounded.
struct Deadline {
    let nanoseconds: UInt64

    init(seconds: Double) {
        let span = seconds.isFinite ? max(0, min(seconds, 86_400)) : 86_400
        nanoseconds = DispatchTime.now().uptimeNanoseconds + UInt64(span * 1e9)
    }

    /// Milliseconds left (rounded up), 0 once passed.
    var remainingMilliseconds: Int32 {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now < nanoseconds else { return 0 }
        return Int32(clamping: (nanoseconds - now + 999_999) / 1_000_000)
    }

    /// Waits until `fd` has `events` (POLLIN, POLLOUT); throws ``HTTPError/timeout`` when the deadline
    /// passes first. Errors and hang-ups return, so that the following call reports them.
    func wait(_ fd: Int32, for events: Int16) throws(HTTPError) {
        while true {
            let left = remainingMilliseconds
            guard left > 0 else { throw .timeout }
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let n = poll(&entry, 1, left)
            if n > 0 { return }
            if n == 0 { continue }  // the loop checks the time left
            if errno == EINTR { continue }
            throw .connectionClosed
        }
    }
}
