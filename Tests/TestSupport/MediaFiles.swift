import Foundation
import Media
import RTCWire

/// Frame counts per codec as ffprobe decodes them.
public func probeFrameCounts(_ path: String) throws -> [String: Int] {
    let r = try runTool(
        "/usr/bin/ffprobe",
        [
            "-v", "error", "-count_frames", "-show_entries",
            "stream=codec_name,nb_read_frames", "-of", "json", path,
        ])
    guard r.status == 0, let json = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any],
        let streams = json["streams"] as? [[String: Any]]
    else { return [:] }
    var counts: [String: Int] = [:]
    for s in streams {
        guard let name = s["codec_name"] as? String else { continue }
        counts[name] = Int(s["nb_read_frames"] as? String ?? "") ?? -1
    }
    return counts
}

/// What `ffmpeg -v error -i FILE -f null -` prints (empty for a clean decode).
public func ffmpegDecodeErrors(_ path: String) throws -> String {
    let r = try runTool(
        "/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-enc_time_base", "-1", "-f", "null", "-"])
    return (r.status == 0 ? "" : "exit \(r.status)\n") + r.err
}

/// A path in this test process's own temporary directory.
public func temporaryPath(_ name: String) -> String {
    let dir = NSTemporaryDirectory() + "understudy-media-tests-\(getpid())"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir + "/" + name
}

/// The synthetic loop used by the tests: 4 s, three layers (encoded once per test process).
public let testMedia: SyntheticMedia = {
    do { return try SyntheticMedia(seconds: 4, layers: 3) } catch { fatalError("\(error)") }
}()

/// Feeds `seconds` of synthetic media, interleaved in time order, to `sink` with ns pts.
public func feed(
    seconds: Double, media: SyntheticMedia = testMedia, layer: Int = 0,
    _ sink: (EncodedFrame, Int64) throws -> Void
) throws {
    let videoCount = Int(seconds * Double(media.fps))
    let audioCount = Int(seconds * 50)
    var v = 0
    var a = 0
    while v < videoCount || a < audioCount {
        let vPts = Int64(v) * 1_000_000_000 / Int64(media.fps)
        let aPts = Int64(a) * 20_000_000
        if v < videoCount && (a >= audioCount || vPts <= aPts) {
            if let f = media.videoFrame(at: v, layer: layer) { try sink(f, vPts) }
            v += 1
        } else {
            if let f = media.audioFrame(at: a) { try sink(f, aPts) }
            a += 1
        }
    }
}

/// Small media files made by ffmpeg (a third-party muxer) once per test process: 2 s each, VP8 with
/// a keyframe every 15 frames (30 fps), Opus in 20 ms packets.
public enum SourceFixtures {
    public struct Files: Sendable {
        public let dir: String
        public var ivf: String { dir + "/video.ivf" }
        public var ogg: String { dir + "/audio.ogg" }
        public var opus: String { dir + "/audio.opus" }
        public var webm: String { dir + "/av.webm" }
        public var audioOnlyWebM: String { dir + "/audio-only.webm" }
        public var mkv: String { dir + "/av.mkv" }
    }

    static let files: Result<Files, any Error> = Result {
        let dir = NSTemporaryDirectory() + "understudy-source-fixtures-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let f = Files(dir: dir)
        let videoIn = ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30"]
        let audioIn = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"]
        let videoOut = [
            "-c:v", "libvpx", "-g", "15", "-keyint_min", "15", "-auto-alt-ref", "0", "-deadline", "realtime",
            "-cpu-used", "8", "-b:v", "400k",
        ]
        let audioOut = ["-c:a", "libopus", "-b:a", "32k"]
        let both = videoIn + audioIn + ["-t", "2"] + videoOut + audioOut
        let jobs: [[String]] = [
            videoIn + ["-t", "2"] + videoOut + ["-f", "ivf", f.ivf],
            audioIn + ["-t", "2"] + audioOut + [f.ogg],
            audioIn + ["-t", "2"] + audioOut + ["-f", "ogg", f.opus],
            both + [f.webm],
            audioIn + ["-t", "2"] + audioOut + [f.audioOnlyWebM],
            both + [f.mkv],
        ]
        for job in jobs {
            let out = try runToolText("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y"] + job)
            guard out.isEmpty else { throw MediaSourceError.unsupported(path: job.last ?? "", reason: out) }
        }
        return f
    }

    /// The files, made on first use (throws what ffmpeg said if it could not make them).
    public static func get() throws -> Files { try files.get() }
}
