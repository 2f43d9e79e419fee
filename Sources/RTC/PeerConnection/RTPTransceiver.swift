import RTCWire

/// One m-line's worth of media: a sender and/or receivers of one kind, with a direction.
///
/// Like every RTC object it belongs to the peer connection's ``EventLoop`` thread.
// Safe: confined to its connection's loop thread; Sendable only to be handed to it.
public final class RTPTransceiver: @unchecked Sendable {
    /// Audio or video.
    public let kind: MediaKind
    /// The media id, assigned at negotiation.
    public internal(set) var mid: String?
    /// What this side wants: send, receive, both or neither.
    public var direction: SDPDirection
    /// The direction agreed by the last offer/answer, from this side's point of view.
    public internal(set) var currentDirection: SDPDirection?
    /// RIDs of the simulcast encodings this side sends (empty: one encoding).
    public let sendRIDs: [String]
    /// RIDs the remote sends us on this m-line (simulcast receive).
    public internal(set) var remoteRIDs: [String] = []

    // Negotiated codec parameters.
    var payloadType: UInt8 = 0
    var rtxPayloadType: UInt8?
    /// The negotiated codec (before negotiation: the first one this side would offer).
    public internal(set) var codec: MediaCodec
    /// The negotiated codec's fmtp parameters as written in the descriptions (H.264: profile-level-id
    /// and packetization mode; nil: the codec's defaults).
    public internal(set) var codecParameters: [SDPParameter]?
    /// The codecs this m-line offers and accepts, preferred first. Video: a sending transceiver
    /// sends what ``MediaPump`` encodes, VP8, so it lists `[.vp8]`; a receive-only one takes VP8 and
    /// H.264. An SFU's down track lists exactly its producer's codec (``setCodecPreferences(_:parameters:)``).
    public private(set) var codecPreferences: [MediaCodec]
    /// Parameters to offer per codec (an SFU down track repeats its producer's H.264 profile).
    private(set) var offeredParameters: [MediaCodec: [SDPParameter]] = [:]

    // Negotiated header extensions.
    /// The header extensions negotiated for this m-section (uri -> id): what the offer's section
    /// listed and the answer's section kept (RFC 8285 §5, JSEP 5.3.1). An extension absent here is
    /// neither written in this section of our descriptions nor sent on its packets.
    var extensionIDs: [String: UInt8] = [:]
    /// The one-way extensions among ``extensionIDs`` as the remote offer listed them (uri ->
    /// `sendonly` or `recvonly`): our answer writes the reverse direction, and we send none the
    /// peer only sends.
    var remoteExtensionDirections: [String: SDPDirection] = [:]
    /// Whether the peer's description lists `goog-remb` for the negotiated video codec.
    var remoteREMB = false
    /// The extensions our last offer listed in this section (an answer may keep only these).
    var offeredExtensionIDs: [String: UInt8] = [:]

    // Local send streams: one per encoding (per RID, or a single one).
    var localSSRCs: [UInt32] = []
    var localRTXSSRCs: [UInt32] = []
    var senders: [RTPSender] = []
    /// Remote SSRCs announced in the remote description (a=ssrc), primary and RTX.
    var remoteSSRCs: [UInt32] = []
    var remoteRTXSSRCs: [UInt32: UInt32] = [:]  // rtx ssrc -> primary ssrc
    /// Whether the m-line was rejected (port 0) or is unsupported.
    var rejected = false
    /// Stopped on this side (``PeerConnection/stopTransceiver(_:)``): the next offer rejects the
    /// m-line; it counts as rejected once an answer to such an offer was applied.
    var stopping = false
    /// Whether an offer rendered since the stop rejected the m-line (only its answer settles the stop).
    var stopOffered = false
    private(set) var msid = ""
    private(set) var trackID = ""

    init(kind: MediaKind, direction: SDPDirection, sendRIDs: [String]) {
        self.kind = kind
        self.direction = direction
        self.sendRIDs = sendRIDs
        codecPreferences = kind == .audio ? [.opus] : (direction.sends ? [.vp8] : [.vp8, .vp9, .h264, .av1])
        codec = codecPreferences[0]
        renewSendIdentity()
    }

    /// Sets the codecs this m-line offers and accepts, preferred first (of its kind; others are
    /// ignored), with the fmtp parameters to offer for each. Applies from the next offer or answer.
    public func setCodecPreferences(_ codecs: [MediaCodec], parameters: [MediaCodec: [SDPParameter]] = [:]) {
        let usable = codecs.filter { $0.kind == kind }
        guard !usable.isEmpty else { return }
        codecPreferences = usable
        offeredParameters = parameters
        if !rejected && currentDirection == nil { codec = usable[0] }
    }

    /// New SSRCs and stream/track ids: what is sent from now on is a new track for the remote.
    func renewSendIdentity() {
        msid = "understudy-" + randomToken(8)
        trackID = randomToken(12)
        localSSRCs = []
        localRTXSSRCs = []
        for _ in 0..<max(1, sendRIDs.count) {
            localSSRCs.append(UInt32.random(in: 1...UInt32.max))
            localRTXSSRCs.append(UInt32.random(in: 1...UInt32.max))
        }
    }

    /// Whether the m-line can carry a new track (``PeerConnection/reuseTransceiver(_:direction:)``):
    /// it was negotiated and then rejected (port 0) in an offer the peer answered, so the peer has
    /// retired it and will take the next track on it for a new transceiver (RFC 8829 §5.2.2).
    public var isReusable: Bool { mid != nil && rejected && !stopping && currentDirection == .inactive }

    /// Whether the m-line is rejected or about to be (port 0, outside BUNDLE, in what this side writes).
    var writesRejected: Bool { rejected || stopping }

    /// Where the reports of this m-line's senders take their RTP time from (an SFU consumer); set on
    /// the senders that exist and on those a negotiation creates.
    public weak var reportSource: (any RTPSenderReportSource)? {
        didSet { for sender in senders { sender.reportSource = reportSource } }
    }

    /// Counters of the first (or only) sender, once negotiation created it.
    public var senderStats: RTPSenderStats? { senders.first?.stats }
    /// The first (or only) local sender, once negotiation created it; loop thread only.
    public var primarySender: RTPSender? { senders.first }
    /// The header-extension id negotiated for `uri` on this m-section, nil when this section did not
    /// negotiate it (another section of the same connection may have).
    public func negotiatedExtensionID(_ uri: String) -> UInt8? { extensionIDs[uri] }
    /// SSRC of the first local send encoding.
    public var localSSRC: UInt32? { localSSRCs.first }

    var sends: Bool { currentDirection == .sendrecv || currentDirection == .sendonly }
    var receives: Bool { currentDirection == .sendrecv || currentDirection == .recvonly }
}

func randomToken(_ n: Int) -> String {
    let chars = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    var s = ""
    for _ in 0..<n { s.append(chars[Int.random(in: 0..<chars.count)]) }
    return s
}
