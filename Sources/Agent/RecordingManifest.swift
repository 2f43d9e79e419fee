import Foundation
import Media
import RTCWire
import RoomProtocol
import Signaling

/// Recording file names for every recorder of the package (the agents, the scenario participants):
/// one escaping of names, files created exclusively (issue 31 item 2).
public enum RecordingFiles {
    /// Creates a new, empty file for `name`'s recording in `directory` and returns its path:
    /// `STEM.EXT`, where STEM is the one escaping of names (``NameEscaping/fileName(_:)``), so that
    /// distinct names never share a file. The file is created exclusively (`O_EXCL`): an existing
    /// file, from another participant, an earlier run or anyone else, is never truncated; the name
    /// then gets the first free suffix `STEM.1.EXT`, `STEM.2.EXT`… (an escaping has no `.`, so a
    /// suffixed name is never another name's first choice).
    public static func create(in directory: String, for name: String, ext: String) throws(MediaError) -> String {
        let stem = NameEscaping.fileName(name)
        for attempt in 0..<1000 {
            let file = attempt == 0 ? "\(stem).\(ext)" : "\(stem).\(attempt).\(ext)"
            let path = (directory as NSString).appendingPathComponent(file)
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd >= 0 {
                close(fd)
                return path
            }
            guard errno == EEXIST else { throw .cannotOpen(path: path, errno: errno) }
        }
        throw .cannotOpen(path: (directory as NSString).appendingPathComponent("\(stem).*.\(ext)"), errno: EEXIST)
    }
}

/// `manifest.json`, what an agent writes beside its recordings (docs/protocol.md, "Recording
/// manifest"); the room agent and the Janus agent fill the same type, so the two read alike. Fields
/// one backend has no use for are absent (nil).
public struct RecordingManifest: Codable, Sendable, Equatable {
    /// One recording file.
    public struct File: Codable, Sendable, Equatable {
        /// Whose media it holds (a Janus feed id for the Janus agent).
        public var participantId: String
        /// The Janus publisher's display name.
        public var display: String?
        /// The file (renamed `.mkv` when its video is H.264).
        public var path: String
        /// `webm`, `mkv`, `ogg` or `ivf`.
        public var format: String
        public var startedAt: String
        /// The kinds it may hold: `["audio", "video"]` for WebM.
        public var kinds: [String]?
        /// `opus` for a file that holds audio.
        public var audioCodec: String?
        /// The video codec, known at the first keyframe written.
        public var videoCodec: String?
        /// At close, or at a disk error: frames in the file.
        public var videoFrames: Int?
        public var audioFrames: Int?
        /// At close: frames dropped because the disk was behind.
        public var droppedFrames: Int?
        /// At close: frames taken but not in the file.
        public var framesNotWritten: Int?
        /// The first write error.
        public var error: String?
        public var failedAt: String?
        /// At close: whether the file holds everything it took.
        public var complete: Bool?
    }

    /// A remote participant seen in the room (a publisher, for Janus).
    public struct Participant: Codable, Sendable, Equatable {
        public var id: String
        /// The room's display name.
        public var name: String?
        /// The Janus display name.
        public var display: String?
        /// Its last known mode.
        public var mode: String?
        public var joinedAt: String
        public var leftAt: String?
    }

    /// A participant's mode change as the agent heard of it.
    public struct ModeChange: Codable, Sendable, Equatable {
        public var participantId: String
        public var mode: String
        public var at: String
    }

    /// A consumed track's last quality reading.
    public struct Track: Codable, Sendable, Equatable {
        public var participantId: String
        public var kind: String
        public var mid: String
        public var quality: ReceiveQualitySnapshot
    }

    /// A consumed webcam's full-reference checks (`--analyze`, ``VideoQualityAnalyzer``).
    public struct Analysis: Codable, Sendable, Equatable {
        public var participantId: String
        /// Frames discarded unanalysed because the decoder fell behind.
        public var framesNotAnalysed: Int
        public var video: VideoQualityReport
    }

    /// The mixed audio file (`--mix-audio`).
    public struct MixedAudio: Codable, Sendable, Equatable {
        public var path: String
        /// `ogg`, `opus`, `webm`, `mkv` or `mp4` (Opus mono in each).
        public var format: String
        /// The room timeline's origin: the file's first sample, and time 0 of ``RecordingManifest/speakers``.
        public var startedAt: String
        /// 48 000.
        public var sampleRate: Int
        /// How the speakers are mixed.
        public var rule: String
        /// At close: the file's length in seconds (wall time from ``startedAt`` to the stop).
        public var durationSeconds: Double?
        /// At close: decoded samples that came too late (or too early) for their place in the mix.
        public var lateSamples: Int?
        /// The first write error.
        public var error: String?
        /// At close: whether the file was finished without error.
        public var complete: Bool?
    }

    /// The room composite (`--composite`): one picture of the stage, encoded once, written to each output.
    public struct Composite: Codable, Sendable, Equatable {
        /// One destination of the composite.
        public struct Output: Codable, Sendable, Equatable {
            /// The path (or URL) as given.
            public var destination: String
            /// Why it stopped early or could not be finished.
            public var error: String?
            /// At stop: whether it was finished without error.
            public var complete: Bool?
        }
        public var outputs: [Output]
        /// `grid` or `speaker`.
        public var layout: String
        public var width: Int
        public var height: Int
        public var fps: Int
        /// `h264` or `vp8`; the audio is the room's mix in Opus.
        public var videoCodec: String
        /// Time 0 of the outputs (the same origin as ``MixedAudio/startedAt``).
        public var startedAt: String
        /// At stop: frames composed, and frame times skipped because the machine was behind.
        public var frames: Int?
        public var skippedFrames: Int?
        /// At stop: received frames dropped by a full hand-off, and frames the decoders refused.
        public var droppedInputFrames: Int?
        public var decodeErrors: Int?
        /// At stop: seconds composed (wall time from ``startedAt`` to the stop).
        public var durationSeconds: Double?
    }

    /// One turn of one speaker, in seconds on the room timeline (``MixedAudio/startedAt``), from the
    /// decoded audio's level (docs/protocol.md, "Speaker timeline").
    public struct SpeakerTurn: Codable, Sendable, Equatable {
        public var participantId: String
        public var start: Double
        public var end: Double
    }

    /// `janus` for the Janus agent.
    public var backend: String?
    public var room: String
    /// The agent's own id and mode.
    public var participantId: String?
    public var mode: String?
    /// `webm` or `ogg+ivf`.
    public var recordFormat: String
    public var files: [File] = []
    public var participants: [Participant] = []
    /// Ids on stage (for Janus: the publishers that have not left).
    public var stage: [String] = []
    /// Ids in the audience (`RECV_ONLY`).
    public var audience: [String]?
    public var modeChanges: [ModeChange]?
    public var refusedInvites: Int?
    public var tracks: [Track]?
    /// `--analyze`: each consumed webcam's full-reference checks, by participant id.
    public var analysis: [Analysis]?
    /// The mixed audio (`--mix-audio`).
    public var mixedAudio: MixedAudio?
    /// Who spoke when, in order of the turns' ends (with ``mixedAudio``).
    public var speakers: [SpeakerTurn]?
    /// The room composite (`--composite`).
    public var composite: Composite?

    /// An empty manifest.
    public init(backend: String? = nil, room: String, recordFormat: String) {
        self.backend = backend
        self.room = room
        self.recordFormat = recordFormat
    }

    /// Now, in ISO 8601 with fractional seconds (every time in the manifest).
    public static func timestamp() -> String { ISO8601Timestamp.string(milliseconds: true) }

    /// The manifest's bytes: pretty JSON with sorted keys.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(self)
    }
}
