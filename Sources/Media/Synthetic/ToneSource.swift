/// Generates the synthetic audio: a quiet 440 Hz tone, with a louder 1 kHz beep at every sync
/// marker (the same media instants as the video flash frames).
///
/// Both frequencies complete whole cycles in one marker interval, so the signal is periodic and a
/// loop of whole intervals has no seam.
public struct ToneSource: Sendable {
    /// Samples per second (Opus clock).
    public static let sampleRate = 48_000
    /// Samples per channel in one 20 ms frame.
    public static let frameSamples = 960
    /// Seconds between beeps.
    public let markerIntervalSeconds: Int
    /// Beep length in samples (100 ms).
    public let beepSamples = 4_800
    /// Peak level of the background tone (0…1).
    public let toneLevel = 0.1
    /// Peak level of the beep (0…1).
    public let beepLevel = 0.5

    /// Creates a source with a beep every `markerIntervalSeconds` seconds.
    public init(markerIntervalSeconds: Int = 2) {
        self.markerIntervalSeconds = max(1, markerIntervalSeconds)
    }

    /// True when sample `n` (counted from the start of the stream) is inside a beep.
    public func isBeep(sample n: Int) -> Bool {
        n % (markerIntervalSeconds * Self.sampleRate) < beepSamples
    }

    /// Writes the mono 20 ms frame `index` (samples `index × 960 ..< (index+1) × 960`) into `out`.
    public func render(frame index: Int, into out: UnsafeMutableBufferPointer<Int16>) {
        let first = max(0, index) * Self.frameSamples
        let period = markerIntervalSeconds * Self.sampleRate
        for i in 0..<min(out.count, Self.frameSamples) {
            let n = (first + i) % period
            let value: Double
            if n < beepSamples {
                value = beepLevel * _sin(2 * Double.pi * 1_000 * Double(n) / Double(Self.sampleRate))
            } else {
                value = toneLevel * _sin(2 * Double.pi * 440 * Double(n) / Double(Self.sampleRate))
            }
            out[i] = Int16(value * 32_767)
        }
    }

    /// Returns the mono 20 ms frame `index` as a new array.
    public func frame(at index: Int) -> [Int16] {
        var pcm = [Int16](repeating: 0, count: Self.frameSamples)
        pcm.withUnsafeMutableBufferPointer { render(frame: index, into: $0) }
        return pcm
    }
}

#if canImport(Glibc)
    import Glibc
    @inline(__always) private func _sin(_ x: Double) -> Double { Glibc.sin(x) }
#else
    import Foundation
    @inline(__always) private func _sin(_ x: Double) -> Double { Foundation.sin(x) }
#endif
