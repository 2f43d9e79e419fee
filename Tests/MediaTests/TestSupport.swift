import Foundation
import Media
import RTCWire

/// Runs a tool and returns (exit status, stdout, stderr).
func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    let outPipe = Pipe()
    let errPipe = Pipe()
    process.standardOutput = outPipe
    process.standardError = errPipe
    try process.run()
    // Read before waiting so a chatty tool cannot fill the pipe and block.
    let out = outPipe.fileHandleForReading.readDataToEndOfFile()
    let err = errPipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
}

/// Frame counts per codec as ffprobe decodes them.
func probeFrameCounts(_ path: String) throws -> [String: Int] {
    let r = try run(
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
func ffmpegDecodeErrors(_ path: String) throws -> String {
    let r = try run("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-enc_time_base", "-1", "-f", "null", "-"])
    return (r.status == 0 ? "" : "exit \(r.status)\n") + r.err
}

func temporaryPath(_ name: String) -> String {
    let dir = NSTemporaryDirectory() + "understudy-media-tests-\(getpid())"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir + "/" + name
}

/// The synthetic loop used by the tests: 4 s, three layers (encoded once per test process).
let testMedia: SyntheticMedia = {
    do { return try SyntheticMedia(seconds: 4, layers: 3) } catch { fatalError("\(error)") }
}()

/// Feeds `seconds` of synthetic media, interleaved in time order, to `sink` with ns pts.
func feed(
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
