/// libFuzzer entry point for the STUN parser.
public enum STUNFuzz {
    /// Parses `data`; if it parses, serializes it again and requires the result to re-parse.
    /// Traps only on that round-trip failure, which would be a serializer bug.
    public static func run(_ data: UnsafeRawBufferPointer) {
        _ = STUNMessage.looksLikeSTUN(data)
        _ = STUNMessage.verifyFingerprint(data)
        _ = STUNMessage.verifyIntegrity(data, key: Array("fuzz".utf8))
        if let (_, payload) = TURNChannelData.parse(data) {
            precondition(payload.upperBound <= data.count, "ChannelData payload past the datagram")
        }
        if case .complete(let length) = TURNChannelData.streamFrame(data) {
            precondition(length >= 4 && length <= data.count, "stream frame past the buffer")
        }
        guard let message = try? STUNMessage.parse(data) else { return }
        let bytes = message.serialize(
            integrityKey: message.hasMessageIntegrity ? Array("key".utf8) : nil,
            fingerprint: message.hasFingerprint)
        let reparsed = bytes.withUnsafeBytes { try? STUNMessage.parse($0) }
        guard reparsed != nil else {
            fatalError("STUN round trip failed for a message that parsed")
        }
        if message.hasFingerprint {
            precondition(bytes.withUnsafeBytes { STUNMessage.verifyFingerprint($0) })
        }
    }
}
