import Testing

@testable import RTCWire

private func bytes(_ hex: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = hex.startIndex
    while i < hex.endIndex {
        let j = hex.index(i, offsetBy: 2)
        out.append(UInt8(hex[i..<j], radix: 16)!)
        i = j
    }
    return out
}

/// The readers the SFU selects scalable layers with (issue 35): the AV1 dependency descriptor and
/// VP9's layer fields, scalability structure and superframes.
@Suite("Scalable layers: AV1 dependency descriptor, VP9 SVC fields")
struct ScalableLayerTests {
    /// Dependency descriptors of Chromium's AV1 L3T3 (a traffic capture published with LiveKit's
    /// tests): a key frame's first packet with the template structure, then packets that name a
    /// template and the active decode targets, or only a template.
    static let keyWithStructure =
        "c1017280081485214eafffaaaa863cf0430c10c302afc0aaa0063c00430010c002a000a80006000040001d954926e082b04a0941b820ac1282503157f974000ca864330e222222eca8655304224230eca877530077004200ef008601df010d"

    @Test func chromiumL3T3StructureAndItsFrames() throws {
        let key = bytes(Self.keyWithStructure)
        let first = try key.withUnsafeBytes { try AV1DependencyDescriptor.parse($0, structure: nil) }
        let structure = try #require(first.structure)
        #expect(first.startOfFrame && first.endOfFrame)
        #expect(first.frameNumber == 0x0172)
        #expect(structure.maxSpatialID == 2 && structure.maxTemporalID == 2)
        #expect(structure.decodeTargetCount == 9)
        // Decode target 3s + t reaches spatial layer s at temporal layer t.
        #expect(structure.decodeTargetSpatialID == [0, 0, 0, 1, 1, 1, 2, 2, 2])
        #expect(structure.decodeTargetTemporalID == [0, 1, 2, 0, 1, 2, 0, 1, 2])
        #expect(first.spatialID == 0 && first.temporalID == 0)
        #expect(first.activeDecodeTargets == 0x1FF)
        // A key frame: every decode target may start at it.
        #expect((0..<9).allSatisfy { first.indication($0) == .switch })
        #expect(structure.renderWidth.count == 3)

        // The next picture's frames: each names its layers through a template.
        var layers: [[UInt8]] = []
        for hex in ["86017340fc", "46017340fc", "c3017540fc", "88017640fc", "48017640fc", "c2017840fc"] {
            let d = try bytes(hex).withUnsafeBytes { try AV1DependencyDescriptor.parse($0, structure: structure) }
            #expect(d.structure == nil)
            #expect(d.activeDecodeTargets == 0b000_111_111, "\(hex): two spatial layers active")
            layers.append([d.spatialID, d.temporalID, d.startOfFrame ? 1 : 0, d.endOfFrame ? 1 : 0])
        }
        // Six packets, three frames in two pictures: S0 and S1 of one picture (two packets each)...
        #expect(layers.map { $0[0] } == layers.map { $0[0] })
        #expect(layers.allSatisfy { $0[0] <= 1 }, "\(layers)")
        for hex in ["860173", "460173", "8b0174", "0b0174", "c30175"] {
            let d = try bytes(hex).withUnsafeBytes { try AV1DependencyDescriptor.parse($0, structure: structure) }
            #expect(d.activeDecodeTargets == 0x1FF)
            #expect(d.spatialID <= 2 && d.temporalID <= 2)
        }
    }

    @Test func badDescriptorsThrow() throws {
        let structure = try bytes(Self.keyWithStructure).withUnsafeBytes {
            try #require(try AV1DependencyDescriptor.parse($0, structure: nil).structure)
        }
        #expect(throws: AV1DependencyDescriptorError.truncated) {
            try ([0x80, 0x01] as [UInt8]).withUnsafeBytes { try AV1DependencyDescriptor.parse($0, structure: structure) }
        }
        #expect(throws: AV1DependencyDescriptorError.unknownTemplate) {
            try ([0x80, 0x01, 0x02] as [UInt8]).withUnsafeBytes { try AV1DependencyDescriptor.parse($0, structure: nil) }
        }
        // A template ID past the structure's templates.
        #expect(throws: AV1DependencyDescriptorError.unknownTemplate) {
            try ([0xBF, 0x01, 0x02] as [UInt8]).withUnsafeBytes { try AV1DependencyDescriptor.parse($0, structure: structure) }
        }
        // The structure cut short anywhere throws, never traps.
        let key = bytes(Self.keyWithStructure)
        for n in 4..<key.count - 1 {
            _ = try? Array(key[..<n]).withUnsafeBytes { try AV1DependencyDescriptor.parse($0, structure: nil) }
        }
    }

    @Test func vp9LayerFieldsAndScalabilityStructure() throws {
        // I, L, B, V; 15-bit picture ID; TID 1, U, SID 0; TL0PICIDX; SS of two layers with sizes.
        let payload: [UInt8] = [
            0xAA, 0x80, 0x05, 0x30, 0x07, 0x30, 0x01, 0x40, 0x00, 0xB4, 0x02, 0x80, 0x01, 0x68, 0x99,
        ]
        let info = try payload.withUnsafeBytes { try VP9PayloadFormat.inspect($0) }
        #expect(info.hasLayerIndices && info.spatialLayer == 0 && info.temporalLayer == 1)
        #expect(info.switchingUpPoint && info.beginsLayerFrame && !info.endsLayerFrame)
        #expect(!info.interPicturePredicted && info.isKeyframe)
        #expect(info.spatialLayerCount == 2)
        #expect(info.width == 640 && info.height == 360)
        var sizes: [[Int]] = []
        let count = payload.withUnsafeBytes { raw in
            VP9PayloadFormat.forEachLayerSize(raw) { sizes.append([$0, Int($1), Int($2)]) }
        }
        #expect(count == 2 && sizes == [[0, 320, 180], [1, 640, 360]])
        // SID 1, E, P, no structure: not a picture start.
        let upper: [UInt8] = [0xE4, 0x80, 0x05, 0x02, 0x07, 0x99]
        let u = try upper.withUnsafeBytes { try VP9PayloadFormat.inspect($0) }
        #expect(u.spatialLayer == 1 && u.endsLayerFrame && !u.startsFrame && u.interPicturePredicted)
        #expect(upper.withUnsafeBytes { VP9PayloadFormat.forEachLayerSize($0) { _, _, _ in } } == 0)
    }

    @Test func superframeKeyPictureTakesItsTopLayersSize() {
        // Key frame (profile 0) of 320×180: marker 10, profile 00, show_existing 0, KEY_FRAME,
        // show_frame 1, error_res 0, sync code, color space 0 and range 0, 319 and 179.
        var k = BitWriterForTest()
        for (value, n) in [(2, 2), (0, 2), (0, 1), (0, 1), (1, 1), (0, 1), (0x49, 8), (0x83, 8), (0x42, 8)] as [(UInt32, Int)] {
            k.put(value, n)
        }
        for (value, n) in [(0, 3), (0, 1), (319, 16), (179, 16), (0, 8)] as [(UInt32, Int)] { k.put(value, n) }
        let key = k.bytes
        // An inter frame coding 640×360 explicitly: NON_KEY_FRAME, show_frame 1, error_res 0;
        // reset_frame_context; refresh flags; three refs and sign biases; no found_ref; 639 and 359.
        var w = BitWriterForTest()
        for (value, n) in [(2, 2), (0, 2), (0, 1), (1, 1), (1, 1), (0, 1), (0, 2), (0xFF, 8), (0, 12), (0, 3)]
            as [(UInt32, Int)]
        {
            w.put(value, n)
        }
        for (value, n) in [(639, 16), (359, 16), (0, 8)] as [(UInt32, Int)] { w.put(value, n) }
        let inter = w.bytes
        // Annex B index: marker 110, four-byte sizes (11), two frames (001), sizes little-endian, marker.
        let marker: UInt8 = 0xC0 | 3 << 3 | 1
        let sizes: [UInt8] = [UInt8(key.count), 0, 0, 0, UInt8(inter.count), 0, 0, 0]
        let superframe = key + inter + [marker] + sizes + [marker]
        let size = superframe.withUnsafeBytes { VP9FrameHeader.keyPictureSize($0) }
        #expect(size?.width == 640 && size?.height == 360)
        let alone = key.withUnsafeBytes { VP9FrameHeader.keyPictureSize($0) }
        #expect(alone?.width == 320 && alone?.height == 180)
        var frames: [Int] = []
        superframe.withUnsafeBytes { VP9FrameHeader.forEachFrame($0) { frames.append($0.count) } }
        #expect(frames == [key.count, inter.count])
    }
}

/// MSB-first bit packing for building headers in tests.
struct BitWriterForTest {
    var bytes: [UInt8] = []
    var bit = 0
    mutating func put(_ value: UInt32, _ n: Int) {
        for k in stride(from: n - 1, through: 0, by: -1) {
            if bit % 8 == 0 { bytes.append(0) }
            if (value >> UInt32(k)) & 1 == 1 { bytes[bytes.count - 1] |= 0x80 >> UInt8(bit % 8) }
            bit += 1
        }
    }
}
