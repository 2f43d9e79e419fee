import Foundation
import Media
import RTCWire
import TestSupport
import Testing

/// What the agent and the load bots publish with `--video-codec h264`: the synthetic loop encoded
/// by libx264, and H.264 Matroska files read without re-encoding.
@Suite struct H264SourceTests {
    func hasSPS(_ frame: EncodedFrame) -> Bool {
        var found = false
        frame.data.withUnsafeBytes {
            H264AnnexB.forEachUnit($0) { if $0[0] & 0x1F == H264NALType.sps { found = true } }
        }
        return found
    }

    @Test func theSyntheticLoopIsEncodedInH264WithAKeyframeEveryTwoSeconds() throws {
        let media = try SyntheticMedia(seconds: 4, layers: 2, videoCodec: .h264)
        #expect(media.videoCodec == .h264)
        for (k, frames) in media.videoFrames.enumerated() {
            #expect(frames.count == 120)
            #expect(frames.allSatisfy { $0.codec == .h264 })
            let keys = frames.indices.filter { frames[$0].isKeyframe }
            // Every 2 s on the top layer, twice as often one layer down.
            #expect(keys == (k == 0 ? [0, 60] : [0, 30, 60, 90]), "layer \(k)")
            #expect(keys.allSatisfy { hasSPS(frames[$0]) })
            let size = try #require(frames[0].keyframePictureSize)
            #expect(size.width == media.layers[k].width && size.height == media.layers[k].height)
        }
        let source = SyntheticVideoSource(media: media, layers: 1)
        #expect(source.codec == .h264)
        // Not a video codec (no video encoder for it): an error, never a trap.
        #expect(throws: MediaError.self) { try SyntheticMedia(seconds: 2, videoCodec: .opus) }
        #expect(throws: MediaError.self) { try SyntheticMedia.sharedLoop(layers: 1, codec: .opus) }
        #expect(throws: MediaSourceError.self) {
            try LocalSources.makeSource(kind: .video, layers: 1, video: .testPattern, audio: .tone, videoCodec: .opus)
        }
    }

    @Test func anH264MatroskaFileIsSentWithoutReEncoding() throws {
        // A recording of a libx264 stream (what the agent writes for an H.264 publisher) ...
        let frames = try x264AccessUnits(seconds: 2)
        let base = temporaryPath("h264-source-\(UUID().uuidString)")
        defer { unlink(base + ".mkv") }
        let recording = try Recording(path: base + ".webm")
        for (i, frame) in frames.enumerated() { recording.write(frame, arrival: 1_000_000 + UInt64(i) * 33_333_333) }
        try recording.close()
        #expect(recording.path == base + ".mkv")

        // ... is played back frame for frame: the same NAL units, each keyframe led by SPS and PPS.
        let source = try FileVideoSource(path: recording.path, codec: .h264)
        #expect(source.codec == .h264)
        #expect(source.framesPerLoop == frames.count)
        let played = pullFrames(source, seconds: 1.9)
        #expect(played.count >= 50)
        #expect(played.allSatisfy { $0.codec == .h264 })
        #expect(played[0].isKeyframe && hasSPS(played[0]))
        func units(_ f: EncodedFrame) -> [[UInt8]] {
            var out: [[UInt8]] = []
            f.data.withUnsafeBytes { H264AnnexB.forEachUnit($0) { out.append(Array($0)) } }
            return out.filter { $0[0] & 0x1F != H264NALType.aud }
        }
        for (a, b) in zip(played.prefix(40), frames.prefix(40)) {
            #expect(units(a).filter { $0[0] & 0x1F <= 5 } == units(b).filter { $0[0] & 0x1F <= 5 })
        }

        // The wrong codec for the file is refused naming both, never sent as garbage.
        #expect(throws: MediaSourceError.self) { try FileVideoSource(path: recording.path) }
        #expect(throws: MediaSourceError.self) {
            try LocalSources.validate(video: recording.path, audio: "none", videoCodec: nil)
        }
        try LocalSources.validate(video: recording.path, audio: "none", videoCodec: "h264")
        #expect(throws: MediaSourceError.self) {
            try LocalSources.validate(video: nil, audio: nil, videoCodec: "mpeg2")
        }
        let factory = try #require(try LocalSources.factory(video: nil, audio: nil, videoCodec: "h264"))
        #expect(try factory(.video, 1).codec == .h264)
        #expect(try factory(.audio, 1).codec == .opus)
    }
}
