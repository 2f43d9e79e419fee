extension EncodedFrame {
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
