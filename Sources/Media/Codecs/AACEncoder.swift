internal import CAVCodec

#if canImport(Glibc)
    import Glibc
#endif

/// AAC-LC encoder (libavcodec's native `aac`) for outputs whose containers or servers want AAC rather than
/// Opus: RTMP/FLV and HLS for Safari. Mono, at the composite's 48 kHz (no resampling: FLV and MP4 carry
/// the rate in the AudioSpecificConfig).
///
/// PCM goes in as it comes (any number of samples per call); AAC frames of 1024 samples come out through
/// the `output` closure, their bytes borrowed for the call. The first frame's time is negative: the encoder
/// primes with 1024 samples (its `initial_padding`), so times are those of the PCM each frame decodes to.
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class AACEncoder: @unchecked Sendable {
    /// Samples per AAC frame.
    public static let frameSamples = 1024
    /// Samples per second.
    public let sampleRate: Int
    /// Channels (always 1: the room's mix is mono).
    public let channels = 1
    /// The AudioSpecificConfig (ISO/IEC 14496-3) that FLV's sequence header and MP4's `esds` carry.
    public let audioSpecificConfig: [UInt8]

    private let context: UnsafeMutablePointer<AVCodecContext>
    private let frame: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>
    /// Samples of the frame being filled.
    private var filled = 0
    /// Samples fed so far (the next frame's pts).
    private var fedSamples: Int64 = 0

    /// Opens an encoder. Throws ``MediaError/invalidArgument(_:)`` for a rate AAC has no index for or a
    /// bitrate outside 8…320 kb/s, ``MediaError/avcodec(function:code:detail:)`` when libavcodec lacks the
    /// encoder or does not open it.
    public init(sampleRate: Int = 48_000, bitrate: Int = 96_000) throws {
        let rates = [96_000, 88_200, 64_000, 48_000, 44_100, 32_000, 24_000, 22_050, 16_000, 12_000, 11_025, 8_000]
        guard rates.contains(sampleRate) else { throw MediaError.invalidArgument("AAC sample rate \(sampleRate)") }
        guard (8_000...320_000).contains(bitrate) else { throw MediaError.invalidArgument("AAC bitrate \(bitrate)") }
        // The encoder logs its average quantizer at info level when it closes; errors are all we want.
        if av_log_get_level() > AV_LOG_ERROR { av_log_set_level(AV_LOG_ERROR) }
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_AAC) else {
            throw MediaError.avcodec(function: "avcodec_find_encoder", code: 0, detail: "libavcodec has no AAC encoder")
        }
        let context = try AVCodecContexts.open(codec, name: "aac") { context in
            context.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
            context.pointee.sample_rate = Int32(sampleRate)
            context.pointee.bit_rate = Int64(bitrate)
            context.pointee.time_base = AVRational(num: 1, den: Int32(sampleRate))
            context.pointee.flags |= ua_codec_flag_global_header
            av_channel_layout_default(&context.pointee.ch_layout, 1)
        }
        let (frame, packet) = (av_frame_alloc(), av_packet_alloc())
        guard let frame, let packet else {
            AVCodecContexts.free(context, packet: packet, frames: frame)
            throw MediaError.avcodec(function: "av_frame_alloc (aac)", code: 0, detail: "out of memory")
        }
        frame.pointee.nb_samples = Int32(Self.frameSamples)
        frame.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
        frame.pointee.sample_rate = Int32(sampleRate)
        av_channel_layout_copy(&frame.pointee.ch_layout, &context.pointee.ch_layout)
        let buffered = av_frame_get_buffer(frame, 0)
        guard buffered >= 0, let extra = context.pointee.extradata, context.pointee.extradata_size >= 2 else {
            AVCodecContexts.free(context, packet: packet, frames: frame)
            throw AVCodecContexts.failure("av_frame_get_buffer (aac)", buffered)
        }
        audioSpecificConfig = Array(UnsafeBufferPointer(start: extra, count: Int(context.pointee.extradata_size)))
        self.sampleRate = sampleRate
        self.context = context
        self.frame = frame
        self.packet = packet
    }

    deinit { AVCodecContexts.free(context, packet: packet, frames: frame) }

    /// Feeds mono PCM. `output` gets each AAC frame that completes (raw, no ADTS header) and its
    /// presentation time in samples from the first sample fed.
    public func encode(
        _ pcm: UnsafeBufferPointer<Int16>,
        _ output: (_ frame: UnsafeRawBufferPointer, _ ptsSamples: Int64) throws -> Void
    ) throws {
        var index = 0
        while index < pcm.count {
            guard let plane = frame.pointee.data.0 else { return }
            let take = min(Self.frameSamples - filled, pcm.count - index)
            plane.withMemoryRebound(to: Float.self, capacity: Self.frameSamples) { samples in
                for i in 0..<take { samples[filled + i] = Float(pcm[index + i]) / 32768 }
            }
            filled += take
            index += take
            if filled == Self.frameSamples {
                filled = 0
                try send(frame: frame, output)
            }
        }
    }

    /// Ends the stream: the partly filled frame (padded with silence) and the frames the encoder holds.
    public func flush(_ output: (_ frame: UnsafeRawBufferPointer, _ ptsSamples: Int64) throws -> Void) throws {
        if filled > 0, let plane = frame.pointee.data.0 {
            plane.withMemoryRebound(to: Float.self, capacity: Self.frameSamples) { samples in
                for i in filled..<Self.frameSamples { samples[i] = 0 }
            }
            filled = 0
            try send(frame: frame, output)
        }
        try send(frame: nil, output)
    }

    private func send(
        frame: UnsafeMutablePointer<AVFrame>?, _ output: (UnsafeRawBufferPointer, Int64) throws -> Void
    ) throws {
        if let frame {
            frame.pointee.pts = fedSamples
            fedSamples += Int64(Self.frameSamples)
        }
        let status = avcodec_send_frame(context, frame)
        guard status >= 0 || status == ua_averror_eof else {
            throw AVCodecContexts.failure("avcodec_send_frame (aac)", status)
        }
        while true {
            let received = avcodec_receive_packet(context, packet)
            if received == ua_averror_eagain || received == ua_averror_eof { break }
            guard received >= 0 else {
                throw AVCodecContexts.failure("avcodec_receive_packet (aac)", received)
            }
            defer { av_packet_unref(packet) }
            try output(
                UnsafeRawBufferPointer(start: packet.pointee.data, count: Int(packet.pointee.size)), packet.pointee.pts)
        }
        // libavcodec may keep a reference to the buffer just sent: the next fill needs one of its own
        // (a no-op when the buffer is not shared).
        if frame != nil { _ = av_frame_make_writable(self.frame) }
    }
}
