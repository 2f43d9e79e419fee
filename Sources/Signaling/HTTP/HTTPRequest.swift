/// An HTTP/1.1 request received by ``HTTPServer``.
public struct HTTPRequest: Sendable {
    /// The method as sent, e.g. `GET`.
    public var method: String
    /// The raw request target: path plus `?query`, still percent-encoded.
    public var target: String
    /// The percent-decoded path, without the query.
    public var path: String
    /// The decoded query items in order (`+` decodes to a space).
    public var queryItems: [(name: String, value: String)]
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// `HTTP/1.1` or `HTTP/1.0`.
    public var version: String

    public init(
        method: String, target: String, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [],
        version: String = "HTTP/1.1"
    ) {
        self.method = method
        self.target = target
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        self.path = percentDecode(parts.first.map(String.init) ?? "/", plusIsSpace: false) ?? String(parts.first ?? "/")
        self.queryItems = parts.count > 1 ? parseQuery(String(parts[1])) : []
        self.headers = headers
        self.body = body
        self.version = version
    }

    /// The first value of query parameter `name`.
    public func query(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }

    /// Query parameters as a dictionary (the first value wins for repeated names).
    public var queryParameters: [String: String] {
        var out: [String: String] = [:]
        for item in queryItems where out[item.name] == nil { out[item.name] = item.value }
        return out
    }

    /// The body decoded as UTF-8.
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// Whether the connection stays open after the response (HTTP/1.1 default, `Connection` overrides).
    public var keepAlive: Bool {
        let connection = headers["Connection"]?.lowercased() ?? ""
        let tokens = connection.split(separator: ",").map { $0.trimmingSpaces() }
        if tokens.contains("close") { return false }
        if version == "HTTP/1.0" { return tokens.contains("keep-alive") }
        return true
    }
}

/// Splits `a=1&b=x%20y` into decoded pairs; undecodable items are kept raw rather than dropped.
func parseQuery(_ query: String) -> [(name: String, value: String)] {
    var items: [(name: String, value: String)] = []
    for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
        let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let rawName = String(kv[0])
        let rawValue = kv.count > 1 ? String(kv[1]) : ""
        items.append(
            (
                percentDecode(rawName, plusIsSpace: true) ?? rawName,
                percentDecode(rawValue, plusIsSpace: true) ?? rawValue
            ))
    }
    return items
}

/// Decodes `%XX` escapes; nil when an escape is malformed or the result is not UTF-8.
func percentDecode(_ text: String, plusIsSpace: Bool) -> String? {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.utf8.count)
    var iterator = text.utf8.makeIterator()
    while let byte = iterator.next() {
        if byte == UInt8(ascii: "%") {
            guard let h = iterator.next().flatMap(hexValue), let l = iterator.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(h << 4 | l)
        } else if plusIsSpace && byte == UInt8(ascii: "+") {
            bytes.append(UInt8(ascii: " "))
        } else {
            bytes.append(byte)
        }
    }
    return String(validating: bytes, as: UTF8.self)
}

private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}

/// Why a request could not be parsed; each maps to the status the server answers with.
public enum HTTPRequestError: Error, Equatable, Sendable {
    /// Request line plus headers exceed the limit (431).
    case headTooLarge
    /// The declared or chunked body exceeds the limit (413).
    case bodyTooLarge
    /// Syntax error (400).
    case malformed(String)
    /// A transfer coding other than chunked (501).
    case unsupportedTransferEncoding

    /// The HTTP status answered for this error.
    public var status: Int {
        switch self {
        case .headTooLarge: return 431
        case .bodyTooLarge: return 413
        case .malformed: return 400
        case .unsupportedTransferEncoding: return 501
        }
    }
}

/// Incremental HTTP/1.1 request parser with hard limits on head and body size.
///
/// Bytes are appended as they arrive; ``next()`` returns a complete request and removes it from
/// the buffer, leaving any pipelined bytes (or, after an upgrade, WebSocket frames) in ``buffered``.
public struct HTTPRequestParser: Sendable {
    public let maxHeadBytes: Int
    public let maxBodyBytes: Int
    /// Received bytes; everything before `start` belongs to requests already returned. Consumed
    /// bytes are dropped lazily so a burst of pipelined requests costs linear, not quadratic, time.
    private var storage: [UInt8] = []
    private var start = 0
    private var scanFrom = 0
    /// The parsed head of a request whose body is still arriving, so it is parsed once.
    private var pendingHead: (request: HTTPRequest, end: Int)?
    /// Progress through a chunked body still arriving.
    private var chunked: HTTPChunkedBody?

    public init(maxHeadBytes: Int = 16 * 1024, maxBodyBytes: Int = 1024 * 1024) {
        self.maxHeadBytes = maxHeadBytes
        self.maxBodyBytes = maxBodyBytes
    }

    /// Number of received bytes not yet consumed by a returned request.
    public var bufferedCount: Int { storage.count - start }

    /// The unconsumed bytes.
    public var buffered: [UInt8] { Array(storage[start...]) }

    public mutating func append(_ bytes: some Sequence<UInt8>) {
        if start > 0 && start >= storage.count / 2 {
            storage.removeFirst(start)
            scanFrom -= start
            pendingHead?.end -= start
            chunked?.shift(by: start)
            start = 0
        }
        storage.append(contentsOf: bytes)
    }

    /// Removes and returns the unconsumed bytes.
    public mutating func takeBuffered() -> [UInt8] {
        defer {
            storage = []
            start = 0
            scanFrom = 0
            pendingHead = nil
            chunked = nil
        }
        return Array(storage[start...])
    }

    /// Returns the next complete request, nil when more bytes are needed.
    public mutating func next() throws(HTTPRequestError) -> HTTPRequest? {
        if pendingHead == nil { pendingHead = try nextHead() }
        guard let (parsed, headEnd) = pendingHead else { return nil }
        var request = parsed
        var consumed = headEnd
        if let te = request.headers["Transfer-Encoding"] {
            guard te.lowercased().trimmingSpaces() == "chunked" else { throw .unsupportedTransferEncoding }
            var body = chunked ?? HTTPChunkedBody(at: headEnd)
            let end: Int?
            do { end = try body.decode(storage, maxBodyBytes: maxBodyBytes) } catch { throw HTTPRequestError(error) }
            chunked = body
            guard let end else { return nil }
            request.body = body.body
            consumed = end
        } else if let cl = request.headers["Content-Length"] {
            guard let length = HTTPNumber.contentLength(cl.trimmingSpaces()) else {
                throw .malformed("bad Content-Length")
            }
            guard length <= maxBodyBytes else { throw .bodyTooLarge }
            guard storage.count - headEnd >= length else { return nil }
            request.body = Array(storage[headEnd..<(headEnd + length)])
            consumed = headEnd + length
        }
        start = consumed
        scanFrom = consumed
        pendingHead = nil
        chunked = nil
        return request
    }

    /// Finds and parses the next request head; nil when it is not complete yet.
    private mutating func nextHead() throws(HTTPRequestError) -> (request: HTTPRequest, end: Int)? {
        // Tolerate stray CRLFs between pipelined requests (RFC 9112 §2.2).
        while start + 1 < storage.count, storage[start] == 13, storage[start + 1] == 10 { start += 2 }
        scanFrom = max(scanFrom, start)
        guard let headEnd = findHeadEnd() else {
            if storage.count - start > maxHeadBytes { throw .headTooLarge }
            return nil
        }
        guard headEnd - start <= maxHeadBytes else { throw .headTooLarge }
        return (try parseHead(storage[start..<(headEnd - 4)]), headEnd)
    }

    private mutating func findHeadEnd() -> Int? {
        var i = max(start, scanFrom - 3)
        while i + 3 < storage.count {
            if storage[i] == 13 && storage[i + 1] == 10 && storage[i + 2] == 13 && storage[i + 3] == 10 {
                return i + 4
            }
            i += 1
        }
        scanFrom = storage.count
        return nil
    }

    private func parseHead(_ head: ArraySlice<UInt8>) throws(HTTPRequestError) -> HTTPRequest {
        guard let text = String(validating: head, as: UTF8.self) else { throw .malformed("head is not UTF-8") }
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard let requestLine = lines.first else { throw .malformed("empty request") }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy({ $0.isLetter && $0.isUppercase }),
            parts[1].hasPrefix("/") || parts[1] == "*", parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0"
        else { throw .malformed("bad request line") }
        var headers = HTTPHeaders()
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw .malformed("bad header line")
            }
            let name = line[..<colon]
            guard !name.contains(where: { $0 == " " || $0 == "\t" }) else { throw .malformed("space in header name") }
            headers.add(String(name), line[line.index(after: colon)...].trimmingSpaces())
        }
        if headers["Transfer-Encoding"] != nil, headers["Content-Length"] != nil {
            throw .malformed("both Transfer-Encoding and Content-Length")
        }
        return HTTPRequest(
            method: String(parts[0]), target: String(parts[1]), headers: headers, version: String(parts[2]))
    }
}

extension HTTPResponse {
    /// A response with the standard reason phrase for `status`.
    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.init(status: status, reason: HTTPResponse.reasonPhrase(status), headers: headers, body: body)
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ text: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: HTTPHeaders([("Content-Type", "text/plain; charset=utf-8")]),
            body: Array(text.utf8))
    }

    /// An `application/json` response from already-serialized JSON.
    public static func json(_ json: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: HTTPHeaders([("Content-Type", "application/json")]), body: Array(json.utf8))
    }

    /// The standard reason phrase, or "Status" for unknown codes.
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 101: return "Switching Protocols"
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 413: return "Content Too Large"
        case 426: return "Upgrade Required"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 503: return "Service Unavailable"
        default: return "Status"
        }
    }

    /// The serialized status line, headers (with `Content-Length` and `Connection` added unless
    /// present) and body.
    func serialized(keepAlive: Bool, isHeadRequest: Bool = false) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(reason)\r\n"
        var hasLength = false
        for (name, value) in headers {
            let lower = name.lowercased()
            if lower == "content-length" { hasLength = true }
            if lower == "connection" && status != 101 { continue }
            head += "\(name): \(value)\r\n"
        }
        if !hasLength && status != 101 && status != 204 && status / 100 != 1 {
            head += "Content-Length: \(body.count)\r\n"
        }
        if status != 101 { head += keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n" }
        head += "\r\n"
        var out = Array(head.utf8)
        if !isHeadRequest { out.append(contentsOf: body) }
        return out
    }
}
