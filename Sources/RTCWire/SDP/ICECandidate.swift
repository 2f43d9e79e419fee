/// An ICE candidate as carried in `a=candidate:` (RFC 8839 §5.1) and trickled by signalling.
///
/// Text fields keep the case they were written in (Firefox writes `UDP`); compare `transport` and
/// `type` case-insensitively when acting on them.
public struct ICECandidate: Sendable, Hashable {
    /// One `key value` pair after the standard fields, e.g. `generation 0` or `tcptype active`.
    public struct Extension: Sendable, Hashable {
        public var key: String
        public var value: String

        /// Creates a value from its fields.
        public init(key: String, value: String) {
            self.key = key
            self.value = value
        }
    }

    /// 1–32 ice-chars; equal foundations mean "same base, same server, same type".
    public var foundation: String
    /// 1 for RTP; 2 for RTCP without rtcp-mux.
    public var component: Int
    /// `udp` (or `tcp`).
    public var transport: String
    /// Candidate priority (RFC 8445 §5.1.2).
    public var priority: UInt32
    /// IP address or mDNS name.
    public var address: String
    /// Transport port.
    public var port: UInt16
    /// `host`, `srflx`, `prflx` or `relay`.
    public var type: String
    /// `raddr` of reflexive and relay candidates.
    public var relatedAddress: String?
    /// `rport` of reflexive and relay candidates.
    public var relatedPort: UInt16?
    /// Remaining pairs in written order (`generation`, `ufrag`, `network-id`, `tcptype` …).
    public var extensions: [Extension]

    /// Creates a value from its fields.
    public init(
        foundation: String, component: Int = 1, transport: String = "udp", priority: UInt32,
        address: String, port: UInt16, type: String, relatedAddress: String? = nil, relatedPort: UInt16? = nil,
        extensions: [Extension] = []
    ) {
        self.foundation = foundation
        self.component = component
        self.transport = transport
        self.priority = priority
        self.address = address
        self.port = port
        self.type = type
        self.relatedAddress = relatedAddress
        self.relatedPort = relatedPort
        self.extensions = extensions
    }

    /// The value of the first extension named `key`, e.g. `value(forExtension: "tcptype")`.
    public func value(forExtension key: String) -> String? {
        extensions.first { $0.key == key }?.value
    }

    /// Parses the value after `a=candidate:` (a leading `candidate:` is tolerated, as sent by
    /// `RTCIceCandidate.candidate` in trickle messages).
    public static func parse(_ attributeValue: String) throws(SDPError) -> ICECandidate {
        var bytes = SDPText.trim(SDPText.bytes(attributeValue))
        let prefix = "candidate:".utf8
        if bytes.starts(with: prefix) { bytes = bytes.dropFirst(prefix.count) }
        return try parse(bytes: bytes)
    }

    static func parse(bytes: SDPBytes) throws(SDPError) -> ICECandidate {
        guard bytes.count <= 4096 else { throw .invalidCandidate(reason: "too long") }
        let parts = SDPText.tokens(bytes)
        guard parts.count >= 8 else { throw .invalidCandidate(reason: "fewer than 8 fields") }
        guard parts[0].count <= 32, SDPText.isICEChars(parts[0]) else {
            throw .invalidCandidate(reason: "bad foundation")
        }
        guard let component = SDPText.unsigned(parts[1], as: UInt16.self), (1...256).contains(component) else {
            throw .invalidCandidate(reason: "bad component")
        }
        guard let priority = SDPText.unsigned(parts[3], as: UInt32.self) else {
            throw .invalidCandidate(reason: "bad priority")
        }
        guard let port = SDPText.unsigned(parts[5], as: UInt16.self) else {
            throw .invalidCandidate(reason: "bad port")
        }
        guard parts[6].elementsEqual("typ".utf8) else { throw .invalidCandidate(reason: "missing typ") }
        var candidate = ICECandidate(
            foundation: SDPText.string(parts[0]), component: Int(component), transport: SDPText.string(parts[2]),
            priority: priority, address: SDPText.string(parts[4]), port: port, type: SDPText.string(parts[7]))
        var index = 8
        while index < parts.count {
            guard index + 1 < parts.count else { throw .invalidCandidate(reason: "extension without value") }
            let key = SDPText.string(parts[index])
            let value = parts[index + 1]
            switch key {
            case "raddr":
                guard candidate.relatedAddress == nil else { throw .invalidCandidate(reason: "duplicate raddr") }
                candidate.relatedAddress = SDPText.string(value)
            case "rport":
                guard candidate.relatedPort == nil, let relatedPort = SDPText.unsigned(value, as: UInt16.self) else {
                    throw .invalidCandidate(reason: "bad rport")
                }
                candidate.relatedPort = relatedPort
            default:
                candidate.extensions.append(Extension(key: key, value: SDPText.string(value)))
            }
            index += 2
        }
        return candidate
    }

    /// The candidate as written after `a=candidate:` (no prefix).
    public var attributeValue: String {
        var out = "\(foundation) \(component) \(transport) \(priority) \(address) \(port) typ \(type)"
        if let relatedAddress { out += " raddr " + relatedAddress }
        if let relatedPort { out += " rport \(relatedPort)" }
        for item in extensions { out += " " + item.key + " " + item.value }
        return out
    }
}
