extension EncodedFrame {
    /// Whether `data`, one coded frame of `codec` as files hold it (VP8/VP9 frame, AV1 temporal
    /// unit, H.264 Annex B access unit), is a key frame by its own bitstream: VP8's frame tag, VP9's
    /// uncompressed header, an AV1 sequence header (encoders write one with each key frame), an
    /// H.264 IDR. False for audio.
    public static func isKeyframe(_ codec: MediaCodec, _ data: [UInt8]) -> Bool {
        switch codec {
        case .vp8: return VP8KeyframeInfo.isKeyframe(data)
        case .vp9: return data.withUnsafeBytes { VP9FrameHeader.keyframeInfo($0) } != nil
        case .av1: return data.withUnsafeBytes { AV1SequenceHeader.configurationRecord(fromTemporalUnit: $0) } != nil
        case .h264:
            var idr = false
            data.withUnsafeBytes { b in
                H264AnnexB.forEachUnit(b) { if !$0.isEmpty, $0[0] & 0x1F == H264NALType.idr { idr = true } }
            }
            return idr
        case .opus: return false
        }
    }

    /// The picture size of a key frame a decoder can start from, read from its own bitstream (VP8:
    /// its frame header; VP9: its uncompressed header; AV1: its sequence header; H.264: its SPS, with
    /// a PPS beside it); nil for any other frame (not ``isKeyframe``, or without what a decoder needs
    /// to start) and for audio.
    ///
    /// Recorders start a video track at such a frame, and `captureImage` keeps the frames from one on.
    public var keyframePictureSize: (width: Int, height: Int)? {
        guard isKeyframe else { return nil }
        switch codec {
        case .vp8:
            return VP8KeyframeInfo.parse(data)
        case .vp9:
            // A spatial SVC picture is a superframe: its top layer's size is the picture's.
            return data.withUnsafeBytes { VP9FrameHeader.keyPictureSize($0).map { (Int($0.width), Int($0.height)) } }
        case .av1:
            return data.withUnsafeBytes { AV1SequenceHeader.frameSize(ofTemporalUnit: $0) }
        case .h264:
            return data.withUnsafeBytes { bytes -> (width: Int, height: Int)? in
                var size: (width: Int, height: Int)?
                H264AnnexB.forEachUnit(bytes) { unit in
                    if size == nil, let sps = H264SPS.parse(unit) { size = (sps.width, sps.height) }
                }
                guard H264DecoderConfiguration.record(fromAnnexB: bytes) != nil else { return nil }
                return size
            }
        case .opus:
            return nil
        }
    }
}
