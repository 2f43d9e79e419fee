import Media
import RTCWire
import TestSupport
import Testing

@Suite("Synthetic media")
struct SyntheticMediaTests {
    @Test func loopIsEncodedWithKeyframesAndLayers() throws {
        let media = testMedia
        #expect(media.layers.map { "\($0.width)x\($0.height)" } == ["640x360", "320x180", "160x90"])
        #expect(media.videoFrames.count == 3)
        for (k, layer) in media.videoFrames.enumerated() {
            #expect(layer.count == 4 * 30)
            // Every 2 s, and twice as often on each lower layer (a switch down waits for one).
            let interval = 60 >> k
            for (i, f) in layer.enumerated() {
                #expect(f.timestamp == UInt32(i * 3000) && f.duration == 3000)
                if i % interval == 0 { #expect(f.isKeyframe, "layer \(k) frame \(i) must be a keyframe") }
            }
        }
        #expect(VP8KeyframeInfo.parse(media.videoFrames[2][0].data)?.width == 160)
        #expect(media.audioFrames.count == 4 * 50)
        #expect(media.audioFrames.allSatisfy { $0.codec == .opus && $0.duration == 960 })
        #expect(media.audioPreSkip == 312)
    }

    @Test func timestampsExtendAcrossLoops() throws {
        let media = testMedia
        let n = media.videoFramesPerLoop
        let again = try #require(media.videoFrame(at: n + 5, layer: 1))
        #expect(again.timestamp == UInt32((n + 5) * 3000))
        #expect(again.data == media.videoFrames[1][5].data)
        #expect(media.videoFrame(at: n, layer: 0)?.isKeyframe == true)
        let audio = try #require(media.audioFrame(at: media.audioFramesPerLoop * 2 + 3))
        #expect(audio.timestamp == UInt32((media.audioFramesPerLoop * 2 + 3) * 960))
        #expect(media.videoFrame(at: 0, layer: 9)?.data == media.videoFrames[2][0].data)  // clamped
    }

    @Test func flashFramesDecodeBrightOthersDont() throws {
        let decoder = try VP8Decoder()
        var lumas: [Int: Double] = [:]
        for (i, f) in testMedia.videoFrames[0].enumerated() {
            guard let picture = try decoder.decode(f.data) else { continue }
            lumas[i] = picture.meanLuma
        }
        #expect(lumas.count == 120)
        for marker in [0, 60] {
            #expect((lumas[marker] ?? 0) > 200, "flash frame \(marker) luma \(lumas[marker] ?? 0)")
        }
        for other in [1, 30, 59, 61, 119] {
            #expect((lumas[other] ?? 255) < 200, "frame \(other) luma \(lumas[other] ?? 0)")
        }
    }

    @Test func beepMarksEveryTwoSeconds() throws {
        let tone = ToneSource()
        func peak(_ frame: Int) -> Int { tone.frame(at: frame).map { abs(Int($0)) }.max() ?? 0 }
        #expect(peak(0) > 15_000)  // beep at 0 s
        #expect(peak(100) > 15_000)  // beep at 2 s
        #expect(peak(10) < 4_000)  // quiet 440 Hz between
        #expect(peak(99) < 4_000)
        #expect(tone.isBeep(sample: 96_000) && !tone.isBeep(sample: 96_000 + 4_800))
    }

    @Test func patternShowsMotionAndDigits() {
        let pattern = TestPatternSource(width: 320, height: 180)
        let a = pattern.frame(at: 3)
        let b = pattern.frame(at: 9)
        let c = pattern.frame(at: 13)
        #expect(a.y != b.y)  // the box moved
        #expect(a.meanLuma < 200 && pattern.frame(at: 60).meanLuma > 200)
        #expect(b.y != c.y)
    }

    @Test func sharedIsCached() {
        #expect(SyntheticMedia.shared(layers: 1) === SyntheticMedia.shared(layers: 1))
    }

    @Test func rejectsBadLayerCount() {
        #expect(throws: MediaError.self) { try SyntheticMedia(seconds: 2, layers: 4) }
    }
}
