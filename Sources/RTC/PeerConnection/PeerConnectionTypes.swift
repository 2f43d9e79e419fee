import RTCWire

/// The overall state of a ``PeerConnection`` (ICE and DTLS combined).
public enum PeerConnectionState: String, Sendable {
    case new, connecting, connected, disconnected, failed, closed
}

/// Errors raised by ``PeerConnection`` negotiation and transport.
public enum PeerConnectionError: Error, Sendable, CustomStringConvertible, Equatable {
    case invalidState(String)
    case badDescription(String)
    case noCommonCodec(mid: String)
    case socket(String)
    case closed

    public var description: String {
        switch self {
        case .invalidState(let s): return "invalid state: \(s)"
        case .badDescription(let s): return "bad session description: \(s)"
        case .noCommonCodec(let mid): return "no common codec for m-line \(mid)"
        case .socket(let s): return "socket error: \(s)"
        case .closed: return "peer connection closed"
        }
    }
}

/// Settings fixed when a ``PeerConnection`` is created.
public struct PeerConnectionConfiguration: Sendable {
    /// Local addresses to gather host candidates on.
    public var bindAddresses: [String]
    /// Fixed UDP port (0 = ephemeral).
    public var port: UInt16
    /// Act as an ICE-lite agent (servers).
    public var iceLite: Bool
    /// DTLS role to take when answering a first `actpass` offer: `.client` answers `active` (RFC 5763
    /// §5's advice, and the SFU's choice), `.server` `passive`. An offer that names a role gets the
    /// other one, and a later offer keeps the role already in use.
    public var answerDTLSRole: DTLSTransport.Role
    /// SRTP profiles in preference order; GCM first because it is ~6× cheaper here.
    public var srtpProfiles: [SRTPProfile]
    /// Negotiate RTX (RFC 4588) for video.
    public var enableRTX: Bool
    /// CNAME for RTCP SDES.
    public var cname: String
    /// A shared server port (ICE-lite servers): when set, the connection uses the mux's socket
    /// instead of opening its own.
    public var portMux: UDPPortMux?
    /// ICE pacing and consent timers. A client that must notice lost media quickly shortens
    /// `consentInterval` and `disconnectedAfter` (see ``ICETimeouts``).
    public var iceTimeouts = ICETimeouts()
    /// Remote SSRCs (media and RTX) this connection creates receive state for; packets of further
    /// SSRCs are dropped (counted as unroutable), so a peer inventing SSRCs cannot grow memory. The
    /// default leaves room for a subscriber receiving many tracks; the SFU sets a tight bound on
    /// its publish connections.
    public var maxRemoteSSRCs = 4096
    /// TURN servers to gather relayed candidates from (clients; see ``ICEServer``). Empty: host
    /// candidates only.
    public var iceServers: [ICEServer] = []
    /// Clients: open ICE-TCP connections (RFC 6544, active) to the peer's passive TCP candidates,
    /// so a network that drops UDP still connects. Servers advertise passive candidates through
    /// their ``UDPPortMux`` instead.
    public var iceTCP = true
    /// Senders keep their own retransmission history (about 750 KB per video sender). An SFU turns
    /// this off and answers NACKs itself (``PeerConnection/onNACK``) from one buffer per producer.
    public var senderHistory = true
    /// Start and bounds of the send-side bandwidth estimate (``MediaTransport/bandwidthEstimate``).
    public var bandwidth = BandwidthEstimatorConfiguration()
    /// The link the connection's own sockets see (rate, delay, loss, …; ``Impairment``), from the
    /// first ICE check on; nil: the loop's (``EventLoop/impairment``). Not applied to a shared port.
    public var impairment: Impairment?
    /// Whether the receive streams measure their quality (``RTPReceiver/measuresQuality``): a load
    /// test may switch it off to measure what it costs, or to save those few operations per frame.
    public var measuresReceiveQuality = RTPReceiver.measuresQualityByDefault

    public init(
        bindAddresses: [String] = ["127.0.0.1"], port: UInt16 = 0, iceLite: Bool = false,
        answerDTLSRole: DTLSTransport.Role = .client,
        srtpProfiles: [SRTPProfile] = [.aeadAES128GCM, .aes128CMHMACSHA1_80], enableRTX: Bool = true,
        cname: String = "understudy", portMux: UDPPortMux? = nil
    ) {
        self.bindAddresses = bindAddresses
        self.port = port
        self.iceLite = iceLite
        self.answerDTLSRole = answerDTLSRole
        self.srtpProfiles = srtpProfiles
        self.enableRTX = enableRTX
        self.cname = cname
        self.portMux = portMux
    }
}

/// Transport-level counters of a ``PeerConnection``.
public struct PeerConnectionCounters: Sendable {
    public var packetsReceived: UInt64 = 0
    public var bytesReceived: UInt64 = 0
    public var packetsSent: UInt64 = 0
    public var bytesSent: UInt64 = 0
    /// Media from an address that did not complete ICE.
    public var droppedUnknownAddress: UInt64 = 0
    /// DTLS that arrived before the remote description started the transport, kept (up to four)
    /// and handed to the handshake once it did.
    public var dtlsHeldUntilStart: UInt64 = 0
    /// DTLS that arrived before the start with four datagrams already kept: dropped (a genuine
    /// peer retransmits its flight).
    public var dtlsDroppedBeforeStart: UInt64 = 0
    /// DTLS from a paired address that ICE had not validated yet (a lite peer's ClientHello that
    /// overtook or outlived the response to our check), kept with the datagrams above until a
    /// response validates the address.
    public var dtlsHeldUntilValid: UInt64 = 0
    /// Packets that failed SRTP/SRTCP authentication or replay checks.
    public var droppedSRTP: UInt64 = 0
    /// Packets that could not be parsed or routed.
    public var droppedMalformed: UInt64 = 0
    public var droppedUnroutable: UInt64 = 0
    /// Transport-cc feedback messages sent for what this connection receives.
    public var transportFeedbackSent: UInt64 = 0
    /// Transport-cc feedback messages and REMBs received about what this connection sends.
    public var transportFeedbackReceived: UInt64 = 0
    public var rembReceived: UInt64 = 0
    /// REMBs sent for what this connection receives (a peer that negotiated only `goog-remb`).
    public var rembSent: UInt64 = 0
    public init() {}
}

/// The codecs and header extensions this stack supports, with the payload types it offers.
enum LocalCapabilities {
    static let opusPT: UInt8 = 111
    static let vp8PT: UInt8 = 96
    static let vp8RTXPT: UInt8 = 97
    static let vp9PT: UInt8 = 98
    static let vp9RTXPT: UInt8 = 99
    static let av1PT: UInt8 = 45
    static let av1RTXPT: UInt8 = 46
    static let h264PT: UInt8 = 102
    static let h264RTXPT: UInt8 = 103
    /// What we offer for H.264 unless told otherwise: constrained baseline, level 3.1, mode 1 (the
    /// profile every browser sends; levels may differ in the answer).
    static let h264Parameters: [SDPParameter] = [
        SDPParameter(key: "level-asymmetry-allowed", value: "1"),
        SDPParameter(key: "packetization-mode", value: "1"),
        SDPParameter(key: "profile-level-id", value: "42e01f"),
    ]

    /// What we offer for VP9: profile 0 (8-bit 4:2:0), the profile ``VP9Encoder`` writes.
    static let vp9Parameters: [SDPParameter] = [SDPParameter(key: "profile-id", value: "0")]
    /// What we offer for AV1, as Chromium does: main profile, level 3.1 (`level-idx=5`), main tier.
    static let av1Parameters: [SDPParameter] = [
        SDPParameter(key: "level-idx", value: "5"), SDPParameter(key: "profile", value: "0"),
        SDPParameter(key: "tier", value: "0"),
    ]

    /// The fmtp parameters we offer for `codec` unless a transceiver was told others (nil: none).
    static func defaultParameters(_ codec: MediaCodec) -> [SDPParameter]? {
        switch codec {
        case .h264: h264Parameters
        case .vp9: vp9Parameters
        case .av1: av1Parameters
        case .opus, .vp8: nil
        }
    }

    /// The payload types we offer for `codec` (media, RTX).
    static func payloadTypes(_ codec: MediaCodec) -> (UInt8, UInt8?) {
        switch codec {
        case .opus: (opusPT, nil)
        case .vp8: (vp8PT, vp8RTXPT)
        case .vp9: (vp9PT, vp9RTXPT)
        case .h264: (h264PT, h264RTXPT)
        case .av1: (av1PT, av1RTXPT)
        }
    }

    // The URIs are spelled once, in `RTPExtensionURI`.
    static let audioLevelURI = RTPExtensionURI.audioLevel
    static let absSendTimeURI = RTPExtensionURI.absSendTime
    static let midURI = RTPExtensionURI.mid
    static let ridURI = RTPExtensionURI.rtpStreamID
    static let repairedRIDURI = RTPExtensionURI.repairedRTPStreamID
    /// Capture time forwarded end to end through the SFU (load tests measure latency with it).
    static let absCaptureTimeURI = RTPExtensionURI.absCaptureTime
    /// Transport-wide sequence numbers: what we receive with them is reported in transport-cc feedback.
    static let transportWideCCURI = RTPExtensionURI.transportWideCC
    /// The AV1 dependency descriptor: the SFU selects an AV1 stream's layers by it (browsers send it
    /// only where it is negotiated; its key-frame element needs the two-byte form).
    static let dependencyDescriptorURI = RTPExtensionURI.dependencyDescriptor

    /// Extension ids we use when we offer. Stable across m-lines, as BUNDLE requires.
    static let offeredExtensions: [(id: UInt8, uri: String, kinds: Set<MediaKind>)] =
        [
            (1, audioLevelURI, [.audio]),
            (2, absSendTimeURI, [.audio, .video]),
            (4, midURI, [.audio, .video]),
            (10, ridURI, [.video]),
            (11, repairedRIDURI, [.video]),
            (7, absCaptureTimeURI, [.audio, .video]),
            (12, dependencyDescriptorURI, [.video]),
        ] + (TransportFeedbackGenerator.negotiable ? [(3, transportWideCCURI, [.audio, .video])] : [])

    static func isSupported(uri: String) -> Bool {
        offeredExtensions.contains { $0.uri == uri }
    }
}
