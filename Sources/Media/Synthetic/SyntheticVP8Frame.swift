import RTCWire

/// VP8-shaped frames for benchmarks and tests: real frame headers (what packetizers, receivers and the SFU
/// look at), filler for the rest. Not decodable; never sent to a decoder.
public enum SyntheticVP8Frame {
    /// A frame of `size` bytes (at least 10): a 640x360 key frame header (RFC 6386 §9.1: P=0,
    /// show_frame, start code, size) or a delta frame tag (P=1).
    public static func make(size: Int, keyframe: Bool) -> EncodedFrame {
        var bytes = [UInt8](repeating: keyframe ? 0x5A : 0xA5, count: max(10, size))
        if keyframe {
            bytes.replaceSubrange(0..<10, with: [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x80, 0x02, 0x68, 0x01])
        } else {
            bytes[0] = 0x11
        }
        return EncodedFrame(codec: .vp8, data: bytes, timestamp: 0, isKeyframe: keyframe)
    }
}
