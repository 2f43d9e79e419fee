#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Errors from codecs, file sources and recorders.
public enum MediaError: Error, Equatable, CustomStringConvertible {
    /// A parameter is outside what the codec or container supports.
    case invalidArgument(String)
    /// A libopus call failed; `code` is the libopus error code.
    case opus(function: String, code: Int32)
    /// A libvpx call failed; `code` is the `vpx_codec_err_t` value.
    case vpx(function: String, code: Int32, detail: String)
    /// A libx264 call failed (libx264 reports no codes; `detail` says what was asked).
    case x264(function: String, detail: String)
    /// A libaom call failed; `code` is the `aom_codec_err_t` value.
    case aom(function: String, code: Int32, detail: String)
    /// A libavcodec call failed; `code` is its `AVERROR` value (0 when there is none).
    case avcodec(function: String, code: Int32, detail: String)
    /// A file could not be opened or created; `errno` is the OS error.
    case cannotOpen(path: String, errno: Int32)
    /// Writing to an open file failed.
    case writeFailed(path: String, errno: Int32)
    /// A file is not in the expected format or is truncated.
    case malformedFile(path: String, reason: String)
    /// The writer was already closed.
    case closed

    public var description: String {
        switch self {
        case .invalidArgument(let what): return "invalid argument: \(what)"
        case .opus(let function, let code): return "\(function) failed with opus error \(code)"
        case .vpx(let function, let code, let detail): return "\(function) failed with vpx error \(code): \(detail)"
        case .x264(let function, let detail): return "\(function) failed: \(detail)"
        case .aom(let function, let code, let detail): return "\(function) failed with aom error \(code): \(detail)"
        case .avcodec(let function, let code, let detail):
            return "\(function) failed with libavcodec error \(code): \(detail)"
        case .cannotOpen(let path, let errno): return "cannot open \(path): \(Self.explain(errno))"
        case .writeFailed(let path, let errno): return "write to \(path) failed: \(Self.explain(errno))"
        case .malformedFile(let path, let reason): return "\(path): \(reason)"
        case .closed: return "writer is closed"
        }
    }

    /// The OS's text for `code` and the number, e.g. "No space left on device (errno 28)".
    static func explain(_ code: Int32) -> String { "\(String(cString: strerror(code))) (errno \(code))" }
}
