internal import CX264
public import RTCWire

/// H.264 encoder (libx264) configured for real-time sending: constrained baseline (no B-frames, no
/// CABAC), the `zerolatency` tune (no lookahead, one output frame per input frame), VBV-capped
/// average bitrate, and SPS/PPS repeated before every IDR so a receiver can start at any keyframe.
///
/// Each ``encode(i420:)`` returns one access unit in Annex B (every NAL unit after a 4-byte start
/// code), which `H264PayloadFormat.packetize` splits into single-NAL and FU-A packets
/// (packetization mode 1).
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class H264Encoder: VideoEncoder, @unchecked Sendable {
    public var codec: MediaCodec { .h264 }
    /// Frame width in pixels.
    public var width: Int { state.width }
    /// Frame height in pixels.
    public var height: Int { state.height }
    /// Frames per second; frame `n` gets RTP timestamp `n × 90000 / fps`.
    public var fps: Int { state.fps }
    /// The target bitrate the encoder runs at, bits per second.
    public var targetBitrate: Int { state.targetBitrate }
    private var state: RealtimeEncoderState
    private let encoder: OpaquePointer
    /// The parameters the encoder was opened with (kept to change the rate with `x264_encoder_reconfig`).
    private var param = x264_param_t()
    /// The input picture: its planes point at the caller's picture during ``encode(i420:)`` (libx264
    /// copies them into its own frame), so no buffer of ours is allocated or copied per frame.
    private var picture = x264_picture_t()

    /// The profile-level-id this encoder's streams fit: constrained baseline, level 3.1 (the value
    /// offered in SDP for H.264 that Understudy sends).
    public static let profileLevelID = "42e01f"

    /// Creates an encoder.
    /// - Parameters:
    ///   - bitrate: target bits per second (average; the VBV buffer holds half a second of it).
    ///   - keyframeInterval: at most this many frames between IDRs.
    ///   - preset: a libx264 speed preset (`ultrafast` … `placebo`).
    /// - Throws: ``MediaError/invalidArgument(_:)`` for a size, rate or preset libx264 cannot take,
    ///   ``MediaError/x264(function:detail:)`` when the encoder does not open.
    public init(
        width: Int, height: Int, fps: Int = 30, bitrate: Int = 600_000, keyframeInterval: Int = 60,
        preset: String = "veryfast", threads: Int = 1
    ) throws {
        state = try RealtimeEncoderState(
            codec: .h264, width: width, height: height, fps: fps, bitrate: bitrate, keyframeInterval: keyframeInterval)
        var p = x264_param_t()
        guard x264_param_default_preset(&p, preset, "zerolatency") == 0 else {
            throw MediaError.invalidArgument("x264 preset '\(preset)'")
        }
        p.i_log_level = X264_LOG_ERROR
        p.i_threads = Int32(max(1, threads))
        p.i_width = Int32(width)
        p.i_height = Int32(height)
        p.i_csp = X264_CSP_I420
        p.i_fps_num = UInt32(fps)
        p.i_fps_den = 1
        p.i_timebase_num = 1
        p.i_timebase_den = UInt32(fps)
        p.b_vfr_input = 0
        p.i_keyint_max = Int32(keyframeInterval)
        p.i_keyint_min = 1
        // IDRs at the interval and on request only: a scene cut (the test pattern's sync flash)
        // would otherwise cost a keyframe's bytes mid-interval.
        p.i_scenecut_threshold = 0
        p.b_intra_refresh = 0
        p.i_bframe = 0
        p.b_repeat_headers = 1
        p.b_annexb = 1
        p.b_aud = 0
        // Level 3.1 (what 42e01f announces) covers up to 1280x720 at 30 fps; larger pictures let
        // libx264 pick the level.
        p.i_level_idc = width * height <= 1280 * 720 && fps <= 30 ? 31 : -1
        p.rc.i_rc_method = X264_RC_ABR
        Self.setRate(&p, bitrate: bitrate)
        guard x264_param_apply_profile(&p, "baseline") == 0 else {
            throw MediaError.x264(function: "x264_param_apply_profile", detail: "baseline refused")
        }
        guard let h = ua_x264_encoder_open(&p) else {
            throw MediaError.x264(
                function: "x264_encoder_open", detail: "cannot open a \(width)x\(height) \(fps) fps encoder")
        }
        encoder = h
        param = p
        x264_picture_init(&picture)
        picture.img.i_csp = X264_CSP_I420
        picture.img.i_plane = 3
    }

    deinit { x264_encoder_close(encoder) }

    /// Average rate with a VBV buffer of half a second, so a burst stays within what a real-time
    /// link drains between keyframes.
    private static func setRate(_ p: inout x264_param_t, bitrate: Int) {
        let kbps = Int32(clamping: max(1, bitrate / 1000))
        p.rc.i_bitrate = kbps
        p.rc.i_vbv_max_bitrate = kbps
        p.rc.i_vbv_buffer_size = max(1, kbps / 2)
    }

    /// Changes the rate-control target (`x264_encoder_reconfig`) for the frames encoded from now on:
    /// the way a live encoder follows a bandwidth estimate (see ``EncoderRateThrottle``).
    public func setTargetBitrate(_ bitrate: Int) throws {
        try state.checkBitrate(bitrate)
        var p = param
        Self.setRate(&p, bitrate: bitrate)
        guard x264_encoder_reconfig(encoder, &p) == 0 else {
            throw MediaError.x264(function: "x264_encoder_reconfig", detail: "bitrate \(bitrate) refused")
        }
        param = p
        state.setTargetBitrate(bitrate)
    }

    /// Makes the next encoded frame an IDR (e.g. after a PLI).
    public func forceKeyframe() { state.forceKeyframe() }

    /// Encodes one picture into one Annex B access unit (SPS and PPS lead every IDR), stamped with a
    /// 90 kHz timestamp from the frame counter.
    public func encode(i420 source: I420Image) throws -> [EncodedFrame] {
        let (pts, keyframe) = try state.begin(source)
        picture.i_type = keyframe ? X264_TYPE_IDR : X264_TYPE_AUTO
        picture.i_pts = pts
        var nals: UnsafeMutablePointer<x264_nal_t>? = nil
        var count: Int32 = 0
        var output = x264_picture_t()
        // The planes are lent for the call only: libx264 copies them into its own frame.
        let lent = source.withPlanes { p -> Int32 in
            picture.img.plane.0 = UnsafeMutablePointer(mutating: p.y)
            picture.img.plane.1 = UnsafeMutablePointer(mutating: p.u)
            picture.img.plane.2 = UnsafeMutablePointer(mutating: p.v)
            picture.img.i_stride.0 = Int32(p.strideY)
            picture.img.i_stride.1 = Int32(p.strideU)
            picture.img.i_stride.2 = Int32(p.strideV)
            defer { (picture.img.plane.0, picture.img.plane.1, picture.img.plane.2) = (nil, nil, nil) }
            return x264_encoder_encode(encoder, &nals, &count, &picture, &output)
        }
        // begin(_:) checked the picture is consistent, so its planes were lent.
        guard let size = lent else { throw MediaError.invalidArgument("picture with short planes") }
        guard size >= 0 else {
            throw MediaError.x264(function: "x264_encoder_encode", detail: "frame \(pts) failed")
        }
        // zerolatency: no lookahead, so every picture comes out at once (size 0 only if none did).
        guard size > 0, let nals, count > 0, let first = nals[0].p_payload else { return [] }
        // libx264 writes one call's NAL units back to back: the access unit is one copy.
        let bytes = Array(UnsafeBufferPointer(start: first, count: Int(size)))
        return [state.frame(bytes, pts: output.i_pts, isKeyframe: output.b_keyframe != 0)]
    }
}
