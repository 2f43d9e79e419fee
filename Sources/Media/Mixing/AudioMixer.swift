import Foundation

/// Mixes mono 48 kHz sources on one timeline, block by block, with headroom and no clipping.
///
/// Each source writes decoded PCM at absolute sample positions (48 kHz samples since the timeline's
/// origin); ``mixBlock(into:)`` then sums every source over the next ``blockSamples`` and advances.
/// A source with nothing at a position contributes silence there, so the mix has no gaps: its length
/// is the number of blocks mixed, whatever the sources did (joined late, left, muted, lost packets).
///
/// The mixing rule: the sources are summed in 32 bits, then one static soft-knee curve maps the sum
/// to 16 bits. Below the knee (``knee``, −6 dBFS) a sample passes unchanged, so one speaker at normal
/// levels is bit-exact; above it the curve bends the excess with `tanh` towards ``ceiling``
/// (−0.2 dBFS), which it never passes, so any number of full-scale sources never clips (wraps or
/// flat-tops at the rails), and the encoder keeps a little room for its own overshoot.
///
/// Writes before the mix position are late and dropped (counted); writes more than
/// ``maxLeadSamples`` ahead are dropped too, so a bad timestamp cannot grow a buffer without bound.
public struct AudioMixer: Sendable {
    /// The timeline's rate.
    public static let sampleRate = 48_000
    /// Samples per mixed block (20 ms, one Opus frame).
    public static let blockSamples = 960
    /// The level (fraction of full scale) up to which a sum passes unchanged.
    public static let knee: Float = 0.5
    /// The level (fraction of full scale) the curve approaches and never passes.
    public static let ceiling: Float = 0.98
    /// ``ceiling`` as a sample value: no mixed sample is louder.
    public static let ceilingSample = Int16(ceiling * 32767)
    /// How far ahead of the mix position a source may write (10 s).
    public static let maxLeadSamples: Int64 = 10 * 48_000

    /// The next position to mix (samples since the origin).
    public private(set) var position: Int64 = 0
    /// Samples dropped because they came after their position was mixed.
    public private(set) var lateSamples = 0
    /// Samples dropped because they were too far ahead.
    public private(set) var earlySamples = 0
    /// Per source: samples from ``position`` on (index 0 is `position`).
    private var buffers: [String: [Int16]] = [:]
    private var sum = [Int32](repeating: 0, count: AudioMixer.blockSamples)

    /// A mixer whose first block starts at `position`.
    public init(position: Int64 = 0) { self.position = position }

    /// The sources that have samples waiting.
    public var sourceIds: [String] { buffers.keys.sorted() }

    /// Writes `samples` of `source` starting at absolute position `start`, replacing what the source
    /// had there (a source never adds to itself). Returns the samples kept.
    @discardableResult
    public mutating func write(source: String, at start: Int64, _ samples: UnsafeBufferPointer<Int16>) -> Int {
        var from = 0
        var at = start
        if at < position {
            let late = Int(min(Int64(samples.count), position - at))
            lateSamples += late
            from = late
            at = position
        }
        guard from < samples.count else { return 0 }
        let offset = Int(at - position)
        guard Int64(offset + samples.count - from) <= Self.maxLeadSamples else {
            earlySamples += samples.count - from
            return 0
        }
        var buffer = buffers[source] ?? []
        buffers[source] = nil  // unique, so the edit below does not copy
        let end = offset + samples.count - from
        if buffer.count < end { buffer.append(contentsOf: repeatElement(0, count: end - buffer.count)) }
        buffer.withUnsafeMutableBufferPointer { out in
            for i in from..<samples.count { out[offset + i - from] = samples[i] }
        }
        buffers[source] = buffer
        return samples.count - from
    }

    /// Array form of ``write(source:at:_:)``.
    @discardableResult
    public mutating func write(source: String, at start: Int64, _ samples: [Int16]) -> Int {
        samples.withUnsafeBufferPointer { write(source: source, at: start, $0) }
    }

    /// Forgets `source`: what it wrote and has not been mixed yet is dropped.
    public mutating func remove(source: String) { buffers[source] = nil }

    /// Mixes the block at ``position`` into `out` (``blockSamples`` samples, replacing its contents)
    /// and advances by one block.
    public mutating func mixBlock(into out: inout [Int16]) {
        let n = Self.blockSamples
        if out.count != n { out = [Int16](repeating: 0, count: n) }
        for i in 0..<n { sum[i] = 0 }
        for id in buffers.keys {
            guard var buffer = buffers[id] else { continue }
            buffers[id] = nil
            let count = min(n, buffer.count)
            for i in 0..<count { sum[i] &+= Int32(buffer[i]) }
            buffer.removeFirst(count)
            // A source with nothing left ahead (it left, or is silent) is forgotten until it writes again.
            if !buffer.isEmpty { buffers[id] = buffer }
        }
        for i in 0..<n { out[i] = Self.shape(sum[i]) }
        position += Int64(n)
    }

    /// The mixing curve: identity up to ``knee``, then `knee + (c − knee)·tanh((|x| − knee)/(c − knee))`
    /// with c = ``ceiling``: continuous in value and slope, monotonic, never above ``ceilingSample``.
    @inline(__always)
    public static func shape(_ sum: Int32) -> Int16 {
        let x = Float(sum) / 32768
        let magnitude = abs(x)
        if magnitude <= knee { return Int16(sum) }
        let bent = knee + (ceiling - knee) * tanhf((magnitude - knee) / (ceiling - knee))
        let y = min((bent * 32767).rounded(.down), Float(ceilingSample))
        return Int16(x < 0 ? -y : y)
    }

    /// Root mean square of `samples` in dBFS (−100 for silence): the level a speaker timeline reads.
    public static func levelDBFS(_ samples: UnsafeBufferPointer<Int16>) -> Float {
        guard !samples.isEmpty else { return -100 }
        var energy: Double = 0
        for s in samples { energy += Double(s) * Double(s) }
        let rms = (energy / Double(samples.count)).squareRoot() / 32768
        return rms <= 1e-5 ? -100 : Float(20 * log10(rms))
    }
}
