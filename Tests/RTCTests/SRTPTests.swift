import Testing

@testable import RTC

/// Builds an RTP packet in a buffer with room for the SRTP trailer.
private func makeSRTPTestPacket(sequence: UInt16, payloadSize: Int = 160, ssrc: UInt32 = 0x1122_3344) -> (
    buffer: [UInt8], length: Int
) {
    var buffer = [UInt8](repeating: 0, count: 12 + payloadSize + SRTPSession.maxTrailerLength)
    buffer[0] = 0x80
    buffer[1] = 111
    buffer[2] = UInt8(sequence >> 8)
    buffer[3] = UInt8(sequence & 0xFF)
    let timestamp = UInt32(sequence) &* 960
    for index in 0..<4 {
        buffer[4 + index] = UInt8(truncatingIfNeeded: timestamp >> (24 - 8 * index))
        buffer[8 + index] = UInt8(truncatingIfNeeded: ssrc >> (24 - 8 * index))
    }
    for index in 0..<payloadSize {
        buffer[12 + index] = UInt8(truncatingIfNeeded: index &* 31 &+ Int(sequence))
    }
    return (buffer, 12 + payloadSize)
}

/// A receiver report (PT 201) with one report block: 32 bytes.
private func makeSRTCPTestReport() -> (buffer: [UInt8], length: Int) {
    var buffer = [UInt8](repeating: 0, count: 32 + SRTPSession.maxTrailerLength)
    let packet: [UInt8] = [0x81, 201, 0, 7, 0xAA, 0xBB, 0xCC, 0xDD, 0x11, 0x22, 0x33, 0x44]
    buffer.replaceSubrange(0..<packet.count, with: packet)
    for index in 12..<32 { buffer[index] = UInt8(index) }
    return (buffer, 32)
}

private func makeSRTPTestSessions(_ profile: SRTPProfile) throws -> (
    outbound: SRTPSession, inbound: SRTPSession
) {
    let key = (0..<profile.keyLength).map { UInt8($0 &+ 1) }
    let salt = (0..<profile.saltLength).map { UInt8(0xA0 &+ $0) }
    let material = SRTPKeyingMaterial(
        profile: profile, localKey: key, localSalt: salt, remoteKey: key, remoteSalt: salt)
    return try SRTPSession.pair(material)
}

private func protectTestPacket(_ session: SRTPSession, _ packet: inout (buffer: [UInt8], length: Int)) throws
    -> Int
{
    let capacity = packet.buffer.count
    let length = packet.length
    return try packet.buffer.withUnsafeMutableBytes { bytes in
        try session.protectRTP(bytes.baseAddress!, length: length, capacity: capacity)
    }
}

private func unprotectTestPacket(_ session: SRTPSession, _ buffer: inout [UInt8], length: Int) throws -> Int {
    try buffer.withUnsafeMutableBytes { bytes in
        try session.unprotectRTP(bytes.baseAddress!, length: length)
    }
}

@Suite struct SRTPTests {
    @Test(arguments: [SRTPProfile.aes128CMHMACSHA1_80, .aeadAES128GCM])
    func rtpRoundTrip(profile: SRTPProfile) throws {
        let (outbound, inbound) = try makeSRTPTestSessions(profile)
        for sequence: UInt16 in [1, 2, 3, 65535, 0] {
            var packet = makeSRTPTestPacket(sequence: sequence)
            let original = Array(packet.buffer[0..<packet.length])
            let protectedLength = try protectTestPacket(outbound, &packet)
            #expect(protectedLength == packet.length + (profile == .aeadAES128GCM ? 16 : 10))
            #expect(Array(packet.buffer[12..<packet.length]) != Array(original[12...]))  // payload encrypted
            let plainLength = try unprotectTestPacket(inbound, &packet.buffer, length: protectedLength)
            #expect(plainLength == packet.length)
            #expect(Array(packet.buffer[0..<plainLength]) == original)
        }
    }

    @Test(arguments: [SRTPProfile.aes128CMHMACSHA1_80, .aeadAES128GCM])
    func rtcpRoundTrip(profile: SRTPProfile) throws {
        let (outbound, inbound) = try makeSRTPTestSessions(profile)
        var packet = makeSRTCPTestReport()
        let original = Array(packet.buffer[0..<packet.length])
        let capacity = packet.buffer.count
        let protectedLength = try packet.buffer.withUnsafeMutableBytes { bytes in
            try outbound.protectRTCP(bytes.baseAddress!, length: 32, capacity: capacity)
        }
        #expect(protectedLength > 32 + 4)
        let plainLength = try packet.buffer.withUnsafeMutableBytes { bytes in
            try inbound.unprotectRTCP(bytes.baseAddress!, length: protectedLength)
        }
        #expect(plainLength == 32)
        #expect(Array(packet.buffer[0..<32]) == original)
    }

    @Test(arguments: [SRTPProfile.aes128CMHMACSHA1_80, .aeadAES128GCM])
    func flippedBitFailsAuthentication(profile: SRTPProfile) throws {
        let (outbound, inbound) = try makeSRTPTestSessions(profile)
        var packet = makeSRTPTestPacket(sequence: 10)
        let protectedLength = try protectTestPacket(outbound, &packet)
        packet.buffer[40] ^= 0x01
        #expect(throws: SRTPError.authFailed) {
            _ = try unprotectTestPacket(inbound, &packet.buffer, length: protectedLength)
        }
        #expect(inbound.authFailures == 1)

        // The RTCP path authenticates too.
        var report = makeSRTCPTestReport()
        let capacity = report.buffer.count
        let reportLength = try report.buffer.withUnsafeMutableBytes { bytes in
            try outbound.protectRTCP(bytes.baseAddress!, length: 32, capacity: capacity)
        }
        report.buffer[20] ^= 0x80
        #expect(throws: SRTPError.authFailed) {
            _ = try report.buffer.withUnsafeMutableBytes { bytes in
                try inbound.unprotectRTCP(bytes.baseAddress!, length: reportLength)
            }
        }
    }

    @Test(arguments: [SRTPProfile.aes128CMHMACSHA1_80, .aeadAES128GCM])
    func replayIsRejectedButNewSequenceIsAccepted(profile: SRTPProfile) throws {
        let (outbound, inbound) = try makeSRTPTestSessions(profile)
        var first = makeSRTPTestPacket(sequence: 100)
        let firstLength = try protectTestPacket(outbound, &first)
        let copy = first.buffer
        _ = try unprotectTestPacket(inbound, &first.buffer, length: firstLength)

        var replayed = copy
        #expect(throws: SRTPError.replayFailed) {
            _ = try unprotectTestPacket(inbound, &replayed, length: firstLength)
        }
        #expect(inbound.replayFailures == 1)

        var next = makeSRTPTestPacket(sequence: 101)
        let nextLength = try protectTestPacket(outbound, &next)
        #expect(try unprotectTestPacket(inbound, &next.buffer, length: nextLength) == next.length)

        // A retransmission (same sequence, same payload) may be protected again on the send side.
        var resent = makeSRTPTestPacket(sequence: 100)
        #expect(try protectTestPacket(outbound, &resent) == firstLength)
    }

    @Test func lateRetransmissionInsideTheWindowIsAccepted() throws {
        let (outbound, inbound) = try makeSRTPTestSessions(.aeadAES128GCM)
        var held = makeSRTPTestPacket(sequence: 1)
        let heldLength = try protectTestPacket(outbound, &held)
        for sequence: UInt16 in 2...600 {
            var packet = makeSRTPTestPacket(sequence: sequence)
            let length = try protectTestPacket(outbound, &packet)
            _ = try unprotectTestPacket(inbound, &packet.buffer, length: length)
        }
        // 599 packets later is far beyond libsrtp's default 128 window, but inside ours.
        #expect(try unprotectTestPacket(inbound, &held.buffer, length: heldLength) == held.length)
    }

    @Test(arguments: [SRTPProfile.aes128CMHMACSHA1_80, .aeadAES128GCM])
    func truncatedPacketsFailCleanly(profile: SRTPProfile) throws {
        let (outbound, inbound) = try makeSRTPTestSessions(profile)
        var packet = makeSRTPTestPacket(sequence: 7, payloadSize: 40)
        let protectedLength = try protectTestPacket(outbound, &packet)
        let pristine = packet.buffer
        for length in 0..<protectedLength {
            var copy = pristine
            #expect(throws: SRTPError.self) { _ = try unprotectTestPacket(inbound, &copy, length: length) }
            var rtcpCopy = pristine
            #expect(throws: SRTPError.self) {
                _ = try rtcpCopy.withUnsafeMutableBytes { bytes in
                    try inbound.unprotectRTCP(bytes.baseAddress!, length: length)
                }
            }
        }
        // The intact packet still verifies afterwards.
        var intact = pristine
        #expect(try unprotectTestPacket(inbound, &intact, length: protectedLength) == packet.length)
    }

    @Test func protectNeedsTrailerRoom() throws {
        let (outbound, _) = try makeSRTPTestSessions(.aeadAES128GCM)
        var buffer = [UInt8](repeating: 0, count: 200)
        buffer[0] = 0x80
        #expect(throws: SRTPError.badParameter) {
            _ = try buffer.withUnsafeMutableBytes { bytes in
                try outbound.protectRTP(bytes.baseAddress!, length: 180, capacity: 200)
            }
        }
    }

    @Test func wrongKeyLengthIsRejected() {
        #expect(throws: SRTPError.badParameter) {
            _ = try SRTPSession(
                profile: .aeadAES128GCM, key: [1, 2, 3], salt: [UInt8](repeating: 0, count: 12),
                direction: .inbound)
        }
        #expect(throws: SRTPError.badParameter) {
            _ = try SRTPSession(
                profile: .aes128CMHMACSHA1_80, key: [UInt8](repeating: 0, count: 16),
                salt: [UInt8](repeating: 0, count: 12), direction: .outbound)
        }
    }

    @Test func differentKeysDoNotInteroperate() throws {
        let (outbound, _) = try makeSRTPTestSessions(.aeadAES128GCM)
        let stranger = try SRTPSession(
            profile: .aeadAES128GCM, key: [UInt8](repeating: 9, count: 16),
            salt: [UInt8](repeating: 9, count: 12),
            direction: .inbound)
        var packet = makeSRTPTestPacket(sequence: 5)
        let length = try protectTestPacket(outbound, &packet)
        #expect(throws: SRTPError.authFailed) {
            _ = try unprotectTestPacket(stranger, &packet.buffer, length: length)
        }
    }

    @Test func benchmarkHelperReportsAPositiveCost() {
        let cost = SRTPBench.unprotectCost(profile: .aeadAES128GCM, payloadSize: 1000, count: 200)
        #expect(cost.isFinite)
        #expect(cost > 0)
        #expect(
            SRTPBench.unprotectCost(profile: .aes128CMHMACSHA1_80, payloadSize: 100, count: 50).isFinite)
    }
}
