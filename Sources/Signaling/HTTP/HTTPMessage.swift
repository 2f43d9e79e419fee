/// Errors from the HTTP/1.1 layer.
public enum HTTPError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidURL(String)
    case unsupportedScheme(String)
    case connectFailed(String)
    case timeout
    case malformedResponse(String)
    case messageTooLarge
    case connectionClosed

    public var description: String {
        switch self {
        case .invalidURL(let u): return "invalid URL: \(u)"
        case .unsupportedScheme(let s): return "unsupported URL scheme '\(s)' (only http is supported)"
        case .connectFailed(let why): return "cannot connect: \(why)"
        case .timeout: return "HTTP request timed out"
        case .malformedResponse(let why): return "malformed HTTP response: \(why)"
        case .messageTooLarge: return "HTTP message too large"
        case .connectionClosed: return "connection closed before the response was complete"
        }
    }
}

/// An HTTP header list that keeps order and compares names case-insensitively.
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    public private(set) var fields: [(name: String, value: String)] = []

    public init(_ fields: [(String, String)] = []) {
        for (n, v) in fields { self.fields.append((n, v)) }
    }

    public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool {
        a.fields.elementsEqual(b.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    /// The first value for `name`, compared case-insensitively.
    public subscript(name: String) -> String? {
        let lower = name.lowercased()
        return fields.first { $0.name.lowercased() == lower }?.value
    }

    public mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }
}

/// An HTTP response.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var reason: String
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, reason: String, headers: HTTPHeaders, body: [UInt8]) {
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
    }

    /// The body decoded as UTF-8.
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// Incremental parser for the head of an HTTP/1.1 message and its body framing.
///
/// Feed bytes with ``append(_:)``; once ``isComplete`` the parsed fields are available. It limits
/// the head to `maxHeadBytes` and the body to `maxBodyBytes`, so a hostile peer cannot make it grow.
public struct HTTPResponseParser {
    public let maxHeadBytes: Int
    public let maxBodyBytes: Int
    private var buffer: [UInt8] = []
    private var headEnd: Int?
    public private(set) var status = 0
    public private(set) var reason = ""
    public private(set) var headers = HTTPHeaders()
    private var contentLength: Int?
    /// Set when the body is chunked: its progress.
    private var chunked: HTTPChunkedBody?
    public private(set) var body: [UInt8] = []
    public private(set) var isComplete = false
    /// True when the response has no length and ends at connection close.
    public private(set) var readsUntilClose = false
    /// Set for responses to HEAD or for 1xx/204/304, which carry no body.
    public var noBody = false

    public init(maxHeadBytes: Int = 64 * 1024, maxBodyBytes: Int = 8 * 1024 * 1024) {
        self.maxHeadBytes = maxHeadBytes
        self.maxBodyBytes = maxBodyBytes
    }

    public mutating func append(_ bytes: some Collection<UInt8>) throws(HTTPError) {
        buffer.append(contentsOf: bytes)
        try advance()
    }

    /// Marks the end of the stream (the peer closed).
    public mutating func finish() throws(HTTPError) {
        if isComplete { return }
        if readsUntilClose, headEnd != nil {
            body = Array(buffer[(headEnd ?? 0)...])
            isComplete = true
            return
        }
        throw .connectionClosed
    }

    private mutating func advance() throws(HTTPError) {
        guard !isComplete else { return }
        if headEnd == nil {
            guard let end = findHeadEnd() else {
                if buffer.count > maxHeadBytes { throw .messageTooLarge }
                return
            }
            headEnd = end
            try parseHead(Array(buffer[0..<(end - 4)]), bodyStart: end)
        }
        guard let start = headEnd else { return }
        if noBody || status / 100 == 1 || status == 204 || status == 304 {
            isComplete = true
            return
        }
        if var decoder = chunked {
            let end: Int?
            do { end = try decoder.decode(buffer, maxBodyBytes: maxBodyBytes) } catch { throw HTTPError(error) }
            chunked = decoder
            if end != nil {
                body = decoder.body
                isComplete = true
            }
        } else if let length = contentLength {
            guard length <= maxBodyBytes else { throw .messageTooLarge }
            if buffer.count - start >= length {
                body = Array(buffer[start..<(start + length)])
                isComplete = true
            }
        } else {
            readsUntilClose = true
            if buffer.count - start > maxBodyBytes { throw .messageTooLarge }
        }
    }

    private func findHeadEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for i in 0...(buffer.count - 4)
        where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
            return i + 4
        }
        return nil
    }

    private mutating func parseHead(_ head: [UInt8], bodyStart: Int) throws(HTTPError) {
        let text = String(decoding: head, as: UTF8.self)
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        guard !lines.isEmpty else { throw .malformedResponse("empty head") }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let code = Int(parts[1]), (100...999).contains(code)
        else { throw .malformedResponse("bad status line '\(statusLine.prefix(80))'") }
        status = code
        reason = parts.count > 2 ? String(parts[2]) : ""
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { throw .malformedResponse("bad header line") }
            let name = String(line[..<colon]).trimmingSpaces()
            let value = String(line[line.index(after: colon)...]).trimmingSpaces()
            headers.add(name, value)
        }
        if let te = headers["Transfer-Encoding"], te.lowercased().contains("chunked") {
            chunked = HTTPChunkedBody(at: bodyStart)
        } else if let cl = headers["Content-Length"] {
            guard let n = HTTPNumber.contentLength(cl) else { throw .malformedResponse("bad Content-Length") }
            contentLength = n
        }
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (HTTP's optional whitespace; the
    /// room token's reader trims the same way).
    public func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
