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
            "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", fixturePattern, "-t", "\(seconds)",
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

/// The picture every fixture encodes: ffmpeg's `testsrc` at 320x240, 30 fps (see ``testPatternLuma(frame:)``).
public let fixturePattern = "testsrc=size=320x240:rate=30"

/// The frames of `seconds` of ``fixturePattern`` encoded by ffmpeg with `encoder` (its codec
/// options) into IVF, in file order: the one reader of the IVF fixtures.
private func ivfFixtureFrames(seconds: Int, name: String, encoder: [String]) throws -> [[UInt8]] {
    let path = temporaryPath("\(name)-\(UUID().uuidString).ivf")
    defer { unlink(path) }
    let run = try runTool(
        "ffmpeg",
        ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", fixturePattern, "-t", "\(seconds)"] + encoder + [
            "-f", "ivf", path,
        ])
    guard run.status == 0 else { throw ToolFailure(tool: "ffmpeg", message: run.err) }
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    var frames: [[UInt8]] = []
    var at = 32
    while at + 12 <= bytes.count {
        let size = Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
        at += 12
        guard at + size <= bytes.count else { break }
        frames.append(Array(bytes[at..<at + size]))
        at += size
    }
    return frames
}

/// `seconds` of ``fixturePattern`` encoded by libvpx VP8 (through ffmpeg), as frames with 90 kHz
/// timestamps at 30 fps; a keyframe every 30 frames.
public func vp8Frames(seconds: Int) throws -> [EncodedFrame] {
    let frames = try ivfFixtureFrames(
        seconds: seconds, name: "vp8",
        encoder: [
            "-c:v", "libvpx", "-pix_fmt", "yuv420p", "-deadline", "realtime", "-cpu-used", "8", "-g", "30",
            "-b:v", "300k", "-auto-alt-ref", "0", "-lag-in-frames", "0",
        ])
    return frames.enumerated().map { i, data in
        EncodedFrame(
            codec: .vp8, data: data, timestamp: UInt32(i) * 3000, isKeyframe: VP8KeyframeInfo.isKeyframe(data),
            duration: 3000)
    }
}

/// `seconds` of ``fixturePattern`` encoded by libvpx VP9 (through ffmpeg, into IVF), as frames
/// with 90 kHz timestamps at 30 fps; a keyframe every 30 frames. `pixelFormat` `yuv420p10le` makes
/// profile 2 (10-bit).
public func vp9Frames(seconds: Int, pixelFormat: String = "yuv420p") throws -> [EncodedFrame] {
    let frames = try ivfFixtureFrames(
        seconds: seconds, name: "vp9",
        encoder: [
            "-c:v", "libvpx-vp9", "-pix_fmt", pixelFormat, "-deadline", "realtime", "-cpu-used", "8",
            "-g", "30", "-b:v", "300k", "-auto-alt-ref", "0", "-lag-in-frames", "0",
        ])
    return frames.enumerated().map { i, data in
        // A VP9 key frame: frame_marker 2, then frame_type 0 after the profile and show_existing bits.
        let key = data.withUnsafeBytes { VP9FrameHeader.keyframeInfo($0) } != nil
        return EncodedFrame(codec: .vp9, data: data, timestamp: UInt32(i) * 3000, isKeyframe: key, duration: 3000)
    }
}

/// `seconds` of ``fixturePattern`` encoded by libaom AV1 (through ffmpeg, into IVF), as temporal
/// units in the low-overhead format without temporal delimiters, with 90 kHz timestamps at 30 fps;
/// a keyframe (with its sequence header) every 30 frames.
public func av1Frames(seconds: Int) throws -> [EncodedFrame] {
    let frames = try ivfFixtureFrames(
        seconds: seconds, name: "av1",
        encoder: [
            "-c:v", "libaom-av1", "-pix_fmt", "yuv420p", "-usage", "realtime", "-cpu-used", "8", "-g", "30",
            "-b:v", "300k", "-lag-in-frames", "0",
        ])
    return frames.enumerated().map { i, bytes in
        // Drop temporal delimiters; keep every other OBU as it is (with its size field).
        var unit: [UInt8] = []
        var o = 0
        while o < bytes.count {
            let header = bytes[o]
            let headerBytes = header & 0x04 != 0 ? 2 : 1
            let (length, n) = bytes.withUnsafeBytes { AV1LEB128.read($0, at: o + headerBytes) } ?? (0, 0)
            let end = min(bytes.count, o + headerBytes + n + Int(length))
            if (header >> 3) & 0x0F != AV1OBUType.temporalDelimiter { unit += bytes[o..<end] }
            o = end
        }
        let key = unit.withUnsafeBytes { AV1SequenceHeader.configurationRecord(fromTemporalUnit: $0) } != nil
        return EncodedFrame(codec: .av1, data: unit, timestamp: UInt32(i) * 3000, isKeyframe: key, duration: 3000)
    }
}

/// The luma plane (320x240, tightly packed) of frame `frame` of ``fixturePattern`` as ffmpeg
/// draws it, before any encoding: what a decoded fixture picture should look like.
public func testPatternLuma(frame: Int) throws -> [UInt8] {
    let path = temporaryPath("pattern-\(UUID().uuidString).yuv")
    defer { unlink(path) }
    let run = try runTool(
        "ffmpeg",
        [
            "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", fixturePattern, "-vf", "select=eq(n\\,\(frame))",
            "-frames:v", "1", "-pix_fmt", "yuv420p", "-f", "rawvideo", path,
        ])
    guard run.status == 0 else { throw ToolFailure(tool: "ffmpeg", message: run.err) }
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    guard bytes.count >= 320 * 240 else { throw ToolFailure(tool: "ffmpeg", message: "short raw frame") }
    return Array(bytes[0..<(320 * 240)])
}

/// Packetizes an AV1 temporal unit (low-overhead format) as the AOM RTP format does: every OBU
/// without its size field, as elements with LEB128 lengths (W = 0), fragmented across payloads of
/// at most `maxPayload` bytes (Z and Y set), N on the first packet of a key frame.
public func av1Payloads(_ frame: EncodedFrame, maxPayload: Int) -> [[UInt8]] {
    var obus: [[UInt8]] = []
    var o = 0
    let b = frame.data
    while o < b.count {
        let header = b[o]
        let headerBytes = header & 0x04 != 0 ? 2 : 1
        let (length, n) = b.withUnsafeBytes { AV1LEB128.read($0, at: o + headerBytes) } ?? (0, 0)
        var obu = [header & ~0x02]
        if headerBytes == 2 { obu.append(b[o + 1]) }
        obu += b[(o + headerBytes + n)..<(o + headerBytes + n + Int(length))]
        obus.append(obu)
        o += headerBytes + n + Int(length)
    }
    var payloads: [[UInt8]] = []
    var current: [UInt8] = [0]
    func leb(_ v: Int) -> [UInt8] {
        var out: [UInt8] = []
        var v = v
        repeat {
            var byte = UInt8(v & 0x7F)
            v >>= 7
            if v > 0 { byte |= 0x80 }
            out.append(byte)
        } while v > 0
        return out
    }
    for obu in obus {
        var rest = obu[...]
        while !rest.isEmpty {
            let room = maxPayload - current.count - 3
            if room <= 0 {
                payloads.append(current)
                current = [0]
                continue
            }
            let piece = rest.prefix(room)
            current += leb(piece.count) + piece
            rest = rest.dropFirst(piece.count)
            if !rest.isEmpty {
                current[0] |= 0x40  // Y: continues in the next packet
                payloads.append(current)
                current = [0x80]  // Z: this packet starts with a continuation
            }
        }
    }
    if current.count > 1 { payloads.append(current) }
    if frame.isKeyframe, !payloads.isEmpty { payloads[0][0] |= 0x08 }  // N
    return payloads
}
