extension MediaCodec {
    /// The video codecs, in the order the room protocol lists them (`videoCodecs`, `roomVideoCodecs`).
    public static let videoCodecs: [MediaCodec] = [.vp8, .h264, .vp9, .av1]

    /// The video codecs named in a `videoCodecs` list of the room protocol (names as ``rawValue``,
    /// any case), in ``videoCodecs`` order, without repeats. Names of other codecs (a browser's
    /// capability list may hold `h265`, `red`, `rtx`) are left out: a receiver may know more codecs
    /// than this build.
    public static func videoCodecs(named names: some Sequence<String>) -> [MediaCodec] {
        let wanted = Set(names.lazy.compactMap { MediaCodec(rawValue: $0.lowercased()) })
        return videoCodecs.filter(wanted.contains)
    }
}

/// What a publisher sends its video in: one codec, or `auto`, the codec the room's receivers all
/// accept (the server's `roomVideoCodecs`, docs/protocol.md "Video codecs a room accepts").
public enum VideoCodecChoice: Sendable, Hashable, CustomStringConvertible {
    /// Always this codec, whatever the room takes (a receiver that cannot take it is refused).
    case fixed(MediaCodec)
    /// The first of ``autoPreference`` the room accepts; VP8 when it accepts none of them.
    case auto

    /// The preference of `auto`: H.264 first (what Safari, iOS and Android decode in hardware, and
    /// what a recorder keeps in MP4), then VP8 (every WebRTC receiver's baseline), then VP9 and AV1,
    /// whose encoders cost several times more CPU per frame.
    public static let autoPreference: [MediaCodec] = [.h264, .vp8, .vp9, .av1]

    /// The option values, as help and errors list them.
    public static let optionValues = "auto, vp8, h264, vp9 or av1"

    /// Parses a `--video-codec` value (any case; `h.264` for `h264`); nil means `fallback`.
    /// Returns nil for any other value (callers name the option in their error: "'x' is not
    /// auto, vp8, h264, vp9 or av1").
    public static func parse(_ value: String?, fallback: VideoCodecChoice = .fixed(.vp8)) -> VideoCodecChoice? {
        switch value?.lowercased() {
        case nil: return fallback
        case "auto": return .auto
        case "vp8": return .fixed(.vp8)
        case "h264", "h.264": return .fixed(.h264)
        case "vp9": return .fixed(.vp9)
        case "av1": return .fixed(.av1)
        default: return nil
        }
    }

    /// The codec to publish in a room that accepts `roomVideoCodecs` (fixed: that codec).
    public func resolve(roomVideoCodecs: [MediaCodec]) -> MediaCodec {
        switch self {
        case .fixed(let codec): return codec
        case .auto: return Self.autoPreference.first(where: roomVideoCodecs.contains) ?? .vp8
        }
    }

    /// The option value: `auto` or the codec's name.
    public var description: String {
        switch self {
        case .auto: return "auto"
        case .fixed(let codec): return codec.rawValue
        }
    }
}
