public import Media

/// Opens the ``CompositeOutput`` a destination names: the one place that maps a `--composite` value
/// to an output.
public enum CompositeOutputs {
    /// The destinations this build takes, as `--composite` help and errors list them.
    public static let kinds = ".mp4, .webm or .mkv file"

    /// The output for `destination`, by its extension (any case) or URL scheme:
    /// `.mp4` (fragmented MP4), `.webm` (VP8 + Opus), `.mkv` (Matroska, H.264 or VP8).
    /// Creates (truncates) a file at once.
    /// - Throws: ``MediaError/invalidArgument(_:)`` for a destination of no known kind; the file's
    ///   error when it cannot be created.
    public static func make(destination: String) throws -> any CompositeOutput {
        let lower = destination.lowercased()
        switch true {
        case lower.hasSuffix(".mp4"): return try MP4CompositeOutput(path: destination)
        case lower.hasSuffix(".webm"): return try WebMCompositeOutput(path: destination, webmOnly: true)
        case lower.hasSuffix(".mkv"): return try WebMCompositeOutput(path: destination, webmOnly: false)
        default:
            throw MediaError.invalidArgument("composite output '\(destination)' is not a \(kinds)")
        }
    }
}
