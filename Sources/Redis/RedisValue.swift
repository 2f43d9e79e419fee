/// One reply of a Redis server (RESP2).
public enum RedisValue: Sendable, Equatable {
    /// A bulk string (binary safe).
    case bulk([UInt8])
    /// A simple status reply such as `OK`.
    case status(String)
    case integer(Int64)
    case array([RedisValue])
    /// The null bulk string or null array.
    case null
    /// An error reply (`ERR …`, `NOSCRIPT …`); ``RedisClient`` turns it into ``RedisError/server(_:)``.
    case error(String)

    /// The reply as text: bulk strings (UTF-8) and status replies; nil otherwise.
    public var string: String? {
        switch self {
        case .bulk(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let text): return text
        default: return nil
        }
    }

    /// Integer replies, and bulk strings that hold a decimal integer.
    public var int: Int64? {
        switch self {
        case .integer(let value): return value
        case .bulk: return string.flatMap { Int64($0) }
        default: return nil
        }
    }

    /// The elements of an array reply; nil for anything else (including null arrays).
    public var array: [RedisValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    public var isNull: Bool { self == .null }
}

/// What went wrong talking to Redis.
public enum RedisError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL given on the command line or in the configuration is not a `redis://` URL.
    case badURL(String, String)
    /// No connection could be made, or it broke (the message is hiredis's).
    case connection(String)
    /// The server answered with an error reply.
    case server(String)
    /// The reply did not have the shape the caller expected.
    case unexpectedReply(String)

    public var description: String {
        switch self {
        case .badURL(let url, let why): return "bad Redis URL '\(url)': \(why)"
        case .connection(let message): return "Redis connection: \(message)"
        case .server(let message): return "Redis: \(message)"
        case .unexpectedReply(let message): return "unexpected Redis reply: \(message)"
        }
    }
}
