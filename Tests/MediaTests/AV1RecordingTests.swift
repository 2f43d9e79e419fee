import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// AV1 from libaom: packetized as the RTP format does and rebuilt byte for byte, its sequence header
/// read, and recorded without transcoding into WebM and MP4, judged by ffprobe and ffmpeg (dav1d).
@Suite struct AV1RecordingTests {
    @Test func packetizedTemporalUnitsAreRebuiltByteForByte() throws {
        let frames = try av1Frames(seconds: 1)
        #expect(frames.count == 30)
        #expect(frames.first?.isKeyframe == true)
        var builder = AV1TemporalUnitBuilder()
        for frame in frames {
            let payloads = av1Payloads(frame, maxPayload: 300)
            builder.reset()
            for p in payloads { p.withUnsafeBytes { builder.append($0) } }
            builder.finish()
            #expect(!builder.malformed)
            var out = [UInt8](repeating: 0, count: builder.encodedLength)
            out.withUnsafeMutableBytes { _ = builder.write(into: $0) }
            #expect(out == frame.data)
            let first = try payloads[0].withUnsafeBytes { b throws(RTPPayloadError) in try AV1PayloadFormat.inspect(b) }
            #expect(first.isKeyframe == frame.isKeyframe)
            if frame.isKeyframe { #expect(first.width == 320 && first.height == 240) }
        }
        let record = try #require(
            frames[0].data.withUnsafeBytes { AV1SequenceHeader.configurationRecord(fromTemporalUnit: $0) })
        #expect(record[0] == 0x81 && record[1] >> 5 == 0)  // version 1, main profile
        #expect(record[2] & 0x0C == 0x0C)  // 4:2:0
    }

    @Test(arguments: ["webm", "mp4"])
    func av1IsRecorded(_ ext: String) throws {
        let frames = try av1Frames(seconds: 2)
        let path = temporaryPath("av1-recording.\(ext)")
        defer { unlink(path) }
        let recording = try Recording(path: path)
        recording.write(frames[1], arrival: 1_000_000)  // a delta frame before the first key frame
        for (i, frame) in frames.enumerated() {
            recording.write(frame, arrival: 2_000_000 + UInt64(i) * 33_333_333)
        }
        try recording.close()
        #expect(recording.videoCodec == .av1)
        #expect(recording.videoFrames == frames.count)
        #expect(try probeFrameCounts(path)["av1"] == frames.count)
        #expect(try ffmpegDecodeErrors(path) == "")
        let header = try runToolText(
            "ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", path])
        #expect(header.split(separator: "\n").first == "av1,320,240")
    }
}
