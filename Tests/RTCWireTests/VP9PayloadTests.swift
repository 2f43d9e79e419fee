import RTCWire
import Testing

/// The VP9 payload descriptor (RFC 9628), on hand-built descriptors (libvpx frames: VP9RecordingTests).
@Suite struct VP9PayloadTests {
    private func inspect(_ bytes: [UInt8]) throws -> RTPPayloadInfo {
        try bytes.withUnsafeBytes { b throws(RTPPayloadError) in try VP9PayloadFormat.inspect(b) }
    }

    @Test func nonFlexibleKeyFrameWithLayersAndScalabilityStructure() throws {
        // I, L, B, E, V: 15-bit picture ID 0x1234, TID 0 SID 0, TL0PICIDX 7, SS with one 640x360 layer.
        let bytes: [UInt8] = [
            0x80 | 0x20 | 0x08 | 0x04 | 0x02, 0x80 | 0x12, 0x34, 0x00, 0x07, 0x10, 0x02, 0x80, 0x01, 0x68, 0xAA,
        ]
        let info = try inspect(bytes)
        #expect(info.startsFrame && info.isKeyframe)
        #expect(info.pictureID == 0x1234 && info.pictureIDIs15Bit && info.pictureIDOffset == 1)
        #expect(info.temporalLayer == 0)
        #expect(info.tl0PicIdx == 7 && info.tl0PicIdxOffset == 4)
        #expect(info.width == 640 && info.height == 360)
        #expect(info.headerLength == 10)
    }

    @Test func flexibleInterFrameSkipsItsReferenceDifferences() throws {
        // I (7-bit id 5), P, F, B: two P_DIFF bytes (N set on the first).
        let info = try inspect([0x80 | 0x40 | 0x10 | 0x08, 0x05, 0x03, 0x02, 0xBB])
        #expect(info.startsFrame && !info.isKeyframe)
        #expect(info.pictureID == 5 && !info.pictureIDIs15Bit)
        #expect(info.tl0PicIdxOffset == 0)
        #expect(info.headerLength == 4)
    }

    @Test func anUpperSpatialLayerDoesNotStartAPicture() throws {
        // I, L, B with SID 1: the second layer frame of a picture.
        let info = try inspect([0x80 | 0x20 | 0x08, 0x09, 0x02, 0x00, 0xCC])
        #expect(!info.startsFrame && !info.isKeyframe)
    }

    @Test func malformedDescriptorsThrowAndPaddingStartsNothing() {
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x80]) }  // picture ID missing
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x80, 0x81]) }  // 15-bit cut
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x20, 0x00]) }  // TL0PICIDX missing
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x50, 0x03, 0x03, 0x03, 0x03, 0x00]) }  // 4 P_DIFF
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x02, 0x10, 0x01, 0x00]) }  // SS sizes cut
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x08]) }  // no VP9 byte
        let padding = try? inspect([])
        #expect(padding?.startsFrame == false)
    }

    /// Found by the fuzzer: frame_width_minus_1 0xFFFF is a legal 65,536, which is kept as 65,535
    /// rather than wrapping to 0.
    @Test func theLargestCodedSizeDoesNotWrap() {
        // Sync code, BT.601 limited range, width-1 0xFFFF, height-1 239.
        let header: [UInt8] = [0x82, 0x49, 0x83, 0x42, 0x2F, 0xFF, 0xF0, 0x0E, 0xF0]
        let info = header.withUnsafeBytes { VP9FrameHeader.keyframeInfo($0) }
        #expect(info?.profile == 0 && info?.width == 65_535 && info?.height == 240)
    }
}
