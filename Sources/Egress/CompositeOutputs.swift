import Media
import RTCWire

/// Opens the ``CompositeOutput`` a destination names: the one place that maps a `--composite` value
/// to an output.
public enum CompositeOutputs {
    /// The destinations this build takes, as `--composite` help and errors list them.
    public static let kinds = ".mp4, .webm or .mkv file, .m3u8 HLS playlist or rtmp:// URL"

    /// The output for `destination`, by its extension (any case) or URL scheme:
    /// `.mp4` (fragmented MP4), `.webm` (VP8 + Opus), `.mkv` (Matroska, H.264 or VP8), `.m3u8`
    /// (``HLSOutput`` with `hls`: fMP4 or TS segments beside the playlist, H.264 + AAC), `rtmp://` (``RTMPOutput``: a push
    /// to an RTMP server, H.264 + AAC). Creates (truncates) a file at once; an RTMP output starts connecting.
    /// `log` hears what happens later on the output's own (an RTMP output's connections and losses);
    /// `failed` (when given) hears the first error a write or the finish throws (a full disk), once, on
    /// the composite's thread, so that a job can end with that reason.
    /// - Throws: ``MediaError/invalidArgument(_:)`` for a destination of no known kind; the file's
    ///   error when it cannot be created.
    public static func make(
        destination: String, hls: HLSOutput.Options = HLSOutput.Options(),
        log: @escaping @Sendable (String) -> Void = { _ in },
        failed: (@Sendable (_ destination: String, _ error: any Error) -> Void)? = nil
    ) throws -> any CompositeOutput {
        let output = try open(destination: destination, hls: hls, log: log)
        guard let failed else { return output }
        return WatchedOutput(output, failed: failed)
    }

    private static func open(destination: String, hls: HLSOutput.Options, log: @escaping @Sendable (String) -> Void)
        throws
        -> any CompositeOutput
    {
        let lower = destination.lowercased()
        switch true {
        case lower.hasSuffix(".mp4"): return try MP4CompositeOutput(path: destination)
        case lower.hasSuffix(".webm"): return try WebMCompositeOutput(path: destination, webmOnly: true)
        case lower.hasSuffix(".mkv"): return try WebMCompositeOutput(path: destination, webmOnly: false)
        case lower.hasSuffix(".m3u8"): return try HLSOutput(destination: destination, options: hls)
        case lower.hasPrefix("rtmp://"): return try RTMPOutput(destination: destination, log: log)
        default:
            throw MediaError.invalidArgument("composite output '\(destination)' is not a \(kinds)")
        }
    }
}

/// An output whose first error is reported (``CompositeOutputs/make(destination:log:failed:)``): the
/// compositor drops an output that throws and goes on with the others, and this tells its owner why.
/// Keeps the inner output's keyframe wish (none: infinity, which the compositor's minimum ignores).
final class WatchedOutput: KeyframePacedOutput {
    private let inner: any CompositeOutput
    private let failed: @Sendable (String, any Error) -> Void
    private var reported = false

    init(_ inner: any CompositeOutput, failed: @escaping @Sendable (String, any Error) -> Void) {
        self.inner = inner
        self.failed = failed
    }

    var destination: String { inner.destination }
    var keyframeIntervalSeconds: Double {
        (inner as? any KeyframePacedOutput)?.keyframeIntervalSeconds ?? .infinity
    }

    func writeVideo(_ frame: EncodedFrame, ptsMicros: Int64) throws {
        try watch { try inner.writeVideo(frame, ptsMicros: ptsMicros) }
    }

    func writeAudio(_ opus: EncodedFrame, pcm: UnsafeBufferPointer<Int16>, ptsMicros: Int64) throws {
        try watch { try inner.writeAudio(opus, pcm: pcm, ptsMicros: ptsMicros) }
    }

    func finish() throws { try watch { try inner.finish() } }

    private func watch(_ body: () throws -> Void) throws {
        do { try body() } catch {
            if !reported {
                reported = true
                failed(inner.destination, error)
            }
            throw error
        }
    }
}
