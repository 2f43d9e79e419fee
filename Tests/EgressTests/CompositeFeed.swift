import Egress
import Foundation
import Media
import RTCWire
import TestSupport

/// What a composite hands its outputs, made up: H.264 test-pattern frames (a keyframe every
/// `keyframeSeconds`) and a tone with beeps as 20 ms PCM frames with their Opus packets, interleaved in
/// time order on one microsecond clock.
// Safe as used: one test drives it, from one thread at a time.
final class CompositeFeed: @unchecked Sendable {
    let fps: Int
    let video: H264Encoder
    let pattern: TestPatternSource
    let tone = ToneSource()
    let opus: OpusEncoder
    private var videoIndex = 0
    private var audioIndex = 0
    private var pcm = [Int16](repeating: 0, count: ToneSource.frameSamples)

    init(width: Int = 320, height: Int = 180, fps: Int = 30, keyframeSeconds: Double = 2) throws {
        self.fps = fps
        video = try H264Encoder(
            width: width, height: height, fps: fps, bitrate: 300_000,
            keyframeInterval: max(1, Int(keyframeSeconds * Double(fps))), preset: "ultrafast")
        pattern = TestPatternSource(width: width, height: height, fps: fps)
        opus = try OpusEncoder(channels: 1)
    }

    /// Microseconds fed so far (the end of the later track).
    var fedMicros: Int64 { max(Int64(videoIndex) * 1_000_000 / Int64(fps), Int64(audioIndex) * 20_000) }

    /// Feeds the next `seconds` of both tracks to `outputs`, encoding on a thread of its own: the work
    /// would otherwise hold a thread of Swift's shared pool (2 wide here) for seconds, and the async
    /// tests running beside it (the compositor's, paced by the wall clock) could not resume.
    func feed(seconds: Double, to outputs: [any CompositeOutput]) async throws {
        let box = UncheckedBox(outputs)
        try await onOwnThread { try self.feedNow(seconds: seconds, to: box.value) }
    }

    private func feedNow(seconds: Double, to outputs: [any CompositeOutput]) throws {
        let endMicros = fedMicros + Int64(seconds * 1_000_000)
        while true {
            let videoPts = Int64(videoIndex) * 1_000_000 / Int64(fps)
            let audioPts = Int64(audioIndex) * 20_000
            if videoPts >= endMicros && audioPts >= endMicros { return }
            if videoPts <= audioPts {
                for frame in try video.encode(i420: pattern.frame(at: videoIndex)) {
                    for output in outputs { try output.writeVideo(frame, ptsMicros: videoPts) }
                }
                videoIndex += 1
            } else {
                try pcm.withUnsafeMutableBufferPointer { buffer in
                    tone.render(frame: audioIndex, into: buffer)
                    let packet = try opus.encode(pcm: UnsafeBufferPointer(buffer))
                    let frame = EncodedFrame(
                        codec: .opus, data: packet, timestamp: UInt32(truncatingIfNeeded: audioIndex * 960),
                        isKeyframe: true, duration: 960)
                    for output in outputs {
                        try output.writeAudio(frame, pcm: UnsafeBufferPointer(buffer), ptsMicros: audioPts)
                    }
                }
                audioIndex += 1
            }
        }
    }
}

/// Holds a value across a thread hop (the test hands its outputs to the feeding thread and waits).
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// Runs `body` on a new thread and waits for it without blocking a thread of the shared pool.
func onOwnThread<T>(_ body: @escaping () throws -> T) async throws -> T {
    let work = UncheckedBox(body)
    return try await withCheckedThrowingContinuation { (done: CheckedContinuation<UncheckedBox<T>, Error>) in
        Thread {
            do { done.resume(returning: UncheckedBox(try work.value())) } catch { done.resume(throwing: error) }
        }.start()
    }.value
}

/// A fresh folder for one test's files.
func scratchFolder(_ name: String) -> String {
    let dir = NSTemporaryDirectory() + "understudy-egress-tests-\(getpid())/\(name)"
    try? FileManager.default.removeItem(atPath: dir)
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

/// ffprobe's duration of a file or playlist, the codecs of its streams (sorted), and what it complained of.
/// Like every tool run below, on a thread of its own (see ``CompositeFeed/feed(seconds:to:)``).
func probe(_ path: String) async throws -> (duration: Double, codecs: [String], errors: String) {
    let r = try await onOwnThread {
        try runTool(
            "/usr/bin/ffprobe",
            ["-v", "error", "-show_entries", "format=duration:stream=codec_name", "-of", "json", path])
    }
    let json = (try? JSONSerialization.jsonObject(with: Data(r.out.utf8))) as? [String: Any] ?? [:]
    let duration = Double((json["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
    let codecs = (json["streams"] as? [[String: Any]] ?? []).compactMap { $0["codec_name"] as? String }
    return (duration, codecs.sorted(), r.err)
}

/// `ffmpegDecodeErrors` off the shared pool.
func decodeErrors(_ path: String) async throws -> String { try await onOwnThread { try ffmpegDecodeErrors(path) } }

/// `probeFrameCounts` off the shared pool.
func frameCounts(_ path: String) async throws -> [String: Int] { try await onOwnThread { try probeFrameCounts(path) } }
