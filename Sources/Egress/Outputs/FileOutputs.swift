import Media
public import RTCWire

/// A composite written to a fragmented MP4 file (``MP4Writer``): H.264 or VP8 video and the mixed
/// Opus audio. A fragment ends at each key frame and at least every second and is handed to the
/// kernel whole, so a process killed with SIGKILL leaves a file that plays up to its last fragment.
public final class MP4CompositeOutput: CompositeOutput {
    public let destination: String
    private let writer: MP4Writer

    /// Creates (truncates) `path`; throws ``MediaError`` when it cannot be created.
    public init(path: String) throws {
        destination = path
        writer = try MP4Writer(path: path, video: true, audioChannels: 1)
    }

    public func writeVideo(_ frame: EncodedFrame, ptsMicros: Int64) throws {
        try writer.write(frame, pts: ptsMicros &* 1_000)
    }

    public func writeAudio(_ opus: EncodedFrame, pcm: UnsafeBufferPointer<Int16>, ptsMicros: Int64) throws {
        try writer.write(opus, pts: ptsMicros &* 1_000)
    }

    public func finish() throws { try writer.close() }
}

/// A composite written to a WebM file (VP8 and Opus), or a Matroska file (`.mkv`: H.264 or VP8), with
/// ``WebMWriter``. Each cluster is handed to the kernel whole as it ends (a killed process leaves a
/// file that plays up to its last cluster); ``finish()`` writes the cues and the duration.
public final class WebMCompositeOutput: CompositeOutput {
    public let destination: String
    private let writer: WebMWriter
    private let webmOnly: Bool

    /// Creates (truncates) `path`. `webmOnly`: refuse video other than VP8 (a `.webm` file, which
    /// browsers play only with VP8/VP9/AV1). Throws ``MediaError`` when the file cannot be created.
    public init(path: String, webmOnly: Bool) throws {
        destination = path
        self.webmOnly = webmOnly
        // The mixed audio comes up to half a second behind the video (the mix waits out network
        // jitter): a reorder window that long keeps the blocks in time order.
        writer = try WebMWriter(
            path: path, video: WebMWriter.VideoTrack(), audio: WebMWriter.AudioTrack(channels: 1),
            reorderWindowMs: 1_000)
    }

    public func writeVideo(_ frame: EncodedFrame, ptsMicros: Int64) throws {
        if webmOnly && frame.codec != .vp8 {
            throw MediaError.invalidArgument(
                "\(destination): WebM takes VP8 here, not \(frame.codec.rawValue) (use --composite-codec vp8 or .mkv)")
        }
        try writer.write(frame, pts: ptsMicros &* 1_000)
    }

    public func writeAudio(_ opus: EncodedFrame, pcm: UnsafeBufferPointer<Int16>, ptsMicros: Int64) throws {
        try writer.write(opus, pts: ptsMicros &* 1_000)
    }

    public func finish() throws { try writer.close() }
}
