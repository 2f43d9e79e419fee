import RTCWire

/// Why a local media source could not be made.
public enum MediaSourceError: Error, Equatable, CustomStringConvertible {
    /// This kind is configured as `none` (`--video none`, `--audio none`): it is not published.
    /// A factory from ``LocalSources/factory(video:audio:)`` throws this instead of making a source.
    case notPublished(MediaKind)
    /// The file could not be opened or read.
    case unreadable(path: String, reason: String)
    /// The file was read but holds nothing this source can send.
    case unsupported(path: String, reason: String)
    /// A capture device could not be opened or configured.
    case device(String)
    /// A `--video`/`--audio` value is not valid; `message` says why.
    case badOption(option: String, message: String)

    public var description: String {
        switch self {
        case .notPublished(let kind): return "\(kind) is not published (none)"
        case .unreadable(let path, let reason): return "cannot read \(path): \(reason)"
        case .unsupported(let path, let reason): return "\(path): \(reason)"
        case .device(let message): return message
        case .badOption(let option, let message): return "\(option): \(message)"
        }
    }
}
