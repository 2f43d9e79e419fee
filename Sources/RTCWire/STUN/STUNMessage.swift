// STUN message model, parser and serializer (RFC 8489), with the ICE attributes of RFC 8445.

/// Errors thrown by `STUNMessage.parse`.
public enum STUNError: Error, Equatable, Sendable {
    /// Fewer than 20 bytes, or fewer than the header's length field promises.
    case truncated
    /// The first two bits are not zero or the magic cookie is wrong.
    case notSTUN
    /// The length field is not a multiple of 4 or does not match the datagram.
    case badLength
    /// An attribute's length runs past the message or its value is malformed.
    case malformedAttribute(type: UInt16)
}

/// The 96-bit STUN transaction ID.
public struct STUNTransactionID: Hashable, Sendable, CustomStringConvertible {
    /// The three big-endian 32-bit words of the ID, most significant first.
    public var high: UInt32
    public var middle: UInt32
    public var low: UInt32

    /// Creates an ID from its three 32-bit words.
    public init(high: UInt32, middle: UInt32, low: UInt32) {
        self.high = high
        self.middle = middle
        self.low = low
    }

    /// Creates an ID from exactly 12 bytes; returns nil for any other count.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 12 else { return nil }
        self = bytes.withUnsafeBytes { STUNTransactionID(reading: $0, at: 0) }
    }

    init(reading bytes: UnsafeRawBufferPointer, at offset: Int) {
        high = readUInt32(bytes, offset)
        middle = readUInt32(bytes, offset + 4)
        low = readUInt32(bytes, offset + 8)
    }

    /// A fresh ID from the system's cryptographic random source.
    public static func random() -> STUNTransactionID {
        var generator = SystemRandomNumberGenerator()
        return STUNTransactionID(
            high: generator.next(), middle: generator.next(), low: generator.next())
    }

    /// The 12 bytes of the ID in wire order.
    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(12)
        appendUInt32(&out, high)
        appendUInt32(&out, middle)
        appendUInt32(&out, low)
        return out
    }

    public var description: String {
        bytes.map { hexByte($0) }.joined()
    }
}

/// A STUN method: Binding for ICE, and the TURN methods of RFC 8656.
public struct STUNMethod: RawRepresentable, Hashable, Sendable {
    /// The 12-bit method number.
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue & 0x0FFF }
    /// The Binding method (0x001).
    public static let binding = STUNMethod(rawValue: 0x001)
    /// TURN Allocate (0x003).
    public static let allocate = STUNMethod(rawValue: 0x003)
    /// TURN Refresh (0x004).
    public static let refresh = STUNMethod(rawValue: 0x004)
    /// TURN Send indication (0x006).
    public static let send = STUNMethod(rawValue: 0x006)
    /// TURN Data indication (0x007).
    public static let data = STUNMethod(rawValue: 0x007)
    /// TURN CreatePermission (0x008).
    public static let createPermission = STUNMethod(rawValue: 0x008)
    /// TURN ChannelBind (0x009).
    public static let channelBind = STUNMethod(rawValue: 0x009)
}

/// The class of a STUN message.
public enum STUNClass: UInt16, Sendable, Hashable {
    case request = 0b00
    case indication = 0b01
    case successResponse = 0b10
    case errorResponse = 0b11
}

/// A transport address as carried in XOR-MAPPED-ADDRESS (already un-XORed).
public struct STUNAddress: Hashable, Sendable, CustomStringConvertible {
    /// Address family.
    public enum Family: UInt8, Sendable, Hashable {
        case ipv4 = 0x01
        case ipv6 = 0x02
    }
    public var family: Family
    public var port: UInt16
    /// 4 bytes for IPv4, 16 bytes for IPv6, network order.
    public var address: [UInt8]

    /// Creates an address; `address` must be 4 (IPv4) or 16 (IPv6) bytes.
    public init?(family: Family, port: UInt16, address: [UInt8]) {
        guard address.count == (family == .ipv4 ? 4 : 16) else { return nil }
        self.family = family
        self.port = port
        self.address = address
    }

    public var description: String {
        switch family {
        case .ipv4:
            return address.map { String($0) }.joined(separator: ".") + ":\(port)"
        case .ipv6:
            var groups = [String]()
            for i in 0..<8 {
                let value = UInt16(address[i * 2]) << 8 | UInt16(address[i * 2 + 1])
                groups.append(String(value, radix: 16))
            }
            return "[" + groups.joined(separator: ":") + "]:\(port)"
        }
    }
}

/// A STUN attribute. Attributes this model does not know are kept raw.
public enum STUNAttribute: Hashable, Sendable {
    /// USERNAME (0x0006); for ICE, "remoteUfrag:localUfrag" as seen by the sender.
    case username(String)
    /// MESSAGE-INTEGRITY (0x0008): the 20-byte HMAC-SHA1 as received.
    case messageIntegrity([UInt8])
    /// FINGERPRINT (0x8028): the CRC-32 XOR 0x5354554E as received.
    case fingerprint(UInt32)
    /// XOR-MAPPED-ADDRESS (0x0020), stored un-XORed.
    case xorMappedAddress(STUNAddress)
    /// PRIORITY (0x0024).
    case priority(UInt32)
    /// USE-CANDIDATE (0x0025).
    case useCandidate
    /// ICE-CONTROLLED (0x8029) with the sender's tie-breaker.
    case iceControlled(UInt64)
    /// ICE-CONTROLLING (0x802A) with the sender's tie-breaker.
    case iceControlling(UInt64)
    /// ERROR-CODE (0x0009): code 300–699 and a reason phrase.
    case errorCode(code: Int, reason: String)
    /// TURN CHANNEL-NUMBER (0x000C): 0x4000–0x4FFF.
    case channelNumber(UInt16)
    /// TURN LIFETIME (0x000D), in seconds.
    case lifetime(UInt32)
    /// TURN XOR-PEER-ADDRESS (0x0012), stored un-XORed.
    case xorPeerAddress(STUNAddress)
    /// TURN DATA (0x0013): the application datagram of a Send or Data indication.
    case data([UInt8])
    /// REALM (0x0014) of long-term credentials.
    case realm(String)
    /// NONCE (0x0015) of long-term credentials.
    case nonce(String)
    /// TURN XOR-RELAYED-ADDRESS (0x0016), stored un-XORed.
    case xorRelayedAddress(STUNAddress)
    /// TURN REQUESTED-TRANSPORT (0x0019): the IP protocol number (17 for UDP).
    case requestedTransport(UInt8)
    /// Any other attribute, value without padding.
    case unknown(type: UInt16, value: [UInt8])

    /// Attribute type numbers.
    public enum TypeCode {
        public static let username: UInt16 = 0x0006
        public static let messageIntegrity: UInt16 = 0x0008
        public static let errorCode: UInt16 = 0x0009
        public static let channelNumber: UInt16 = 0x000C
        public static let lifetime: UInt16 = 0x000D
        public static let xorPeerAddress: UInt16 = 0x0012
        public static let data: UInt16 = 0x0013
        public static let realm: UInt16 = 0x0014
        public static let nonce: UInt16 = 0x0015
        public static let xorRelayedAddress: UInt16 = 0x0016
        public static let requestedTransport: UInt16 = 0x0019
        public static let xorMappedAddress: UInt16 = 0x0020
        public static let priority: UInt16 = 0x0024
        public static let useCandidate: UInt16 = 0x0025
        public static let fingerprint: UInt16 = 0x8028
        public static let iceControlled: UInt16 = 0x8029
        public static let iceControlling: UInt16 = 0x802A
    }

    /// The attribute's type number on the wire.
    public var typeCode: UInt16 {
        switch self {
        case .username: TypeCode.username
        case .messageIntegrity: TypeCode.messageIntegrity
        case .fingerprint: TypeCode.fingerprint
        case .priority: TypeCode.priority
        case .useCandidate: TypeCode.useCandidate
        case .iceControlled: TypeCode.iceControlled
        case .iceControlling: TypeCode.iceControlling
        case .errorCode: TypeCode.errorCode
        case .xorMappedAddress: TypeCode.xorMappedAddress
        case .xorPeerAddress: TypeCode.xorPeerAddress
        case .xorRelayedAddress: TypeCode.xorRelayedAddress
        case .channelNumber: TypeCode.channelNumber
        case .lifetime: TypeCode.lifetime
        case .requestedTransport: TypeCode.requestedTransport
        case .data: TypeCode.data
        case .realm: TypeCode.realm
        case .nonce: TypeCode.nonce
        case .unknown(let type, _): type
        }
    }
}

/// A STUN message (RFC 8489).
public struct STUNMessage: Hashable, Sendable {
    /// The fixed magic cookie 0x2112A442.
    public static let magicCookie: UInt32 = 0x2112_A442
    /// XORed into the CRC-32 to form FINGERPRINT.
    static let fingerprintXor: UInt32 = 0x5354_554E

    public var method: STUNMethod
    public var messageClass: STUNClass
    public var transactionID: STUNTransactionID
    /// Attributes in wire order.
    public var attributes: [STUNAttribute]

    /// Creates a message.
    public init(
        method: STUNMethod = .binding, messageClass: STUNClass,
        transactionID: STUNTransactionID = .random(), attributes: [STUNAttribute] = []
    ) {
        self.method = method
        self.messageClass = messageClass
        self.transactionID = transactionID
        self.attributes = attributes
    }

    // MARK: Attribute accessors

    /// The USERNAME attribute, if present.
    public var username: String? { first { if case .username(let value) = $0 { value } else { nil } } }
    /// The PRIORITY attribute, if present.
    public var priority: UInt32? { first { if case .priority(let value) = $0 { value } else { nil } } }
    /// True if USE-CANDIDATE is present.
    public var hasUseCandidate: Bool {
        attributes.contains(.useCandidate)
    }
    /// The ICE-CONTROLLING tie-breaker, if present.
    public var iceControlling: UInt64? { first { if case .iceControlling(let value) = $0 { value } else { nil } } }
    /// The ICE-CONTROLLED tie-breaker, if present.
    public var iceControlled: UInt64? { first { if case .iceControlled(let value) = $0 { value } else { nil } } }
    /// The XOR-MAPPED-ADDRESS, if present.
    public var xorMappedAddress: STUNAddress? {
        first { if case .xorMappedAddress(let value) = $0 { value } else { nil } }
    }
    /// The ERROR-CODE, if present.
    public var errorCode: (code: Int, reason: String)? {
        first { if case .errorCode(let code, let reason) = $0 { (code, reason) } else { nil } }
    }
    /// The XOR-RELAYED-ADDRESS (TURN), if present.
    public var xorRelayedAddress: STUNAddress? {
        first { if case .xorRelayedAddress(let value) = $0 { value } else { nil } }
    }
    /// The XOR-PEER-ADDRESS (TURN), if present.
    public var xorPeerAddress: STUNAddress? { first { if case .xorPeerAddress(let value) = $0 { value } else { nil } } }
    /// The DATA attribute (TURN), if present.
    public var data: [UInt8]? { first { if case .data(let value) = $0 { value } else { nil } } }
    /// The LIFETIME (TURN), if present.
    public var lifetime: UInt32? { first { if case .lifetime(let value) = $0 { value } else { nil } } }
    /// The REALM, if present.
    public var realm: String? { first { if case .realm(let value) = $0 { value } else { nil } } }
    /// The NONCE, if present.
    public var nonce: String? { first { if case .nonce(let value) = $0 { value } else { nil } } }
    /// True if MESSAGE-INTEGRITY is present.
    public var hasMessageIntegrity: Bool {
        attributes.contains { if case .messageIntegrity = $0 { return true } else { return false } }
    }
    /// True if FINGERPRINT is present.
    public var hasFingerprint: Bool {
        attributes.contains { if case .fingerprint = $0 { return true } else { return false } }
    }

    /// The value `extract` finds in the first attribute it matches.
    private func first<Value>(_ extract: (STUNAttribute) -> Value?) -> Value? {
        for attribute in attributes { if let value = extract(attribute) { return value } }
        return nil
    }

    // MARK: Classification

    /// True if `bytes` could be a STUN message: at least a header, first two bits zero and the
    /// magic cookie in place. Used to demultiplex STUN from DTLS and RTP on one socket.
    public static func looksLikeSTUN(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 20, bytes[0] & 0xC0 == 0 else { return false }
        return readUInt32(bytes, 4) == magicCookie
    }

    // MARK: Parse

    /// Parses one STUN message. Throws on anything malformed; never traps.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(STUNError) -> STUNMessage {
        guard bytes.count >= 20 else { throw .truncated }
        guard bytes[0] & 0xC0 == 0, readUInt32(bytes, 4) == magicCookie else { throw .notSTUN }
        let type = readUInt16(bytes, 0)
        let length = Int(readUInt16(bytes, 2))
        guard length % 4 == 0 else { throw .badLength }
        guard 20 + length <= bytes.count else { throw .truncated }
        guard 20 + length == bytes.count else { throw .badLength }

        // Method bits are M11..M7, M6..M4, M3..M0 interleaved with the class bits C1 and C0.
        let methodValue = (type & 0x000F) | ((type & 0x00E0) >> 1) | ((type & 0x3E00) >> 2)
        let classValue = ((type & 0x0010) >> 4) | ((type & 0x0100) >> 7)
        guard let messageClass = STUNClass(rawValue: classValue) else { throw .notSTUN }
        let transactionID = STUNTransactionID(reading: bytes, at: 8)

        var attributes = [STUNAttribute]()
        var offset = 20
        let end = 20 + length
        while offset < end {
            guard end - offset >= 4 else { throw .malformedAttribute(type: 0) }
            let attributeType = readUInt16(bytes, offset)
            let attributeLength = Int(readUInt16(bytes, offset + 2))
            let valueStart = offset + 4
            guard attributeLength <= end - valueStart else {
                throw .malformedAttribute(type: attributeType)
            }
            let value = UnsafeRawBufferPointer(rebasing: bytes[valueStart..<(valueStart + attributeLength)])
            let attribute = try parseAttribute(
                type: attributeType, value: value, transactionID: transactionID)
            attributes.append(attribute)
            let padded = (attributeLength + 3) & ~3
            // Padding may run to the very end only; a short final pad is malformed.
            guard padded <= end - valueStart else { throw .malformedAttribute(type: attributeType) }
            offset = valueStart + padded
        }
        return STUNMessage(
            method: STUNMethod(rawValue: methodValue), messageClass: messageClass,
            transactionID: transactionID, attributes: attributes)
    }

    static func parseAttribute(
        type: UInt16, value: UnsafeRawBufferPointer, transactionID: STUNTransactionID
    ) throws(STUNError) -> STUNAttribute {
        typealias Code = STUNAttribute.TypeCode
        /// The value, checked to be `count` bytes long (a fixed-size attribute).
        func sized(_ count: Int) throws(STUNError) -> UnsafeRawBufferPointer {
            guard value.count == count else { throw .malformedAttribute(type: type) }
            return value
        }
        switch type {
        case Code.username:
            guard value.count <= 513 else { throw .malformedAttribute(type: type) }
            return .username(String(decoding: value, as: UTF8.self))
        case Code.messageIntegrity: return .messageIntegrity(Array(try sized(20)))
        case Code.fingerprint: return .fingerprint(readUInt32(try sized(4), 0))
        case Code.priority: return .priority(readUInt32(try sized(4), 0))
        case Code.useCandidate:
            _ = try sized(0)
            return .useCandidate
        case Code.iceControlled: return .iceControlled(readUInt64(try sized(8), 0))
        case Code.iceControlling: return .iceControlling(readUInt64(try sized(8), 0))
        case Code.errorCode:
            guard value.count >= 4, value.count <= 4 + 763 else { throw .malformedAttribute(type: type) }
            let hundreds = Int(value[2] & 0x07)
            let number = Int(value[3])
            guard (3...6).contains(hundreds), number < 100 else { throw .malformedAttribute(type: type) }
            let reason = String(
                decoding: UnsafeRawBufferPointer(rebasing: value[4...]), as: UTF8.self)
            return .errorCode(code: hundreds * 100 + number, reason: reason)
        case Code.xorMappedAddress:
            return .xorMappedAddress(try parseXORAddress(type: type, value: value, transactionID: transactionID))
        case Code.xorPeerAddress:
            return .xorPeerAddress(try parseXORAddress(type: type, value: value, transactionID: transactionID))
        case Code.xorRelayedAddress:
            return .xorRelayedAddress(try parseXORAddress(type: type, value: value, transactionID: transactionID))
        case Code.channelNumber: return .channelNumber(readUInt16(try sized(4), 0))
        case Code.lifetime: return .lifetime(readUInt32(try sized(4), 0))
        case Code.requestedTransport: return .requestedTransport(try sized(4)[0])
        case Code.data:
            return .data(Array(value))
        case Code.realm, Code.nonce:
            // RFC 8489 §14.9/14.10: fewer than 128 characters, at most 763 bytes.
            guard value.count <= 763 else { throw .malformedAttribute(type: type) }
            let text = String(decoding: value, as: UTF8.self)
            return type == Code.realm ? .realm(text) : .nonce(text)
        default:
            return .unknown(type: type, value: Array(value))
        }
    }

    /// Decodes an XOR-MAPPED-ADDRESS-style value (also XOR-PEER- and XOR-RELAYED-ADDRESS).
    static func parseXORAddress(
        type: UInt16, value: UnsafeRawBufferPointer, transactionID: STUNTransactionID
    ) throws(STUNError) -> STUNAddress {
        guard value.count >= 4 else { throw .malformedAttribute(type: type) }
        let port = readUInt16(value, 2) ^ UInt16(magicCookie >> 16)
        let family: STUNAddress.Family
        var address = [UInt8]()
        switch value[1] {
        case STUNAddress.Family.ipv4.rawValue where value.count == 8:
            family = .ipv4
            appendUInt32(&address, readUInt32(value, 4) ^ magicCookie)
        case STUNAddress.Family.ipv6.rawValue where value.count == 20:
            family = .ipv6
            address = zip(value[4...], xorMask(transactionID)).map { $0 ^ $1 }
        default:
            throw .malformedAttribute(type: type)
        }
        guard let result = STUNAddress(family: family, port: port, address: address) else {
            throw .malformedAttribute(type: type)
        }
        return result
    }

    /// Magic cookie followed by the transaction ID: the IPv6 XOR mask.
    static func xorMask(_ id: STUNTransactionID) -> [UInt8] {
        var mask = [UInt8]()
        mask.reserveCapacity(16)
        appendUInt32(&mask, magicCookie)
        mask += id.bytes
        return mask
    }

    // MARK: Serialize

    /// Serializes the message. Any MESSAGE-INTEGRITY or FINGERPRINT in `attributes` is dropped and
    /// recomputed: MESSAGE-INTEGRITY when `integrityKey` is given (short-term credentials: the
    /// password's UTF-8 bytes), then FINGERPRINT when `fingerprint` is true.
    public func serialize(integrityKey: [UInt8]?, fingerprint: Bool) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(128)
        let m = method.rawValue
        let c = messageClass.rawValue
        let type =
            (m & 0x000F) | ((m & 0x0070) << 1) | ((m & 0x0F80) << 2) | ((c & 0x1) << 4) | ((c & 0x2) << 7)
        appendUInt16(&out, type)
        appendUInt16(&out, 0)  // length, patched below
        appendUInt32(&out, Self.magicCookie)
        out += transactionID.bytes

        for attribute in attributes {
            switch attribute {
            case .messageIntegrity, .fingerprint:
                continue
            default:
                appendAttribute(&out, attribute)
            }
        }

        if let key = integrityKey {
            // The length field covers the MESSAGE-INTEGRITY attribute while hashing.
            Self.patchLength(&out, out.count - 20 + 24)
            let mac = HMACSHA1.authenticate(key: key, message: out)
            appendTLV(&out, STUNAttribute.TypeCode.messageIntegrity, mac)
        }
        if fingerprint {
            Self.patchLength(&out, out.count - 20 + 8)
            let crc = CRC32.checksum(out) ^ Self.fingerprintXor
            var value = [UInt8]()
            appendUInt32(&value, crc)
            appendTLV(&out, STUNAttribute.TypeCode.fingerprint, value)
        }
        Self.patchLength(&out, out.count - 20)
        return out
    }

    static func patchLength(_ out: inout [UInt8], _ length: Int) {
        out[2] = UInt8(truncatingIfNeeded: length >> 8)
        out[3] = UInt8(truncatingIfNeeded: length)
    }

    func appendAttribute(_ out: inout [UInt8], _ attribute: STUNAttribute) {
        var value = [UInt8]()
        switch attribute {
        case .username(let text):
            value = Array(text.utf8)
        case .realm(let text), .nonce(let text):
            value = Array(text.utf8.prefix(763))
        case .messageIntegrity(let mac):
            value = mac
        case .fingerprint(let word), .priority(let word), .lifetime(let word):
            appendUInt32(&value, word)
        case .useCandidate:
            break
        case .iceControlled(let tieBreaker), .iceControlling(let tieBreaker):
            appendUInt64(&value, tieBreaker)
        case .errorCode(let code, let reason):
            let clamped = min(max(code, 300), 699)
            value = [0, 0, UInt8(clamped / 100), UInt8(clamped % 100)]
            value += Array(reason.utf8.prefix(763))
        case .xorMappedAddress(let address), .xorPeerAddress(let address), .xorRelayedAddress(let address):
            value = xorAddressValue(address)
        case .channelNumber(let channel):
            appendUInt16(&value, channel)
            appendUInt16(&value, 0)
        case .requestedTransport(let proto):
            value = [proto, 0, 0, 0]
        case .data(let bytes):
            // The length field is 16 bits and the whole message must fit too.
            value = Array(bytes.prefix(0xFFFF - 256))
        case .unknown(_, let raw):
            value = Array(raw.prefix(0xFFFF))
        }
        appendTLV(&out, attribute.typeCode, value)
    }

    /// The XORed wire value of an address attribute.
    func xorAddressValue(_ address: STUNAddress) -> [UInt8] {
        var value: [UInt8] = [0, address.family.rawValue]
        appendUInt16(&value, address.port ^ UInt16(Self.magicCookie >> 16))
        switch address.family {
        case .ipv4:
            var raw: UInt32 = 0
            for byte in address.address.prefix(4) { raw = raw << 8 | UInt32(byte) }
            appendUInt32(&value, raw ^ Self.magicCookie)
        case .ipv6:
            let mask = Self.xorMask(transactionID)
            for i in 0..<16 {
                value.append((i < address.address.count ? address.address[i] : 0) ^ mask[i])
            }
        }
        return value
    }

    func appendTLV(_ out: inout [UInt8], _ type: UInt16, _ value: [UInt8]) {
        appendUInt16(&out, type)
        appendUInt16(&out, UInt16(truncatingIfNeeded: value.count))
        out += value
        let padding = (4 - value.count % 4) % 4
        for _ in 0..<padding { out.append(0) }
    }

    // MARK: Verification

    /// Walks the attributes of a raw message and returns the offset of the first attribute of
    /// `type`, or nil if absent or malformed.
    static func offsetOfAttribute(_ bytes: UnsafeRawBufferPointer, type wanted: UInt16) -> Int? {
        guard bytes.count >= 20, looksLikeSTUN(bytes) else { return nil }
        let length = Int(readUInt16(bytes, 2))
        guard 20 + length == bytes.count else { return nil }
        var offset = 20
        while bytes.count - offset >= 4 {
            let type = readUInt16(bytes, offset)
            let attributeLength = Int(readUInt16(bytes, offset + 2))
            if type == wanted { return offset }
            offset += 4 + ((attributeLength + 3) & ~3)
        }
        return nil
    }

    /// Checks MESSAGE-INTEGRITY of a raw message: HMAC-SHA1 under `key` over the message up to the
    /// attribute, with the header length field set as if the message ended right after it.
    public static func verifyIntegrity(_ bytes: UnsafeRawBufferPointer, key: [UInt8]) -> Bool {
        guard let offset = offsetOfAttribute(bytes, type: STUNAttribute.TypeCode.messageIntegrity),
            bytes.count - offset >= 24, readUInt16(bytes, offset + 2) == 20
        else { return false }
        var prefix = Array(bytes[0..<offset])
        patchLength(&prefix, offset - 20 + 24)
        let expected = HMACSHA1.authenticate(key: key, message: prefix)
        var difference: UInt8 = 0
        for i in 0..<20 { difference |= expected[i] ^ bytes[offset + 4 + i] }
        return difference == 0
    }

    /// Checks FINGERPRINT of a raw message: it must be the last attribute and match the CRC-32.
    public static func verifyFingerprint(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard looksLikeSTUN(bytes), bytes.count >= 28,
            Int(readUInt16(bytes, 2)) + 20 == bytes.count
        else { return false }
        let offset = bytes.count - 8
        guard readUInt16(bytes, offset) == STUNAttribute.TypeCode.fingerprint,
            readUInt16(bytes, offset + 2) == 4
        else { return false }
        let crc = CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<offset])) ^ fingerprintXor
        return crc == readUInt32(bytes, offset + 4)
    }
}

// MARK: Byte helpers (callers bounds-check first)

@inline(__always)
private func readUInt16(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt16 {
    UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
}

@inline(__always)
private func readUInt32(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
    UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
        | UInt32(bytes[offset + 3])
}

@inline(__always)
private func readUInt64(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
    UInt64(readUInt32(bytes, offset)) << 32 | UInt64(readUInt32(bytes, offset + 4))
}

@inline(__always)
private func appendUInt16(_ out: inout [UInt8], _ value: UInt16) {
    out.append(UInt8(truncatingIfNeeded: value >> 8))
    out.append(UInt8(truncatingIfNeeded: value))
}

@inline(__always)
private func appendUInt32(_ out: inout [UInt8], _ value: UInt32) {
    appendUInt16(&out, UInt16(truncatingIfNeeded: value >> 16))
    appendUInt16(&out, UInt16(truncatingIfNeeded: value))
}

@inline(__always)
private func appendUInt64(_ out: inout [UInt8], _ value: UInt64) {
    appendUInt32(&out, UInt32(truncatingIfNeeded: value >> 32))
    appendUInt32(&out, UInt32(truncatingIfNeeded: value))
}

private func hexByte(_ byte: UInt8) -> String {
    let digits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f"]
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
}
