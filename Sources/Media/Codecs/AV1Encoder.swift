internal import CAOM
public import RTCWire

/// AV1 encoder (libaom `aom_codec_av1_cx`) configured for real-time sending: the realtime usage at
/// speed 10, no lag (one temporal unit out per picture), constant bitrate, cyclic-refresh adaptive
/// quantization, profile 0 (8-bit 4:2:0, `profile=0` in SDP), one spatial and one temporal layer.
///
/// libaom was chosen over SVT-AV1 and libavcodec's wrappers after timing all three at 640x360,
/// 600 kbit/s on one core of this machine: libaom realtime speed 10 took about 5.0 ms a frame,
/// SVT-AV1 preset 12 in its low-delay mode (marked experimental by SVT-AV1 1.4) about 6 ms and
/// rav1e speed 10 about 48 ms; libavcodec's libaom wrapper stops at speed 8 and cannot change the
/// bitrate of an open encoder, which ``setTargetBitrate(_:)`` needs.
///
/// Each ``encode(i420:)`` returns one temporal unit in the low-overhead bitstream format (every OBU
/// with its size field) without its temporal delimiter, as ``MediaCodec/av1`` frames are; a key
/// frame's unit starts with the sequence header. `AV1PayloadFormat.packetize` sends it.
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class AV1Encoder: VideoEncoder, @unchecked Sendable {
    public var codec: MediaCodec { .av1 }
    /// Frame width in pixels.
    public var width: Int { state.width }
    /// Frame height in pixels.
    public var height: Int { state.height }
    /// Frames per second; frame `n` gets RTP timestamp `n × 90000 / fps`.
    public var fps: Int { state.fps }
    /// The target bitrate the encoder runs at, bits per second.
    public var targetBitrate: Int { state.targetBitrate }
    private var state: RealtimeEncoderState
    private let ctx: UnsafeMutablePointer<aom_codec_ctx_t>
    private let image: UnsafeMutablePointer<aom_image_t>
    /// The configuration the encoder runs with (kept to change the rate with `aom_codec_enc_config_set`).
    private var config = aom_codec_enc_cfg_t()

    /// Creates an encoder.
    /// - Parameters:
    ///   - bitrate: target bits per second.
    ///   - keyframeInterval: at most this many frames between key frames.
    ///   - speed: libaom's `cpu-used` (realtime usage: 7…10, higher is faster).
    /// - Throws: ``MediaError/invalidArgument(_:)`` for an odd or out-of-range size or rate,
    ///   ``MediaError/aom(function:code:detail:)`` when libaom does not open the encoder.
    public init(
        width: Int, height: Int, fps: Int = 30, bitrate: Int = 600_000, keyframeInterval: Int = 60, speed: Int = 10,
        threads: Int = 1
    ) throws {
        state = try RealtimeEncoderState(
            codec: .av1, width: width, height: height, fps: fps, bitrate: bitrate, keyframeInterval: keyframeInterval,
            extra: (0...10).contains(speed), extraText: " speed \(speed)")
        var cfg = aom_codec_enc_cfg_t()
        try Self.check(ua_aom_enc_config_default_av1_realtime(&cfg), "aom_codec_enc_config_default", nil)
        cfg.g_w = UInt32(width)
        cfg.g_h = UInt32(height)
        cfg.g_timebase = aom_rational(num: 1, den: Int32(fps))
        cfg.g_profile = 0
        cfg.g_bit_depth = AOM_BITS_8
        cfg.g_input_bit_depth = 8
        cfg.g_threads = UInt32(max(1, threads))
        cfg.g_lag_in_frames = 0
        cfg.g_error_resilient = 0
        cfg.rc_end_usage = AOM_CBR
        cfg.rc_target_bitrate = RealtimeEncoderState.kilobits(bitrate)
        cfg.rc_dropframe_thresh = 0  // every input picture yields a temporal unit
        cfg.rc_min_quantizer = 10
        cfg.rc_max_quantizer = 56
        cfg.rc_undershoot_pct = 50
        cfg.rc_overshoot_pct = 50
        cfg.rc_buf_initial_sz = 600
        cfg.rc_buf_optimal_sz = 600
        cfg.rc_buf_sz = 1000
        cfg.kf_mode = AOM_KF_AUTO
        cfg.kf_min_dist = 0
        cfg.kf_max_dist = UInt32(keyframeInterval)
        config = cfg
        ctx = .allocate(capacity: 1)
        ctx.initialize(to: aom_codec_ctx_t())
        do {
            try Self.check(ua_aom_enc_init_av1(ctx, &cfg), "aom_codec_enc_init", ctx)
        } catch {
            ctx.deallocate()
            throw error
        }
        _ = ua_aom_set_cpuused(ctx, Int32(speed))
        _ = ua_aom_set_aq_mode(ctx, 3)
        // Look-ahead tools a real-time encoder has no frames for.
        _ = ua_aom_set_enable_tpl_model(ctx, 0)
        _ = ua_aom_set_deltaq_mode(ctx, 0)
        guard let img = aom_img_alloc(nil, AOM_IMG_FMT_I420, UInt32(width), UInt32(height), 16) else {
            aom_codec_destroy(ctx)
            ctx.deallocate()
            throw MediaError.aom(function: "aom_img_alloc", code: -1, detail: "out of memory")
        }
        image = img
    }

    deinit {
        aom_img_free(image)
        aom_codec_destroy(ctx)
        ctx.deallocate()
    }

    private static func check(_ err: aom_codec_err_t, _ function: String, _ ctx: UnsafeMutablePointer<aom_codec_ctx_t>?)
        throws
    {
        guard err != AOM_CODEC_OK else { return }
        var detail = String(cString: aom_codec_err_to_string(err))
        if let ctx, let d = aom_codec_error_detail(ctx) { detail += " (" + String(cString: d) + ")" }
        throw MediaError.aom(function: function, code: Int32(truncatingIfNeeded: err.rawValue), detail: detail)
    }

    /// Changes the rate-control target (`rc_target_bitrate` through `aom_codec_enc_config_set`) for
    /// the frames encoded from now on (see ``EncoderRateThrottle`` for when to call it).
    public func setTargetBitrate(_ bitrate: Int) throws {
        try state.checkBitrate(bitrate)
        config.rc_target_bitrate = RealtimeEncoderState.kilobits(bitrate)
        try Self.check(aom_codec_enc_config_set(ctx, &config), "aom_codec_enc_config_set", ctx)
        state.setTargetBitrate(bitrate)
    }

    /// Makes the next temporal unit a key frame with its sequence header (e.g. after a PLI).
    public func forceKeyframe() { state.forceKeyframe() }

    /// Encodes one picture into one temporal unit (without its temporal delimiter), stamped with a
    /// 90 kHz timestamp from the frame counter.
    public func encode(i420 picture: I420Image) throws -> [EncodedFrame] {
        let (pts, keyframe) = try state.begin(picture)
        RealtimeEncoderState.copy(picture, planes: image.pointee.planes, strides: image.pointee.stride)
        let flags: aom_enc_frame_flags_t = keyframe ? ua_aom_efflag_force_kf : 0
        try Self.check(aom_codec_encode(ctx, image, pts, 1, flags), "aom_codec_encode", ctx)
        var out: [EncodedFrame] = []
        var iter: aom_codec_iter_t? = nil
        while let pkt = aom_codec_get_cx_data(ctx, &iter) {
            guard pkt.pointee.kind == AOM_CODEC_CX_FRAME_PKT else { continue }
            let f = pkt.pointee.data.frame
            guard let buf = f.buf, f.sz > 0 else { continue }
            let unit = UnsafeRawBufferPointer(start: buf, count: Int(f.sz))
            let skip = AV1OBUType.leadingTemporalDelimiters(unit)
            guard skip < unit.count else { continue }
            out.append(state.frame(Array(unit[skip...]), pts: f.pts, isKeyframe: f.flags & ua_aom_frame_is_key != 0))
        }
        return out
    }
}
