internal import CAudioProcessing

/// Which webrtc-audio-processing stages run on captured audio.
public struct AudioProcessingOptions: Sendable, Equatable {
    /// Acoustic echo cancellation (needs the far end through ``AudioProcessor/processReverse(_:)``).
    public var echoCancellation: Bool
    /// Noise suppression (high level).
    public var noiseSuppression: Bool
    /// Adaptive digital gain control.
    public var gainControl: Bool
    /// High-pass filter (removes DC and rumble).
    public var highPassFilter: Bool

    /// Creates options; everything is on by default, as for a microphone.
    public init(
        echoCancellation: Bool = true, noiseSuppression: Bool = true, gainControl: Bool = true,
        highPassFilter: Bool = true
    ) {
        self.echoCancellation = echoCancellation
        self.noiseSuppression = noiseSuppression
        self.gainControl = gainControl
        self.highPassFilter = highPassFilter
    }

    /// Every stage off: audio passes through unchanged.
    public static let off = AudioProcessingOptions(
        echoCancellation: false, noiseSuppression: false, gainControl: false, highPassFilter: false)
}

/// webrtc-audio-processing (AEC, NS, AGC, high-pass) over 10 ms chunks of 16-bit PCM.
///
/// Not thread-safe: confine an instance to one thread (the capture thread).
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class AudioProcessor: @unchecked Sendable {
    /// Sample rate in Hz (8000, 16000, 32000 or 48000).
    public let sampleRate: Int
    /// Interleaved channels (1 or 2).
    public let channels: Int
    /// Samples per channel in one 10 ms chunk.
    public let samplesPerChunk: Int
    /// The stages that run.
    public let options: AudioProcessingOptions
    private let apm: OpaquePointer
    /// One float plane per channel, and the array of plane pointers the C API takes.
    private let planes: UnsafeMutablePointer<Float>
    private let planePointers: UnsafeMutablePointer<UnsafeMutablePointer<Float>?>

    /// Creates a pipeline. Throws ``CaptureError/audioProcessing(_:)`` for an unsupported format.
    public init(sampleRate: Int = 48_000, channels: Int = 1, options: AudioProcessingOptions = .init())
        throws(CaptureError)
    {
        guard channels == 1 || channels == 2, [8000, 16000, 32000, 48000].contains(sampleRate) else {
            throw .audioProcessing("unsupported format \(sampleRate) Hz × \(channels) channels")
        }
        var config = ua_apm_config(
            echo_cancellation: options.echoCancellation ? 1 : 0, noise_suppression: options.noiseSuppression ? 1 : 0,
            gain_control: options.gainControl ? 1 : 0, high_pass_filter: options.highPassFilter ? 1 : 0)
        guard let apm = ua_apm_create(Int32(sampleRate), Int32(channels), &config) else {
            throw .audioProcessing("webrtc AudioProcessing could not be created")
        }
        self.apm = apm
        self.sampleRate = sampleRate
        self.channels = channels
        self.options = options
        samplesPerChunk = Int(ua_apm_frames_per_chunk(apm))
        planes = .allocate(capacity: samplesPerChunk * channels)
        planes.initialize(repeating: 0, count: samplesPerChunk * channels)
        planePointers = .allocate(capacity: channels)
        for c in 0..<channels { planePointers[c] = planes + c * samplesPerChunk }
    }

    deinit {
        ua_apm_destroy(apm)
        planes.deallocate()
        planePointers.deallocate()
    }

    /// Processes one 10 ms near-end chunk (`samplesPerChunk × channels` interleaved samples) in place.
    public func process(_ chunk: UnsafeMutableBufferPointer<Int16>) throws(CaptureError) {
        try load(chunk)
        // The AEC wants the playout-to-capture delay with every chunk; a headless agent plays
        // nothing through a speaker, so the delay is 0.
        if options.echoCancellation { _ = ua_apm_set_stream_delay_ms(apm, 0) }
        let rc = ua_apm_process(apm, planePointers)
        guard rc == 0 else { throw .audioProcessing("ProcessStream failed with error \(rc)") }
        store(into: chunk)
    }

    /// Convenience overload for an array holding one chunk.
    public func process(_ chunk: inout [Int16]) throws(CaptureError) {
        try chunk.withUnsafeMutableBufferPointer { (b: inout UnsafeMutableBufferPointer<Int16>) throws(CaptureError) in
            try process(b)
        }
    }

    /// Feeds one 10 ms far-end chunk (what is being played out), the echo canceller's reference.
    public func processReverse(_ chunk: UnsafeMutableBufferPointer<Int16>) throws(CaptureError) {
        try load(chunk)
        let rc = ua_apm_process_reverse(apm, planePointers)
        guard rc == 0 else { throw .audioProcessing("ProcessReverseStream failed with error \(rc)") }
    }

    private func load(_ chunk: UnsafeMutableBufferPointer<Int16>) throws(CaptureError) {
        guard chunk.count == samplesPerChunk * channels else {
            throw .audioProcessing("a chunk needs \(samplesPerChunk * channels) samples, got \(chunk.count)")
        }
        for i in 0..<samplesPerChunk {
            for c in 0..<channels {
                planes[c * samplesPerChunk + i] = Float(chunk[i * channels + c]) / 32768
            }
        }
    }

    private func store(into chunk: UnsafeMutableBufferPointer<Int16>) {
        for i in 0..<samplesPerChunk {
            for c in 0..<channels {
                let v = (planes[c * samplesPerChunk + i] * 32768).rounded()
                chunk[i * channels + c] = v.isNaN ? 0 : Int16(max(-32768, min(32767, v)))
            }
        }
    }
}
