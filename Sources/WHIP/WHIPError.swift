import Media

/// Why a WHIP publish or WHEP play failed; each case keeps the error that caused it and prints as
/// one clear line.
public enum WHIPError: Error, CustomStringConvertible {
    /// The endpoint URL (or the `Location` the server answered with) is not a usable HTTP URL.
    case badURL(String, cause: any Error)
    /// Both kinds are `none`: there is nothing to publish.
    case nothingToSend
    /// A file or device source could not be opened (checked before any network exchange).
    case source(MediaSourceError)
    /// The HTTP exchange failed (connect, send, receive).
    case http(cause: any Error)
    /// The server answered with something other than `201 Created`.
    case rejected(status: Int, reason: String, body: String)
    /// The local offer could not be made, or the server's answer could not be parsed or applied.
    case badSDP(what: String, cause: any Error)
    /// The peer connection could not be created, or ICE/DTLS did not complete.
    case connection(cause: any Error)
    /// The WHEP recording could not be opened or finished.
    case recording(RecordingError)
    /// Some received frames could not be written; `cause` is the writer's last error.
    case framesNotWritten(count: Int, path: String, cause: (any Error)?)

    public var description: String {
        switch self {
        case .badURL(let url, let cause): return "bad URL '\(url)': \(cause)"
        case .nothingToSend: return "nothing to send: both --video and --audio are none"
        case .source(let e): return "file error: \(e)"
        case .http(let cause): return "HTTP error: \(cause)"
        case .rejected(let status, let reason, let body):
            let detail = body.split(whereSeparator: \.isNewline).first.map { ": \($0.prefix(160))" } ?? ""
            return "server refused the request: \(status) \(reason)\(detail)"
        case .badSDP(let what, let cause): return "bad SDP (\(what)): \(cause)"
        case .connection(let cause): return "connection failed: \(cause)"
        case .recording(let e): return "\(e)"
        case .framesNotWritten(let count, let path, let cause):
            return "\(count) frames could not be written to \(path)" + (cause.map { ": \($0)" } ?? "")
        }
    }
}
