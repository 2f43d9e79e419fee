/// One `a=` line. Attributes WebRTC relies on are typed; anything else is kept as ``other(name:value:)``
/// so that a parse/serialize round trip keeps it, in place.
public enum SDPAttribute: Sendable, Hashable {
    case group(SDPGroup)
    case iceLite
    case iceUfrag(String)
    case icePwd(String)
    case iceOptions([String])
    case fingerprint(SDPFingerprint)
    case setup(SDPSetup)
    case extmapAllowMixed
    case mid(String)
    case direction(SDPDirection)
    case rtcpMux
    case rtcpRsize
    case candidate(ICECandidate)
    case endOfCandidates
    case msid(SDPMsid)
    case rtpmap(SDPRtpMap)
    case fmtp(SDPFormatParameters)
    case rtcpFeedback(SDPRtcpFeedback)
    case extmap(SDPExtmap)
    case ssrc(SDPSSRCAttribute)
    case ssrcGroup(SDPSSRCGroup)
    case rid(SDPRid)
    case simulcast(SDPSimulcast)
    case sctpPort(UInt16)
    case maxMessageSize(UInt64)
    /// Any other attribute, verbatim: `a=name` (value nil) or `a=name:value`.
    case other(name: String, value: String?)

    /// The attribute name as written before `:`.
    public var name: String {
        switch self {
        case .group: "group"
        case .iceLite: "ice-lite"
        case .iceUfrag: "ice-ufrag"
        case .icePwd: "ice-pwd"
        case .iceOptions: "ice-options"
        case .fingerprint: "fingerprint"
        case .setup: "setup"
        case .extmapAllowMixed: "extmap-allow-mixed"
        case .mid: "mid"
        case .direction(let direction): direction.rawValue
        case .rtcpMux: "rtcp-mux"
        case .rtcpRsize: "rtcp-rsize"
        case .candidate: "candidate"
        case .endOfCandidates: "end-of-candidates"
        case .msid: "msid"
        case .rtpmap: "rtpmap"
        case .fmtp: "fmtp"
        case .rtcpFeedback: "rtcp-fb"
        case .extmap: "extmap"
        case .ssrc: "ssrc"
        case .ssrcGroup: "ssrc-group"
        case .rid: "rid"
        case .simulcast: "simulcast"
        case .sctpPort: "sctp-port"
        case .maxMessageSize: "max-message-size"
        case .other(let name, _): name
        }
    }

    /// The text after `name:`, or nil for flag attributes.
    public var value: String? {
        switch self {
        case .iceLite, .extmapAllowMixed, .direction, .rtcpMux, .rtcpRsize, .endOfCandidates: nil
        case .group(let group): group.attributeValue
        case .iceUfrag(let text), .icePwd(let text), .mid(let text): text
        case .iceOptions(let options): options.joined(separator: " ")
        case .fingerprint(let fingerprint): fingerprint.attributeValue
        case .setup(let setup): setup.rawValue
        case .candidate(let candidate): candidate.attributeValue
        case .msid(let msid): msid.attributeValue
        case .rtpmap(let map): map.attributeValue
        case .fmtp(let fmtp): fmtp.attributeValue
        case .rtcpFeedback(let feedback): feedback.attributeValue
        case .extmap(let extmap): extmap.attributeValue
        case .ssrc(let ssrc): ssrc.attributeValue
        case .ssrcGroup(let group): group.attributeValue
        case .rid(let rid): rid.attributeValue
        case .simulcast(let simulcast): simulcast.attributeValue
        case .sctpPort(let port): "\(port)"
        case .maxMessageSize(let size): "\(size)"
        case .other(_, let value): value
        }
    }

    /// The full line without `a=` and without line end.
    public var text: String {
        if let value { return name + ":" + value }
        return name
    }

    /// Parses the text after `a=`. Returns nil when a known attribute has a malformed value.
    static func parse(_ line: SDPBytes) -> SDPAttribute? {
        let (nameBytes, valueBytes) = SDPText.splitOnce(line, at: SDPText.colon)
        guard !nameBytes.isEmpty else { return nil }
        let name = SDPText.string(nameBytes)
        guard let valueBytes else {
            switch name {
            case "ice-lite": return .iceLite
            case "extmap-allow-mixed": return .extmapAllowMixed
            case "rtcp-mux": return .rtcpMux
            case "rtcp-rsize": return .rtcpRsize
            case "end-of-candidates": return .endOfCandidates
            default:
                if let direction = SDPDirection(rawValue: name) { return .direction(direction) }
                return .other(name: name, value: nil)
            }
        }
        let trimmed = SDPText.trim(valueBytes)
        switch name {
        case "group": return SDPGroup.parse(trimmed).map(SDPAttribute.group)
        case "ice-ufrag": return trimmed.isEmpty ? nil : .iceUfrag(SDPText.string(trimmed))
        case "ice-pwd": return trimmed.isEmpty ? nil : .icePwd(SDPText.string(trimmed))
        case "mid": return trimmed.isEmpty ? nil : .mid(SDPText.string(trimmed))
        case "ice-options": return .iceOptions(SDPText.tokens(trimmed).map(SDPText.string))
        case "fingerprint": return SDPFingerprint.parse(trimmed).map(SDPAttribute.fingerprint)
        case "setup": return SDPSetup(rawValue: SDPText.string(trimmed)).map(SDPAttribute.setup)
        case "candidate": return (try? ICECandidate.parse(bytes: trimmed)).map(SDPAttribute.candidate)
        case "msid": return SDPMsid.parse(trimmed).map(SDPAttribute.msid)
        case "rtpmap": return SDPRtpMap.parse(trimmed).map(SDPAttribute.rtpmap)
        case "fmtp": return SDPFormatParameters.parse(trimmed).map(SDPAttribute.fmtp)
        case "rtcp-fb": return SDPRtcpFeedback.parse(trimmed).map(SDPAttribute.rtcpFeedback)
        case "extmap": return SDPExtmap.parse(trimmed).map(SDPAttribute.extmap)
        case "ssrc": return SDPSSRCAttribute.parse(trimmed).map(SDPAttribute.ssrc)
        case "ssrc-group": return SDPSSRCGroup.parse(trimmed).map(SDPAttribute.ssrcGroup)
        case "rid": return SDPRid.parse(trimmed).map(SDPAttribute.rid)
        case "simulcast": return SDPSimulcast.parse(trimmed).map(SDPAttribute.simulcast)
        case "sctp-port": return SDPText.unsigned(trimmed, as: UInt16.self).map(SDPAttribute.sctpPort)
        case "max-message-size": return SDPText.unsigned(trimmed, as: UInt64.self).map(SDPAttribute.maxMessageSize)
        default: return .other(name: name, value: SDPText.string(valueBytes))
        }
    }
}

/// An ordered attribute list with typed views, shared by session and media level
/// (``SessionDescription`` and ``MediaDescription``).
///
/// Setters keep the position of the attributes they replace; new attributes go to the end, so a
/// description built from scratch lists attributes in the order its properties were set.
public protocol SDPAttributeContainer {
    /// The `a=` lines in order.
    var attributes: [SDPAttribute] { get set }
}

/// The attributes that may stand at session or media level (a media-level one wins; see
/// ``SessionDescription/iceCredentials(forMediaAt:)``).
extension SDPAttributeContainer {
    /// `a=ice-ufrag` at this level.
    public var iceUfrag: String? {
        get { first(\.asIceUfrag) }
        set { replaceAll(\.asIceUfrag, with: newValue.map { [.iceUfrag($0)] } ?? []) }
    }

    /// `a=ice-pwd` at this level.
    public var icePwd: String? {
        get { first(\.asIcePwd) }
        set { replaceAll(\.asIcePwd, with: newValue.map { [.icePwd($0)] } ?? []) }
    }

    /// Tokens of `a=ice-options`, e.g. `["trickle"]`; empty when absent.
    public var iceOptions: [String] {
        get { first(\.asIceOptions) ?? [] }
        set { replaceAll(\.asIceOptions, with: newValue.isEmpty ? [] : [.iceOptions(newValue)]) }
    }

    /// Every `a=fingerprint` line (aiortc sends sha-256, sha-384 and sha-512).
    public var fingerprints: [SDPFingerprint] {
        get { all(\.asFingerprint) }
        set { replaceAll(\.asFingerprint, with: newValue.map(SDPAttribute.fingerprint)) }
    }

    /// The first fingerprint.
    public var fingerprint: SDPFingerprint? {
        get { first(\.asFingerprint) }
        set { fingerprints = newValue.map { [$0] } ?? [] }
    }

    /// `a=setup`: the DTLS role offered or chosen.
    public var setup: SDPSetup? {
        get { first(\.asSetup) }
        set { replaceAll(\.asSetup, with: newValue.map { [.setup($0)] } ?? []) }
    }

    /// `a=extmap` lines at this level, in order.
    public var extmaps: [SDPExtmap] {
        get { all(\.asExtmap) }
        set { replaceAll(\.asExtmap, with: newValue.map(SDPAttribute.extmap)) }
    }
}

extension SDPAttributeContainer {
    func first<T>(_ extract: (SDPAttribute) -> T?) -> T? {
        for attribute in attributes {
            if let value = extract(attribute) { return value }
        }
        return nil
    }

    func all<T>(_ extract: (SDPAttribute) -> T?) -> [T] {
        attributes.compactMap(extract)
    }

    func has(_ attribute: SDPAttribute) -> Bool {
        attributes.contains(attribute)
    }

    /// Replaces every attribute matched by `extract` with `replacement`, at the first match's position.
    mutating func replaceAll<T>(
        _ extract: (SDPAttribute) -> T?, with replacement: [SDPAttribute], defaultIndex: Int? = nil
    ) {
        let firstIndex = attributes.firstIndex { extract($0) != nil }
        attributes.removeAll { extract($0) != nil }
        let index = min(firstIndex ?? defaultIndex ?? attributes.count, attributes.count)
        attributes.insert(contentsOf: replacement, at: index)
    }

    mutating func setFlag(_ flag: SDPAttribute, _ on: Bool) {
        replaceAll({ $0 == flag ? () : nil }, with: on ? [flag] : [])
    }

    /// The first attribute named `name`, verbatim (typed or not).
    func attribute(named name: String) -> SDPAttribute? {
        attributes.first { $0.name == name }
    }
}

extension SDPAttribute {
    var asGroup: SDPGroup? { if case .group(let v) = self { v } else { nil } }
    var asIceUfrag: String? { if case .iceUfrag(let v) = self { v } else { nil } }
    var asIcePwd: String? { if case .icePwd(let v) = self { v } else { nil } }
    var asIceOptions: [String]? { if case .iceOptions(let v) = self { v } else { nil } }
    var asFingerprint: SDPFingerprint? { if case .fingerprint(let v) = self { v } else { nil } }
    var asSetup: SDPSetup? { if case .setup(let v) = self { v } else { nil } }
    var asMid: String? { if case .mid(let v) = self { v } else { nil } }
    var asDirection: SDPDirection? { if case .direction(let v) = self { v } else { nil } }
    var asCandidate: ICECandidate? { if case .candidate(let v) = self { v } else { nil } }
    var asMsid: SDPMsid? { if case .msid(let v) = self { v } else { nil } }
    var asRtpMap: SDPRtpMap? { if case .rtpmap(let v) = self { v } else { nil } }
    var asFmtp: SDPFormatParameters? { if case .fmtp(let v) = self { v } else { nil } }
    var asRtcpFeedback: SDPRtcpFeedback? { if case .rtcpFeedback(let v) = self { v } else { nil } }
    var asExtmap: SDPExtmap? { if case .extmap(let v) = self { v } else { nil } }
    var asSSRC: SDPSSRCAttribute? { if case .ssrc(let v) = self { v } else { nil } }
    var asSSRCGroup: SDPSSRCGroup? { if case .ssrcGroup(let v) = self { v } else { nil } }
    var asRid: SDPRid? { if case .rid(let v) = self { v } else { nil } }
    var asSimulcast: SDPSimulcast? { if case .simulcast(let v) = self { v } else { nil } }
    var asSctpPort: UInt16? { if case .sctpPort(let v) = self { v } else { nil } }
    var asMaxMessageSize: UInt64? { if case .maxMessageSize(let v) = self { v } else { nil } }
    var isCodecAttribute: Bool {
        switch self {
        case .rtpmap, .fmtp, .rtcpFeedback: true
        default: false
        }
    }
}
