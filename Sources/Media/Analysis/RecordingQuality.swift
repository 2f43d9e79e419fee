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
        /// The file is not a WebM/Matroska recording (an MP4 is named as such: no MP4 reader exists).
        case notARecording(path: String, reason: String)
        /// No video track, or one of a codec Understudy does not decode.
        case noVideo(path: String, codecs: [String])
        /// No frame of the video track decoded.
        case nothingDecoded(path: String, frames: Int, reason: String)

        public var description: String {
            switch self {
            case .notARecording(let path, let reason): return "\(path) is not a WebM/Matroska recording: \(reason)"
            case .noVideo(let path, let codecs):
                return
                    "\(path) has no video track Understudy decodes (tracks: \(codecs.isEmpty ? "none" : codecs.joined(separator: ", ")))"
            case .nothingDecoded(let path, let frames, let reason):
                return "no picture of \(path) decoded (\(frames) video frames): \(reason)"
            }
        }
    }

    /// Reads and analyses the recording at `path` (WebM or Matroska), assuming a source of `fps`.
    /// Throws ``Failure``; a file cut short is analysed up to its last whole block.
    public static func analyze(path: String, fps: Int = 30) throws(Failure) -> RecordingQuality {
        let reader: WebMReader
        do {
            reader = try WebMReader(path: path)
        } catch {
            var reason = error.description
            if error == .notEBML, let head = try? readWholeFile(path).prefix(12), head.count >= 8,
                Array(head[4..<8]) == Array("ftyp".utf8)
            {
                reason = "it is an MP4 file, which analyze does not read (record with --record-format webm)"
            }
            throw .notARecording(path: path, reason: reason)
        }
        return try analyze(reader: reader, path: path, fps: fps)
    }

    /// Analyses an already-read recording.
    public static func analyze(reader: WebMReader, path: String, fps: Int = 30) throws(Failure) -> RecordingQuality {
        guard let track = reader.tracks.first(where: { $0.kind == .video && $0.codec != nil }),
            let codec = track.codec,
            let decoder = try? VideoDecoder(codec: codec)
        else {
            throw .noVideo(path: path, codecs: reader.tracks.map(\.codecID))
        }
        var analyzer = VideoQualityAnalyzer(fps: fps)
        var lastError = "the decoder produced no picture"
        let frames = reader.frames(track: track.number)
        for frame in frames {
            guard !frame.data.isEmpty else {
                analyzer.addUndecodable()
                continue
            }
            do {
                // A damaged frame is counted and skipped, as a player skips it.
                if let picture = try decoder.decode(frame.data) {
                    analyzer.add(picture, ptsNanoseconds: frame.timestampNanoseconds)
                }
            } catch {
                lastError = "\(error)"
                analyzer.addUndecodable()
            }
        }
        let video = analyzer.report()
        guard video.frames > 0 else { throw .nothingDecoded(path: path, frames: frames.count, reason: lastError) }

        var beeps: [Double] = []
        if let audio = reader.tracks.first(where: { $0.codec == .opus }) {
            beeps = (try? SyncMarkerAnalyzer.beepOnsets(reader.frames(track: audio.number), track: audio)) ?? []
        }
        let pairs = SyncMarkerAnalyzer.pair(flashes: video.flashTimesMs, beeps: beeps)
        return RecordingQuality(
            path: path, videoCodec: codec.rawValue, truncated: reader.isTruncated, video: video, beepOnsetsMs: beeps,
            syncPairs: pairs.count, avOffsetMs: SyncMarkerAnalyzer.median(pairs.map(\.offsetMs)))
    }
}
