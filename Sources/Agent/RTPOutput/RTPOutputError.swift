import RTC

/// Why an ``RTPOutput`` (`--relay`) could not be set up; each case prints as one clear line.
public enum RTPOutputError: Error, Equatable, CustomStringConvertible, Sendable {
    /// The URL does not start with `rtp://`.
    case unsupportedScheme(String)
    /// The URL has no host.
    case missingHost
    /// The host is not a numeric IPv4/IPv6 address nor `localhost` (no DNS lookups are made).
    case invalidHost(String)
    /// The URL has no `:PORT`.
    case missingPort
    /// The port is not a number, is odd (RTP uses even ports), is 0, or leaves no room for the audio
    /// port PORT+2.
    case invalidPort(String)
    /// The URL carries something after the port (a path or query), which the output does not use.
    case unexpectedSuffix(String)
    /// The UDP socket could not be opened.
    case socket(SocketError)
    /// The session description could not be written.
    case file(path: String, errno: Int32)

    public var description: String {
        switch self {
        case .unsupportedScheme(let s): return "relay URL must start with rtp:// (got \"\(s)\")"
        case .missingHost: return "relay URL has no host (expected rtp://HOST:PORT)"
        case .invalidHost(let h):
            return "relay host \"\(h)\" is not a numeric IP address or localhost (host names are not resolved)"
        case .missingPort: return "relay URL has no port (expected rtp://HOST:PORT)"
        case .invalidPort(let p):
            return "relay port \"\(p)\" must be an even number from 2 to 65532 (audio uses PORT+2)"
        case .unexpectedSuffix(let s): return "relay URL has unexpected text after the port: \"\(s)\""
        case .socket(let error): return "relay socket failed: \(error)"
        case .file(let path, let errno): return "cannot write session description \(path) (errno \(errno))"
        }
    }
}
