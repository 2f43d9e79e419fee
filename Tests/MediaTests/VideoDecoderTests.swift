import Media
import RTCWire
import TestSupport
import Testing

/// The mean absolute difference of two luma planes of one size.
private func meanDifference(_ a: [UInt8], _ b: [UInt8]) -> Double {
    guard a.count == b.count, !a.isEmpty else { return .infinity }
    var sum = 0
    for i in a.indices { sum += abs(Int(a[i]) - Int(b[i])) }
    return Double(sum) / Double(a.count)
}

/// The visible luma of `picture`, tightly packed.
private func packedLuma(_ picture: I420Image) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(picture.width * picture.height)
    for row in 0..<picture.height {
        out += picture.y[(row * picture.strideY)..<(row * picture.strideY + picture.width)]
    }
    return out
}

@Suite("VideoDecoder")
struct VideoDecoderTests {
    /// Real encoded fixtures of every video codec (ffmpeg's libvpx, libx264, libaom) decode to the
    /// picture the pattern source drew: right size, and the luma of the 30th frame within 2.5 levels
    /// of the original on average (the pattern's first frame differs by 5.5, a grey picture by 62).
    @Test(arguments: [MediaCodec.vp8, .vp9, .h264, .av1])
    func eachCodecDecodesToTheSourcePicture(_ codec: MediaCodec) throws {
        let frames = try videoFixture(codec, seconds: 1)
        #expect(frames.count == 30)
        #expect(frames[0].keyframePictureSize.map { [$0.width, $0.height] } == [320, 240])
        let decoder = try VideoDecoder(codec: codec)
        let picture = try decoder.newestPicture(decoding: frames.map(\.data))
        #expect(picture.width == 320 && picture.height == 240 && picture.isConsistent)
        let difference = meanDifference(packedLuma(picture), try testPatternLuma(frame: 29))
        #expect(difference < 2.5, "\(codec): mean luma difference \(difference)")
        // The pattern's frame 0 differs from frame 29 (its counter and moving gradient): the
        // comparison above tells frames apart, not only pictures from noise.
        #expect(meanDifference(try testPatternLuma(frame: 0), try testPatternLuma(frame: 29)) > 5)
    }

    /// Frame by frame: each frame gives its picture (or a held-back one at the end), the same count
    /// as went in.
    @Test(arguments: [MediaCodec.vp8, .vp9, .h264, .av1])
    func decodingFrameByFrameGivesEveryPicture(_ codec: MediaCodec) throws {
        let frames = try videoFixture(codec, seconds: 1)
        let decoder = try VideoDecoder(codec: codec)
        var pictures = 0
        for frame in frames where try decoder.decode(frame.data) != nil { pictures += 1 }
        if try decoder.finish() != nil { pictures += 1 }
        #expect(pictures >= frames.count - 2 && pictures <= frames.count, "\(codec): \(pictures) pictures")
    }

    /// VP8 goes through libavcodec's own decoder (cheaper than libvpx: the composite decodes with it),
    /// the others through the decoders the type documents.
    @Test func eachCodecHasItsLibavcodecDecoder() throws {
        #expect(try VideoDecoder(codec: .vp8).implementation == "vp8")
        #expect(try VideoDecoder(codec: .vp9).implementation == "vp9")
        #expect(try VideoDecoder(codec: .h264).implementation == "h264")
        #expect(["libdav1d", "av1"].contains(try VideoDecoder(codec: .av1).implementation))
    }

    /// A 10-bit VP9 stream (profile 2) comes out as 8-bit I420 with the same picture.
    @Test func tenBitVP9IsConvertedToEightBits() throws {
        let frames = try vp9Frames(seconds: 1, pixelFormat: "yuv420p10le")
        let picture = try VideoDecoder(codec: .vp9).newestPicture(decoding: frames.map(\.data))
        #expect(picture.width == 320 && picture.height == 240)
        let difference = meanDifference(packedLuma(picture), try testPatternLuma(frame: 29))
        #expect(difference < 2.5, "mean luma difference \(difference)")
    }

    /// In place (the compositor's way): each frame's picture is lent from the decoder's own buffer,
    /// the same pixels the copying decode returns, and is there until the next decode. 10-bit VP9
    /// is lent as a converted copy.
    @Test(arguments: [MediaCodec.vp8, .vp9, .h264, .av1])
    func decodingInPlaceLendsThePictureTheCopyGives(_ codec: MediaCodec) throws {
        let frames = try videoFixture(codec, seconds: 1)
        let copying = try VideoDecoder(codec: codec)
        let inPlace = try VideoDecoder(codec: codec)
        #expect(try inPlace.withPicture { _ in 1 } == nil)
        var compared = 0
        for frame in frames {
            let copy = try copying.decode(frame.data)
            let lent = try inPlace.decodeInPlace(frame.data)
            #expect(lent == (copy != nil))
            guard let copy else { continue }
            let luma = try inPlace.withPicture { p -> [UInt8] in
                #expect(p.width == copy.width && p.height == copy.height)
                return (0..<p.height).flatMap { row in
                    Array(UnsafeBufferPointer(start: p.y + row * p.strideY, count: p.width))
                }
            }
            #expect(luma == packedLuma(copy))
            compared += 1
        }
        #expect(compared >= frames.count - 2)
        // Still lent after the last decode, with the last frame's pixels.
        let last = try inPlace.withPicture { p in p.y[p.strideY * (p.height / 2) + p.width / 2] }
        #expect(last != nil)
        #expect(throws: MediaError.self) { try inPlace.decodeInPlace([]) }

        if codec == .vp9 {
            let deep = try vp9Frames(seconds: 1, pixelFormat: "yuv420p10le")
            let decoder = try VideoDecoder(codec: .vp9)
            for frame in deep { _ = try decoder.decodeInPlace(frame.data) }
            _ = try decoder.finish()
            let luma = try decoder.withPicture { p in
                (0..<p.height).flatMap { row in Array(UnsafeBufferPointer(start: p.y + row * p.strideY, count: p.width))
                }
            }
            let difference = meanDifference(luma ?? [], try testPatternLuma(frame: 29))
            #expect(difference < 2.5, "10-bit lent as 8-bit: mean luma difference \(difference)")
        }
    }

    /// Bad input is a thrown MediaError, never a crash: garbage, delta frames without their key
    /// frame, truncated key frames, an empty frame, and audio.
    @Test(arguments: [MediaCodec.vp8, .vp9, .h264, .av1])
    func badInputThrowsAndTheDecoderStaysUsable(_ codec: MediaCodec) throws {
        let frames = try videoFixture(codec, seconds: 1)
        #expect(throws: MediaError.self) {
            try VideoDecoder(codec: codec).newestPicture(decoding: frames.dropFirst().map(\.data))
        }
        var random = SplitMix64(seed: 35)
        let garbage = (0..<20).map { _ in (0..<400).map { _ in UInt8(truncatingIfNeeded: random.next()) } }
        #expect(throws: MediaError.self) { try VideoDecoder(codec: codec).newestPicture(decoding: garbage) }
        #expect(throws: MediaError.self) { try VideoDecoder(codec: codec).decode([]) }
        let cut = Array(frames[0].data.prefix(frames[0].data.count / 3))
        _ = try? VideoDecoder(codec: codec).newestPicture(decoding: [cut] + garbage)
        // After garbage, a key frame still decodes.
        let decoder = try VideoDecoder(codec: codec)
        for g in garbage { _ = try? decoder.decode(g) }
        let picture = try decoder.newestPicture(decoding: frames.prefix(3).map(\.data))
        #expect(picture.width == 320 && picture.height == 240)
        #expect(throws: MediaError.self) { try VideoDecoder(codec: .opus) }
    }
}
