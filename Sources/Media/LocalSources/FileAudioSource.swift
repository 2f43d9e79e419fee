import RTCWire

/// Opus audio from an Ogg Opus (`.ogg`/`.opus`) or WebM/Matroska file, sent in real time by the
/// packets' own timing and looped at the end with timestamps that keep increasing.
public final class FileAudioSource: MediaSource {
    /// The file being played.
    public let path: String
    public let kind = MediaKind.audio
    public let layerCount = 1
    private let playback: LoopingPlayback

    /// Reads `path`. Throws ``MediaSourceError`` naming the file and why it cannot be used.
    public init(path: String) throws(MediaSourceError) {
        self.path = path
        playback = try MediaFile.audioPlayback(path: path)
    }

    /// Packets in one pass of the file.
    public var framesPerLoop: Int { playback.count }
    /// Completed passes over the file.
    public var loops: Int { playback.loops }

    /// Clock time of the first pull: the file plays from its beginning there.
    private var startedAt: UInt64?

    public func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void) {
        let start = startedAt ?? elapsedNanos
        startedAt = start
        playback.pull(elapsedNanos: elapsedNanos &- start) { emit($0, 0) }
    }

    public func requestKeyframe() {}
    public func close() {}
}
