import RTC
import RTCWire

/// The video stream of an ``RTPOutput`` as its session description announces it: the codec on
/// payload type ``RTPOutput/videoPayloadType`` and the format parameters a receiver needs.
///
/// - VP8: `VP8/90000`, no parameters (RFC 7741).
/// - H.264: `H264/90000` with `packetization-mode=1` (the output sends single NAL unit and FU-A
///   packets), `profile-level-id` from the SPS and `sprop-parameter-sets` (the SPS and PPS in
///   base64), so that ffmpeg can decode from any IDR (RFC 6184 §8.1).
/// - VP9: `VP9/90000` with `profile-id` (RFC 9628 §6).
/// - AV1: `AV1/90000` with `profile`, `level-idx` and `tier` from the sequence header (the AOM AV1
///   RTP specification §7.2).
///
/// The parameters come from a key frame as the receive path assembles it (H.264 Annex B, a VP9
/// frame, an AV1 temporal unit in the low-overhead format); those it lacks are left out.
public struct RTPOutputVideoFormat: Sendable, Equatable {
    /// The codec.
    public var codec: MediaCodec
    /// The `a=fmtp` value (nil: no fmtp line).
    public var fmtp: String?

    /// VP8, the output's format until a key frame says otherwise.
    public static let vp8 = RTPOutputVideoFormat(codec: .vp8, fmtp: nil)

    /// A format with these parameters.
    public init(codec: MediaCodec, fmtp: String?) {
        self.codec = codec
        self.fmtp = fmtp
    }

    /// The format of `codec`, its parameters read from `keyframe`; nil for Opus (not video).
    public init?(codec: MediaCodec, keyframe: UnsafeRawBufferPointer) {
        self.codec = codec
        switch codec {
        case .opus: return nil
        case .vp8: fmtp = nil
        case .h264:
            var fmtp = "packetization-mode=1"
            var profile: H264ProfileLevelID?
            H264AnnexB.forEachUnit(keyframe) { unit in
                if profile == nil, unit[0] & 0x1F == H264NALType.sps, unit.count >= 4 {
                    profile = H264ProfileLevelID(profileIDC: unit[1], constraints: unit[2], level: unit[3])
                }
            }
            if let profile { fmtp += ";profile-level-id=\(profile.text)" }
            if let sprop = H264FormatParameters.spropParameterSets(fromAnnexB: keyframe) {
                fmtp += ";sprop-parameter-sets=\(sprop)"
            }
            self.fmtp = fmtp
        case .vp9:
            fmtp = VP9FrameHeader.keyframeInfo(keyframe).map { "profile-id=\($0.profile)" }
        case .av1:
            // The av1C record: byte 1 is seq_profile (3 bits) and seq_level_idx_0 (5), byte 2's top bit seq_tier_0.
            fmtp = AV1SequenceHeader.configurationRecord(fromTemporalUnit: keyframe).flatMap { record in
                guard record.count >= 3 else { return nil }
                return "profile=\(record[1] >> 5);level-idx=\(record[1] & 0x1F);tier=\(record[2] >> 7)"
            }
        }
    }

    /// The encoding name and clock rate of `a=rtpmap`.
    public var rtpmap: String {
        switch codec {
        case .vp8: return "VP8/90000"
        case .h264: return "H264/90000"
        case .vp9: return "VP9/90000"
        case .av1: return "AV1/90000"
        case .opus: return "opus/48000/2"
        }
    }
}
