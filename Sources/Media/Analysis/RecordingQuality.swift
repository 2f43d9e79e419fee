/// Full-reference checks of a recording of the synthetic media: its first video track decoded and
/// given to ``VideoQualityAnalyzer``, its Opus track searched for beeps, and the flashes paired with
/// the beeps for the A/V offset (``SyncMarkerAnalyzer``'s definitions). What `understudy analyze`
/// prints.
public struct RecordingQuality: Sendable, Equatable, Codable {
    /// The recording's path.
    public var path: String
    /// The video codec analysed (`vp8`, `h264`, `vp9`, `av1`).
    public var videoCodec: String
    /// True when the file ended inside an element (a recorder that was killed).
    public var truncated: Bool
    /// The video checks.
    public var video: VideoQualityReport
    /// Beep onsets (ms), empty without an Opus track.
    public var beepOnsetsMs: [Double]
    /// Flash/beep pairs (ms).
    public var syncPairs: Int
    /// Median beep − flash (ms): positive when the audio is late; nil without pairs.
    public var avOffsetMs: Double?

    /// Why a file cannot be analysed.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The file is neither a WebM/Matroska nor an MP4 recording, or does not parse as one.
        case notARecording(path: String, reason: String)
        /// No video track, or one of a codec Understudy does not decode.
        case noVideo(path: String, codecs: [String])
        /// No frame of the video track decoded.
        case nothingDecoded(path: String, frames: Int, reason: String)

        public var description: String {
            switch self {
            case .notARecording(let path, let reason):
                return "\(path) is not a WebM, Matroska or MP4 recording: \(reason)"
            case .noVideo(let path, let codecs):
                return
                    "\(path) has no video track Understudy decodes (tracks: \(codecs.isEmpty ? "none" : codecs.joined(separator: ", ")))"
            case .nothingDecoded(let path, let frames, let reason):
                return "no picture of \(path) decoded (\(frames) video frames): \(reason)"
            }
        }
    }

    /// Reads and analyses the recording at `path` (WebM, Matroska or MP4, told apart by their
    /// first bytes), assuming a source of `fps`. Throws ``Failure``; a file cut short is analysed
    /// up to its last whole block or sample.
    public static func analyze(path: String, fps: Int = 30) throws(Failure) -> RecordingQuality {
        let head = (try? readWholeFile(path).prefix(8)).map(Array.init) ?? []
        if head.count >= 8, Array(head[4..<8]) == Array("ftyp".utf8) {
            let reader: MP4Reader
            do { reader = try MP4Reader(path: path) } catch {
                throw .notARecording(path: path, reason: error.description)
            }
            return try analyze(
                tracks: reader.tracks, frames: reader.frames(track:), truncated: reader.isTruncated, path: path,
                fps: fps)
        }
        let reader: WebMReader
        do {
            reader = try WebMReader(path: path)
        } catch {
            throw .notARecording(path: path, reason: error.description)
        }
        return try analyze(reader: reader, path: path, fps: fps)
    }

    /// Analyses an already-read WebM/Matroska recording.
    public static func analyze(reader: WebMReader, path: String, fps: Int = 30) throws(Failure) -> RecordingQuality {
        try analyze(
            tracks: reader.tracks, frames: reader.frames(track:), truncated: reader.isTruncated, path: path, fps: fps)
    }

    /// The analysis over either container's tracks. H.264 samples are length-prefixed with the
    /// parameter sets in the track's avcC (Matroska CodecPrivate, MP4 `avcC`): they become the
    /// Annex B access units the decoder takes.
    static func analyze(
        tracks: [WebMReader.Track], frames framesOf: (Int) -> [WebMReader.Frame], truncated: Bool, path: String,
        fps: Int
    ) throws(Failure) -> RecordingQuality {
        guard let track = tracks.first(where: { $0.kind == .video && $0.codec != nil }),
            let codec = track.codec,
            let decoder = try? VideoDecoder(codec: codec)
        else {
            throw .noVideo(path: path, codecs: tracks.map(\.codecID))
        }
        var frames = framesOf(track.number)
        if codec == .h264 {
            guard let avc = AVCConfiguration(track.codecPrivate) else {
                throw .nothingDecoded(
                    path: path, frames: frames.count,
                    reason: "the H.264 track has no usable avcC (\(track.codecPrivate.count) bytes)")
            }
            // A sample whose lengths overrun it is kept empty: counted as undecodable below.
            for i in frames.indices { frames[i].data = avc.annexB(frames[i].data)?.bytes ?? [] }
        }
        var analyzer = VideoQualityAnalyzer(fps: fps)
        var lastError = "the decoder produced no picture"
        // Samples in decode order whose times go back (H.264 B-frames) come out of the decoder in
        // presentation order: each picture then takes the next of the sorted times.
        let times = frames.map(\.timestampNanoseconds)
        let presentation: [Int64]? = zip(times, times.dropFirst()).contains { $0 > $1 } ? times.sorted() : nil
        var pictures = 0
        for frame in frames {
            guard !frame.data.isEmpty else {
                analyzer.addUndecodable()
                continue
            }
            do {
                // A damaged frame is counted and skipped, as a player skips it.
                if let picture = try decoder.decode(frame.data) {
                    analyzer.add(
                        picture,
                        ptsNanoseconds: presentation?[min(pictures, times.count - 1)] ?? frame.timestampNanoseconds)
                    pictures += 1
                }
            } catch {
                lastError = "\(error)"
                analyzer.addUndecodable()
            }
        }
        // The newest picture a reordering decoder still holds.
        if let presentation, pictures < presentation.count, let last = try? decoder.finish() {
            analyzer.add(last, ptsNanoseconds: presentation[presentation.count - 1])
        }
        let video = analyzer.report()
        guard video.frames > 0 else { throw .nothingDecoded(path: path, frames: frames.count, reason: lastError) }

        var beeps: [Double] = []
        if let audio = tracks.first(where: { $0.codec == .opus }) {
            beeps = (try? SyncMarkerAnalyzer.beepOnsets(framesOf(audio.number), track: audio)) ?? []
        }
        let pairs = SyncMarkerAnalyzer.pair(flashes: video.flashTimesMs, beeps: beeps)
        return RecordingQuality(
            path: path, videoCodec: codec.rawValue, truncated: truncated, video: video, beepOnsetsMs: beeps,
            syncPairs: pairs.count, avOffsetMs: SyncMarkerAnalyzer.median(pairs.map(\.offsetMs)))
    }
}
