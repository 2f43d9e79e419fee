import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// VP9 from libvpx: its key-frame header read, and recorded without transcoding into WebM, MP4 and IVF, judged by ffprobe and ffmpeg.
@Suite struct VP9RecordingTests {
    @Test(arguments: ["webm", "mp4", "ivf"])
    func vp9IsRecorded(_ ext: String) throws {
        let frames = try vp9Frames(seconds: 2)
        let path = temporaryPath("vp9-recording.\(ext)")
        defer { unlink(path) }
        let recording = try Recording(path: path)
        // A delta frame before the first keyframe is never written.
        recording.write(frames[1], arrival: 1_000_000)
        for (i, frame) in frames.enumerated() {
            recording.write(frame, arrival: 2_000_000 + UInt64(i) * 33_333_333)
        }
        try recording.close()
        #expect(recording.videoCodec == .vp9)
        #expect(recording.path == path)
        #expect(recording.videoFrames == frames.count)
        #expect(try probeFrameCounts(path)["vp9"] == frames.count)
        #expect(try ffmpegDecodeErrors(path) == "")
        let header = try runToolText(
            "ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", path])
        #expect(header.split(separator: "\n").first == "vp9,320,240")
    }

    @Test func keyFrameSizeAndProfileFromLibvpxFrames() throws {
        let frames = try vp9Frames(seconds: 1)
        #expect(frames.count == 30)
        let key = try #require(frames.first)
        #expect(key.isKeyframe)
        let header = key.data.withUnsafeBytes { VP9FrameHeader.keyframeInfo($0) }
        #expect(header?.profile == 0 && header?.width == 320 && header?.height == 240)
        #expect(frames.dropFirst().allSatisfy { !$0.isKeyframe })
        // A packet of the key frame without a scalability structure: the size comes from the header.
        let packet: [UInt8] = [0x08] + key.data.prefix(40)
        let info = try packet.withUnsafeBytes { b throws(RTPPayloadError) in try VP9PayloadFormat.inspect(b) }
        #expect(info.isKeyframe && info.width == 320 && info.height == 240)
    }
}
