/// Why audio capture or processing could not start or continue.
public enum CaptureError: Error, Equatable, CustomStringConvertible {
    /// ALSA could not open the capture device; `message` is ALSA's (`snd_strerror`).
    case cannotOpen(device: String, message: String)
    /// The device opened but refused 48 kHz 16-bit capture.
    case cannotConfigure(device: String, message: String)
    /// An ALSA configuration text given to the capture did not parse.
    case badConfiguration(message: String)
    /// webrtc-audio-processing refused a setting or a chunk.
    case audioProcessing(String)
    /// The Opus encoder could not be created.
    case encoder(String)

    public var description: String {
        switch self {
        case .cannotOpen(let device, let message): return "cannot open ALSA capture device '\(device)': \(message)"
        case .cannotConfigure(let device, let message):
            return "ALSA capture device '\(device)' refused 48 kHz 16-bit capture: \(message)"
        case .badConfiguration(let message): return "bad ALSA configuration: \(message)"
        case .audioProcessing(let what): return "audio processing: \(what)"
        case .encoder(let what): return "opus encoder: \(what)"
        }
    }
}
