import Testing

@testable import RTCWire

/// Builds an RTP packet whose extension block `elements` appends.
private func packet(
    twoByte: Bool = false, payload: [UInt8] = [0xAA, 0xBB],
    _ elements: (inout RTPExtensionBlockWriter) throws(RTPError) -> Void
) throws -> [UInt8] {
    var buf = [UInt8](repeating: 0, count: 1500)
    let end = try buf.withUnsafeMutableBytes { raw -> Int in
        _ = try RTPHeaderWriter.writeFixedHeader(
            into: raw, marker: true, payloadType: 96, sequenceNumber: 0x1234, timestamp: 0xDEAD_BEEF,
            ssrc: 0x0102_0304)
        var block = try RTPExtensionBlockWriter(buffer: raw, at: 12, twoByte: twoByte)
        try elements(&block)
        var at = try block.finish()
        for b in payload {
            raw[at] = b
            at += 1
        }
        return at
    }
    return Array(buf[0..<end])
}

private func parse(_ bytes: [UInt8]) throws(RTPError) -> RTPHeader {
    do {
        return try bytes.withUnsafeBytes { raw in try RTPHeader.parse(raw) }
    } catch let e as RTPError {
        throw e
    } catch {
        fatalError("unreachable")
    }
}

private func rtpError(_ bytes: [UInt8]) -> RTPError? {
    do {
        _ = try parse(bytes)
        return nil
    } catch {
        return error
    }
}

@Suite struct RTPExtensionTests {
    @Test func oneByteFormDecodesEveryExtension() throws {
        let bytes = try packet { (block) throws(RTPError) in
            try block.appendIdentifier(id: 1, "0")
            try block.appendIdentifier(id: 2, "hi")
            try block.appendAbsSendTime(id: 3, 0xAB_CDEF)
            try block.appendAudioLevel(id: 4, RTPAudioLevel(voiceActivity: true, level: 42))
            try block.appendTransportSequenceNumber(id: 5, 0xBEEF)
        }
        try bytes.withUnsafeBytes { raw in
            let h = try RTPHeader.parse(raw)
            #expect(h.extensionProfile == 0xBEDE)
            #expect(h.payloadLength == 2)
            #expect(raw[h.payloadOffset] == 0xAA)
            let mid = try #require(h.extensionElement(id: 1, in: raw))
            #expect(RTPExtensions.identifier(raw, mid) == "0")
            #expect(RTPExtensions.identifier(raw, mid, equals: "0"))
            #expect(!RTPExtensions.identifier(raw, mid, equals: "01"))
            let rid = try #require(h.extensionElement(id: 2, in: raw))
            #expect(RTPExtensions.identifier(raw, rid) == "hi")
            let abs = try #require(h.extensionElement(id: 3, in: raw))
            #expect(RTPExtensions.absSendTime(raw, abs) == 0xAB_CDEF)
            let level = try #require(h.extensionElement(id: 4, in: raw))
            #expect(RTPExtensions.audioLevel(raw, level) == RTPAudioLevel(voiceActivity: true, level: 42))
            let twcc = try #require(h.extensionElement(id: 5, in: raw))
            #expect(RTPExtensions.transportSequenceNumber(raw, twcc) == 0xBEEF)
            #expect(h.extensionElement(id: 6, in: raw) == nil)
            // Wrong element for a decoder: sizes are checked.
            #expect(RTPExtensions.transportSequenceNumber(raw, abs) == nil)
            #expect(RTPExtensions.absSendTime(raw, twcc) == nil)
        }
    }

    @Test func twoByteFormCarriesIdsAbove14AndLongData() throws {
        // Id 20 needs the two-byte (0x1000) form; a 20-byte RID does too.
        let longRID = "abcdefghij0123456789"
        let bytes = try packet(twoByte: true) { (block) throws(RTPError) in
            try block.appendIdentifier(id: 20, longRID)
            try block.appendTransportSequenceNumber(id: 3, 7)
            try block.appendAudioLevel(id: 200, RTPAudioLevel(voiceActivity: false, level: 127))
        }
        try bytes.withUnsafeBytes { raw in
            let h = try RTPHeader.parse(raw)
            #expect(h.extensionProfile == 0x1000)
            let rid = try #require(h.extensionElement(id: 20, in: raw))
            #expect(RTPExtensions.identifier(raw, rid) == longRID)
            let seq = try #require(h.extensionElement(id: 3, in: raw))
            #expect(RTPExtensions.transportSequenceNumber(raw, seq) == 7)
            let level = try #require(h.extensionElement(id: 200, in: raw))
            #expect(
                RTPExtensions.audioLevel(raw, level) == RTPAudioLevel(voiceActivity: false, level: 127))
        }
    }

    @Test(arguments: [false, true])
    func blockWriterRoundTrips(twoByte: Bool) throws {
        var buf = [UInt8](repeating: 0xFF, count: 100)
        let end = try buf.withUnsafeMutableBytes { raw -> Int in
            _ = try RTPHeaderWriter.writeFixedHeader(
                into: raw, marker: false, payloadType: 111, sequenceNumber: 1, timestamp: 2, ssrc: 3)
            var ext = try RTPExtensionBlockWriter(buffer: raw, at: 12, twoByte: twoByte)
            try ext.appendIdentifier(id: 1, "audio")
            try ext.appendAudioLevel(id: 2, RTPAudioLevel(voiceActivity: true, level: 3))
            try ext.appendAbsSendTime(id: 3, 0x12_3456)
            try ext.appendTransportSequenceNumber(id: 4, 65535)
            return try ext.finish()
        }
        #expect((end - 12) % 4 == 0)
        buf[end] = 0x55  // one payload byte
        let bytes = Array(buf[0...end])
        try bytes.withUnsafeBytes { raw in
            let h = try RTPHeader.parse(raw)
            #expect(h.extensionProfile == (twoByte ? 0x1000 : 0xBEDE))
            #expect(h.payloadOffset == end)
            #expect(h.payloadLength == 1)
            #expect(
                RTPExtensions.identifier(raw, try #require(h.extensionElement(id: 1, in: raw))) == "audio")
            #expect(
                RTPExtensions.audioLevel(raw, try #require(h.extensionElement(id: 2, in: raw)))
                    == RTPAudioLevel(voiceActivity: true, level: 3))
            #expect(
                RTPExtensions.absSendTime(raw, try #require(h.extensionElement(id: 3, in: raw)))
                    == 0x12_3456)
            #expect(
                RTPExtensions.transportSequenceNumber(raw, try #require(h.extensionElement(id: 4, in: raw)))
                    == 65535)
        }
    }

    @Test func blockWriterRejectsOneByteIdOutOfRangeAndOverflow() throws {
        var buf = [UInt8](repeating: 0, count: 20)
        buf.withUnsafeMutableBytes { raw in
            #expect(throws: RTPError.bufferTooSmall) {
                var ext = try RTPExtensionBlockWriter(buffer: raw, at: 12)
                try ext.appendTransportSequenceNumber(id: 15, 1)
            }
            #expect(throws: RTPError.bufferTooSmall) {
                var ext = try RTPExtensionBlockWriter(buffer: raw, at: 12)
                try ext.appendIdentifier(id: 1, "too-long-for-eight-bytes")
            }
        }
    }

    @Test func identifierValidation() throws {
        let bytes: [UInt8] = [0x61, 0x20, 0x62, 0x80, 0x41]
        bytes.withUnsafeBytes { raw in
            #expect(RTPExtensions.identifier(raw, 0..<1) == "a")
            #expect(RTPExtensions.identifier(raw, 0..<3) == nil)  // space is not allowed
            #expect(RTPExtensions.identifier(raw, 3..<5) == nil)  // non-ASCII
            #expect(RTPExtensions.identifier(raw, 2..<2) == nil)  // empty
            #expect(RTPExtensions.identifier(raw, 4..<9) == nil)  // out of bounds
        }
    }

    @Test func absSendTimeConversions() {
        // 1.5 s after an NTP epoch second that is a multiple of 64: 1.5 * 2^18 = 393216.
        let ntp: UInt64 = (64 * 1000 + 1) << 32 | 0x8000_0000
        #expect(RTPExtensions.absSendTime(fromNTP: ntp) == 393_216)
        #expect(RTPExtensions.microseconds(fromAbsSendTime: 393_216) == 1_500_000)
        #expect(RTPExtensions.absSendTime(fromMicroseconds: 1_500_000) == 393_216)
        #expect(RTPExtensions.absSendTime(fromMicroseconds: 65_500_000) == 393_216)  // wraps at 64 s
        #expect(RTPExtensions.ntpTimestamp(fromAbsSendTime: 393_216) == (1 << 32 | 0x8000_0000))
        #expect(
            RTPExtensions.absSendTime(fromNTP: RTPExtensions.ntpTimestamp(fromAbsSendTime: 0xFF_FFFF))
                == 0xFF_FFFF)
    }

    @Test func audioLevelClampsAndSetsVBit() throws {
        var buf = [UInt8](repeating: 0, count: 1)
        let n = try buf.withUnsafeMutableBytes { raw in
            try RTPExtensions.writeAudioLevel(
                RTPAudioLevel(voiceActivity: true, level: 200), into: raw, at: 0)
        }
        #expect(n == 1)
        #expect(buf[0] == 0x80 | 127)
    }
}

@Suite struct RTPMalformedTests {
    /// A valid 12-byte header to corrupt.
    let base: [UInt8] = [0x80, 0x60, 0x00, 0x01, 0, 0, 0, 1, 0, 0, 0, 2]

    @Test func truncated() {
        for n in 0..<12 { #expect(rtpError(Array(base.prefix(n))) == .tooShort(n)) }
        #expect(rtpError(base) == nil)
    }

    @Test func badVersion() {
        var b = base
        b[0] = 0x40
        #expect(rtpError(b) == .badVersion(1))
        b[0] = 0x00
        #expect(rtpError(b) == .badVersion(0))
    }

    @Test func csrcOverrun() {
        var b = base + [0, 0, 0, 9]  // room for one CSRC, claim 15
        b[0] = 0x8F
        #expect(rtpError(b) == .csrcOverrun)
        b[0] = 0x81
        #expect(rtpError(b) == nil)
    }

    @Test func extensionOverrun() {
        var b = base
        b[0] = 0x90
        #expect(rtpError(b) == .extensionOverrun)  // no room for the extension header
        b += [0xBE, 0xDE, 0x00, 0x02, 0x10, 0xFF, 0, 0]  // claims 8 bytes, has 4
        #expect(rtpError(b) == .extensionOverrun)
        b += [0, 0, 0, 0]
        #expect(rtpError(b) == nil)
    }

    @Test func paddingLongerThanPacket() {
        var b = base + [1, 2, 3, 200]
        b[0] = 0xA0
        #expect(rtpError(b) == .badPadding)
        b[b.count - 1] = 0
        #expect(rtpError(b) == .badPadding)  // zero padding count is invalid
        b[b.count - 1] = 4
        let h = try? parse(b)
        #expect(h?.payloadLength == 0)
        #expect(h?.paddingLength == 4)
    }

    @Test func malformedExtensionElementsAreNotFound() throws {
        // One-byte form: element 1 claims 16 bytes inside a 4-byte block.
        var b = base + [0xBE, 0xDE, 0x00, 0x01, 0x1F, 0x00, 0x00, 0x00, 0x99]
        b[0] = 0x90
        try b.withUnsafeBytes { raw in
            let h = try RTPHeader.parse(raw)
            #expect(h.extensionElement(id: 1, in: raw) == nil)
        }
    }
}
