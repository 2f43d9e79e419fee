import RTCWire
import Testing

@testable import Benchmarks

/// The recording cost per codec row compares codecs at the same bitrate: each codec's loop is
/// encoded again, its target scaled by the miss, until it carries the bitrate it is asked for.
@Suite struct RecordingCodecStreamTests {
    @Test(arguments: [MediaCodec.vp8, .h264])
    func aCalibratedLoopCarriesTheBitrateAskedFor(codec: MediaCodec) throws {
        let bitrate = 400_000
        let media = try RecordingBenchmark.calibratedStream(width: 320, height: 180, bitrate: bitrate, codec: codec)
        let bits = RecordingBenchmark.bitsPerSecond(media)
        #expect(abs(bits / Double(bitrate) - 1) <= 0.01, "\(codec): \(bits) bit/s")
        #expect(media.videoFrames[0].count == 300 && media.videoFrames[0][0].isKeyframe)
    }
}
