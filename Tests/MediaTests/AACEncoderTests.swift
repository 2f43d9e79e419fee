import Foundation
import Media
import Testing

/// AACEncoder through the shared libavcodec open (AVCodecContexts): it opens, encodes a second of
/// tone into frames stamped 1024 samples apart, and refuses what AAC cannot take with a clear error.
@Suite struct AACEncoderTests {
    @Test func encodesOneSecondOfToneIntoStampedFrames() throws {
        let encoder = try AACEncoder(sampleRate: 48_000, bitrate: 96_000)
        // AAC-LC (object type 2) at 48 kHz (index 3), mono.
        #expect(encoder.audioSpecificConfig.count >= 2)
        #expect(encoder.audioSpecificConfig[0] >> 3 == 2)
        let pcm = (0..<48_000).map { Int16(8000 * sin(Double($0) * 2 * .pi * 440 / 48_000)) }
        var stamps: [Int64] = []
        var bytes = 0
        try pcm.withUnsafeBufferPointer { samples in
            try encoder.encode(samples) { frame, pts in
                stamps.append(pts)
                bytes += frame.count
            }
        }
        try encoder.flush { frame, pts in
            stamps.append(pts)
            bytes += frame.count
        }
        // 48 000 samples: 47 whole frames, a padded one, and the priming frame libavcodec adds.
        #expect(stamps.count >= 47 && stamps.count <= 49, "\(stamps.count) frames")
        #expect(zip(stamps, stamps.dropFirst()).allSatisfy { $1 - $0 == 1024 }, "\(stamps)")
        #expect(bytes > 1000)
    }

    @Test func refusesRatesAACHasNoIndexFor() {
        #expect(throws: MediaError.self) { try AACEncoder(sampleRate: 47_000) }
        #expect(throws: MediaError.self) { try AACEncoder(bitrate: 1_000) }
    }
}
