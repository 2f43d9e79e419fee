import Glibc

/// A TURN server to gather relayed candidates from, as given by `--ice-servers` or handed out by
/// the room server in the join response (`iceServers`, the shape of WebRTC's `RTCIceServer`).
public struct ICEServer: Sendable, Hashable, CustomStringConvertible {
    /// How the client reaches the TURN server.
    public enum Transport: String, Sendable, Hashable {
        case udp, tcp, tls
    }

    /// Host name or numeric address of the TURN server.
    public var host: String
    /// Port (3478 for `turn:`, 5349 for `turns:` unless given).
    public var port: UInt16
    /// Transport to the server: `turn:…?transport=udp` (the default), `?transport=tcp`, or `turns:`.
    public var transport: Transport
    /// Long-term credential user name.
    public var username: String
    /// Long-term credential password.
    public var credential: String

    /// Creates a server from its fields.
    public init(host: String, port: UInt16, transport: Transport, username: String, credential: String) {
        self.host = host
        self.port = port
        self.transport = transport
        self.username = username
        self.credential = credential
    }

    /// Why an ICE server URL was refused.
    public struct ParseError: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Parses one URL: `turn:HOST[:PORT][?transport=udp|tcp]` or `turns:HOST[:PORT][?transport=tcp]`
    /// (RFC 7065), with the credentials optionally inline as `turn:USER:PASSWORD@HOST:PORT` (an
    /// Understudy extension for the command line; explicit `username`/`credential` win).
    /// `stun:` URLs are refused: a server-reflexive candidate adds nothing on the networks this
    /// client is for (the room server is ICE-lite and learns peer-reflexive addresses).
    public init(url: String, username: String? = nil, credential: String? = nil) throws(ParseError) {
        let lower = url.lowercased()
        let secure: Bool
        var rest: Substring
        if lower.hasPrefix("turns:") {
            secure = true
            rest = url.dropFirst(6)
        } else if lower.hasPrefix("turn:") {
            secure = false
            rest = url.dropFirst(5)
        } else {
            throw ParseError(description: "ICE server \(url): only turn: and turns: URLs are supported")
        }
        var transport: Transport = secure ? .tls : .udp
        if let question = rest.firstIndex(of: "?") {
            let query = rest[rest.index(after: question)...].lowercased()
            rest = rest[..<question]
            switch query {
            case "transport=udp" where !secure: transport = .udp
            case "transport=tcp": transport = secure ? .tls : .tcp
            default: throw ParseError(description: "ICE server \(url): unsupported query \(query)")
            }
        }
        var inlineUser: String?
        var inlinePassword: String?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard let colon = userInfo.firstIndex(of: ":") else {
                throw ParseError(description: "ICE server \(url): credentials must be USER:PASSWORD@")
            }
            inlineUser = String(userInfo[..<colon])
            inlinePassword = String(userInfo[userInfo.index(after: colon)...])
        }
        var host = String(rest)
        var port: UInt16 = secure ? 5349 : 3478
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            // [IPv6]:port
            let after = host[host.index(after: close)...]
            let inner = String(host[host.index(after: host.startIndex)..<close])
            if after.hasPrefix(":") {
                guard let p = UInt16(after.dropFirst()), p > 0 else {
                    throw ParseError(description: "ICE server \(url): bad port")
                }
                port = p
            } else if !after.isEmpty {
                throw ParseError(description: "ICE server \(url): bad address")
            }
            host = inner
        } else if let colon = host.lastIndex(of: ":") {
            guard let p = UInt16(host[host.index(after: colon)...]), p > 0 else {
                throw ParseError(description: "ICE server \(url): bad port")
            }
            port = p
            host = String(host[..<colon])
        }
        guard !host.isEmpty else { throw ParseError(description: "ICE server \(url): no host") }
        let user = username ?? inlineUser
        let password = credential ?? inlinePassword
        guard let user, let password, !user.isEmpty else {
            throw ParseError(description: "ICE server \(url): TURN needs a username and a credential")
        }
        self.init(host: host, port: port, transport: transport, username: user, credential: password)
    }

    /// Parses a comma-separated list of URLs (the `--ice-servers` flag).
    public static func parseList(_ text: String) throws(ParseError) -> [ICEServer] {
        var servers: [ICEServer] = []
        for part in text.split(separator: ",") where !part.trimmingSpaces.isEmpty {
            servers.append(try ICEServer(url: String(part.trimmingSpaces)))
        }
        return servers
    }

    /// The URL without credentials (for logs and the protocol's `urls`).
    public var url: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        switch transport {
        case .udp: return "turn:\(shownHost):\(port)?transport=udp"
        case .tcp: return "turn:\(shownHost):\(port)?transport=tcp"
        case .tls: return "turns:\(shownHost):\(port)?transport=tcp"
        }
    }

    public var description: String { url }

    /// Resolves `host` to a socket address (numeric addresses without a lookup). Blocking: call it
    /// off the event loop.
    public func resolve() -> SocketAddress? {
        if let numeric = SocketAddress(ip: host, port: port) { return numeric }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &result) == 0, let first = result else { return nil }
        defer { freeaddrinfo(result) }
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            if let address = current.pointee.ai_addr,
                let resolved = SocketAddress(raw: address, length: Int(current.pointee.ai_addrlen))
            {
                return resolved
            }
            entry = current.pointee.ai_next
        }
        return nil
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var s = self
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return s
    }
}
