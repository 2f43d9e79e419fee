internal import CALSA
internal import COpus
import Glibc
import Synchronization

/// Captures a microphone through ALSA at 48 kHz on its own thread, cleans each 10 ms chunk with
/// webrtc-audio-processing, encodes 20 ms Opus packets and leaves them in ``ring`` for the event
/// loop thread to take.
///
/// The capture thread allocates nothing per chunk. A device that delivers audio much faster than
/// real time (ALSA's `null` or `file` plugins) is paced to real time, so it behaves like a sound card.
// Safe: the capture thread and the loop share only `ring` (locked) and atomics.
public final class ALSACapture: @unchecked Sendable {
    /// The ALSA PCM name, e.g. `default`, `hw:1,0`, `plughw:1`.
    public let device: String
    /// Channels the device delivers (1, or 2 mixed down to mono).
    public let deviceChannels: Int
    /// Encoded packets waiting for the loop thread.
    public let ring: EncodedAudioRing
    private let pcm: OpaquePointer
    private let localConfig: OpaquePointer?
    private let processor: AudioProcessor
    private let encoder: OpaquePointer
    private let stopRequested = Atomic<Bool>(false)
    private let chunkCount = Atomic<Int>(0)
    private let recoveries = Atomic<Int>(0)
    private let processingFailures = Atomic<Int>(0)
    private let failure = Mutex<String?>(nil)
    /// The capture thread; touched only by the owner (start/stop).
    private var thread: pthread_t?
    private var closed = false

    /// Opens and configures `device` (mono or stereo, 16-bit, 48 kHz) and prepares processing
    /// and encoding. Nothing is captured until ``start()``.
    ///
    /// - Parameters:
    ///   - configText: an ALSA configuration (asoundrc syntax) to resolve `device` in, instead of the
    ///     system's; used by tests to define `file` plugin devices without a sound card.
    ///   - ringCapacity: 20 ms packets kept for the reader (the oldest is dropped when full).
    public init(
        device: String, configText: String? = nil, processing: AudioProcessingOptions = .init(),
        bitrate: Int = 32_000, ringCapacity: Int = 50
    ) throws(CaptureError) {
        let (pcm, config, channels) = try Self.open(device: device, configText: configText)
        do {
            processor = try AudioProcessor(sampleRate: 48_000, channels: 1, options: processing)
        } catch {
            snd_pcm_close(pcm)
            if let config { snd_config_delete(config) }
            throw error
        }
        var err: Int32 = 0
        guard let enc = opus_encoder_create(48_000, 1, OPUS_APPLICATION_VOIP, &err), err == OPUS_OK else {
            snd_pcm_close(pcm)
            if let config { snd_config_delete(config) }
            throw .encoder("opus_encoder_create failed with \(err)")
        }
        _ = ua_opus_set_bitrate(enc, Int32(clamping: bitrate))
        encoder = enc
        self.pcm = pcm
        localConfig = config
        deviceChannels = channels
        self.device = device
        ring = EncodedAudioRing(capacity: ringCapacity)
    }

    deinit {
        stop()
        opus_encoder_destroy(encoder)
    }

    /// Checks that `device` opens for 48 kHz capture, then closes it (for startup validation).
    public static func probe(device: String, configText: String? = nil) throws(CaptureError) {
        let (pcm, config, _) = try open(device: device, configText: configText)
        snd_pcm_close(pcm)
        if let config { snd_config_delete(config) }
    }

    /// 10 ms chunks captured so far.
    public var chunksCaptured: Int { chunkCount.load(ordering: .relaxed) }
    /// Overruns and other errors ALSA recovered from.
    public var recoveredErrors: Int { recoveries.load(ordering: .relaxed) }
    /// Chunks webrtc-audio-processing refused (sent unprocessed).
    public var processingErrors: Int { processingFailures.load(ordering: .relaxed) }
    /// Why the capture thread stopped on its own (the device failed), if it did.
    public var failureMessage: String? { failure.withLock { $0 } }

    /// Starts the capture thread. Call once.
    public func start() {
        guard thread == nil, !closed else { return }
        var t = pthread_t()
        let box = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(
            &t, nil,
            { raw in
                guard let raw else { return nil }
                let capture = Unmanaged<ALSACapture>.fromOpaque(raw).takeRetainedValue()
                capture.run()
                return nil
            }, box)
        if rc == 0 {
            thread = t
        } else {
            Unmanaged<ALSACapture>.fromOpaque(box).release()
            failure.withLock { $0 = "cannot start the capture thread: error \(rc)" }
        }
    }

    /// Stops the capture thread (waits for it, at most one ALSA wait of 200 ms) and closes the device.
    public func stop() {
        guard !closed else { return }
        closed = true
        stopRequested.store(true, ordering: .releasing)
        if let thread { pthread_join(thread, nil) }
        thread = nil
        snd_pcm_close(pcm)
        if let localConfig { snd_config_delete(localConfig) }
    }

    private static func alsaMessage(_ code: Int32) -> String {
        guard let s = snd_strerror(code) else { return "error \(code)" }
        return String(cString: s)
    }

    private static func open(device: String, configText: String?) throws(CaptureError) -> (
        OpaquePointer, OpaquePointer?, Int
    ) {
        // ALSA prints its own errors to stderr by default; ours name the device instead.
        _ = ua_alsa_silence_errors(1)
        var config: OpaquePointer?
        if let configText {
            guard snd_config_top(&config) == 0, let top = config else {
                throw .badConfiguration(message: "snd_config_top failed")
            }
            var input: OpaquePointer?
            var rc = configText.withCString { snd_input_buffer_open(&input, $0, strlen($0)) }
            if rc == 0, let input {
                rc = snd_config_load(top, input)
                snd_input_close(input)
            }
            guard rc == 0 else {
                snd_config_delete(top)
                throw .badConfiguration(message: alsaMessage(rc))
            }
        }
        var handle: OpaquePointer?
        let rc: Int32
        if let config {
            rc = snd_pcm_open_lconf(&handle, device, SND_PCM_STREAM_CAPTURE, 0, config)
        } else {
            rc = snd_pcm_open(&handle, device, SND_PCM_STREAM_CAPTURE, 0)
        }
        guard rc == 0, let pcm = handle else {
            if let config { snd_config_delete(config) }
            throw .cannotOpen(device: device, message: alsaMessage(rc))
        }
        var last: Int32 = 0
        // Mono first; many hw: devices only offer stereo, which is mixed down.
        for channels in [1, 2] {
            last = snd_pcm_set_params(
                pcm, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED, UInt32(channels), 48_000, 1, 100_000)
            if last == 0 { return (pcm, config, channels) }
        }
        snd_pcm_close(pcm)
        if let config { snd_config_delete(config) }
        throw .cannotConfigure(device: device, message: alsaMessage(last))
    }

    private static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// The capture thread.
    private func run() {
        let chunk = processor.samplesPerChunk
        let channels = deviceChannels
        let readBuffer = UnsafeMutablePointer<Int16>.allocate(capacity: chunk * channels)
        let frame = UnsafeMutablePointer<Int16>.allocate(capacity: chunk * 2)
        let packet = UnsafeMutablePointer<UInt8>.allocate(capacity: EncodedAudioRing.maxPacketBytes)
        defer {
            readBuffer.deallocate()
            frame.deallocate()
            packet.deallocate()
        }
        var chunksInFrame = 0
        var timestamp: UInt32 = 0
        var captured: UInt64 = 0
        var paced = false
        let started = Self.monotonicNanos()
        while !stopRequested.load(ordering: .acquiring) {
            // Fill one 10 ms chunk, waiting at most 200 ms at a time so stop() is noticed.
            var got = 0
            while got < chunk {
                if stopRequested.load(ordering: .acquiring) { return }
                let ready = snd_pcm_wait(pcm, 200)
                if ready == 0 { continue }
                let n =
                    ready < 0
                    ? Int(ready)
                    : snd_pcm_readi(pcm, readBuffer + got * channels, snd_pcm_uframes_t(chunk - got))
                if n < 0 {
                    let rc = snd_pcm_recover(pcm, Int32(clamping: n), 1)
                    guard rc >= 0 else {
                        failure.withLock { $0 = "capture from '\(device)' failed: \(Self.alsaMessage(rc))" }
                        return
                    }
                    recoveries.add(1, ordering: .relaxed)
                    continue
                }
                got += n
            }
            let out = frame + chunksInFrame * chunk
            if channels == 1 {
                out.update(from: readBuffer, count: chunk)
            } else {
                for i in 0..<chunk {
                    out[i] = Int16((Int(readBuffer[2 * i]) + Int(readBuffer[2 * i + 1])) / 2)
                }
            }
            // A chunk the processor refuses goes out unprocessed rather than as a gap.
            do { try processor.process(UnsafeMutableBufferPointer(start: out, count: chunk)) } catch {
                processingFailures.add(1, ordering: .relaxed)
            }
            chunksInFrame += 1
            chunkCount.add(1, ordering: .relaxed)
            if chunksInFrame == 2 {
                chunksInFrame = 0
                let n = opus_encode(
                    encoder, frame, Int32(2 * chunk), packet, Int32(EncodedAudioRing.maxPacketBytes))
                if n > 0 { ring.push(UnsafeRawBufferPointer(start: packet, count: Int(n)), timestamp: timestamp) }
                timestamp &+= UInt32(2 * chunk)
            }
            captured += UInt64(chunk)
            // Media time of the audio captured so far, against the wall clock.
            let mediaNanos = captured * 1_000_000_000 / 48_000
            let wall = Self.monotonicNanos() - started
            if !paced, captured == 48_000 / 2, wall < mediaNanos / 2 { paced = true }
            if paced, mediaNanos > wall {
                let wait = mediaNanos - wall
                var ts = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
                nanosleep(&ts, nil)
            }
        }
    }
}
