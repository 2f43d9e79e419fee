/// The codecs Understudy sends and receives.
public enum MediaCodec: String, Sendable, Hashable {
    case opus
    case vp8
    /// H.264 (RFC 6184). Frames are Annex B access units (4-byte start codes).
    case h264
    /// VP9 (RFC 9628). Frames are VP9 frames; the layer frames of one picture are concatenated.
    case vp9
    /// AV1 (the AOM RTP payload format). Frames are temporal units in the low-overhead bitstream
    /// format (every OBU with its size), without temporal delimiters.
    case av1

    /// RTP clock rate: 48 kHz for Opus (RFC 7587), 90 kHz for video (RFC 7741, RFC 6184, RFC 9628).
    public var clockRate: UInt32 { self == .opus ? 48_000 : 90_000 }

    /// The encoding name in SDP `a=rtpmap` lines.
    public var rtpName: String {
        switch self {
        case .opus: "opus"
        case .vp8: "VP8"
        case .vp9: "VP9"
        case .h264: "H264"
        case .av1: "AV1"
        }
    }

    /// Whether a format's `a=fmtp` parameters tell one stream of this codec from another (H.264
    /// profile and packetization mode, VP9 profile), so a forwarded stream keeps them.
    public var formatParametersMatter: Bool { self == .h264 || self == .vp9 || self == .av1 }

    /// Whether this codec carries audio or video.
    public var kind: MediaKind { self == .opus ? .audio : .video }
}

/// Audio or video.
public enum MediaKind: String, Sendable, Hashable {
    case audio
    case video
}

/// One encoded frame: the unit handed between media sources, the RTP engine and recorders.
///
/// `timestamp` is in the codec's RTP clock (see ``MediaCodec/clockRate``); its origin is arbitrary
/// but monotonic within one stream.
public struct EncodedFrame: Sendable {
    /// The codec that produced `data`.
    public var codec: MediaCodec
    /// The codec bitstream of one frame (a VP8 frame, an H.264 access unit in Annex B form, or one
    /// Opus packet).
    public var data: [UInt8]
    /// Media time in RTP clock units.
    public var timestamp: UInt32
    /// True for a VP8 key frame or an H.264 IDR access unit with its parameter sets; always true for
    /// Opus.
    public var isKeyframe: Bool
    /// Frame duration in RTP clock units (0 when unknown).
    public var duration: UInt32

    /// Creates a frame.
    public init(codec: MediaCodec, data: [UInt8], timestamp: UInt32, isKeyframe: Bool, duration: UInt32 = 0) {
        self.codec = codec
        self.data = data
        self.timestamp = timestamp
        self.isKeyframe = isKeyframe
        self.duration = duration
    }
}
