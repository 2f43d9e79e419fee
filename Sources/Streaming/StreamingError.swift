/// Why a WHIP/WHEP session or recording failed; each case prints as one clear line.
public enum StreamingError: Error, CustomStringConvertible, Sendable {
    case http(String)
    case rejected(status: Int, reason: String, body: String)
    case badSDP(String)
    case connection(String)
    case file(String)
    case badArgument(String)

    public var description: String {
        switch self {
        case .http(let s): return "HTTP error: \(s)"
        case .rejected(let status, let reason, let body):
            let detail = body.split(whereSeparator: \.isNewline).first.map { ": \($0.prefix(160))" } ?? ""
            return "server refused the request: \(status) \(reason)\(detail)"
        case .badSDP(let s): return "bad SDP: \(s)"
        case .connection(let s): return "connection failed: \(s)"
        case .file(let s): return "file error: \(s)"
        case .badArgument(let s): return s
        }
    }
}
