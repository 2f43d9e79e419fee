import Foundation
import Media
import RTCWire
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// 33.333 ms: the pts step of a 30 fps stream in these tests.
private let interval: Int64 = 1_000_000_000 / 30

/// Halves a picture with a 2x2 box filter (a scaler, as a simulcast layer or a browser would apply).
private func halve(_ p: I420Image) -> I420Image {
    func plane(_ src: [UInt8], _ stride: Int, _ w: Int, _ h: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: (w / 2) * (h / 2))
        for y in 0..<(h / 2) {
            for x in 0..<(w / 2) {
                let s =
                    Int(src[2 * y * stride + 2 * x]) + Int(src[2 * y * stride + 2 * x + 1])
                    + Int(src[(2 * y + 1) * stride + 2 * x]) + Int(src[(2 * y + 1) * stride + 2 * x + 1])
                out[y * (w / 2) + x] = UInt8((s + 2) / 4)
            }
        }
        return out
    }
    return I420Image(
        width: p.width / 2, height: p.height / 2, y: plane(p.y, p.strideY, p.width, p.height),
        u: plane(p.u, p.strideU, p.chromaWidth, p.chromaHeight),
        v: plane(p.v, p.strideV, p.chromaWidth, p.chromaHeight),
        strideY: p.width / 2, strideU: p.chromaWidth / 2, strideV: p.chromaWidth / 2)
}

@Suite("Frame number code")
struct FrameCodeTests {
    @Test("cells of frame 5, by hand: white calibration, bits 9 and 11 of the data set, both parities 0")
    func cellsByHand() {
        // 5 = 0b0000_0000_0101: data bits 9 and 11 (MSB first) sit in cells 11 and 13.
        #expect(FrameCode.cells(for: 5) == 1 | 1 << 11 | 1 << 13)
        // 1 = bit 11 only (odd position): odd parity 1, in cell 15.
        #expect(FrameCode.cells(for: 1) == 1 | 1 << 13 | 1 << 15)
        #expect(FrameCode.number(from: FrameCode.cells(for: 5)) == 5)
    }

    @Test("every number round-trips and any single flipped cell is rejected")
    func roundTripAndParity() {
        for n in 0..<FrameCode.modulus {
            let cells = FrameCode.cells(for: n)
            #expect(FrameCode.number(from: cells) == n)
            for cell in 0..<FrameCode.cellCount where n % 97 == 0 {
                #expect(FrameCode.number(from: cells ^ (1 << UInt32(cell))) == nil, "n \(n) cell \(cell)")
            }
        }
        #expect(FrameCode.number(from: FrameCode.cells(for: FrameCode.modulus + 7)) == 7)
    }

    @Test("reads the number of rendered frames at 640x360, 320x180 and 160x90, flash frames too")
    func readsRendered() {
        for (w, h) in [(640, 360), (320, 180), (160, 90)] {
            let pattern = TestPatternSource(width: w, height: h)
            for n in [0, 1, 7, 59, 60, 299, 1234, 4095] {
                #expect(FrameNumberReader.read(pattern.frame(at: n)) == n, "\(w)x\(h) frame \(n)")
            }
        }
        #expect(FrameNumberReader.read(I420Image(width: 320, height: 180)) == nil)  // black: no code
        #expect(FrameNumberReader.read(I420Image(width: 320, height: 180, fillY: 200)) == nil)
    }

    @Test("reads frames downscaled from 640x360 to 320x180 and 160x90")
    func readsDownscaled() {
        let pattern = TestPatternSource(width: 640, height: 360)
        for n in [3, 100, 2049] {
            let half = halve(pattern.frame(at: n))
            #expect(FrameNumberReader.read(half) == n)
            #expect(FrameNumberReader.read(halve(half)) == n)
        }
    }

    @Test("reads every frame of a 320x180 VP8 encode at 100 kbit/s")
    func readsLowBitrateVP8() throws {
        let pattern = TestPatternSource(width: 320, height: 180)
        let encoder = try VP8Encoder(width: 320, height: 180, fps: 30, bitrate: 100_000)
        let decoder = try VP8Decoder()
        var picture = I420Image(width: 320, height: 180)
        var misread: [Int] = []
        for n in 0..<90 {
            pattern.render(n, into: &picture)
            for frame in try encoder.encode(i420: picture) {
                let decoded = try #require(try decoder.decode(frame.data))
                if FrameNumberReader.read(decoded) != n { misread.append(n) }
            }
        }
        #expect(misread.isEmpty, "misread frames \(misread)")
    }
}

@Suite("Picture quality")
struct PictureQualityTests {
    @Test("PSNR by hand: luma off by 10 everywhere, chroma exact")
    func psnrByHand() throws {
        let reference = I420Image(width: 64, height: 32, fillY: 100)
        let decoded = I420Image(width: 64, height: 32, fillY: 110)
        let p = try PictureQuality.psnr(decoded, reference: reference)
        #expect(abs(p.y - 10 * log10(65_025.0 / 100)) < 1e-9)  // 28.1308 dB
        #expect(p.u == PictureQuality.maximumPSNR && p.v == PictureQuality.maximumPSNR)
        // All planes: SSE 100·2048 over 2048 + 2·512 samples.
        #expect(abs(p.average - 10 * log10(65_025.0 / (100.0 * 2048 / 3072))) < 1e-9)
        #expect(try PictureQuality.ssim(reference, reference: reference) == 1)
    }

    @Test("SSIM by hand on one 8x8 window: a flat 100 against a flat 110")
    func ssimByHand() throws {
        let reference = I420Image(width: 8, height: 8, fillY: 100)
        let decoded = I420Image(width: 8, height: 8, fillY: 110)
        // No variance: SSIM = (2·s1·s2 + c1) / (s1² + s2² + c1) with s = 64·luma.
        let s1 = 6400.0
        let s2 = 7040.0
        let expected = (2 * s1 * s2 + 416) / (s1 * s1 + s2 * s2 + 416)
        #expect(abs(try PictureQuality.ssim(decoded, reference: reference) - expected) < 1e-12)
    }

    @Test("mismatched sizes are an error, not a crash")
    func mismatched() {
        #expect(throws: PictureQuality.Failure.self) {
            try PictureQuality.psnr(I420Image(width: 8, height: 8), reference: I420Image(width: 16, height: 8))
        }
    }

    @Test("PSNR and SSIM agree with ffmpeg's psnr and ssim filters on a VP8-decoded frame")
    func agreesWithFFmpeg() throws {
        let pattern = TestPatternSource(width: 320, height: 180)
        let encoder = try VP8Encoder(width: 320, height: 180, fps: 30, bitrate: 150_000)
        let decoder = try VP8Decoder()
        var decoded: I420Image?
        for n in 0...20 {
            for frame in try encoder.encode(i420: pattern.frame(at: n)) { decoded = try decoder.decode(frame.data) }
        }
        let picture = try #require(decoded)
        let reference = pattern.frame(at: 20)
        let ours = try PictureQuality.psnr(picture, reference: reference)
        let ourSSIM = try PictureQuality.ssim(picture, reference: reference)
        #expect(ours.y > 20 && ours.y < 60)

        func raw(_ p: I420Image, _ name: String) throws -> String {
            let path = temporaryPath(name)
            var bytes: [UInt8] = []
            for r in 0..<p.height { bytes += p.y[(r * p.strideY)..<(r * p.strideY + p.width)] }
            for r in 0..<p.chromaHeight { bytes += p.u[(r * p.strideU)..<(r * p.strideU + p.chromaWidth)] }
            for r in 0..<p.chromaHeight { bytes += p.v[(r * p.strideV)..<(r * p.strideV + p.chromaWidth)] }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
        let a = try raw(picture, "quality-decoded.yuv")
        let b = try raw(reference, "quality-reference.yuv")
        let input = ["-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "320x180"]
        let r = try runTool(
            "/usr/bin/ffmpeg",
            ["-nostdin", "-hide_banner"] + input + ["-i", a] + input + ["-i", b]
                + ["-lavfi", "[0][1]psnr;[0][1]ssim", "-f", "null", "-"])
        #expect(r.status == 0, "\(r.err)")
        func value(after key: String) -> Double? {
            guard let range = r.err.range(of: key) else { return nil }
            return Double(r.err[range.upperBound...].prefix { "0123456789.".contains($0) })
        }
        let ffY = try #require(value(after: "PSNR y:"), "\(r.err)")
        let ffAll = try #require(value(after: "average:"), "\(r.err)")
        let ffSSIM = try #require(value(after: "SSIM Y:"), "\(r.err)")
        #expect(abs(ours.y - ffY) < 0.01, "ours \(ours.y) ffmpeg \(ffY)")
        #expect(abs(ours.average - ffAll) < 0.01, "ours \(ours.average) ffmpeg \(ffAll)")
        #expect(abs(ourSSIM - ffSSIM) < 0.0005, "ours \(ourSSIM) ffmpeg \(ffSSIM)")
    }
}

@Suite("Video quality analyzer")
struct VideoQualityAnalyzerTests {
    let pattern = TestPatternSource(width: 160, height: 90)

    /// Feeds source frames `indices` at pts `slots[i] × 33.3 ms` (the slot defaults to the index).
    func run(_ indices: [Int], slots: [Int]? = nil, picture: (Int) -> I420Image? = { _ in nil }) -> VideoQualityReport {
        var analyzer = VideoQualityAnalyzer(fps: 30)
        for (i, n) in indices.enumerated() {
            let slot = slots?[i] ?? n
            analyzer.add(picture(n) ?? pattern.frame(at: n), ptsNanoseconds: Int64(slot) * interval)
        }
        return analyzer.report()
    }

    @Test("a clean stream: no drops, repeats, freezes or black; PSNR at its maximum")
    func clean() {
        let r = run(Array(0..<90))
        #expect(r.frames == 90 && r.numbered == 90)
        #expect(r.dropped == 0 && r.repeated == 0 && r.outOfOrder == 0)
        #expect(r.freezes.isEmpty && r.blackSpans.isEmpty)
        #expect(r.psnr?.min == PictureQuality.maximumPSNR && r.ssim?.min == 1)
        #expect(r.flashTimesMs.map { ($0 / 2_000).rounded() } == [0, 1])  // flashes at frames 0 and 60
        #expect(r.sizes == ["160x90"])
        // Sampled comparisons (a live receiver): pictures 1, 11, …, 81 of 90.
        var sampled = VideoQualityAnalyzer(fps: 30, compareEvery: 10)
        for n in 0..<90 { sampled.add(pattern.frame(at: n), ptsNanoseconds: Int64(n) * interval) }
        #expect(sampled.report().psnr?.count == 9 && sampled.report().numbered == 90)
    }

    @Test("removed frames count as dropped, a long gap as one freeze of its length")
    func removed() {
        // Frames 10–12 (100 ms gap: under the 183 ms threshold) and 40–49 (a 366.7 ms picture).
        let kept = (0..<90).filter { !(10...12).contains($0) && !(40...49).contains($0) }
        let r = run(kept)
        #expect(r.dropped == 13 && r.repeated == 0)
        #expect(r.freezes.count == 1)
        #expect(abs((r.freezes.first?.startMs ?? 0) - 39 * 1000.0 / 30) < 0.01)
        #expect(abs((r.freezes.first?.durationMs ?? 0) - 11 * 1000.0 / 30) < 0.01)
    }

    @Test("duplicated pictures count as repeated; six repeats are a freeze")
    func duplicated() {
        // Frame 20 shown twice (slots 20, 21), then frame 50 shown seven times in a row.
        let indices = Array(0...20) + [20] + Array(21...50) + Array(repeating: 50, count: 6) + Array(51...70)
        let slots = Array(0..<indices.count)
        let r = run(indices, slots: slots)
        #expect(r.repeated == 7 && r.dropped == 0)
        #expect(r.freezes.count == 1)
        #expect(abs((r.freezes.first?.durationMs ?? 0) - 7 * 1000.0 / 30) < 0.01)
    }

    @Test("a sender jumping ahead (a key frame request on a pre-encoded loop) skips, it does not drop")
    func skipped() {
        // 0–30, then 90–120 on the next slots: the pts runs on, the content jumped 59 frames.
        let r = run(Array(0...30) + Array(90...120), slots: Array(0..<62))
        #expect(r.skipped == 59 && r.dropped == 0 && r.freezes.isEmpty)
        // A jump with a gap: 3 slots pass (2 frames dropped on the way), the content moves 60.
        let g = run(Array(0...30) + Array(90...120), slots: Array(0...30) + Array(33..<64))
        #expect(g.skipped == 57 && g.dropped == 2)
    }

    @Test("a looping source: the wrap is not a drop; drops across it are counted from the times")
    func loopWrap() {
        let loop = Array(0..<300)
        #expect(run(loop + loop, slots: Array(0..<600)).dropped == 0)
        // 298, 299 and the new loop's 0 are lost: slots 298–300 are empty.
        let indices = Array(0..<298) + Array(1..<300)
        let slots = Array(0..<298) + Array(301..<600)
        let r = run(indices, slots: slots)
        #expect(r.dropped == 3 && r.outOfOrder == 0)
    }

    @Test("a black span is found with its time and length")
    func blackSpan() {
        let black = I420Image(width: 160, height: 90)
        let r = run(Array(0..<90)) { (30..<60).contains($0) ? black : nil }
        #expect(r.blackSpans.count == 1)
        #expect(abs((r.blackSpans.first?.startMs ?? 0) - 1_000) < 0.01)
        #expect(abs((r.blackSpans.first?.durationMs ?? 0) - 1_000) < 0.01)
        // The unchanging black picture is also a 1 s freeze; the 30 black frames were shown, not dropped.
        #expect(r.freezes.count == 1 && abs((r.freezes.first?.durationMs ?? 0) - 1_000) < 0.01)
        #expect(r.numbered == 60 && r.dropped == 0)
    }

    @Test("frame delay from arrival times: relative to the fastest frame, or to a known capture start")
    func delay() {
        var relative = VideoQualityAnalyzer(fps: 30)
        var absolute = VideoQualityAnalyzer(fps: 30, captureStartNanoseconds: 1_000_000_000)
        for n in 0..<30 {
            let late: Int64 = n == 20 ? 90_000_000 : 50_000_000
            let arrival = 1_000_000_000 + Int64(n) * interval + late
            relative.add(pattern.frame(at: n), ptsNanoseconds: Int64(n) * interval, arrivalNanoseconds: arrival)
            absolute.add(pattern.frame(at: n), ptsNanoseconds: Int64(n) * interval, arrivalNanoseconds: arrival)
        }
        let r = relative.report()
        #expect(r.delayIsRelative && r.delayMs?.min == 0 && r.delayMs?.max == 40)
        let a = absolute.report()
        #expect(!a.delayIsRelative && a.delayMs?.min == 50 && a.delayMs?.max == 90 && a.delayMs?.p5 == 50)
    }

    @Test("pictures without numbers: an unchanged picture is frozen, a changed one is not")
    func contentFreeze() {
        var analyzer = VideoQualityAnalyzer(fps: 30)
        let grey = I420Image(width: 160, height: 90, fillY: 120)
        let lighter = I420Image(width: 160, height: 90, fillY: 160)
        for n in 0..<10 { analyzer.add(grey, ptsNanoseconds: Int64(n) * interval) }
        analyzer.add(lighter, ptsNanoseconds: 10 * interval)
        let r = analyzer.report()
        #expect(r.numbered == 0 && r.psnr == nil)
        #expect(r.freezes.count == 1 && abs((r.freezes.first?.durationMs ?? 0) - 10 * 1000.0 / 30) < 0.01)
    }
}

/// A 6 s single-layer 320x180 loop (180 frames), so an 8 s recording crosses a loop restart.
private let loopMedia: SyntheticMedia = {
    do { return try SyntheticMedia(seconds: 6, layers: 1, width: 320, height: 180) } catch { fatalError("\(error)") }
}()

@Suite("Recording quality")
struct RecordingQualityTests {
    /// Writes 8 s of `loopMedia` to a WebM, leaving out the video frames in `skip`.
    func record(_ name: String, skip: Set<Int> = []) throws -> String {
        let path = temporaryPath(name)
        let writer = try WebMWriter(
            path: path, video: .init(), audio: .init(channels: loopMedia.audioChannels, preSkip: loopMedia.audioPreSkip)
        )
        var video = 0
        try feed(seconds: 8, media: loopMedia) { frame, pts in
            if frame.codec.kind == .video {
                defer { video += 1 }
                if skip.contains(video) { return }
            }
            try writer.write(frame, pts: pts)
        }
        try writer.close()
        return path
    }

    @Test("a clean recording across a loop restart: every frame, no drops or freezes, PSNR above 30 dB, A/V in sync")
    func clean() throws {
        let q = try RecordingQuality.analyze(path: try record("quality-clean.webm"))
        #expect(q.videoCodec == "vp8" && !q.truncated)
        #expect(q.video.frames == 240 && q.video.numbered == 240 && q.video.undecodable == 0)
        #expect(q.video.dropped == 0 && q.video.repeated == 0 && q.video.outOfOrder == 0)
        #expect(q.video.freezes.isEmpty && q.video.blackSpans.isEmpty)
        let psnr = try #require(q.video.psnr)
        #expect(psnr.mean > 30 && psnr.p5 > 25, "\(psnr)")
        #expect((q.video.ssim?.mean ?? 0) > 0.9)
        #expect(q.syncPairs >= 3)
        #expect(abs(q.avOffsetMs ?? 99) < 10, "\(q.avOffsetMs as Any)")
    }

    @Test("frames left out of the file are counted as dropped, exactly, and the long gap is a freeze")
    func dropped() throws {
        // 3 delta frames at 20–22 (one reference lost: the decoder's pictures drift until the next
        // key frame at 60, but stay readable), and 12 frames 100–111.
        let q = try RecordingQuality.analyze(
            path: try record("quality-dropped.webm", skip: Set(20...22).union(100...111)))
        #expect(q.video.dropped == 15, "\(q.video)")
        #expect(q.video.freezes.count == 1)
        #expect(abs((q.video.freezes.first?.durationMs ?? 0) - 13 * 1000.0 / 30) < 1)
    }

    @Test("files that are not recordings give a clear error")
    func badFiles() throws {
        let garbage = temporaryPath("quality-garbage.webm")
        try Data("this is not a recording".utf8).write(to: URL(fileURLWithPath: garbage))
        #expect(throws: RecordingQuality.Failure.self) { try RecordingQuality.analyze(path: garbage) }
        #expect(throws: RecordingQuality.Failure.self) {
            try RecordingQuality.analyze(path: temporaryPath("missing.webm"))
        }

        let mp4 = temporaryPath("quality.mp4")
        var box: [UInt8] = [0, 0, 0, 16] + Array("ftypisom".utf8) + [0, 0, 2, 0]
        box += [UInt8](repeating: 0, count: 32)
        try Data(box).write(to: URL(fileURLWithPath: mp4))
        do {
            _ = try RecordingQuality.analyze(path: mp4)
            Issue.record("an MP4 was analysed")
        } catch {
            #expect("\(error)".contains("MP4"), "\(error)")
        }

        let audioOnly = try SourceFixtures.get().audioOnlyWebM
        #expect(throws: RecordingQuality.Failure.noVideo(path: audioOnly, codecs: ["A_OPUS"])) {
            try RecordingQuality.analyze(path: audioOnly)
        }
    }

    @Test("a recording cut short is analysed up to its last whole block")
    func truncated() throws {
        let path = try record("quality-cut-src.webm")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let cut = temporaryPath("quality-cut.webm")
        try bytes.prefix(bytes.count / 2 + 7).write(to: URL(fileURLWithPath: cut))
        let q = try RecordingQuality.analyze(path: cut)
        #expect(q.truncated && q.video.frames > 60 && q.video.frames < 240)
        #expect(q.video.dropped == 0)
    }
}
