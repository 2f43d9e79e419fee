import Testing

@testable import RTCWire

/// The codec-payload layer: one parse per packet (``RTPPayloadFormat``), the packet split, the VP8
/// munger and the rewrite it hands to the sender.
@Suite("RTP payload formats")
struct PayloadFormatTests {
    /// A VP8 key-frame header (frame tag, start code, 640×360).
    static let keyframeHeader: [UInt8] = [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x80, 0x02, 0x68, 0x01]

    func inspect(_ bytes: [UInt8], _ codec: MediaCodec = .vp8) throws(RTPPayloadError) -> RTPPayloadInfo {
        var result: Result<RTPPayloadInfo, RTPPayloadError> = .failure(.empty)
        bytes.withUnsafeBytes { raw in
            do throws(RTPPayloadError) { result = .success(try codec.inspect(raw)) } catch {
                result = .failure(error)
            }
        }
        return try result.get()
    }

    func descriptor(_ d: VP8PayloadDescriptor) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: d.encodedLength)
        let n = out.withUnsafeMutableBytes { try! d.write(into: $0) }
        return Array(out[0..<n])
    }

    @Test func vp8InspectAgreesWithTheDescriptorParserOnEveryFieldCombination() throws {
        for pid: UInt16? in [nil, 5, 300] {
            for tl0: UInt8? in [nil, 9] {
                for tid: UInt8? in [nil, 2] {
                    for start in [false, true] {
                        let d = VP8PayloadDescriptor(
                            startOfPartition: start, pictureID: pid, pictureIDIs15Bit: (pid ?? 0) > 127,
                            tl0PicIdx: tl0, tid: tid)
                        let bytes = descriptor(d) + [0x11, 0x22]
                        let info = try inspect(bytes)
                        #expect(info.headerLength == d.encodedLength)
                        #expect(info.startsFrame == start)
                        #expect(info.isKeyframe == false, "0x11 has the P bit set")
                        #expect(info.hasPictureID == (pid != nil))
                        if let pid {
                            #expect(info.pictureID == pid)
                            #expect(info.pictureIDIs15Bit == (pid > 127))
                            #expect(
                                bytes[Int(info.pictureIDOffset)] & 0x7F
                                    == UInt8(truncatingIfNeeded: pid >> (pid > 127 ? 8 : 0)))
                        }
                        #expect(info.hasTL0PicIdx == (tl0 != nil))
                        if let tl0 { #expect(bytes[Int(info.tl0PicIdxOffset)] == tl0) }
                        #expect(info.temporalLayer == tid)
                    }
                }
            }
        }
    }

    @Test func vp8KeyframeStartCarriesItsSize() throws {
        let d = VP8PayloadDescriptor(startOfPartition: true, pictureID: 1000)
        let info = try inspect(descriptor(d) + Self.keyframeHeader)
        #expect(info.isKeyframe && info.startsFrame)
        #expect(info.width == 640 && info.height == 360)
        // The same bytes in a continuation packet (S=0) are not a key frame start.
        let later = try inspect(
            descriptor(VP8PayloadDescriptor(startOfPartition: false, pictureID: 1000)) + Self.keyframeHeader)
        #expect(!later.isKeyframe)
        // A delta frame (P bit set) is not a key frame.
        var delta = Self.keyframeHeader
        delta[0] |= 1
        #expect(try !inspect(descriptor(d) + delta).isKeyframe)
    }

    @Test func vp8MalformedDescriptorsThrowAndPaddingIsNoFrame() throws {
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x90]) }  // X set, nothing after
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x90, 0x80, 0x81]) }  // 15-bit id cut
        #expect(throws: RTPPayloadError.malformedHeader) { try inspect([0x10]) }  // no VP8 byte
        let padding = try inspect([])
        #expect(!padding.startsFrame && !padding.isKeyframe)
        #expect(throws: RTPPayloadError.empty) { try inspect([], .opus) }
        let opus = try inspect([0x78, 1, 2], .opus)
        #expect(opus.headerLength == 0 && opus.isKeyframe && !opus.hasPictureID)
    }

    @Test func theSplitCoversTheFrameInBalancedChunksLikeThePacketizer() throws {
        let frame = (0..<2500).map { UInt8(truncatingIfNeeded: $0) }
        let split = VP8PayloadFormat.Split(frameLength: frame.count, maxPayloadSize: 1000, descriptorLength: 4)
        var viaSplit: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 1200)
        try frame.withUnsafeBytes { f in
            for k in 0..<split.count {
                let n = try buffer.withUnsafeMutableBytes { out in
                    try VP8PayloadFormat.writePacket(k, of: split, frame: f, pictureID: 77, into: out)
                }
                viaSplit.append(Array(buffer[0..<n]))
            }
        }
        var packetizer = VP8Packetizer()
        var viaPacketizer: [[UInt8]] = []
        _ = try frame.withUnsafeBytes { f in
            try packetizer.packetize(frame: f, maxPayloadSize: 1000, pictureID: 77) { p, _ in
                viaPacketizer.append(Array(p))
            }
        }
        #expect(split.count == 3)
        #expect(viaSplit == viaPacketizer)
        // Equal sizes but the last, a few bytes shorter (one UDP GSO run per frame).
        #expect(viaSplit.map(\.count) == [838, 838, 836])
        #expect(viaSplit.flatMap { $0.dropFirst(4) } == frame)
    }

    @Test(arguments: [1, 2, 3, 5, 7, 13, 100, 999, 1000, 1001, 2500, 9999, 65_000])
    func everySplitCoversTheFrameWithEqualChunksButTheLast(frameLength: Int) {
        for room in [1, 2, 3, 4, 7, 100, 996] {
            let split = VP8PayloadFormat.Split(frameLength: frameLength, maxPayloadSize: room + 4, descriptorLength: 4)
            let chunks = (0..<split.count).map { split.chunk($0) }
            // Contiguous, complete, none empty, none larger than the room.
            #expect(chunks.first?.lowerBound == 0 && chunks.last?.upperBound == frameLength)
            #expect(zip(chunks, chunks.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
            #expect(chunks.allSatisfy { !$0.isEmpty && $0.count <= room })
            #expect(split.count == (frameLength + room - 1) / room)
            // Sizes never grow along the frame, and differ by less than the packet count.
            #expect(zip(chunks, chunks.dropFirst()).allSatisfy { $0.count >= $1.count })
            #expect(chunks[0].count - chunks[chunks.count - 1].count < max(2, split.count))
        }
    }

    /// Two sources (simulcast layers) with unrelated picture IDs: after a switch the output continues
    /// one past the newest sent; a late packet of an older picture does not move it.
    @Test func theVP8MungerKeepsPictureIDsAndTL0PicIdxContinuousAcrossASwitch() throws {
        var munger = VP8Munger()
        func info(_ pid: UInt16, tl0: UInt8, long: Bool = true) -> RTPPayloadInfo {
            var i = RTPPayloadInfo()
            i.pictureID = pid
            i.pictureIDOffset = 2
            i.pictureIDIs15Bit = long
            i.tl0PicIdx = tl0
            i.tl0PicIdxOffset = long ? 4 : 3
            return i
        }
        #expect(munger.munge(info(0x7FFE, tl0: 254)).pictureID == 0x7FFE, "the first source passes through")
        let wrapped = munger.munge(info(0x7FFF, tl0: 255))
        #expect(wrapped.pictureID == 0x7FFF && wrapped.tl0PicIdx == 255)
        #expect(munger.munge(info(0x7FFE, tl0: 254)).pictureID == 0x7FFE, "a late packet keeps its own id")
        #expect(munger.lastPictureID == 0x7FFF && munger.lastTL0PicIdx == 255)
        // Switch to a source whose ids are far away.
        munger.switchSource(at: info(1234, tl0: 7))
        let first = munger.munge(info(1234, tl0: 7))
        #expect(first.pictureID == 0 && first.tl0PicIdx == 0, "continues after 0x7FFF and 255 (wrap)")
        #expect(munger.munge(info(1235, tl0: 8)).pictureID == 1)
        // A source with 7-bit picture IDs keeps its width.
        munger.switchSource(at: info(100, tl0: 3, long: false))
        let short = munger.munge(info(100, tl0: 3, long: false))
        #expect(short.pictureID == 2 && !short.pictureIDIs15Bit && short.tl0PicIdx == 2)
    }

    @Test func theRewriteWritesOnlyItsFieldsAndNeverPastThePayload() {
        let d = VP8PayloadDescriptor(startOfPartition: true, pictureID: 1000, tl0PicIdx: 5, tid: 1)
        var bytes = descriptor(d) + [0xAA, 0xBB]
        let info = try! inspect(bytes)
        let rewrite = RTPPayloadRewrite(
            pictureIDOffset: info.pictureIDOffset, pictureIDIs15Bit: true, pictureID: 0x1234,
            tl0PicIdxOffset: info.tl0PicIdxOffset, tl0PicIdx: 99)
        bytes.withUnsafeMutableBytes { rewrite.apply(to: $0) }
        let after = try! inspect(bytes)
        #expect(after.pictureID == 0x1234 && after.tl0PicIdx == 99 && after.temporalLayer == 1)
        #expect(bytes.suffix(2) == [0xAA, 0xBB])
        // Offsets beyond a (hostile, short) payload are ignored.
        var short: [UInt8] = [0x90, 0x80]
        short.withUnsafeMutableBytes {
            RTPPayloadRewrite(pictureIDOffset: 2, pictureIDIs15Bit: true, pictureID: 1).apply(to: $0)
        }
        #expect(short == [0x90, 0x80])
        #expect(RTPPayloadRewrite.none.isEmpty)
    }
}
