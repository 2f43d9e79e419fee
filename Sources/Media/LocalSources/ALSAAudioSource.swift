import RTCWire

/// A microphone through ALSA: captured on its own thread, cleaned by webrtc-audio-processing
/// (AEC, NS, AGC, high-pass), Opus-encoded in 20 ms packets and sent as they arrive.
///
/// The device opens when the source is made (a track starts) and closes in ``close()``. Timestamps
/// count captured samples, so they follow the sound card's clock.
public final class ALSAAudioSource: MediaSource {
    public let kind = MediaKind.audio
    public let layerCount = 1
    /// The capture underneath (device, counters, packet ring).
    public let capture: ALSACapture

    /// Opens `device` (an ALSA PCM name such as `default` or `hw:1,0`) and starts capturing.
    ///
    /// - Parameter configText: an ALSA configuration to resolve `device` in instead of the system's.
    /// - Throws: ``MediaSourceError/capture(_:)`` naming the device and ALSA's message.
    public init(device: String, configText: String? = nil, processing: AudioProcessingOptions = .init())
        throws(MediaSourceError)
    {
        do {
            capture = try ALSACapture(device: device, configText: configText, processing: processing)
        } catch {
            throw .capture(error)
        }
        capture.start()
    }

    private var sending = false

    public func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void) {
        if !sending {
            // Audio captured while the connection was coming up is stale: sending it in one burst
            // would only put the far end's playout behind by that much.
            sending = true
            capture.ring.discardOldest(keepingNewest: 2)
        }
        while let frame = capture.ring.pop() { emit(frame, 0) }
    }

    public func requestKeyframe() {}

    public func close() { capture.stop() }
}
