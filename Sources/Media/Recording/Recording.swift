import Glibc
import RTCWire

/// Writes received frames to one file, choosing the container from the file extension:
/// `.webm`/`.mkv` (VP8 or H.264, + Opus), `.mp4` (fragmented: H.264 or VP8, + Opus), `.ogg` (Opus
/// only) or `.ivf` (VP8 or VP9). Nothing is
/// transcoded. A `.webm` file whose video turns out to be H.264 is renamed to `.mkv` when its first
/// keyframe is written (WebM holds VP8, VP9 and AV1 only), unless a file of that name exists.
///
/// Presentation times come from RTP timestamps, anchored per stream at its first frame's arrival
/// (and through RTCP sender reports when both streams have them), so audio and video line up.
/// Disk writes happen on a ``DiskWriter`` thread, never on the caller's: a frame costs the caller
/// only the container bytes it adds to a buffer. When the disk falls behind so that more than
/// ``backlogLimit`` bytes of this file wait for it, whole frames are dropped instead of queued (counted
/// in ``droppedFrames``), and video resumes only at a keyframe once the backlog is under the limit
/// again: the file then has a gap, but every frame in it decodes.
///
/// Loop-thread confined (one thread writes; ``close()`` may follow from another once writes stopped).
// Safe as used: one loop thread writes; close() follows only once writes stopped (see above).
public final class Recording: @unchecked Sendable {
    /// The file format, chosen from the extension.
    public enum Container: String, Sendable { case webm, mp4, ogg, ivf }

    /// The file written (a `.webm` path becomes `.mkv` when its video is H.264).
    public private(set) var path: String
    /// The video codec in the file, once its first keyframe was written (WebM/Matroska, IVF).
    public var videoCodec: MediaCodec? { webm?.videoCodec ?? mp4?.videoCodec ?? ivf?.codec }
    private var checkedContainerName = false
    /// Its format.
    public let container: Container
    var webm: WebMWriter?
    var mp4: MP4Writer?
    var ogg: OggOpusWriter?
    var ivf: IVFWriter?
    var sessionStart: UInt64?
    var anchors: [MediaKind: (arrival: UInt64, timestamp: UInt32, clock: UInt32, lastPTS: Int64)] = [:]
    /// Video frames in the file: written whole by the disk writer (see ``writtenFrames``).
    public var videoFrames: Int { writtenFrames.video }
    /// Audio frames in the file: written whole by the disk writer.
    public var audioFrames: Int { writtenFrames.audio }
    /// Video keyframes in the file.
    public var keyframes: Int { writtenFrames.keyframes }
    /// What reached the file: frames whose every byte the disk writer wrote. Frames still buffered
    /// (an open WebM cluster, an Ogg page, the writer's queue) are not counted yet; ``close()``
    /// writes them. After a write error this stays at what the file holds (issue 31 item 16).
    public var writtenFrames: RecordedFrames { fileSink?.writtenFrames ?? RecordedFrames() }
    /// The first write error (a full disk, a file size limit), as soon as the disk writer met it;
    /// from then on nothing more is written to the file. ``observeDisk(_:)`` hears of it at once.
    public var diskError: MediaError? { fileSink?.writeError }
    /// Frames this recording took that are not in the file: lost to ``diskError`` (those in the
    /// failed chunk and every frame after it), or still buffered before ``close()``.
    public var framesNotWritten: Int { accepted.total + refusedAfterDiskError - writtenFrames.total }
    /// Frames handed to the container writer.
    private var accepted = RecordedFrames()
    /// Frames refused because the file had already failed.
    private var refusedAfterDiskError = 0
    /// The file the container writer fills.
    private var fileSink: FileSink?
    /// Frames the container writer refused (see ``lastError``).
    public private(set) var writeErrors = 0
    /// Frames not written because the disk was behind (see ``backlogLimit``), including the video
    /// frames skipped afterwards until a keyframe.
    public private(set) var droppedFrames = 0
    /// Bytes of this file that may wait for the disk writer before frames are dropped.
    public let backlogLimit: Int
    /// The default ``backlogLimit``: 4 MiB, about half a minute of a 1 Mbit/s stream.
    public static let defaultBacklogLimit = 4 << 20
    /// Video was dropped: skip deltas until the next keyframe.
    var videoNeedsKeyframe = false
    /// The writer's error for the last frame that could not be written (counted in ``writeErrors``).
    public private(set) var lastError: (any Error)?
    var closed = false

    /// Opens `path` for writing; throws ``RecordingError/unsupportedFormat(path:)`` for an unknown
    /// extension, ``RecordingError/cannotCreate(path:cause:)`` for an unwritable path.
    ///
    /// - Parameters:
    ///   - writer: the thread that writes the file (default: the process-wide one).
    ///   - backlogLimit: bytes that may wait for `writer` before frames are dropped.
    public init(
        path: String, opusChannels: Int = 2, writer: DiskWriter = .shared,
        backlogLimit: Int = Recording.defaultBacklogLimit
    ) throws(RecordingError) {
        self.path = path
        self.backlogLimit = max(0, backlogLimit)
        let lower = path.lowercased()
        do {
            if lower.hasSuffix(".webm") || lower.hasSuffix(".mkv") {
                container = .webm
                webm = try WebMWriter(path: path, audio: WebMWriter.AudioTrack(channels: opusChannels), writer: writer)
            } else if lower.hasSuffix(".mp4") {
                container = .mp4
                mp4 = try MP4Writer(path: path, audioChannels: opusChannels, writer: writer)
            } else if lower.hasSuffix(".ogg") || lower.hasSuffix(".opus") {
                container = .ogg
                ogg = try OggOpusWriter(path: path, channels: opusChannels, writer: writer)
            } else if lower.hasSuffix(".ivf") {
                container = .ivf
                ivf = try IVFWriter(path: path, writer: writer)
            } else {
                throw RecordingError.unsupportedFormat(path: path)
            }
        } catch let e as RecordingError {
            throw e
        } catch {
            throw .cannotCreate(path: path, cause: error)
        }
        fileSink = webm?.fileSink ?? mp4?.fileSink ?? ogg?.fileSink ?? ivf?.fileSink
    }

    /// Sets who hears, on the disk writer thread, of frames that reached the file and of the first
    /// write error (at once, not at close). Set it before the first ``write(_:arrival:)``.
    public func observeDisk(_ events: DiskEvents) { fileSink?.observe(events) }

    /// Whether this container stores frames of `kind`.
    public func accepts(_ kind: MediaKind) -> Bool {
        switch container {
        case .webm, .mp4: return true
        case .ogg: return kind == .audio
        case .ivf: return kind == .video
        }
    }

    /// How far the time an RTP timestamp gives may stray from the arrival time before the stream is
    /// taken for a new one (jitter and clock drift stay far below this), in nanoseconds.
    static let discontinuity: Int64 = 2_000_000_000

    /// Writes one received frame; `arrival` is the loop's monotonic time in nanoseconds.
    public func write(_ frame: EncodedFrame, arrival: UInt64) {
        guard !closed, accepts(frame.codec.kind) else { return }
        if fileSink?.hasFailed == true {
            // The file failed (see diskError): nothing more goes to it, and nothing counts as recorded.
            refusedAfterDiskError += 1
            return
        }
        let kind = frame.codec.kind
        if backlogBytes > backlogLimit {
            droppedFrames += 1
            if kind == .video { videoNeedsKeyframe = true }
            return
        }
        if kind == .video && videoNeedsKeyframe {
            guard frame.isKeyframe else {
                droppedFrames += 1
                return
            }
            videoNeedsKeyframe = false
        }
        if sessionStart == nil { sessionStart = arrival }
        let start = sessionStart ?? arrival
        var pts: Int64
        if var anchor = anchors[kind] {
            let delta = Int64(Int32(bitPattern: frame.timestamp &- anchor.timestamp))
            pts = Int64(anchor.arrival - start) + delta * 1_000_000_000 / Int64(anchor.clock)
            let minimum = anchor.lastPTS + 1_000_000
            let arrived = Int64(arrival - start)
            if abs(pts - arrived) > Self.discontinuity {
                // A new RTP stream under the same track (the sender rejoined after a server restart,
                // a new producer): its timestamps have another origin. Anchor again at this arrival.
                pts = max(arrived, minimum)
                anchor = (arrival, frame.timestamp, frame.codec.clockRate, pts)
                anchor.arrival = UInt64(Int64(start) + pts)
            }
            // Strictly increasing per track at the container's 1 ms resolution: a reordered or
            // repeated timestamp must not give two frames the same (or a decreasing) time.
            if pts < minimum { pts = minimum }
            anchor.lastPTS = pts
            anchors[kind] = anchor
        } else {
            pts = Int64(arrival - start)
            anchors[kind] = (arrival, frame.timestamp, frame.codec.clockRate, pts)
        }
        do {
            if let webm {
                try webm.write(frame, pts: pts)
                if !checkedContainerName, kind == .video, let codec = webm.videoCodec {
                    checkedContainerName = true
                    if codec == .h264 { renameToMatroska() }
                }
            }
            if let mp4 { try mp4.write(frame, pts: pts) }
            if let ogg { try ogg.write(frame, pts: pts) }
            if let ivf { try ivf.write(frame, pts: pts) }
            accepted.add(frame)
        } catch {
            writeErrors += 1
            lastError = error
        }
    }

    /// Gives an H.264 file the `.mkv` name (the open descriptor is unaffected).
    private func renameToMatroska() {
        guard path.lowercased().hasSuffix(".webm") else { return }
        let renamed = String(path.dropLast(5)) + ".mkv"
        // link(2) refuses an existing name, so no other file is replaced.
        guard link(path, renamed) == 0 else { return }
        unlink(path)
        path = renamed
    }

    /// Bytes of this file handed to the disk writer and not yet written.
    public var backlogBytes: Int {
        webm?.backlogBytes ?? mp4?.backlogBytes ?? ogg?.backlogBytes ?? ivf?.backlogBytes ?? 0
    }

    /// Finishes the file (patches sizes, writes indexes) and waits until the disk writer has written
    /// all of it. Safe to call twice.
    public func close() throws(RecordingError) {
        guard !closed else { return }
        closed = true
        do {
            try webm?.close()
            try mp4?.close()
            try ogg?.close()
            try ivf?.close()
        } catch {
            // The writer stopped at the error: the file is still closed (its descriptor released).
            try? fileSink?.close()
            throw .cannotFinish(path: path, cause: error)
        }
    }
}

/// Why a ``Recording`` could not be started or finished; the cause is the container writer's error.
public enum RecordingError: Error, CustomStringConvertible {
    /// The extension names no container this recorder writes (`.webm`, `.mkv`, `.mp4`, `.ogg`, `.opus`, `.ivf`).
    case unsupportedFormat(path: String)
    /// The file could not be created.
    case cannotCreate(path: String, cause: any Error)
    /// The file could not be finished (flush, sizes, index).
    case cannotFinish(path: String, cause: any Error)

    public var description: String {
        switch self {
        case .unsupportedFormat(let path):
            return "unsupported recording format '\(path)' (use .webm, .mkv, .mp4, .ogg or .ivf)"
        case .cannotCreate(let path, let cause): return "cannot record to '\(path)': \(cause)"
        case .cannotFinish(let path, let cause): return "cannot finish '\(path)': \(cause)"
        }
    }
}
