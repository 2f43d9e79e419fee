import RTCWire

/// VP8 video from an IVF or WebM/Matroska file, sent in real time by the file's own timestamps and
/// looped at the end of the file (each pass restarts on the first keyframe).
///
/// The file is read whole when the source is made (source files are seconds of encoded media). A
/// keyframe request jumps the content ahead to the next keyframe, as a pre-encoded file cannot make
/// one; timestamps keep following the wall clock.
public final class FileVideoSource: MediaSource {
    /// The file being played.
    public let path: String
    public let kind = MediaKind.video
    /// A file has one encoding: always 1, whatever the track asks for.
    public let layerCount = 1
    private let playback: LoopingPlayback

    /// Reads `path`. Throws ``MediaSourceError`` naming the file and why it cannot be used.
    public init(path: String) throws(MediaSourceError) {
        self.path = path
        playback = try MediaFile.videoPlayback(path: path)
    }

    /// Frames in one pass of the file.
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
