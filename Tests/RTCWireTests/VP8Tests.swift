import Testing

@testable import RTCWire

private func parseVP8(_ bytes: [UInt8]) throws(VP8Error) -> (VP8PayloadDescriptor, Int) {
    var result: Result<(VP8PayloadDescriptor, Int), VP8Error> = .failure(.truncated)
    bytes.withUnsafeBytes { raw in
        do throws(VP8Error) {
            let (d, n) = try VP8PayloadDescriptor.parse(raw)
            result = .success((d, n))
        } catch { result = .failure(error) }
    }
    return try result.get()
}

private func vp8Error(_ bytes: [UInt8]) -> VP8Error? {
    do {
        _ = try parseVP8(bytes)
        return nil
    } catch { return error }
}

private func writeVP8(_ d: VP8PayloadDescriptor, capacity: Int = 16) throws(VP8Error) -> [UInt8] {
    var buf = [UInt8](repeating: 0xEE, count: capacity)
    var result: Result<Int, VP8Error> = .success(0)
    buf.withUnsafeMutableBytes { raw in
        do throws(VP8Error) { result = .success(try d.write(into: raw)) } catch {
            result = .failure(error)
        }
    }
    return Array(buf[0..<(try result.get())])
}

@Suite struct VP8DescriptorTests {
    @Test func minimalDescriptor() throws {
        let (d, n) = try parseVP8([0x10, 0x50, 0x42, 0x00])
        #expect(n == 1)
        #expect(d == VP8PayloadDescriptor(startOfPartition: true, pictureIDIs15Bit: false))
        #expect(!d.hasExtension)
        #expect(try writeVP8(d) == [0x10])
    }

    @Test func everyOptionalField() throws {
        // X N=1 S PID=2 | I L T K | M PictureID 0x1234 | TL0PICIDX 5 | TID 2 Y KEYIDX 3
        let bytes: [UInt8] = [0xB2, 0xF0, 0x92, 0x34, 0x05, 0xA3, 0x9D]
        let (d, n) = try parseVP8(bytes)
        #expect(n == 6)
        #expect(d.nonReference)
        #expect(d.startOfPartition)
        #expect(d.partitionIndex == 2)
        #expect(d.pictureID == 0x1234)
        #expect(d.pictureIDIs15Bit)
        #expect(d.tl0PicIdx == 5)
        #expect(d.tid == 2)
        #expect(d.layerSync)
        #expect(d.keyIdx == 3)
        #expect(d.encodedLength == 6)
        #expect(try writeVP8(d) == Array(bytes.prefix(6)))
    }

    @Test func sevenBitPictureIDAndKeyIdxOnly() throws {
        let (d, n) = try parseVP8([0x80, 0x80, 0x7F, 0x00])
        #expect(n == 3)
        #expect(d.pictureID == 0x7F)
        #expect(!d.pictureIDIs15Bit)
        #expect(try writeVP8(d) == [0x80, 0x80, 0x7F])
        // K without T: the TID and Y bits are ignored.
        let (k, m) = try parseVP8([0x80, 0x10, 0xE5, 0x00])
        #expect(m == 3)
        #expect(k.tid == nil)
        #expect(!k.layerSync)
        #expect(k.keyIdx == 5)
        #expect(try writeVP8(k) == [0x80, 0x10, 0x05])
    }

    @Test func truncatedDescriptors() {
        #expect(vp8Error([]) == .truncated)
        #expect(vp8Error([0x10]) == .truncated)  // no VP8 data after the descriptor
        #expect(vp8Error([0x80]) == .truncated)
        #expect(vp8Error([0x80, 0x80]) == .truncated)
        #expect(vp8Error([0x80, 0x80, 0x80]) == .truncated)
        #expect(vp8Error([0x80, 0x80, 0x80, 0x01]) == .truncated)
        #expect(vp8Error([0x80, 0x40]) == .truncated)
        #expect(vp8Error([0x80, 0x20]) == .truncated)
        #expect(vp8Error([0x80, 0x80, 0x80, 0x01, 0x00]) == nil)
    }

    @Test func writeValidatesFields() {
        #expect(throws: VP8Error.invalidField) {
            try writeVP8(VP8PayloadDescriptor(startOfPartition: true, pictureID: 0x8000))
        }
        #expect(throws: VP8Error.invalidField) {
            try writeVP8(VP8PayloadDescriptor(startOfPartition: true, tid: 4))
        }
        #expect(throws: VP8Error.invalidField) {
            try writeVP8(VP8PayloadDescriptor(startOfPartition: true, partitionIndex: 8))
        }
        #expect(throws: VP8Error.bufferTooSmall) {
            try writeVP8(VP8PayloadDescriptor(startOfPartition: true, pictureID: 300), capacity: 3)
        }
        // A picture id above 127 is always written in the 15-bit form.
        #expect(
            VP8PayloadDescriptor(startOfPartition: true, pictureID: 300, pictureIDIs15Bit: false)
                .encodedLength == 4)
    }

    @Test func keyframeDetection() {
        // Frame tag of a key frame (P=0) followed by the start code 9d 01 2a.
        let key: [UInt8] = [0x50, 0x42, 0x00, 0x9D, 0x01, 0x2A]
        let inter: [UInt8] = [0x31, 0x0A, 0x00]
        key.withUnsafeBytes { #expect(VP8PayloadDescriptor.isKeyframe(payloadAfterDescriptor: $0)) }
        inter.withUnsafeBytes { #expect(!VP8PayloadDescriptor.isKeyframe(payloadAfterDescriptor: $0)) }
        [UInt8]().withUnsafeBytes {
            #expect(!VP8PayloadDescriptor.isKeyframe(payloadAfterDescriptor: $0))
        }
    }
}

@Suite struct VP8PacketizerTests {
    @Test(arguments: [
        (2500, 1000, nil as UInt8?), (10, 1200, 7), (996, 1000, nil), (997, 1000, nil), (3000, 6, 1),
    ])
    func packetizeAndReassemble(frameLength: Int, maxPayload: Int, tl0: UInt8?) throws {
        let frame = (0..<frameLength).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        var packetizer = VP8Packetizer()
        var reassembled: [UInt8] = []
        var descriptors: [VP8PayloadDescriptor] = []
        var lastFlags: [Bool] = []
        var sizes: [Int] = []
        let count = try frame.withUnsafeBytes { raw in
            try packetizer.packetize(
                frame: raw, maxPayloadSize: maxPayload, pictureID: 0x7FFF, tl0PicIdx: tl0
            ) {
                payload, isLast in
                sizes.append(payload.count)
                lastFlags.append(isLast)
                if let (d, n) = try? VP8PayloadDescriptor.parse(payload) {
                    descriptors.append(d)
                    reassembled.append(contentsOf: payload[n...])
                }
            }
        }
        let descriptorLength = tl0 == nil ? 4 : 5
        let expectedCount =
            (frameLength + maxPayload - descriptorLength - 1) / (maxPayload - descriptorLength)
        #expect(count == expectedCount)
        #expect(descriptors.count == count)
        #expect(reassembled == frame)
        #expect(sizes.allSatisfy { $0 <= maxPayload })
        // Balanced: equal sizes but the last, fewer than `count` bytes shorter (one GSO run).
        #expect(Set(sizes.dropLast()).count <= 1)
        #expect(sizes.first! - sizes.last! < max(2, count))
        #expect(lastFlags == Array(repeating: false, count: count - 1) + [true])
        #expect(
            descriptors.map(\.startOfPartition) == [true] + Array(repeating: false, count: count - 1))
        #expect(
            descriptors.allSatisfy {
                $0.pictureID == 0x7FFF && $0.pictureIDIs15Bit && $0.tl0PicIdx == tl0
            })
        #expect(VP8Packetizer.nextPictureID(0x7FFF) == 0)
    }

    @Test func tooSmallPayloadSizeThrows() {
        var packetizer = VP8Packetizer()
        let frame: [UInt8] = [1, 2, 3]
        #expect(throws: VP8Error.payloadSizeTooSmall) {
            try frame.withUnsafeBytes { raw in
                try packetizer.packetize(frame: raw, maxPayloadSize: 4, pictureID: 1) { _, _ in }
            }
        }
    }
}
