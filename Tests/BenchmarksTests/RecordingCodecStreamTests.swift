import Foundation
import RTCWire
import Testing

@testable import Benchmarks

/// The recording cost per codec row compares codecs at the same bitrate: each codec's loop is
/// encoded again, its target scaled by the miss, until it carries the bitrate it is asked for.
@Suite struct RecordingCodecStreamTests {
    @Test(arguments: [MediaCodec.vp8, .h264])
    func aCalibratedLoopCarriesTheBitrateAskedFor(codec: MediaCodec) async throws {
        let bitrate = 200_000
        // Seconds of encoding: on a thread of its own, not the cooperative pool (other suites' waits
        // run there).
        let media = try await withCheckedThrowingContinuation { c in
            Thread {
                c.resume(
                    with: Result {
                        try RecordingBenchmark.calibratedStream(width: 160, height: 96, bitrate: bitrate, codec: codec)
                    })
            }.start()
        }
        let bits = RecordingBenchmark.bitsPerSecond(media)
        #expect(abs(bits / Double(bitrate) - 1) <= 0.01, "\(codec): \(bits) bit/s")
        #expect(media.videoFrames[0].count == 300 && media.videoFrames[0][0].isKeyframe)
    }
}
