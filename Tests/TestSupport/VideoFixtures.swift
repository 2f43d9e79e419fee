import Foundation
import RTCWire

/// A real H.264 stream (libx264 through the ffmpeg CLI, access unit delimiters on) split into
/// access units, with RTP timestamps at 30 fps.
public func x264AccessUnits(seconds: Int) throws -> [EncodedFrame] {
    // Tests run in parallel: each call its own file.
    let path = temporaryPath("x264-\(UUID().uuidString).h264")
    defer { unlink(path) }
    let run = try runTool(
        "ffmpeg",
        [
            "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-t", "\(seconds)",
            "-c:v", "libx264", "-profile:v", "baseline", "-pix_fmt", "yuv420p", "-g", "30", "-x264-params", "aud=1",
            "-f", "h264", path,
        ])
    guard run.status == 0 else { throw ToolFailure(tool: "ffmpeg", message: run.err) }
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    var units: [(type: UInt8, range: Range<Int>)] = []
    bytes.withUnsafeBytes { b in H264AnnexB.forEachUnitRange(b) { units.append((b[$0.lowerBound] & 0x1F, $0)) } }
    var frames: [EncodedFrame] = []
    var current: [UInt8] = []
    var key = false
    func flush() {
        guard !current.isEmpty else { return }
        frames.append(
            EncodedFrame(
                codec: .h264, data: current, timestamp: UInt32(frames.count) * 3000, isKeyframe: key, duration: 3000))
        current = []
        key = false
    }
    for u in units {
        if u.type == H264NALType.aud {
            flush()
            continue
        }
        if u.type == H264NALType.idr { key = true }
        current += [0, 0, 0, 1] + bytes[u.range]
    }
    flush()
    return frames
}

/// A tool run that failed.
public struct ToolFailure: Error, CustomStringConvertible {
    public let tool: String
    public let message: String
    public var description: String { "\(tool) failed: \(message)" }
}

/// `seconds` of a 320x240 test pattern encoded by libvpx VP9 (through ffmpeg, into IVF), as frames
/// with 90 kHz timestamps at 30 fps; a keyframe every 30 frames.
public func vp9Frames(seconds: Int) throws -> [EncodedFrame] {
    let path = temporaryPath("vp9-\(UUID().uuidString).ivf")
    defer { unlink(path) }
    let run = try runTool(
        "ffmpeg",
        [
            "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-t", "\(seconds)",
            "-c:v", "libvpx-vp9", "-pix_fmt", "yuv420p", "-deadline", "realtime", "-cpu-used", "8", "-g", "30", "-b:v", "300k",
            "-auto-alt-ref", "0", "-lag-in-frames", "0", "-f", "ivf", path,
        ])
    guard run.status == 0 else { throw ToolFailure(tool: "ffmpeg", message: run.err) }
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    var frames: [EncodedFrame] = []
    var at = 32
    while at + 12 <= bytes.count {
        let size = Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
        at += 12
        guard at + size <= bytes.count else { break }
        let data = Array(bytes[at..<at + size])
        at += size
        // A VP9 key frame: frame_marker 2, then frame_type 0 after the profile and show_existing bits.
        let key = data.withUnsafeBytes { VP9FrameHeader.keyframeInfo($0) } != nil
        frames.append(
            EncodedFrame(
                codec: .vp9, data: data, timestamp: UInt32(frames.count) * 3000, isKeyframe: key, duration: 3000))
    }
    return frames
}
