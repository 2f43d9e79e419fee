public import RTCWire

/// A real-time video encoder: pictures in, encoded frames of one ``codec`` out, with a rate that
/// follows a bandwidth estimate and keyframes on request: ``VP8Encoder`` and ``VP9Encoder``
/// (libvpx), ``H264Encoder`` (libx264) and ``AV1Encoder`` (libaom);
/// ``VideoEncoders/make(codec:width:height:fps:bitrate:keyframeInterval:)`` opens the one for a codec.
public protocol VideoEncoder: AnyObject {
    /// The codec of the frames ``encode(i420:)`` returns.
    var codec: MediaCodec { get }
    /// The rate-control target, bits per second.
    var targetBitrate: Int { get }
    /// Changes the rate-control target for the frames encoded from now on.
    func setTargetBitrate(_ bitrate: Int) throws
    /// Makes the next encoded frame a keyframe.
    func forceKeyframe()
    /// Encodes one picture; normally exactly one frame comes out.
    func encode(i420 picture: I420Image) throws -> [EncodedFrame]
}

/// The codecs Understudy can encode and publish (`--video-codec`), VP8 first (the default).
public enum VideoEncoders {
    /// The codecs an encoder exists for.
    public static let codecs: [MediaCodec] = [.vp8, .h264, .vp9, .av1]

    /// Opens a real-time encoder for `codec`.
    /// - Throws: ``MediaError/invalidArgument(_:)`` for a codec with no video encoder (Opus) or
    ///   parameters the encoder refuses; the library's own error when it does not open.
    public static func make(
        codec: MediaCodec, width: Int, height: Int, fps: Int, bitrate: Int, keyframeInterval: Int
    ) throws -> any VideoEncoder {
        switch codec {
        case .vp8:
            return try VP8Encoder(
                width: width, height: height, fps: fps, bitrate: bitrate, keyframeInterval: keyframeInterval,
                realtime: true, errorResilient: true)
        case .h264:
            return try H264Encoder(
                width: width, height: height, fps: fps, bitrate: bitrate, keyframeInterval: keyframeInterval)
        case .vp9:
            return try VP9Encoder(
                width: width, height: height, fps: fps, bitrate: bitrate, keyframeInterval: keyframeInterval)
        case .av1:
            return try AV1Encoder(
                width: width, height: height, fps: fps, bitrate: bitrate, keyframeInterval: keyframeInterval)
        case .opus:
            throw MediaError.invalidArgument(
                "no \(codec) video encoder (encodable: \(codecs.map(\.rawValue).joined(separator: ", ")))")
        }
    }
}
