public import Media

/// Opens the ``CompositeOutput`` a destination names: the one place that maps a `--composite` value
/// to an output.
public enum CompositeOutputs {
    /// The destinations this build takes, as `--composite` help and errors list them.
    public static let kinds = ".mp4, .webm or .mkv file, .m3u8 HLS playlist or rtmp:// URL"

    /// The output for `destination`, by its extension (any case) or URL scheme:
    /// `.mp4` (fragmented MP4), `.webm` (VP8 + Opus), `.mkv` (Matroska, H.264 or VP8), `.m3u8`
    /// (``HLSOutput``: fMP4 segments beside the playlist, H.264 + AAC), `rtmp://` (``RTMPOutput``: a push
    /// to an RTMP server, H.264 + AAC). Creates (truncates) a file at once; an RTMP output starts connecting.
    /// `log` hears what happens later on the output's own (an RTMP output's connections and losses).
    /// - Throws: ``MediaError/invalidArgument(_:)`` for a destination of no known kind; the file's
    ///   error when it cannot be created.
    public static func make(
        destination: String, log: @escaping @Sendable (String) -> Void = { _ in }
    ) throws -> any CompositeOutput {
        let lower = destination.lowercased()
        switch true {
        case lower.hasSuffix(".mp4"): return try MP4CompositeOutput(path: destination)
        case lower.hasSuffix(".webm"): return try WebMCompositeOutput(path: destination, webmOnly: true)
        case lower.hasSuffix(".mkv"): return try WebMCompositeOutput(path: destination, webmOnly: false)
        case lower.hasSuffix(".m3u8"): return try HLSOutput(destination: destination)
        case lower.hasPrefix("rtmp://"): return try RTMPOutput(destination: destination, log: log)
        default:
            throw MediaError.invalidArgument("composite output '\(destination)' is not a \(kinds)")
        }
    }
}
