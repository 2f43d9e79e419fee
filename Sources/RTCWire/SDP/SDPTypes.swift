/// Media direction attribute (`a=sendrecv` …), RFC 8866 §6.7.
public enum SDPDirection: String, Sendable, Hashable, CaseIterable {
    case sendrecv, sendonly, recvonly, inactive

    /// The direction as seen from the other side (sendonly ↔ recvonly).
    public var reversed: SDPDirection {
        switch self {
        case .sendonly: .recvonly
        case .recvonly: .sendonly
        default: self
        }
    }

    /// Whether this side sends media.
    public var sends: Bool { self == .sendrecv || self == .sendonly }
    /// Whether this side receives media.
    public var receives: Bool { self == .sendrecv || self == .recvonly }
}

/// DTLS role negotiation (`a=setup:`), RFC 4145 / RFC 8842.
public enum SDPSetup: String, Sendable, Hashable, CaseIterable {
    case actpass, active, passive, holdconn
}

/// `a=fingerprint:<algorithm> <value>` (RFC 8122), e.g. `sha-256 AB:CD:…`.
public struct SDPFingerprint: Sendable, Hashable {
    /// Hash function name as written, e.g. `sha-256`.
    public var algorithm: String
    /// Colon-separated upper-case hex bytes as written.
    public var value: String

    /// Creates a value from its fields.
    public init(algorithm: String, value: String) {
        self.algorithm = algorithm
        self.value = value
    }

    /// The fingerprint bytes, or nil when `value` is not colon-separated hex.
    public var bytes: [UInt8]? {
        var result: [UInt8] = []
        for part in SDPText.split(SDPText.bytes(value), on: SDPText.colon) {
            guard part.count == 2, let high = Self.hexValue(part[part.startIndex]),
                let low = Self.hexValue(part[part.startIndex + 1])
            else { return nil }
            result.append(high << 4 | low)
        }
        return result.isEmpty ? nil : result
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    static func parse(_ bytes: SDPBytes) -> SDPFingerprint? {
        let parts = SDPText.tokens(bytes)
        guard parts.count == 2 else { return nil }
        return SDPFingerprint(algorithm: SDPText.string(parts[0]), value: SDPText.string(parts[1]))
    }

    var attributeValue: String { algorithm + " " + value }
}

/// The `o=` line.
public struct SDPOrigin: Sendable, Hashable {
    public var username: String
    /// Numeric session id, kept as text because implementations exceed 64 bits.
    public var sessionID: String
    /// Incremented on every new offer/answer of the same session.
    public var sessionVersion: UInt64
    public var networkType: String
    public var addressType: String
    public var address: String

    /// Creates a value from its fields.
    public init(
        username: String = "-", sessionID: String, sessionVersion: UInt64,
        networkType: String = "IN", addressType: String = "IP4", address: String = "127.0.0.1"
    ) {
        self.username = username
        self.sessionID = sessionID
        self.sessionVersion = sessionVersion
        self.networkType = networkType
        self.addressType = addressType
        self.address = address
    }

    static func parse(_ bytes: SDPBytes) -> SDPOrigin? {
        let parts = SDPText.tokens(bytes)
        guard parts.count == 6, let version = SDPText.unsigned(parts[2], as: UInt64.self) else { return nil }
        return SDPOrigin(
            username: SDPText.string(parts[0]), sessionID: SDPText.string(parts[1]), sessionVersion: version,
            networkType: SDPText.string(parts[3]), addressType: SDPText.string(parts[4]),
            address: SDPText.string(parts[5]))
    }

    var lineValue: String {
        "\(username) \(sessionID) \(sessionVersion) \(networkType) \(addressType) \(address)"
    }
}

/// A `c=` line: `IN IP4 127.0.0.1`.
public struct SDPConnection: Sendable, Hashable {
    public var networkType: String
    public var addressType: String
    /// Address as written (may carry `/ttl` for multicast).
    public var address: String

    /// Creates a value from its fields.
    public init(networkType: String = "IN", addressType: String = "IP4", address: String) {
        self.networkType = networkType
        self.addressType = addressType
        self.address = address
    }

    static func parse(_ bytes: SDPBytes) -> SDPConnection? {
        let parts = SDPText.tokens(bytes)
        guard parts.count == 3 else { return nil }
        return SDPConnection(
            networkType: SDPText.string(parts[0]), addressType: SDPText.string(parts[1]),
            address: SDPText.string(parts[2]))
    }

    var lineValue: String { "\(networkType) \(addressType) \(address)" }
}

/// A `b=<type>:<value>` line, e.g. `AS:2500` (kbit/s) or `TIAS:2500000` (bit/s).
public struct SDPBandwidth: Sendable, Hashable {
    public var type: String
    public var value: UInt64

    /// Creates a value from its fields.
    public init(type: String, value: UInt64) {
        self.type = type
        self.value = value
    }

    static func parse(_ bytes: SDPBytes) -> SDPBandwidth? {
        let (type, value) = SDPText.splitOnce(SDPText.trim(bytes), at: SDPText.colon)
        guard !type.isEmpty, !type.contains(where: SDPText.isSpace), let value,
            let number = SDPText.unsigned(value, as: UInt64.self)
        else { return nil }
        return SDPBandwidth(type: SDPText.string(type), value: number)
    }

    var lineValue: String { "\(type):\(value)" }
}

/// A `t=` line and the `r=` lines that follow it.
public struct SDPTiming: Sendable, Hashable {
    public var start: UInt64
    public var stop: UInt64
    /// `r=` values, kept verbatim.
    public var repeats: [String]

    /// Creates a value from its fields.
    public init(start: UInt64 = 0, stop: UInt64 = 0, repeats: [String] = []) {
        self.start = start
        self.stop = stop
        self.repeats = repeats
    }

    static func parse(_ bytes: SDPBytes) -> SDPTiming? {
        let parts = SDPText.tokens(bytes)
        guard parts.count == 2, let start = SDPText.unsigned(parts[0], as: UInt64.self),
            let stop = SDPText.unsigned(parts[1], as: UInt64.self)
        else { return nil }
        return SDPTiming(start: start, stop: stop)
    }
}

/// A line of a type the model does not interpret (`i=`, `u=`, `e=`, `p=`, `z=`, `k=`, unknown letters),
/// kept so that serialization loses nothing.
public struct SDPLine: Sendable, Hashable {
    /// The ASCII letter before `=`.
    public var type: UInt8
    public var value: String

    /// Creates a value from its fields.
    public init(type: UInt8, value: String) {
        self.type = type
        self.value = value
    }

    var text: String { String(decoding: [type], as: UTF8.self) + "=" + value }
}

/// One `key[=value]` item of an `fmtp` or `rid` parameter list, in written order.
public struct SDPParameter: Sendable, Hashable {
    public var key: String
    public var value: String?

    /// Creates a value from its fields.
    public init(key: String, value: String? = nil) {
        self.key = key
        self.value = value
    }
}

extension Array where Element == SDPParameter {
    /// The value of the first parameter named `key` (nil if absent or value-less).
    public func value(for key: String) -> String? {
        first { $0.key == key }?.value
    }
}

/// `a=group:<semantics> <mid>…`, e.g. `BUNDLE 0 1` (RFC 5888, RFC 9143).
public struct SDPGroup: Sendable, Hashable {
    public var semantics: String
    public var mids: [String]

    /// Creates a value from its fields.
    public init(semantics: String, mids: [String]) {
        self.semantics = semantics
        self.mids = mids
    }

    static func parse(_ bytes: SDPBytes) -> SDPGroup? {
        let parts = SDPText.tokens(bytes)
        guard let first = parts.first else { return nil }
        return SDPGroup(semantics: SDPText.string(first), mids: parts.dropFirst().map(SDPText.string))
    }

    var attributeValue: String { ([semantics] + mids).joined(separator: " ") }
}

/// `a=msid:<stream id> [<track id>]` (RFC 8830).
public struct SDPMsid: Sendable, Hashable {
    /// Media stream id; `-` means "no stream".
    public var streamID: String
    public var trackID: String?

    /// Creates a value from its fields.
    public init(streamID: String, trackID: String? = nil) {
        self.streamID = streamID
        self.trackID = trackID
    }

    static func parse(_ bytes: SDPBytes) -> SDPMsid? {
        let parts = SDPText.tokens(bytes)
        guard parts.count == 1 || parts.count == 2 else { return nil }
        return SDPMsid(streamID: SDPText.string(parts[0]), trackID: parts.count == 2 ? SDPText.string(parts[1]) : nil)
    }

    var attributeValue: String { trackID.map { streamID + " " + $0 } ?? streamID }
}

/// `a=msid-semantic:<semantic> <id>…`, e.g. `WMS *`.
public struct SDPMsidSemantic: Sendable, Hashable {
    public var semantic: String
    public var identifiers: [String]

    /// Creates a value from its fields.
    public init(semantic: String = "WMS", identifiers: [String] = []) {
        self.semantic = semantic
        self.identifiers = identifiers
    }
}

/// `a=rtpmap:<pt> <name>/<clock rate>[/<channels>]`.
public struct SDPRtpMap: Sendable, Hashable {
    public var payloadType: UInt8
    public var name: String
    public var clockRate: UInt32
    public var channels: UInt16?

    /// Creates a value from its fields.
    public init(payloadType: UInt8, name: String, clockRate: UInt32, channels: UInt16? = nil) {
        self.payloadType = payloadType
        self.name = name
        self.clockRate = clockRate
        self.channels = channels
    }

    static func parse(_ bytes: SDPBytes) -> SDPRtpMap? {
        let parts = SDPText.tokens(bytes)
        guard parts.count == 2, let payloadType = SDPPayloadType.parse(parts[0]) else { return nil }
        let encoding = SDPText.split(parts[1], on: SDPText.slash)
        guard encoding.count == 2 || encoding.count == 3, !encoding[0].isEmpty,
            let clockRate = SDPText.unsigned(encoding[1], as: UInt32.self)
        else { return nil }
        var channels: UInt16?
        if encoding.count == 3 {
            guard let value = SDPText.unsigned(encoding[2], as: UInt16.self) else { return nil }
            channels = value
        }
        return SDPRtpMap(
            payloadType: payloadType, name: SDPText.string(encoding[0]), clockRate: clockRate,
            channels: channels)
    }

    var attributeValue: String {
        var out = "\(payloadType) \(name)/\(clockRate)"
        if let channels { out += "/\(channels)" }
        return out
    }
}

enum SDPPayloadType {
    /// RTP payload types are 7 bits.
    static func parse(_ bytes: SDPBytes) -> UInt8? {
        guard let value = SDPText.unsigned(bytes, as: UInt8.self), value <= 127 else { return nil }
        return value
    }
}

/// `a=fmtp:<pt> <key=value;…>`; parameters keep their written order.
public struct SDPFormatParameters: Sendable, Hashable {
    public var payloadType: UInt8
    public var parameters: [SDPParameter]

    /// Creates a value from its fields.
    public init(payloadType: UInt8, parameters: [SDPParameter]) {
        self.payloadType = payloadType
        self.parameters = parameters
    }

    static func parse(_ bytes: SDPBytes) -> SDPFormatParameters? {
        let (token, rest) = SDPText.firstToken(bytes)
        guard let payloadType = SDPPayloadType.parse(token) else { return nil }
        return SDPFormatParameters(payloadType: payloadType, parameters: SDPText.parameters(rest))
    }

    var attributeValue: String {
        parameters.isEmpty ? "\(payloadType)" : "\(payloadType) " + SDPText.serialize(parameters)
    }
}

/// One RTCP feedback mechanism, e.g. `nack` + `pli`, `ccm` + `fir`, `transport-cc`.
public struct RTCPFeedback: Sendable, Hashable {
    public var type: String
    public var parameter: String?

    /// Creates a value from its fields.
    public init(type: String, parameter: String? = nil) {
        self.type = type
        self.parameter = parameter
    }

    /// `nack`.
    public static let nack = RTCPFeedback(type: "nack")
    /// `nack pli`.
    public static let pli = RTCPFeedback(type: "nack", parameter: "pli")
    /// `ccm fir`.
    public static let fir = RTCPFeedback(type: "ccm", parameter: "fir")
    /// `transport-cc`.
    public static let transportCC = RTCPFeedback(type: "transport-cc")
    /// `goog-remb`.
    public static let googREMB = RTCPFeedback(type: "goog-remb")
}

/// `a=rtcp-fb:<pt|*> <type> [<parameter>]` (RFC 4585).
public struct SDPRtcpFeedback: Sendable, Hashable {
    /// The payload type, or nil for the `*` wildcard.
    public var payloadType: UInt8?
    public var feedback: RTCPFeedback

    /// Creates a value from its fields.
    public init(payloadType: UInt8?, feedback: RTCPFeedback) {
        self.payloadType = payloadType
        self.feedback = feedback
    }

    static func parse(_ bytes: SDPBytes) -> SDPRtcpFeedback? {
        let parts = SDPText.tokens(bytes)
        guard parts.count >= 2 else { return nil }
        var payloadType: UInt8?
        if !parts[0].elementsEqual("*".utf8) {
            guard let value = SDPPayloadType.parse(parts[0]) else { return nil }
            payloadType = value
        }
        let parameter = parts.count > 2 ? parts.dropFirst(2).map(SDPText.string).joined(separator: " ") : nil
        return SDPRtcpFeedback(
            payloadType: payloadType, feedback: RTCPFeedback(type: SDPText.string(parts[1]), parameter: parameter))
    }

    var attributeValue: String {
        var out = payloadType.map { "\($0)" } ?? "*"
        out += " " + feedback.type
        if let parameter = feedback.parameter { out += " " + parameter }
        return out
    }
}

/// `a=extmap:<id>[/<direction>] <uri> [<attributes>]` (RFC 8285).
public struct SDPExtmap: Sendable, Hashable {
    /// Extension id: 1–14 for one-byte headers, up to 255 for two-byte headers.
    public var id: UInt16
    public var direction: SDPDirection?
    public var uri: String
    public var attributes: String?

    /// Creates a value from its fields.
    public init(id: UInt16, direction: SDPDirection? = nil, uri: String, attributes: String? = nil) {
        self.id = id
        self.direction = direction
        self.uri = uri
        self.attributes = attributes
    }

    static func parse(_ bytes: SDPBytes) -> SDPExtmap? {
        let parts = SDPText.tokens(bytes)
        guard parts.count >= 2 else { return nil }
        let (idBytes, directionBytes) = SDPText.splitOnce(parts[0], at: SDPText.slash)
        guard let id = SDPText.unsigned(idBytes, as: UInt16.self) else { return nil }
        var direction: SDPDirection?
        if let directionBytes {
            guard let value = SDPDirection(rawValue: SDPText.string(directionBytes)) else { return nil }
            direction = value
        }
        let attributes = parts.count > 2 ? parts.dropFirst(2).map(SDPText.string).joined(separator: " ") : nil
        return SDPExtmap(id: id, direction: direction, uri: SDPText.string(parts[1]), attributes: attributes)
    }

    var attributeValue: String {
        var out = "\(id)"
        if let direction { out += "/" + direction.rawValue }
        out += " " + uri
        if let attributes { out += " " + attributes }
        return out
    }
}

/// `a=ssrc:<ssrc> <attribute>[:<value>]` (RFC 5576), e.g. `cname:abc` or `msid:stream track`.
public struct SDPSSRCAttribute: Sendable, Hashable {
    public var ssrc: UInt32
    public var attribute: String
    public var value: String?

    /// Creates a value from its fields.
    public init(ssrc: UInt32, attribute: String, value: String? = nil) {
        self.ssrc = ssrc
        self.attribute = attribute
        self.value = value
    }

    static func parse(_ bytes: SDPBytes) -> SDPSSRCAttribute? {
        let (token, rest) = SDPText.firstToken(bytes)
        guard let ssrc = SDPText.unsigned(token, as: UInt32.self), !rest.isEmpty else { return nil }
        let (attribute, value) = SDPText.splitOnce(rest, at: SDPText.colon)
        guard !attribute.isEmpty else { return nil }
        return SDPSSRCAttribute(ssrc: ssrc, attribute: SDPText.string(attribute), value: value.map(SDPText.string))
    }

    var attributeValue: String {
        "\(ssrc) " + attribute + (value.map { ":" + $0 } ?? "")
    }
}

/// `a=ssrc-group:<semantics> <ssrc>…`, e.g. `FID <primary> <rtx>`.
public struct SDPSSRCGroup: Sendable, Hashable {
    public var semantics: String
    public var ssrcs: [UInt32]

    /// Creates a value from its fields.
    public init(semantics: String, ssrcs: [UInt32]) {
        self.semantics = semantics
        self.ssrcs = ssrcs
    }

    static func parse(_ bytes: SDPBytes) -> SDPSSRCGroup? {
        let parts = SDPText.tokens(bytes)
        guard let first = parts.first else { return nil }
        var ssrcs: [UInt32] = []
        for part in parts.dropFirst() {
            guard let ssrc = SDPText.unsigned(part, as: UInt32.self) else { return nil }
            ssrcs.append(ssrc)
        }
        return SDPSSRCGroup(semantics: SDPText.string(first), ssrcs: ssrcs)
    }

    var attributeValue: String { ([semantics] + ssrcs.map { "\($0)" }).joined(separator: " ") }
}

/// Direction of a `rid` line.
public enum SDPRidDirection: String, Sendable, Hashable {
    case send, recv
}

/// `a=rid:<id> <send|recv> [<restrictions>]` (RFC 8851), e.g. `q send` or `1 send pt=96;max-width=1280`.
public struct SDPRid: Sendable, Hashable {
    public var id: String
    public var direction: SDPRidDirection
    public var parameters: [SDPParameter]

    /// Creates a value from its fields.
    public init(id: String, direction: SDPRidDirection, parameters: [SDPParameter] = []) {
        self.id = id
        self.direction = direction
        self.parameters = parameters
    }

    static func parse(_ bytes: SDPBytes) -> SDPRid? {
        let (id, rest) = SDPText.firstToken(bytes)
        let (directionBytes, parameters) = SDPText.firstToken(rest)
        guard !id.isEmpty, let direction = SDPRidDirection(rawValue: SDPText.string(directionBytes)) else {
            return nil
        }
        return SDPRid(id: SDPText.string(id), direction: direction, parameters: SDPText.parameters(parameters))
    }

    var attributeValue: String {
        var out = id + " " + direction.rawValue
        if !parameters.isEmpty { out += " " + SDPText.serialize(parameters) }
        return out
    }
}

/// One rid reference inside `a=simulcast`; `~` marks it paused.
public struct SDPSimulcastRID: Sendable, Hashable {
    public var id: String
    public var paused: Bool

    /// Creates a value from its fields.
    public init(id: String, paused: Bool = false) {
        self.id = id
        self.paused = paused
    }
}

/// `a=simulcast:send q;h;f recv a,b` (RFC 8853). Each entry of `send`/`receive` is one simulcast
/// stream given as a list of alternative rids.
public struct SDPSimulcast: Sendable, Hashable {
    public var send: [[SDPSimulcastRID]]
    public var receive: [[SDPSimulcastRID]]

    /// Creates a value from its fields.
    public init(send: [[SDPSimulcastRID]] = [], receive: [[SDPSimulcastRID]] = []) {
        self.send = send
        self.receive = receive
    }

    /// The first alternative of each send stream, e.g. `["q", "h", "f"]`.
    public var sendRIDs: [String] { send.compactMap { $0.first?.id } }
    /// The first alternative of each receive stream.
    public var receiveRIDs: [String] { receive.compactMap { $0.first?.id } }

    static func parse(_ bytes: SDPBytes) -> SDPSimulcast? {
        let parts = SDPText.tokens(bytes)
        guard !parts.isEmpty, parts.count.isMultiple(of: 2) else { return nil }
        var result = SDPSimulcast()
        var sawSend = false
        var sawReceive = false
        var index = 0
        while index + 1 < parts.count {
            guard let streams = parseStreams(parts[index + 1]) else { return nil }
            switch SDPText.string(parts[index]) {
            case "send" where !sawSend:
                sawSend = true
                result.send = streams
            case "recv" where !sawReceive:
                sawReceive = true
                result.receive = streams
            default:
                return nil
            }
            index += 2
        }
        return result
    }

    private static func parseStreams(_ bytes: SDPBytes) -> [[SDPSimulcastRID]]? {
        var streams: [[SDPSimulcastRID]] = []
        for stream in SDPText.split(bytes, on: SDPText.semicolon) {
            var alternatives: [SDPSimulcastRID] = []
            for alternative in SDPText.split(stream, on: SDPText.comma) {
                var id = alternative
                let paused = id.first == SDPText.tilde
                if paused { id = id.dropFirst() }
                guard !id.isEmpty, !id.contains(SDPText.tilde) else { return nil }
                alternatives.append(SDPSimulcastRID(id: SDPText.string(id), paused: paused))
            }
            streams.append(alternatives)
        }
        return streams
    }

    private static func serialize(_ streams: [[SDPSimulcastRID]]) -> String {
        streams.map { stream in
            stream.map { ($0.paused ? "~" : "") + $0.id }.joined(separator: ",")
        }.joined(separator: ";")
    }

    var attributeValue: String {
        var pieces: [String] = []
        if !send.isEmpty { pieces.append("send " + Self.serialize(send)) }
        if !receive.isEmpty { pieces.append("recv " + Self.serialize(receive)) }
        return pieces.joined(separator: " ")
    }
}
