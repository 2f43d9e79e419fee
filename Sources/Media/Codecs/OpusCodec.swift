internal import COpus

/// Opus encoder at 48 kHz producing one packet per 20 ms frame (libopus).
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class OpusEncoder: @unchecked Sendable {
    /// Samples per channel in one 20 ms frame at 48 kHz.
    public static let frameSamples = 960
    /// Sample rate, always 48 kHz (the Opus RTP clock).
    public static let sampleRate = 48_000

    /// Number of interleaved channels (1 or 2).
    public let channels: Int
    /// Encoder lookahead in 48 kHz samples: the Ogg/WebM pre-skip / CodecDelay.
    public let lookahead: Int
    private let encoder: OpaquePointer
    private var scratch = [UInt8](repeating: 0, count: 1500)

    /// What the encoder optimises for.
    public enum Application: Sendable { case voip, audio, lowDelay }

    /// Creates an encoder.
    /// - Parameters:
    ///   - channels: 1 (mono) or 2 (stereo).
    ///   - bitrate: target bits per second.
    ///   - inbandFEC: emit forward error correction so a lost packet can be rebuilt from the next.
    ///   - expectedLossPercent: loss estimate that sizes the FEC (only with `inbandFEC`).
    public init(
        channels: Int = 1, bitrate: Int = 32_000, application: Application = .audio,
        inbandFEC: Bool = false, expectedLossPercent: Int = 10, complexity: Int = 5
    ) throws {
        guard channels == 1 || channels == 2 else { throw MediaError.invalidArgument("opus channels \(channels)") }
        let app: Int32
        switch application {
        case .voip: app = OPUS_APPLICATION_VOIP
        case .audio: app = OPUS_APPLICATION_AUDIO
        case .lowDelay: app = OPUS_APPLICATION_RESTRICTED_LOWDELAY
        }
        var err: Int32 = 0
        guard let enc = opus_encoder_create(48_000, Int32(channels), app, &err), err == OPUS_OK else {
            throw MediaError.opus(function: "opus_encoder_create", code: err)
        }
        encoder = enc
        self.channels = channels
        var rc = ua_opus_set_bitrate(enc, Int32(clamping: bitrate))
        if rc == OPUS_OK { rc = ua_opus_set_complexity(enc, Int32(clamping: complexity)) }
        if rc == OPUS_OK, inbandFEC {
            rc = ua_opus_set_inband_fec(enc, 1)
            if rc == OPUS_OK { rc = ua_opus_set_packet_loss_perc(enc, Int32(clamping: expectedLossPercent)) }
        }
        var la: Int32 = 0
        if rc == OPUS_OK { rc = ua_opus_get_lookahead(enc, &la) }
        guard rc == OPUS_OK else {
            opus_encoder_destroy(enc)
            throw MediaError.opus(function: "opus_encoder_ctl", code: rc)
        }
        lookahead = Int(la)
    }

    deinit { opus_encoder_destroy(encoder) }

    /// Encodes one 20 ms frame of interleaved PCM (`960 × channels` samples) into one Opus packet.
    public func encode(pcm: UnsafeBufferPointer<Int16>) throws -> [UInt8] {
        guard pcm.count == Self.frameSamples * channels, let base = pcm.baseAddress else {
            throw MediaError.invalidArgument(
                "opus frame needs \(Self.frameSamples * channels) samples, got \(pcm.count)")
        }
        let n = scratch.withUnsafeMutableBufferPointer { out -> Int32 in
            guard let ob = out.baseAddress else { return OPUS_BUFFER_TOO_SMALL }
            return opus_encode(encoder, base, Int32(Self.frameSamples), ob, Int32(out.count))
        }
        guard n > 0 else { throw MediaError.opus(function: "opus_encode", code: n) }
        return Array(scratch[0..<Int(n)])
    }

    /// Convenience overload for an array of interleaved samples.
    public func encode(pcm: [Int16]) throws -> [UInt8] {
        try pcm.withUnsafeBufferPointer { try encode(pcm: $0) }
    }
}

/// Opus decoder (libopus) at 48 kHz or a lower Opus rate, with packet loss concealment.
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class OpusDecoder: @unchecked Sendable {
    /// Number of interleaved output channels.
    public let channels: Int
    /// Output samples per second: 48 000 (default), 24 000, 16 000, 12 000 or 8 000. libopus
    /// decodes at these rates directly (its own band-limited synthesis), so no resampler is needed.
    public let sampleRate: Int
    private let decoder: OpaquePointer
    /// Large enough for the longest Opus packet (120 ms).
    private var scratch: [Int16]

    /// Creates a decoder producing `channels` interleaved channels at `sampleRate`.
    public init(channels: Int = 1, sampleRate: Int = 48_000) throws {
        guard channels == 1 || channels == 2 else { throw MediaError.invalidArgument("opus channels \(channels)") }
        guard [8_000, 12_000, 16_000, 24_000, 48_000].contains(sampleRate) else {
            throw MediaError.invalidArgument("opus decode rate \(sampleRate)")
        }
        var err: Int32 = 0
        guard let dec = opus_decoder_create(Int32(sampleRate), Int32(channels), &err), err == OPUS_OK else {
            throw MediaError.opus(function: "opus_decoder_create", code: err)
        }
        decoder = dec
        self.channels = channels
        self.sampleRate = sampleRate
        scratch = [Int16](repeating: 0, count: 5760 * channels)
    }

    deinit { opus_decoder_destroy(decoder) }

    /// Decodes one packet into interleaved PCM.
    ///
    /// Pass `nil` for a lost packet: the decoder conceals `lostSamples` samples per channel (at
    /// ``sampleRate``; a multiple of 2.5 ms).
    public func decode(_ packet: [UInt8]?, lostSamples: Int = OpusEncoder.frameSamples) throws -> [Int16] {
        let maxFrame = Int32(scratch.count / channels * sampleRate / 48_000)
        let n: Int32
        if let packet, !packet.isEmpty {
            n = packet.withUnsafeBufferPointer { p in
                scratch.withUnsafeMutableBufferPointer { out -> Int32 in
                    guard let ob = out.baseAddress else { return OPUS_BUFFER_TOO_SMALL }
                    return opus_decode(decoder, p.baseAddress, Int32(clamping: p.count), ob, maxFrame, 0)
                }
            }
        } else {
            let frame = Int32(clamping: min(max(lostSamples, sampleRate / 400), Int(maxFrame)))
            n = scratch.withUnsafeMutableBufferPointer { out -> Int32 in
                guard let ob = out.baseAddress else { return OPUS_BUFFER_TOO_SMALL }
                return opus_decode(decoder, nil, 0, ob, frame, 0)
            }
        }
        guard n >= 0 else { throw MediaError.opus(function: "opus_decode", code: n) }
        return Array(scratch[0..<Int(n) * channels])
    }

    /// Samples per channel (at 48 kHz) that `packet` decodes to, or nil if the packet is invalid.
    public static func sampleCount(of packet: [UInt8]) -> Int? {
        let n = packet.withUnsafeBufferPointer { p -> Int32 in
            guard let pb = p.baseAddress else { return OPUS_INVALID_PACKET }
            return opus_packet_get_nb_samples(pb, Int32(clamping: p.count), 48_000)
        }
        return n > 0 ? Int(n) : nil
    }
}
