import Testing

@testable import RTCWire

private func hex(_ string: String) -> [UInt8] {
    let digits = string.filter { $0.isHexDigit }
    var out = [UInt8]()
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        out.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return out
}

// RFC 5769 section 2.1: sample request (with SOFTWARE, PRIORITY, ICE-CONTROLLED, USERNAME).
private let rfc5769Request = hex(
    """
    00 01 00 58 21 12 a4 42 b7 e7 a7 01 bc 34 d6 86 fa 87 df ae
    80 22 00 10 53 54 55 4e 20 74 65 73 74 20 63 6c 69 65 6e 74
    00 24 00 04 6e 00 01 ff
    80 29 00 08 93 2f f9 b1 51 26 3b 36
    00 06 00 09 65 76 74 6a 3a 68 36 76 59 20 20 20
    00 08 00 14 9a ea a7 0c bf d8 cb 56 78 1e f2 b5 b2 d3 f2 49 c1 b5 71 a2
    80 28 00 04 e5 7a 3b cf
    """)

// RFC 5769 section 2.2: sample IPv4 response.
private let rfc5769IPv4Response = hex(
    """
    01 01 00 3c 21 12 a4 42 b7 e7 a7 01 bc 34 d6 86 fa 87 df ae
    80 22 00 0b 74 65 73 74 20 76 65 63 74 6f 72 20
    00 20 00 08 00 01 a1 47 e1 12 a6 43
    00 08 00 14 2b 91 f5 99 fd 9e 90 c3 8c 74 89 f9 2a f9 ba 53 f0 6b e7 d7
    80 28 00 04 c0 7d 4c 96
    """)

// RFC 5769 section 2.3: sample IPv6 response.
private let rfc5769IPv6Response = hex(
    """
    01 01 00 48 21 12 a4 42 b7 e7 a7 01 bc 34 d6 86 fa 87 df ae
    80 22 00 0b 74 65 73 74 20 76 65 63 74 6f 72 20
    00 20 00 14 00 02 a1 47 01 13 a9 fa a5 d3 f1 79 bc 25 f4 b5 be d2 b9 d9
    00 08 00 14 a3 82 95 4e 4b e6 7b f1 17 84 c9 7c 82 92 c2 75 bf e3 ed 41
    80 28 00 04 c8 fb 0b 4c
    """)

private let rfc5769Password = Array("VOkJxbRl1RmTxUk/WvJxBt".utf8)

@Suite struct STUNCryptoTests {
    @Test func sha1KnownVectors() {
        #expect(SHA1.hash([]) == hex("da39a3ee5e6b4b0d3255bfef95601890afd80709"))
        #expect(SHA1.hash(Array("abc".utf8)) == hex("a9993e364706816aba3e25717850c26c9cd0d89d"))
        #expect(
            SHA1.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == hex("84983e441c3bd26ebaae4aa1f95129e5e54670f1"))
        #expect(
            SHA1.hash([UInt8](repeating: 0x61, count: 1_000_000))
                == hex("34aa973cd4c4daa4f61eeb2bdbad27316534016f"))
    }

    @Test func hmacSHA1RFC2202() {
        #expect(
            HMACSHA1.authenticate(key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8))
                == hex("b617318655057264e28bc0b6fb378c8ef146be00"))
        #expect(
            HMACSHA1.authenticate(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
                == hex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"))
        #expect(
            HMACSHA1.authenticate(
                key: [UInt8](repeating: 0xaa, count: 20), message: [UInt8](repeating: 0xdd, count: 50))
                == hex("125d7342b9ac11cd91a39af48aa17b4f63f175d3"))
        #expect(
            HMACSHA1.authenticate(
                key: [UInt8](repeating: 0xaa, count: 80),
                message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
                == hex("aa4ae5e15272d00e95705637ce8a3b55ed402112"))
    }

    @Test func crc32CheckValue() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([]) == 0)
    }
}

@Suite struct STUNMessageTests {
    @Test func parsesRFC5769Request() throws {
        let message = try rfc5769Request.withUnsafeBytes { try STUNMessage.parse($0) }
        #expect(message.method == .binding)
        #expect(message.messageClass == .request)
        #expect(message.transactionID.bytes == hex("b7e7a701bc34d686fa87dfae"))
        #expect(message.username == "evtj:h6vY")
        #expect(message.priority == 0x6e00_01ff)
        #expect(message.iceControlled == 0x932f_f9b1_5126_3b36)
        #expect(message.hasMessageIntegrity)
        #expect(message.hasFingerprint)
        #expect(message.attributes.contains(.unknown(type: 0x8022, value: Array("STUN test client".utf8))))
        rfc5769Request.withUnsafeBytes {
            #expect(STUNMessage.looksLikeSTUN($0))
            #expect(STUNMessage.verifyIntegrity($0, key: rfc5769Password))
            #expect(!STUNMessage.verifyIntegrity($0, key: Array("wrong".utf8)))
            #expect(STUNMessage.verifyFingerprint($0))
        }
    }

    @Test func reserializingRFC5769RequestReproducesIntegrityAndFingerprint() throws {
        let message = try rfc5769Request.withUnsafeBytes { try STUNMessage.parse($0) }
        let bytes = message.serialize(integrityKey: rfc5769Password, fingerprint: true)
        // USERNAME padding is spaces in the RFC and zeros here, so MAC and CRC differ; everything
        // before that padding (offset 73) must be byte-identical, and our MAC and CRC must verify.
        #expect(bytes.count == rfc5769Request.count)
        #expect(Array(bytes[0..<73]) == Array(rfc5769Request[0..<73]))
        bytes.withUnsafeBytes {
            #expect(STUNMessage.verifyIntegrity($0, key: rfc5769Password))
            #expect(STUNMessage.verifyFingerprint($0))
        }
    }

    @Test func parsesRFC5769IPv4Response() throws {
        let message = try rfc5769IPv4Response.withUnsafeBytes { try STUNMessage.parse($0) }
        #expect(message.messageClass == .successResponse)
        #expect(message.xorMappedAddress == STUNAddress(family: .ipv4, port: 32853, address: [192, 0, 2, 1]))
        rfc5769IPv4Response.withUnsafeBytes {
            #expect(STUNMessage.verifyIntegrity($0, key: rfc5769Password))
            #expect(STUNMessage.verifyFingerprint($0))
        }
        // Our serializer, given the same attributes (SOFTWARE padding is a space in the RFC), must
        // produce the RFC's XOR-MAPPED-ADDRESS bytes exactly.
        let bytes = message.serialize(integrityKey: rfc5769Password, fingerprint: true)
        #expect(Array(bytes[36..<48]) == Array(rfc5769IPv4Response[36..<48]))
    }

    @Test func parsesRFC5769IPv6Response() throws {
        let message = try rfc5769IPv6Response.withUnsafeBytes { try STUNMessage.parse($0) }
        let expected = hex("20010db8123456780011223344556677")
        #expect(message.xorMappedAddress == STUNAddress(family: .ipv6, port: 32853, address: expected))
        #expect(message.xorMappedAddress?.description == "[2001:db8:1234:5678:11:2233:4455:6677]:32853")
        rfc5769IPv6Response.withUnsafeBytes {
            #expect(STUNMessage.verifyIntegrity($0, key: rfc5769Password))
            #expect(STUNMessage.verifyFingerprint($0))
        }
        let bytes = message.serialize(integrityKey: rfc5769Password, fingerprint: true)
        #expect(Array(bytes[36..<60]) == Array(rfc5769IPv6Response[36..<60]))
    }

    @Test func roundTripsEveryAttribute() throws {
        let address = try #require(STUNAddress(family: .ipv4, port: 5000, address: [127, 0, 0, 1]))
        let message = STUNMessage(
            messageClass: .errorResponse,
            attributes: [
                .username("abcd:efgh"), .priority(1234), .useCandidate, .iceControlling(42),
                .iceControlled(7), .errorCode(code: 487, reason: "Role Conflict"),
                .xorMappedAddress(address), .unknown(type: 0x8022, value: [1, 2, 3]),
            ])
        let bytes = message.serialize(integrityKey: Array("pw".utf8), fingerprint: true)
        let parsed = try bytes.withUnsafeBytes { try STUNMessage.parse($0) }
        #expect(parsed.messageClass == .errorResponse)
        #expect(parsed.transactionID == message.transactionID)
        #expect(parsed.errorCode?.code == 487)
        #expect(parsed.errorCode?.reason == "Role Conflict")
        #expect(Array(parsed.attributes.prefix(8)) == message.attributes)
        bytes.withUnsafeBytes {
            #expect(STUNMessage.verifyIntegrity($0, key: Array("pw".utf8)))
            #expect(STUNMessage.verifyFingerprint($0))
        }
    }

    @Test func classAndMethodBitsInterleave() throws {
        let indication = STUNMessage(method: STUNMethod(rawValue: 0xABC), messageClass: .indication)
        let bytes = indication.serialize(integrityKey: nil, fingerprint: false)
        let parsed = try bytes.withUnsafeBytes { try STUNMessage.parse($0) }
        #expect(parsed.method.rawValue == 0xABC)
        #expect(parsed.messageClass == .indication)
        #expect(bytes[0] & 0xC0 == 0)
    }

    @Test func rejectsMalformedInput() {
        func parse(_ bytes: [UInt8]) -> STUNError? {
            bytes.withUnsafeBytes {
                do throws(STUNError) {
                    _ = try STUNMessage.parse($0)
                    return nil
                } catch { return error }
            }
        }
        #expect(parse([]) == .truncated)
        #expect(parse(Array(rfc5769Request[0..<19])) == .truncated)
        var rtpLike = rfc5769Request
        rtpLike[0] = 0x80
        #expect(parse(rtpLike) == .notSTUN)
        var badCookie = rfc5769Request
        badCookie[4] = 0
        #expect(parse(badCookie) == .notSTUN)
        #expect(parse(rfc5769Request + [0, 0, 0, 0]) == .badLength)
        var longAttribute = rfc5769Request
        longAttribute[22] = 0xFF  // SOFTWARE length now runs past the end
        #expect(parse(longAttribute) == .malformedAttribute(type: 0x8022))
        var truncatedBody = rfc5769Request
        truncatedBody.removeLast(4)
        #expect(parse(truncatedBody) == .truncated)
        var corrupted = rfc5769Request
        corrupted[30] ^= 1
        corrupted.withUnsafeBytes {
            #expect(!STUNMessage.verifyIntegrity($0, key: rfc5769Password))
            #expect(!STUNMessage.verifyFingerprint($0))
        }
    }

    @Test func fuzzEntryPointSurvivesMutations() {
        // Every single-byte mutation and every truncation of the RFC vectors.
        for vector in [rfc5769Request, rfc5769IPv4Response, rfc5769IPv6Response] {
            for i in 0..<vector.count {
                for value: UInt8 in [0x00, 0xFF, 0x7F, 0x80] {
                    var mutated = vector
                    mutated[i] = value
                    mutated.withUnsafeBytes { STUNFuzz.run($0) }
                }
                Array(vector[0..<i]).withUnsafeBytes { STUNFuzz.run($0) }
            }
        }
        var generator = SystemRandomNumberGenerator()
        var accepted = 0
        for _ in 0..<2000 {
            var bytes = rfc5769Request
            bytes[Int.random(in: 20..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            bytes.withUnsafeBytes {
                STUNFuzz.run($0)
                if (try? STUNMessage.parse($0)) != nil { accepted += 1 }
            }
        }
        #expect(accepted > 0)
    }

    @Test func transactionIDsAreRandom() {
        let a = STUNTransactionID.random()
        let b = STUNTransactionID.random()
        #expect(a != b)
        #expect(STUNTransactionID(bytes: a.bytes) == a)
        #expect(STUNTransactionID(bytes: [1, 2, 3]) == nil)
    }
}
