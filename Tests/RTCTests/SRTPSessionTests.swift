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

@Suite struct SRTPSessionTests {
    /// An SFU's subscribe session interleaves the SSRCs of several consumers: each keeps its own
    /// rollover counter, whatever the order (the send path looks streams up per packet).
    @Test(arguments: [SRTPProfile.aes128CMHMACSHA1_80, .aeadAES128GCM])
    func interleavedSSRCsKeepTheirOwnRollover(profile: SRTPProfile) throws {
        let (outbound, inbound) = try makeSRTPTestSessions(profile)
        let audio: UInt32 = 0x0A0A_0A0A
        let video: UInt32 = 0x0B0B_0B0B
        let third: UInt32 = 0x0C0C_0C0C
        // The audio stream rolls over while the other two do not.
        let order: [(UInt32, UInt16)] = [
            (audio, 65534), (video, 100), (third, 7), (audio, 65535), (video, 101), (audio, 0), (third, 8),
            (video, 102), (audio, 1), (video, 103), (third, 9), (audio, 2),
        ]
        for (ssrc, sequence) in order {
            var packet = makeSRTPTestPacket(sequence: sequence, ssrc: ssrc)
            let original = Array(packet.buffer[0..<packet.length])
            let protectedLength = try protectTestPacket(outbound, &packet)
            let plainLength = try unprotectTestPacket(inbound, &packet.buffer, length: protectedLength)
            #expect(Array(packet.buffer[0..<plainLength]) == original, "ssrc \(ssrc) seq \(sequence)")
        }
        #expect(inbound.authFailures == 0)
    }

    /// A live stream's subscriber sees a new SSRC at every stage invite: ended ones are forgotten,
    /// or the session would stop taking new SSRCs at ``SRTPSession/maxStreams``.
    @Test func forgottenSSRCsFreeTheirPlaceUnderTheStreamLimit() throws {
        let (outbound, inbound) = try makeSRTPTestSessions(.aeadAES128GCM)
        func roundTrip(_ ssrc: UInt32, _ sequence: UInt16) throws -> Bool {
            var packet = makeSRTPTestPacket(sequence: sequence, ssrc: ssrc)
            let original = Array(packet.buffer[0..<packet.length])
            let protectedLength = try protectTestPacket(outbound, &packet)
            let plainLength = try unprotectTestPacket(inbound, &packet.buffer, length: protectedLength)
            return Array(packet.buffer[0..<plainLength]) == original
        }
        for ssrc in 1...UInt32(SRTPSession.maxStreams) { #expect(try roundTrip(ssrc, 10)) }
        #expect(outbound.streamCount == SRTPSession.maxStreams && inbound.streamCount == SRTPSession.maxStreams)
        // Full: a new SSRC is refused on both sides.
        #expect(throws: SRTPError.self) { try roundTrip(5000, 10) }
        for ssrc: UInt32 in [7, 8] {
            outbound.forget(ssrc: ssrc)
            inbound.forget(ssrc: ssrc)
        }
        outbound.forget(ssrc: 99_999)  // unknown: nothing happens
        #expect(outbound.streamCount == SRTPSession.maxStreams - 2)
        #expect(try roundTrip(5000, 10) && roundTrip(5001, 10))
        // A forgotten SSRC that comes back starts over: its old replay window is gone too.
        #expect(throws: SRTPError.self) { try roundTrip(5000, 10) }
        inbound.forget(ssrc: 5000)
        outbound.forget(ssrc: 5000)
        outbound.forget(ssrc: 9)
        inbound.forget(ssrc: 9)
        #expect(try roundTrip(5000, 10))
        // The streams still there are untouched (the lookup cache does not point at freed ones).
        #expect(try roundTrip(1, 11) && roundTrip(1024, 11))
    }

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
                try outbound.protectRTP(bytes.baseAddress!, length: 201 - SRTPSession.maxTrailerLength, capacity: 200)
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
}

/// Our SRTP against libsrtp, the reference implementation: the same keys must give byte-identical
/// packets, and each must open what the other sealed.
@Suite struct SRTPReferenceTests {
    static let profiles: [SRTPProfile] = [.aes128CMHMACSHA1_80, .aeadAES128GCM]

    /// A pseudo-random RTP packet: CSRCs, a header extension and padding appear in some.
    private static func packet(sequence: UInt16, ssrc: UInt32, seed: inout UInt64) -> [UInt8] {
        func next() -> UInt64 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return seed >> 33
        }
        let csrcCount = Int(next() % 3)
        let hasExtension = next() % 2 == 0
        let hasPadding = next() % 4 == 0
        var bytes: [UInt8] = [
            0x80 | (hasPadding ? 0x20 : 0) | (hasExtension ? 0x10 : 0) | UInt8(csrcCount), 96,
            UInt8(sequence >> 8), UInt8(truncatingIfNeeded: sequence),
        ]
        let timestamp = UInt32(truncatingIfNeeded: next())
        for shift in stride(from: 24, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: timestamp >> UInt32(shift)))
        }
        for shift in stride(from: 24, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: ssrc >> UInt32(shift)))
        }
        for _ in 0..<(csrcCount * 4) { bytes.append(UInt8(truncatingIfNeeded: next())) }
        if hasExtension {
            bytes += [0xBE, 0xDE, 0x00, 0x02]
            for _ in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: next())) }
        }
        let payloadLength = Int(next() % 1100)
        for _ in 0..<payloadLength { bytes.append(UInt8(truncatingIfNeeded: next())) }
        if hasPadding { bytes += [0, 0, 3] }
        return bytes
    }

    /// `plain` protected by our session (`a`) and by libsrtp (`b`), each in its own buffer with
    /// room for the trailer.
    private static func protectWithBoth(_ plain: [UInt8], _ ours: SRTPSession, _ reference: LibSRTPSession) throws
        -> (a: [UInt8], lengthA: Int, b: [UInt8], lengthB: Int)
    {
        var a = plain + [UInt8](repeating: 0, count: LibSRTPSession.maxTrailerLength)
        var b = a
        let lengthA = try a.withUnsafeMutableBytes {
            try ours.protectRTP($0.baseAddress!, length: plain.count, capacity: $0.count)
        }
        let lengthB = try #require(
            b.withUnsafeMutableBytes { reference.protectRTP($0.baseAddress!, length: plain.count) })
        return (a, lengthA, b, lengthB)
    }

    /// Our sessions and libsrtp's, both directions, on the same keys.
    private static func sessions(_ profile: SRTPProfile) throws -> (
        ours: SRTPSession, reference: LibSRTPSession, oursIn: SRTPSession, referenceIn: LibSRTPSession
    ) {
        let (key, salt) = keys(profile)
        return (
            try SRTPSession(profile: profile, key: key, salt: salt, direction: .outbound),
            try #require(LibSRTPSession(profile: profile, key: key, salt: salt, direction: .outbound)),
            try SRTPSession(profile: profile, key: key, salt: salt, direction: .inbound),
            try #require(LibSRTPSession(profile: profile, key: key, salt: salt, direction: .inbound))
        )
    }

    private static func keys(_ profile: SRTPProfile) -> (key: [UInt8], salt: [UInt8]) {
        (
            (0..<profile.keyLength).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 3) },
            (0..<profile.saltLength).map { UInt8(truncatingIfNeeded: $0 &* 53 &+ 7) }
        )
    }

    /// Sequence numbers with the things that break index estimation: a wrap, reordering, a
    /// retransmission and a jump.
    static let sequences: [UInt16] = [
        65_500, 65_501, 65_503, 65_502, 65_535, 0, 1, 65_534, 2, 3, 3, 900, 901, 20_000, 30_000, 45_000, 60_000,
        65_535, 0, 5,
    ]

    @Test(arguments: profiles)
    func rtpPacketsAreByteIdenticalAndOpenBothWays(profile: SRTPProfile) throws {
        let (ours, reference, oursIn, referenceIn) = try Self.sessions(profile)
        var seed: UInt64 = 42
        var opened = 0
        for (step, sequence) in Self.sequences.enumerated() {
            for ssrc: UInt32 in [0x0102_0304, 0xCAFE_F00D] {
                let plain = Self.packet(sequence: sequence, ssrc: ssrc, seed: &seed)
                var (a, lengthA, b, lengthB) = try Self.protectWithBoth(plain, ours, reference)
                #expect(lengthA == lengthB, "step \(step)")
                #expect(a[0..<lengthA] == b[0..<lengthB], "step \(step) seq \(sequence): ciphertext differs")
                // The repeated 3 is a retransmission: both receivers refuse it as a replay.
                let isReplay = step == 10
                let back = a.withUnsafeMutableBytes { try? oursIn.unprotectRTP($0.baseAddress!, length: lengthA) }
                let backRef = b.withUnsafeMutableBytes { referenceIn.unprotectRTP($0.baseAddress!, length: lengthB) }
                if isReplay {
                    #expect(back == nil && backRef == nil, "step \(step): replay accepted")
                } else {
                    #expect(back == plain.count && backRef == plain.count, "step \(step) seq \(sequence)")
                    #expect(Array(a[0..<plain.count]) == plain)
                    opened += 1
                }
            }
        }
        #expect(opened == 2 * (Self.sequences.count - 1))
        #expect(oursIn.replayFailures == 2)
    }

    /// More SSRCs than the session's recent-stream entries, in a changing order and at different
    /// rollover phases: each keeps its own index (a mixed-up stream would use another's rollover
    /// counter, and libsrtp's ciphertext and our receiver would disagree).
    @Test(arguments: profiles)
    func manyInterleavedSSRCsKeepTheirOwnRollover(profile: SRTPProfile) throws {
        let (ours, reference, oursIn, _) = try Self.sessions(profile)
        let ssrcs: [UInt32] = [0x0000_0001, 0x0102_0304, 0xCAFE_F00D, 0x7777_0000, 0xFFFF_FFFE, 0x1234_5678]
        let starts: [UInt16] = [65_520, 100, 65_530, 30_000, 65_535, 7]
        var seed: UInt64 = 7
        for step in 0..<24 {
            var order = Array(ssrcs.indices)
            order = Array(order[(step % 6)...] + order[..<(step % 6)])
            if step % 2 == 1 { order.reverse() }
            for i in order {
                let sequence = starts[i] &+ UInt16(step)
                let plain = Self.packet(sequence: sequence, ssrc: ssrcs[i], seed: &seed)
                var (a, lengthA, b, lengthB) = try Self.protectWithBoth(plain, ours, reference)
                #expect(a[0..<lengthA] == b[0..<lengthB], "step \(step) ssrc \(i): ciphertext differs")
                let back = a.withUnsafeMutableBytes { try? oursIn.unprotectRTP($0.baseAddress!, length: lengthA) }
                #expect(back == plain.count, "step \(step) ssrc \(i) seq \(sequence)")
            }
        }
    }

    @Test(arguments: profiles)
    func libsrtpPacketsOpenWithOursAndForgeriesDoNot(profile: SRTPProfile) throws {
        let (key, salt) = Self.keys(profile)
        let reference = try #require(LibSRTPSession(profile: profile, key: key, salt: salt, direction: .outbound))
        let ours = try SRTPSession(profile: profile, key: key, salt: salt, direction: .inbound)
        var seed: UInt64 = 7
        for sequence: UInt16 in [10, 11, 9, 12] {
            let plain = Self.packet(sequence: sequence, ssrc: 77, seed: &seed)
            var buffer = plain + [UInt8](repeating: 0, count: LibSRTPSession.maxTrailerLength)
            let length = try #require(
                buffer.withUnsafeMutableBytes { reference.protectRTP($0.baseAddress!, length: plain.count) })
            var forged = buffer
            forged[length - 1] ^= 0x01
            #expect(throws: SRTPError.authFailed) {
                _ = try forged.withUnsafeMutableBytes { try ours.unprotectRTP($0.baseAddress!, length: length) }
            }
            let opened = try buffer.withUnsafeMutableBytes { try ours.unprotectRTP($0.baseAddress!, length: length) }
            #expect(Array(buffer[0..<opened]) == plain)
        }
        #expect(ours.authFailures == 4)
    }

    @Test(arguments: profiles)
    func rtcpOpensBothWays(profile: SRTPProfile) throws {
        let (ours, reference, oursIn, referenceIn) = try Self.sessions(profile)
        for round in 0..<5 {
            // A sender report followed by an SDES chunk, as a compound packet.
            var plain: [UInt8] = [0x80, 200, 0x00, 0x06, 0xAA, 0xBB, 0xCC, 0xDD]
            plain += (0..<20).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ round) }
            plain += [0x81, 202, 0x00, 0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0x01, 0x02, 0x61, 0x62]
            // Ours → libsrtp.
            var a = plain + [UInt8](repeating: 0, count: LibSRTPSession.maxTrailerLength)
            let sealed = try a.withUnsafeMutableBytes {
                try ours.protectRTCP($0.baseAddress!, length: plain.count, capacity: $0.count)
            }
            #expect(a[8..<plain.count] != plain[8...])
            let openedByReference = a.withUnsafeMutableBytes {
                referenceIn.unprotectRTCP($0.baseAddress!, length: sealed)
            }
            #expect(openedByReference == plain.count)
            #expect(Array(a[0..<plain.count]) == plain)
            // libsrtp → ours.
            var b = plain + [UInt8](repeating: 0, count: LibSRTPSession.maxTrailerLength)
            let sealedByReference = try #require(
                b.withUnsafeMutableBytes { reference.protectRTCP($0.baseAddress!, length: plain.count) })
            var replay = b
            let openedByUs = try b.withUnsafeMutableBytes {
                try oursIn.unprotectRTCP($0.baseAddress!, length: sealedByReference)
            }
            #expect(openedByUs == plain.count)
            #expect(Array(b[0..<plain.count]) == plain)
            #expect(throws: SRTPError.replayFailed) {
                _ = try replay.withUnsafeMutableBytes {
                    try oursIn.unprotectRTCP($0.baseAddress!, length: sealedByReference)
                }
            }
        }
    }

    @Test func replayWindowSlidesAndForgets() {
        let window = SRTPReplayWindow(size: 128)
        #expect(window.check(5) == .fresh)
        window.accept(5)
        #expect(window.check(5) == .replayed)
        window.accept(70)  // slide by 65: across a word boundary
        #expect(window.check(5) == .replayed)
        #expect(window.check(6) == .fresh)
        window.accept(6)
        #expect(window.check(6) == .replayed)
        window.accept(200)  // 6 is now 194 behind: older than the window
        #expect(window.check(6) == .tooOld)
        #expect(window.check(70) == .tooOld)
        #expect(window.check(73) == .fresh)  // 127 behind, never seen
        #expect(window.check(200) == .replayed)
        window.accept(1_000)
        #expect(window.check(999) == .fresh)
        #expect(window.check(200) == .tooOld)
        // Ring positions reused after a wrap must have been cleared: 1,000 + 128 lands on 1,000's bit.
        window.accept(1_100)
        window.accept(1_128)
        #expect(window.check(1_000) == .tooOld)
        #expect(window.check(1_101) == .fresh)
        #expect(window.check(1_100) == .replayed)
        for index: UInt64 in 1_129...1_300 { window.accept(index) }
        #expect(window.check(1_172) == .tooOld)
        #expect(window.check(1_173) == .replayed)
        window.accept(1_400)  // the bits of 1,301…1,399 held 1,173…1,271, all accepted: now cleared
        #expect(window.check(1_350) == .fresh)
        #expect(window.check(1_300) == .replayed)
    }

    @Test func indexEstimateFollowsTheRollover() {
        #expect(estimateSRTPIndex(sequence: 65_535, highest: 3) == 65_535)  // no earlier cycle
        #expect(estimateSRTPIndex(sequence: 0, highest: 65_535) == 65_536)
        #expect(estimateSRTPIndex(sequence: 65_535, highest: 65_536 + 2) == 65_535)
        #expect(estimateSRTPIndex(sequence: 10, highest: 3 << 16 | 40_000) == 4 << 16 | 10)  // 25,546 ahead
        #expect(estimateSRTPIndex(sequence: 65_000, highest: 3 << 16 | 100) == 2 << 16 | 65_000)  // 636 behind
        #expect(estimateSRTPIndex(sequence: 30_000, highest: 3 << 16 | 100) == 3 << 16 | 30_000)
        #expect(estimateSRTPIndex(sequence: 5, highest: 3 << 16 | 60_000) == 4 << 16 | 5)
    }
}
