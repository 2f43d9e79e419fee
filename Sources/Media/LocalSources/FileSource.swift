import RTCWire

/// What a ``FileSource`` plays from its file: ``FileVideo`` or ``FileAudio``.
public protocol FileSourceKind {
    /// The kind of media the source reads and sends.
    static var kind: MediaKind { get }
}

/// VP8, VP9 or AV1 video from an IVF or WebM/Matroska file, or H.264 from Matroska, sent as the
/// file holds it; each pass of the file restarts on its first keyframe.
public enum FileVideo: FileSourceKind {
    public static var kind: MediaKind { .video }
}

/// Opus audio from an Ogg Opus (`.ogg`/`.opus`) or WebM/Matroska file.
public enum FileAudio: FileSourceKind {
    public static var kind: MediaKind { .audio }
}

/// A media file sent in real time by its frames' own timestamps and looped at the end, with
/// timestamps that keep increasing across passes.
///
/// The file is read whole when the source is made (source files are seconds of encoded media). A
/// keyframe request jumps the content ahead to the next keyframe, as a pre-encoded file cannot make
/// one; timestamps keep following the wall clock (every Opus packet stands alone, so audio never
/// jumps). Use it as ``FileVideoSource`` or ``FileAudioSource``.
public final class FileSource<Kind: FileSourceKind>: MediaSource {
    /// The file being played.
    public let path: String
    public var kind: MediaKind { Kind.kind }
    /// A file has one encoding: always 1, whatever the track asks for.
    public let layerCount = 1
    private let playback: LoopingPlayback

    /// The codec of the frames sent.
    public let codec: MediaCodec

    /// Reads `path`, whose video must be `codec` (VP8, VP9 or AV1 from IVF or WebM, H.264 from
    /// Matroska; audio is always Opus). Throws ``MediaSourceError`` naming the file and why it cannot be used.
    public init(path: String, codec: MediaCodec = .vp8) throws(MediaSourceError) {
        self.path = path
        self.codec = Kind.kind == .audio ? .opus : codec
        playback = try MediaFile.playback(path: path, kind: Kind.kind, codec: codec)
    }

    /// Frames (video) or packets (audio) in one pass of the file.
    public var framesPerLoop: Int { playback.count }
    /// Completed passes over the file.
    public var loops: Int { playback.loops }
    /// Times a keyframe request moved the content forward.
    public var keyframeJumps: Int { playback.keyframeJumps }

    /// Clock time of the first pull: the file plays from its beginning there.
    private var startedAt: UInt64?

    public func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void) {
        let start = startedAt ?? elapsedNanos
        startedAt = start
        playback.pull(elapsedNanos: elapsedNanos &- start) { emit($0, 0) }
    }

    public func requestKeyframe() { playback.requestKeyframe() }
    public func close() {}
}

/// Video from an IVF, WebM or Matroska file (see ``FileSource``).
public typealias FileVideoSource = FileSource<FileVideo>
/// Opus audio from an Ogg Opus or WebM/Matroska file (see ``FileSource``).
public typealias FileAudioSource = FileSource<FileAudio>
