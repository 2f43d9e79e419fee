import RTCWire

/// The bodies of FLV audio and video tags (Adobe FLV 10.1, E.4.2/E.4.3), which RTMP carries as its audio
/// (type 8) and video (type 9) messages: H.264 as AVC packets, AAC as AAC packets.
enum FLVTags {
    /// The AVC sequence header (AVCPacketType 0): the AVCDecoderConfigurationRecord of a keyframe's SPS and
    /// PPS; nil when the access unit carries neither.
    static func avcSequenceHeader(keyframe: EncodedFrame, into b: inout [UInt8]) -> Bool {
        guard let record = keyframe.data.withUnsafeBytes({ H264DecoderConfiguration.record(fromAnnexB: $0) }) else {
            return false
        }
        b.append(contentsOf: [0x17, 0x00, 0, 0, 0])  // keyframe | AVC, sequence header, composition time 0
        b.append(contentsOf: record)
        return true
    }

    /// An AVC NALU packet (AVCPacketType 1): the access unit's NAL units, each after a 4-byte length;
    /// composition time 0 (the composite's encoder makes no B-frames).
    static func avcFrame(_ frame: EncodedFrame, into b: inout [UInt8]) {
        b.append(contentsOf: [frame.isKeyframe ? 0x17 : 0x27, 0x01, 0, 0, 0])
        frame.data.withUnsafeBytes { bytes in
            H264AnnexB.forEachUnitRange(bytes) { unit in
                let n = UInt32(unit.count)
                b.append(contentsOf: [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)])
                b.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[unit]))
            }
        }
    }

    /// The first byte of every AAC tag: AAC, "44 kHz", 16-bit, stereo, as FLV requires for AAC whatever
    /// the stream (the AudioSpecificConfig gives the real rate and channels).
    static let aacTagHeader: UInt8 = 0xAF

    /// The AAC sequence header (AACPacketType 0): the AudioSpecificConfig.
    static func aacSequenceHeader(_ audioSpecificConfig: [UInt8], into b: inout [UInt8]) {
        b.append(contentsOf: [aacTagHeader, 0x00])
        b.append(contentsOf: audioSpecificConfig)
    }

    /// A raw AAC frame (AACPacketType 1).
    static func aacFrame(_ frame: UnsafeRawBufferPointer, into b: inout [UInt8]) {
        b.append(contentsOf: [aacTagHeader, 0x01])
        b.append(contentsOf: frame)
    }
}
