import Testing

@testable import RTCWire

@Suite struct TURNWireTests {
    @Test func turnAttributesRoundTrip() throws {
        let peer = try #require(STUNAddress(family: .ipv4, port: 40000, address: [10, 1, 2, 3]))
        let relayed = try #require(
            STUNAddress(
                family: .ipv6, port: 50000, address: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 7, count: 12)))
        let message = STUNMessage(
            method: .allocate, messageClass: .successResponse,
            attributes: [
                .xorRelayedAddress(relayed), .xorPeerAddress(peer), .lifetime(600), .requestedTransport(17),
                .channelNumber(0x4001), .realm("example.org"), .nonce("f//499k954d6OL34oL9FSTvy64sA"),
                .data([1, 2, 3, 4, 5]),
            ])
        let bytes = message.serialize(integrityKey: Array("key".utf8), fingerprint: true)
        let parsed = try bytes.withUnsafeBytes { try STUNMessage.parse($0) }
        #expect(parsed.method == .allocate)
        #expect(Array(parsed.attributes.prefix(8)) == message.attributes)
        #expect(parsed.xorRelayedAddress == relayed)
        #expect(parsed.xorPeerAddress == peer)
        #expect(parsed.lifetime == 600)
        #expect(parsed.realm == "example.org")
        #expect(parsed.nonce == "f//499k954d6OL34oL9FSTvy64sA")
        #expect(parsed.data == [1, 2, 3, 4, 5])
        // XOR-PEER-ADDRESS is XORed on the wire like XOR-MAPPED-ADDRESS (RFC 8656 §18.3).
        #expect(!bytes.windows(4).contains([10, 1, 2, 3]))
    }

    @Test func turnMethodsHaveTheirRFCNumbers() throws {
        // RFC 8656 §17: Allocate 0x003 … ChannelBind 0x009; a Send indication has type 0x0016.
        let send = STUNMessage(method: .send, messageClass: .indication)
        let bytes = send.serialize(integrityKey: nil, fingerprint: false)
        #expect(bytes[0] == 0x00 && bytes[1] == 0x16)
        let data = STUNMessage(method: .data, messageClass: .indication).serialize(
            integrityKey: nil, fingerprint: false)
        #expect(data[0] == 0x00 && data[1] == 0x17)
        let bind = STUNMessage(method: .channelBind, messageClass: .successResponse)
            .serialize(integrityKey: nil, fingerprint: false)
        #expect(bind[0] == 0x01 && bind[1] == 0x09)
    }

    @Test func malformedTURNAttributesAreErrorsNotTraps() {
        for (type, value) in [
            (STUNAttribute.TypeCode.lifetime, [UInt8](repeating: 0, count: 3)),
            (STUNAttribute.TypeCode.channelNumber, [0x40]),
            (STUNAttribute.TypeCode.requestedTransport, []),
            (STUNAttribute.TypeCode.xorPeerAddress, [0, 9, 0, 0, 1, 2, 3, 4]),
            (STUNAttribute.TypeCode.xorRelayedAddress, [0, 1, 0, 0, 1, 2]),
            (STUNAttribute.TypeCode.realm, [UInt8](repeating: 0x61, count: 800)),
        ] {
            let message = STUNMessage(messageClass: .request, attributes: [.unknown(type: type, value: value)])
            let bytes = message.serialize(integrityKey: nil, fingerprint: false)
            #expect(throws: STUNError.malformedAttribute(type: type)) {
                try bytes.withUnsafeBytes { try STUNMessage.parse($0) }
            }
        }
    }

    @Test func channelDataParsesAndRejectsBadFrames() {
        var frame: [UInt8] = [0, 0, 0, 0, 9, 8, 7]
        frame.withUnsafeMutableBytes { TURNChannelData.writeHeader(into: $0, channel: 0x4002, length: 3) }
        frame.withUnsafeBytes {
            #expect(TURNChannelData.looksLikeChannelData($0))
            let parsed = TURNChannelData.parse($0)
            #expect(parsed?.channel == 0x4002)
            #expect(parsed?.payload == 4..<7)
        }
        // Length beyond the datagram, channel outside the range, too short.
        for bad: [UInt8] in [[0x40, 0x01, 0, 9, 1], [0x50, 0x00, 0, 0], [0x40, 0x01, 0]] {
            bad.withUnsafeBytes { #expect(TURNChannelData.parse($0) == nil) }
        }
    }

    @Test func streamFramingFindsSTUNAndPaddedChannelData() {
        let stun = STUNMessage(method: .refresh, messageClass: .request, attributes: [.lifetime(0)])
            .serialize(integrityKey: nil, fingerprint: false)
        stun.withUnsafeBytes { #expect(TURNChannelData.streamFrame($0) == .complete(stun.count)) }
        Array(stun.prefix(10)).withUnsafeBytes { #expect(TURNChannelData.streamFrame($0) == .needMore) }
        // 5 payload bytes are padded to 8 on a stream.
        let channel: [UInt8] = [0x40, 0x00, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0, 0xFF]
        channel.withUnsafeBytes { #expect(TURNChannelData.streamFrame($0) == .complete(12)) }
        Array(channel.prefix(9)).withUnsafeBytes { #expect(TURNChannelData.streamFrame($0) == .needMore) }
        [UInt8]([0x80, 0, 0, 0]).withUnsafeBytes { #expect(TURNChannelData.streamFrame($0) == .invalid) }
    }
}

extension Array where Element == UInt8 {
    fileprivate func windows(_ size: Int) -> [[UInt8]] {
        guard count >= size else { return [] }
        return (0...(count - size)).map { Array(self[$0..<($0 + size)]) }
    }
}
