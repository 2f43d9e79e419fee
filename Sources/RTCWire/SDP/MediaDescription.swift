/// The media type of an `m=` line.
public enum SDPMediaType: Sendable, Hashable {
    case audio, video, application
    case other(String)

    /// Maps the `m=` token to a case.
    public init(_ text: String) {
        switch text {
        case "audio": self = .audio
        case "video": self = .video
        case "application": self = .application
        default: self = .other(text)
        }
    }

    /// The `m=` token.
    public var text: String {
        switch self {
        case .audio: "audio"
        case .video: "video"
        case .application: "application"
        case .other(let text): text
        }
    }

    /// The shared audio/video kind, nil for data channels and unknown types.
    public var mediaKind: MediaKind? {
        switch self {
        case .audio: .audio
        case .video: .video
        default: nil
        }
    }
}

/// A negotiated RTP payload format assembled from `rtpmap`, `fmtp` and `rtcp-fb` lines.
public struct RTPCodec: Sendable, Hashable {
    public var payloadType: UInt8
    /// Encoding name as written, e.g. `opus`, `VP8`, `rtx`.
    public var name: String
    public var clockRate: UInt32
    /// Audio channel count (`/2` for Opus); nil when absent.
    public var channels: UInt16?
    /// fmtp parameters in written order.
    public var parameters: [SDPParameter]
    /// Feedback mechanisms for this payload type, including `rtcp-fb:*` ones.
    public var feedback: [RTCPFeedback]

    /// Creates a value from its fields.
    public init(
        payloadType: UInt8, name: String, clockRate: UInt32, channels: UInt16? = nil,
        parameters: [SDPParameter] = [], feedback: [RTCPFeedback] = []
    ) {
        self.payloadType = payloadType
        self.name = name
        self.clockRate = clockRate
        self.channels = channels
        self.parameters = parameters
        self.feedback = feedback
    }

    /// The value of fmtp parameter `key`.
    public func parameter(_ key: String) -> String? { parameters.value(for: key) }

    /// Whether `name` equals `other` ignoring ASCII case (encoding names are case-insensitive).
    public func hasName(_ other: String) -> Bool {
        name.lowercased() == other.lowercased()
    }

    /// `opus` or `vp8` when this is one of the codecs Understudy implements.
    public var mediaCodec: MediaCodec? { MediaCodec(rawValue: name.lowercased()) }

    /// True for an RTX (RFC 4588) retransmission format.
    public var isRTX: Bool { hasName("rtx") }

    /// For RTX: the payload type it repairs (`apt=`).
    public var associatedPayloadType: UInt8? {
        parameter("apt").flatMap { SDPPayloadType.parse(SDPText.bytes($0)) }
    }

    /// Static payload types (RFC 3551) that may appear without an `rtpmap` line.
    static func staticCodec(_ payloadType: UInt8) -> RTPCodec? {
        switch payloadType {
        case 0: RTPCodec(payloadType: 0, name: "PCMU", clockRate: 8000)
        case 8: RTPCodec(payloadType: 8, name: "PCMA", clockRate: 8000)
        case 9: RTPCodec(payloadType: 9, name: "G722", clockRate: 8000)
        case 13: RTPCodec(payloadType: 13, name: "CN", clockRate: 8000)
        default: nil
        }
    }
}

/// One `m=` section with everything below it up to the next `m=`.
///
/// The attribute list ``attributes`` is the source of truth and keeps written order; the typed
/// properties read and write it.
public struct MediaDescription: Sendable, Hashable, SDPAttributeContainer {
    /// Media type of the `m=` line.
    public var type: SDPMediaType
    /// Port of the `m=` line; 9 with ICE, 0 when rejected.
    public var port: UInt16
    /// The `/<n>` after the port, rarely used.
    public var portCount: UInt16?
    /// Transport protocol, e.g. `UDP/TLS/RTP/SAVPF` or `UDP/DTLS/SCTP`.
    public var proto: String
    /// Format list: RTP payload types as text, or `webrtc-datachannel`.
    public var formats: [String]
    /// `i=` (and any unknown) lines before `c=`; kept verbatim.
    public var informationLines: [SDPLine]
    /// The `c=` line.
    public var connection: SDPConnection?
    /// `b=` lines in order.
    public var bandwidths: [SDPBandwidth]
    /// `k=` and unknown line types after `b=`; kept verbatim.
    public var otherLines: [SDPLine]
    /// `a=` lines in written order; the typed properties read and edit this list.
    public var attributes: [SDPAttribute]

    /// Creates a value from its fields.
    public init(
        type: SDPMediaType, port: UInt16 = 9, portCount: UInt16? = nil, proto: String = "UDP/TLS/RTP/SAVPF",
        formats: [String] = [], connection: SDPConnection? = SDPConnection(address: "0.0.0.0"),
        bandwidths: [SDPBandwidth] = [], attributes: [SDPAttribute] = []
    ) {
        self.type = type
        self.port = port
        self.portCount = portCount
        self.proto = proto
        self.formats = formats
        self.informationLines = []
        self.connection = connection
        self.bandwidths = bandwidths
        self.otherLines = []
        self.attributes = attributes
    }

    /// Audio/video/application as the shared enum (nil for application/unknown).
    public var kind: MediaKind? { type.mediaKind }

    /// `a=mid`: the section's identifier inside the BUNDLE group.
    public var mid: String? {
        get { first(\.asMid) }
        set { replaceAll(\.asMid, with: newValue.map { [.mid($0)] } ?? []) }
    }

    /// The direction attribute; nil when absent (which means sendrecv).
    public var direction: SDPDirection? {
        get { first(\.asDirection) }
        set { replaceAll(\.asDirection, with: newValue.map { [.direction($0)] } ?? []) }
    }

    /// The direction, defaulting to `sendrecv` when the attribute is absent (RFC 8866 §6.7).
    public var effectiveDirection: SDPDirection { direction ?? .sendrecv }

    /// A rejected or stopped section has port 0 (RFC 8829 §5.3.1), unless it is `a=bundle-only`:
    /// a max-bundle offerer (GStreamer's webrtcbin, JSEP's `max-bundle`) sends port 0 there for a live
    /// section that shares the BUNDLE transport (RFC 8843 §6).
    public var isRejected: Bool { port == 0 && !bundleOnly }

    /// `a=bundle-only`: the section is used only inside a BUNDLE group (RFC 8843 §6).
    public var bundleOnly: Bool {
        attributes.contains { if case .other(let name, _) = $0 { name == "bundle-only" } else { false } }
    }

    /// `a=rtcp-mux`: RTP and RTCP share one transport.
    public var rtcpMux: Bool {
        get { has(.rtcpMux) }
        set { setFlag(.rtcpMux, newValue) }
    }

    /// `a=rtcp-rsize`: reduced-size RTCP is allowed (RFC 5506).
    public var rtcpRsize: Bool {
        get { has(.rtcpRsize) }
        set { setFlag(.rtcpRsize, newValue) }
    }

    /// `a=end-of-candidates`: no more trickled candidates follow.
    public var endOfCandidates: Bool {
        get { has(.endOfCandidates) }
        set { setFlag(.endOfCandidates, newValue) }
    }

    /// `a=candidate` lines in order. New candidates go before `a=end-of-candidates` when present.
    public var candidates: [ICECandidate] {
        get { all(\.asCandidate) }
        set {
            let endIndex = attributes.firstIndex(of: .endOfCandidates)
            replaceAll(\.asCandidate, with: newValue.map(SDPAttribute.candidate), defaultIndex: endIndex)
        }
    }

    /// `a=msid`: stream and track ids of the sender.
    public var msid: SDPMsid? {
        get { first(\.asMsid) }
        set { replaceAll(\.asMsid, with: newValue.map { [.msid($0)] } ?? []) }
    }

    /// The negotiated id of header extension `uri`, when it fits an RTP header extension id (≤ 255).
    public func extensionID(for uri: String) -> UInt8? {
        extmaps.first { $0.uri == uri }.flatMap { UInt8(exactly: $0.id) }
    }

    /// `a=ssrc` lines in order.
    public var ssrcAttributes: [SDPSSRCAttribute] {
        get { all(\.asSSRC) }
        set { replaceAll(\.asSSRC, with: newValue.map(SDPAttribute.ssrc)) }
    }

    /// Distinct SSRCs named by `a=ssrc` lines, in first-seen order.
    public var ssrcs: [UInt32] {
        var seen = Set<UInt32>()
        return ssrcAttributes.compactMap { seen.insert($0.ssrc).inserted ? $0.ssrc : nil }
    }

    /// The `cname` of `ssrc`, if declared.
    public func cname(for ssrc: UInt32) -> String? {
        ssrcAttributes.first { $0.ssrc == ssrc && $0.attribute == "cname" }?.value
    }

    /// `a=ssrc-group` lines in order (FID pairs a primary SSRC with its RTX SSRC).
    public var ssrcGroups: [SDPSSRCGroup] {
        get { all(\.asSSRCGroup) }
        set { replaceAll(\.asSSRCGroup, with: newValue.map(SDPAttribute.ssrcGroup)) }
    }

    /// The RTX SSRC paired with `primary` by an `a=ssrc-group:FID` line.
    public func rtxSSRC(for primary: UInt32) -> UInt32? {
        for group in ssrcGroups where group.semantics == "FID" && group.ssrcs.count >= 2 && group.ssrcs[0] == primary {
            return group.ssrcs[1]
        }
        return nil
    }

    /// The first `FID` group as (primary, rtx).
    public var fidSSRCs: (primary: UInt32, rtx: UInt32)? {
        for group in ssrcGroups where group.semantics == "FID" && group.ssrcs.count >= 2 {
            return (group.ssrcs[0], group.ssrcs[1])
        }
        return nil
    }

    /// The primary (media) SSRC: the first FID group's primary, else the first `a=ssrc`.
    public var primarySSRC: UInt32? { fidSSRCs?.primary ?? ssrcs.first }

    /// `a=rid` lines in order.
    public var rids: [SDPRid] {
        get { all(\.asRid) }
        set { replaceAll(\.asRid, with: newValue.map(SDPAttribute.rid)) }
    }

    /// `a=simulcast`.
    public var simulcast: SDPSimulcast? {
        get { first(\.asSimulcast) }
        set { replaceAll(\.asSimulcast, with: newValue.map { [.simulcast($0)] } ?? []) }
    }

    /// `a=sctp-port` of a data channel section (RFC 8841).
    public var sctpPort: UInt16? {
        get { first(\.asSctpPort) }
        set { replaceAll(\.asSctpPort, with: newValue.map { [.sctpPort($0)] } ?? []) }
    }

    /// `a=max-message-size` of a data channel section.
    public var maxMessageSize: UInt64? {
        get { first(\.asMaxMessageSize) }
        set { replaceAll(\.asMaxMessageSize, with: newValue.map { [.maxMessageSize($0)] } ?? []) }
    }

    /// Attributes the model does not type, in order.
    public var otherAttributes: [(name: String, value: String?)] {
        attributes.compactMap { if case .other(let name, let value) = $0 { (name, value) } else { nil } }
    }

    /// The codecs in `m=` format order, assembled from rtpmap/fmtp/rtcp-fb (static payload types
    /// without rtpmap are included). Setting replaces `formats` and every rtpmap/fmtp/rtcp-fb line,
    /// written per codec as rtpmap, rtcp-fb…, fmtp at the position of the first old codec line.
    public var codecs: [RTPCodec] {
        get {
            let maps = all(\.asRtpMap)
            let fmtps = all(\.asFmtp)
            let feedback = all(\.asRtcpFeedback)
            var result: [RTPCodec] = []
            var seen = Set<UInt8>()
            for format in formats {
                guard let payloadType = SDPPayloadType.parse(SDPText.bytes(format)),
                    seen.insert(payloadType).inserted
                else { continue }
                var codec: RTPCodec
                if let map = maps.first(where: { $0.payloadType == payloadType }) {
                    codec = RTPCodec(
                        payloadType: payloadType, name: map.name, clockRate: map.clockRate,
                        channels: map.channels)
                } else if let known = RTPCodec.staticCodec(payloadType) {
                    codec = known
                } else {
                    continue
                }
                codec.parameters = fmtps.first { $0.payloadType == payloadType }?.parameters ?? []
                codec.feedback = feedback.compactMap {
                    $0.payloadType == nil || $0.payloadType == payloadType ? $0.feedback : nil
                }
                result.append(codec)
            }
            return result
        }
        set {
            formats = newValue.map { "\($0.payloadType)" }
            var lines: [SDPAttribute] = []
            for codec in newValue {
                lines.append(
                    .rtpmap(
                        SDPRtpMap(
                            payloadType: codec.payloadType, name: codec.name,
                            clockRate: codec.clockRate, channels: codec.channels)))
                for item in codec.feedback {
                    lines.append(.rtcpFeedback(SDPRtcpFeedback(payloadType: codec.payloadType, feedback: item)))
                }
                if !codec.parameters.isEmpty {
                    lines.append(
                        .fmtp(
                            SDPFormatParameters(
                                payloadType: codec.payloadType,
                                parameters: codec.parameters)))
                }
            }
            replaceAll({ $0.isCodecAttribute ? () : nil }, with: lines)
        }
    }

    /// The codec with payload type `payloadType`.
    public func codec(payloadType: UInt8) -> RTPCodec? {
        codecs.first { $0.payloadType == payloadType }
    }

    /// The first codec named `name` (case-insensitive).
    public func codec(named name: String) -> RTPCodec? {
        codecs.first { $0.hasName(name) }
    }

    /// The RTX codec whose `apt` is `payloadType`.
    public func rtxCodec(for payloadType: UInt8) -> RTPCodec? {
        codecs.first { $0.isRTX && $0.associatedPayloadType == payloadType }
    }

    /// The first attribute named `name`, typed or not, e.g. `attribute(named: "rtcp")?.value`.
    public func attributeValue(named name: String) -> String? {
        attribute(named: name)?.value
    }
}
