import RoomProtocol
import Signaling
import Understudy

/// Why a ``RoomAgent`` could not start, with the error underneath.
public enum RoomAgentError: Error, Sendable, CustomStringConvertible {
    /// The record directory could not be created (`cause`: the file system's error).
    case recordDirectory(path: String, cause: any Error)
    /// The RTP output (`--relay`) could not be set up (`cause`: its ``RTPOutputError``).
    case rtpOutput(url: String, cause: any Error)
    /// The mixed audio file (`--mix-audio`) could not be created (`cause`: the recorder's or Opus' error).
    case mixAudio(path: String, cause: any Error)
    /// A composite output (`--composite`) could not be opened, or the encoder refused the options.
    case composite(destination: String, cause: any Error)
    /// The room was left before the join completed; `cause` is the last error the SDK reported.
    case joinFailed(reason: Understudy.LeaveReason, cause: RoomError?)

    public var description: String {
        switch self {
        case .recordDirectory(let path, let cause): "cannot create record directory '\(path)': \(cause)"
        case .rtpOutput(let url, let cause): "cannot relay to \(url): \(cause)"
        case .mixAudio(let path, let cause): "cannot mix audio to '\(path)': \(cause)"
        case .composite(let destination, let cause): "cannot write the composite to '\(destination)': \(cause)"
        case .joinFailed(let reason, let cause):
            "join failed (\(reason.name))" + (cause.map { ": \($0.code) \($0.message)" } ?? "")
        }
    }
}

/// Why the agent's metrics endpoint (`--metrics`) could not start.
public enum RoomAgentMetricsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The address is not `HOST:PORT`.
    case notHostAndPort(String)
    /// The port is not a number from 0 to 65535.
    case badPort(String)
    /// The host is not a loopback address (the endpoint has no authentication).
    case notLoopback(String)
    /// Listening failed (`cause`: the HTTP server's error).
    case cannotListen(host: String, port: UInt16, cause: HTTPError)

    public var description: String {
        switch self {
        case .notHostAndPort(let text): "'\(text)' is not HOST:PORT"
        case .badPort(let text): "'\(text)' is not a port number"
        case .notLoopback(let host):
            "'\(host)' is not a loopback address (the metrics endpoint has no authentication; "
                + "use 127.0.0.1 or [::1] and a proxy to expose it)"
        case .cannotListen(let host, let port, let cause): "cannot listen on \(host):\(port) for metrics: \(cause)"
        }
    }
}
