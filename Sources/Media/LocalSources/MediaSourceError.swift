import RTCWire

#if canImport(Glibc)
    import Glibc
#endif

/// Why a local media source could not be made.
public enum MediaSourceError: Error, Equatable, CustomStringConvertible {
    /// This kind is configured as `none` (`--video none`, `--audio none`): it is not published.
    /// A factory from ``LocalSources/factory(video:audio:)`` throws this instead of making a source.
    case notPublished(MediaKind)
    /// The file could not be opened or read; `errno` is the system's reason.
    case unreadable(path: String, errno: Int32)
    /// The file was read but holds nothing this source can send.
    case unsupported(path: String, reason: String)
    /// The capture device could not be opened or configured.
    case capture(CaptureError)
    /// The video encoder of the test pattern did not open or encode (`--video-codec`).
    case encoder(MediaError)
    /// A `--video`/`--audio` value is not valid; `message` says why, `cause` is what opening the
    /// file or device said.
    indirect case badOption(option: String, message: String, cause: MediaSourceError?)

    public var description: String {
        switch self {
        case .notPublished(let kind): return "\(kind) is not published (none)"
        case .unreadable(let path, let code): return "cannot read \(path): \(String(cString: strerror(code)))"
        case .unsupported(let path, let reason): return "\(path): \(reason)"
        case .capture(let error): return error.description
        case .encoder(let error): return "cannot encode the test pattern: \(error)"
        case .badOption(let option, _, _): return "\(option): \(explanation)"
        }
    }

    /// The description without the option's name: for ``badOption(option:message:cause:)`` the
    /// message and its cause.
    public var explanation: String {
        guard case .badOption(_, let message, let cause) = self else { return description }
        return cause.map { "\(message) (\($0))" } ?? message
    }
}
