internal import CVPX
public import RTCWire

private func vpxCheck(_ err: vpx_codec_err_t, _ function: String, _ ctx: UnsafeMutablePointer<vpx_codec_ctx_t>?) throws
{
    guard err != VPX_CODEC_OK else { return }
    var detail = String(cString: vpx_codec_err_to_string(err))
    if let ctx, let d = vpx_codec_error_detail(ctx) { detail += " (" + String(cString: d) + ")" }
    throw MediaError.vpx(function: function, code: Int32(truncatingIfNeeded: err.rawValue), detail: detail)
}

/// A libvpx encoder configured for real-time sending: no lag, constant bitrate, no frame drops.
/// ``VP8Encoder`` and ``VP9Encoder`` are its two codecs; everything but opening is shared.
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public class VPXEncoder: VideoEncoder, @unchecked Sendable {
    public var codec: MediaCodec { state.codec }
    /// Frame width in pixels.
    public var width: Int { state.width }
    /// Frame height in pixels.
    public var height: Int { state.height }
    /// Frames per second; frame `n` gets RTP timestamp `n × 90000 / fps`.
    public var fps: Int { state.fps }
    /// The target bitrate the encoder runs at, bits per second.
    public var targetBitrate: Int { state.targetBitrate }
    private var state: RealtimeEncoderState
    private let ctx: UnsafeMutablePointer<vpx_codec_ctx_t>
    private let image: UnsafeMutablePointer<vpx_image_t>
    private let deadline: UInt
    /// The configuration the encoder runs with (kept to change the rate with `vpx_codec_enc_config_set`).
    private var config = vpx_codec_enc_cfg_t()

    /// Opens a VP8 or VP9 encoder (the subclasses' initializers say what each parameter does).
    init(
        codec: MediaCodec, width: Int, height: Int, fps: Int, bitrate: Int, keyframeInterval: Int, realtime: Bool,
        errorResilient: Bool, cpuUsed: Int, threads: Int
    ) throws {
        state = try RealtimeEncoderState(
            codec: codec, width: width, height: height, fps: fps, bitrate: bitrate, keyframeInterval: keyframeInterval)
        deadline = realtime ? ua_vpx_dl_realtime : ua_vpx_dl_good_quality
        var cfg = vpx_codec_enc_cfg_t()
        try vpxCheck(
            codec == .vp9 ? ua_vpx_enc_config_default_vp9(&cfg) : ua_vpx_enc_config_default_vp8(&cfg),
            "vpx_codec_enc_config_default", nil)
        cfg.g_w = UInt32(width)
        cfg.g_h = UInt32(height)
        cfg.g_timebase = vpx_rational(num: 1, den: Int32(fps))
        cfg.g_profile = 0  // VP9 profile 0: 8-bit 4:2:0, what `profile-id=0` announces
        cfg.rc_target_bitrate = RealtimeEncoderState.kilobits(bitrate)
        cfg.rc_end_usage = VPX_CBR
        cfg.g_lag_in_frames = 0
        cfg.rc_dropframe_thresh = 0  // every input frame yields an output frame
        cfg.g_error_resilient = errorResilient ? ua_vpx_error_resilient_default : 0
        cfg.kf_mode = VPX_KF_AUTO
        cfg.kf_max_dist = UInt32(keyframeInterval)
        cfg.g_threads = UInt32(max(1, threads))
        cfg.rc_min_quantizer = codec == .vp9 ? 2 : 4
        cfg.rc_max_quantizer = codec == .vp9 ? 52 : 56
        cfg.rc_undershoot_pct = codec == .vp9 ? 50 : 100
        cfg.rc_overshoot_pct = codec == .vp9 ? 50 : 15
        cfg.rc_buf_initial_sz = 500
        cfg.rc_buf_optimal_sz = 600
        cfg.rc_buf_sz = 1000

        config = cfg
        ctx = .allocate(capacity: 1)
        ctx.initialize(to: vpx_codec_ctx_t())
        do {
            try vpxCheck(
                codec == .vp9 ? ua_vpx_enc_init_vp9(ctx, &cfg, 0) : ua_vpx_enc_init_vp8(ctx, &cfg, 0),
                "vpx_codec_enc_init", ctx)
        } catch {
            ctx.deallocate()
            throw error
        }
        _ = ua_vpx_set_cpuused(ctx, Int32(cpuUsed))
        _ = ua_vpx_set_static_threshold(ctx, 1)
        _ = ua_vpx_set_noise_sensitivity(ctx, 0)
        _ = ua_vpx_set_max_intra_bitrate_pct(ctx, 300)
        if codec == .vp9 {
            // Cyclic refresh, as real-time VP9 senders run it; one tile column at these sizes.
            _ = ua_vpx_set_vp9_aq_mode(ctx, 3)
            _ = ua_vpx_set_vp9_tile_columns(ctx, 0)
        }
        guard let img = vpx_img_alloc(nil, VPX_IMG_FMT_I420, UInt32(width), UInt32(height), 16) else {
            vpx_codec_destroy(ctx)
            ctx.deallocate()
            throw MediaError.vpx(function: "vpx_img_alloc", code: -1, detail: "out of memory")
        }
        image = img
    }

    deinit {
        vpx_img_free(image)
        vpx_codec_destroy(ctx)
        ctx.deallocate()
    }

    /// Changes the rate-control target (`rc_target_bitrate` through `vpx_codec_enc_config_set`) for
    /// the frames encoded from now on: the way a live encoder follows a bandwidth estimate (see
    /// ``EncoderRateThrottle`` for when to call it).
    public func setTargetBitrate(_ bitrate: Int) throws {
        try state.checkBitrate(bitrate)
        config.rc_target_bitrate = RealtimeEncoderState.kilobits(bitrate)
        try vpxCheck(vpx_codec_enc_config_set(ctx, &config), "vpx_codec_enc_config_set", ctx)
        state.setTargetBitrate(bitrate)
    }

    /// Makes the next encoded frame a keyframe (e.g. after a PLI).
    public func forceKeyframe() { state.forceKeyframe() }

    /// Encodes one picture. Returns the frames libvpx produced (normally exactly one), stamped
    /// with a 90 kHz timestamp from the frame counter.
    public func encode(i420 picture: I420Image) throws -> [EncodedFrame] {
        let (pts, keyframe) = try state.begin(picture)
        RealtimeEncoderState.copy(picture, planes: image.pointee.planes, strides: image.pointee.stride)
        let flags: vpx_enc_frame_flags_t = keyframe ? ua_vpx_efflag_force_kf : 0
        try vpxCheck(vpx_codec_encode(ctx, image, pts, 1, flags, deadline), "vpx_codec_encode", ctx)
        var out: [EncodedFrame] = []
        var iter: vpx_codec_iter_t? = nil
        while let pkt = vpx_codec_get_cx_data(ctx, &iter) {
            guard pkt.pointee.kind == VPX_CODEC_CX_FRAME_PKT else { continue }
            let f = pkt.pointee.data.frame
            guard let buf = f.buf, f.sz > 0 else { continue }
            let bytes = Array(UnsafeRawBufferPointer(start: buf, count: Int(f.sz)))
            out.append(state.frame(bytes, pts: f.pts, isKeyframe: (f.flags & ua_vpx_frame_is_key) != 0))
        }
        return out
    }
}

/// VP8 encoder (libvpx) configured for real-time sending: no lag, constant bitrate, no frame drops.
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class VP8Encoder: VPXEncoder, @unchecked Sendable {
    /// Creates an encoder.
    /// - Parameters:
    ///   - bitrate: target bits per second.
    ///   - keyframeInterval: at most this many frames between keyframes.
    ///   - realtime: use libvpx's real-time deadline (fast); otherwise good quality.
    ///   - errorResilient: make frames decodable after losses in earlier non-reference frames.
    ///   - cpuUsed: libvpx speed setting (-16…16, higher is faster).
    public init(
        width: Int, height: Int, fps: Int = 30, bitrate: Int = 600_000, keyframeInterval: Int = 60,
        realtime: Bool = true, errorResilient: Bool = true, cpuUsed: Int = 8, threads: Int = 1
    ) throws {
        try super.init(
            codec: .vp8, width: width, height: height, fps: fps, bitrate: bitrate, keyframeInterval: keyframeInterval,
            realtime: realtime, errorResilient: errorResilient, cpuUsed: cpuUsed, threads: threads)
    }
}

/// VP9 encoder (libvpx `vpx_codec_vp9_cx`) configured for real-time sending: profile 0 (8-bit
/// 4:2:0, `profile-id=0`), one spatial and one temporal layer, no lag (no hidden alt-ref frames, so
/// one frame out per picture), constant bitrate with cyclic-refresh adaptive quantization.
///
/// `VP9PayloadFormat.writePacket` sends its frames in the non-flexible mode of RFC 9628.
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class VP9Encoder: VPXEncoder, @unchecked Sendable {
    /// Creates an encoder.
    /// - Parameters:
    ///   - bitrate: target bits per second.
    ///   - keyframeInterval: at most this many frames between keyframes.
    ///   - cpuUsed: libvpx speed setting (5…9 in real time, higher is faster); 8 encodes 640x360 in
    ///     about 1.6 ms a frame on one core here.
    /// - Throws: ``MediaError/invalidArgument(_:)`` for an odd or out-of-range size or rate,
    ///   ``MediaError/vpx(function:code:detail:)`` when libvpx does not open the encoder.
    public init(
        width: Int, height: Int, fps: Int = 30, bitrate: Int = 600_000, keyframeInterval: Int = 60, cpuUsed: Int = 8,
        threads: Int = 1
    ) throws {
        try super.init(
            codec: .vp9, width: width, height: height, fps: fps, bitrate: bitrate, keyframeInterval: keyframeInterval,
            realtime: true, errorResilient: false, cpuUsed: cpuUsed, threads: threads)
    }
}

/// VP8 decoder (libvpx).
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class VP8Decoder: @unchecked Sendable {
    private let ctx: UnsafeMutablePointer<vpx_codec_ctx_t>

    /// Creates a decoder.
    public init(threads: Int = 1) throws {
        ctx = .allocate(capacity: 1)
        ctx.initialize(to: vpx_codec_ctx_t())
        var cfg = vpx_codec_dec_cfg_t(threads: UInt32(max(1, threads)), w: 0, h: 0)
        do {
            try vpxCheck(ua_vpx_dec_init_vp8(ctx, &cfg, 0), "vpx_codec_dec_init", ctx)
        } catch {
            ctx.deallocate()
            throw error
        }
    }

    deinit {
        vpx_codec_destroy(ctx)
        ctx.deallocate()
    }

    /// Decodes one VP8 frame. Returns the picture, or nil when the decoder produced none.
    public func decode(_ frame: [UInt8]) throws -> I420Image? {
        guard try decodeInPlace(frame), let img = held else { return nil }
        return Self.copy(img.pointee)
    }

    /// The newest picture of the last decode, in libvpx's buffer: valid until the next decode.
    private var held: UnsafeMutablePointer<vpx_image_t>?

    /// Decodes one VP8 frame and keeps its picture in libvpx's buffer (no copy): true when an I420
    /// picture completed. ``withPicture(_:)`` lends it until the next decode; after a frame is
    /// refused there is none.
    public func decodeInPlace(_ frame: [UInt8]) throws -> Bool {
        guard !frame.isEmpty else { throw MediaError.invalidArgument("empty VP8 frame") }
        held = nil
        let err = frame.withUnsafeBufferPointer { p in
            vpx_codec_decode(ctx, p.baseAddress, UInt32(clamping: p.count), nil, 0)
        }
        try vpxCheck(err, "vpx_codec_decode", ctx)
        var iter: vpx_codec_iter_t? = nil
        while let img = vpx_codec_get_frame(ctx, &iter) { held = img }
        if let img = held, img.pointee.fmt != VPX_IMG_FMT_I420 { held = nil }
        return held != nil
    }

    /// Lends the picture the last ``decodeInPlace(_:)`` completed; nil (body not called) when there is none.
    public func withPicture<R>(_ body: (I420Planes) throws -> R) rethrows -> R? {
        guard let img = held?.pointee, let y = img.planes.0, let u = img.planes.1, let v = img.planes.2 else {
            return nil
        }
        return try body(
            I420Planes(
                width: Int(img.d_w), height: Int(img.d_h), y: y, u: u, v: v, strideY: Int(img.stride.0),
                strideU: Int(img.stride.1), strideV: Int(img.stride.2)))
    }

    private static func copy(_ img: vpx_image_t) -> I420Image? {
        guard img.fmt == VPX_IMG_FMT_I420 else { return nil }
        let w = Int(img.d_w)
        let h = Int(img.d_h)
        var out = I420Image(width: w, height: h)
        let planes = [img.planes.0, img.planes.1, img.planes.2]
        let strides = [Int(img.stride.0), Int(img.stride.1), Int(img.stride.2)]
        func fill(_ dst: inout [UInt8], _ plane: Int, rows: Int, cols: Int) {
            guard let src = planes[plane] else { return }
            dst.withUnsafeMutableBufferPointer { d in
                guard let db = d.baseAddress else { return }
                for r in 0..<rows { (db + r * cols).update(from: src + r * strides[plane], count: cols) }
            }
        }
        fill(&out.y, 0, rows: h, cols: w)
        fill(&out.u, 1, rows: out.chromaHeight, cols: out.chromaWidth)
        fill(&out.v, 2, rows: out.chromaHeight, cols: out.chromaWidth)
        return out
    }
}
