import RTCWire

/// Called on the loop thread with each complete frame received on a transceiver.
public typealias FrameHandler = (RTPTransceiver, _ rid: String?, EncodedFrame, FrameTiming) -> Void

/// The JSEP subset a headless client and an SFU need: offers and answers with BUNDLE and rtcp-mux,
/// transceivers with directions, simulcast send by RID and receive by mid/rid, over ICE + DTLS-SRTP.
///
/// A `PeerConnection` belongs to one ``EventLoop``. Its synchronous methods must be called on that
/// loop's thread (debug builds assert it, see ``EventLoop/assertInLoop(file:line:)``); the `async`
/// variants hop onto it. Media arrives through ``onFrame`` on the loop
/// thread with no hop per packet.
// Safe: loop-confined; its on-loop methods assert the loop in debug builds (EventLoop.assertInLoop).
public final class PeerConnection: @unchecked Sendable {
    public let loop: EventLoop
    public let configuration: PeerConnectionConfiguration
    public let certificate: DTLSCertificate
    /// The media transport under this connection: ICE, DTLS, SRTP, the RTP listener and the send
    /// path. The connection keeps JSEP (descriptions, transceivers, m-lines) and starts it.
    public let transport: MediaTransport
    public private(set) var transceivers: [RTPTransceiver] = [] {
        didSet { transport.transceivers = transceivers }
    }
    public internal(set) var state: PeerConnectionState = .new
    public var counters: PeerConnectionCounters { transport.counters }
    /// Why the connection failed, when it did.
    public internal(set) var failureReason: String?
    /// Negotiated SRTP profile, once DTLS completes.
    public var srtpProfile: SRTPProfile? { transport.srtpProfile }

    /// Frames received, on the loop thread.
    ///
    /// While it is nil the receivers skip frame assembly copies entirely (an SFU only forwards).
    public var onFrame: FrameHandler? {
        didSet {
            if (oldValue == nil) != (onFrame == nil) {
                for s in transport.listener.streams { attachFrameHandler(s) }
            }
        }
    }
    /// State changes, on the loop thread.
    public var onStateChange: ((PeerConnectionState) -> Void)?
    /// Waiters of ``waitUntilConnected(timeout:)``, told of each state change on the loop thread;
    /// one that returns true is done and removed.
    var stateWaiters: [(PeerConnectionState) -> Bool] = []
    /// Sees each protected outgoing RTP packet with its socket and destination; returning true
    /// consumes it instead of sending. Benchmarks use it to capture real SRTP traffic once and replay
    /// it without the sender's cost in the measurement.
    public var outboundRTPTap: ((UnsafeRawBufferPointer, UDPSocket, SocketAddress) -> Bool)? {
        get { transport.outboundRTPTap }
        set { transport.outboundRTPTap = newValue }
    }
    /// The peer's RTCP BYE (RFC 3550 §6.6) said this remote SSRC is gone; on the loop thread, once per
    /// source named. A closing ``PeerConnection`` sends one for each of its sending SSRCs.
    public var onBYE: ((UInt32) -> Void)?
    /// The send-side bandwidth estimate toward the peer, from its transport-cc feedback (or its
    /// REMB); nil when the peer gives none. Read it on the loop thread (see ``BandwidthEstimate``).
    public var bandwidthEstimate: BandwidthEstimate? { transport.bandwidthEstimate }
    /// Called on the loop thread when ``bandwidthEstimate``'s target or state changes.
    public var onBandwidthEstimate: ((BandwidthEstimate) -> Void)?
    /// A keyframe was requested by the remote (PLI/FIR) for this transceiver; on the loop thread.
    public var onKeyframeRequest: ((RTPTransceiver) -> Void)?
    /// When set, NACKs for this connection's senders go here (transceiver, lost sequence numbers,
    /// now) instead of being answered from the senders' own history: an SFU answers them from its
    /// shared per-producer buffer (``PeerConnectionConfiguration/senderHistory`` is then usually off).
    public var onNACK: ((RTPTransceiver, [UInt16], UInt64) -> Void)?
    /// Every received media packet (after SRTP, RTX unwrapping and the receiver's bookkeeping), on
    /// the loop thread, for forwarding without frame assembly (an SFU). The packet's bytes are only
    /// valid during the call. The receiver still sends NACK, PLI and receiver reports upstream.
    public var onRTP: RTPPacketHandler? {
        get { transport.onRTP }
        set { transport.onRTP = newValue }
    }

    // The peer's transport parameters, from its description (the transport is started with them).
    var remoteFingerprint: SDPFingerprint?
    var remoteUfrag: String?
    var remotePassword: String?
    var remoteCandidates: [ICECandidate] = []
    var remoteIsLite = false
    var dtlsRole: DTLSTransport.Role?

    // Negotiation.
    var pendingLocalOffer: Bool = false
    var isOfferer = false
    var nextMid = 0
    var remoteMidOrder: [String] = []
    var extensionIDs: [String: UInt8] = [:]  // uri -> id, negotiated in some section (see adoptExtensions)
    var sessionVersion: UInt64 = 1
    let sessionID: UInt64 = UInt64.random(in: 1...(UInt64(1) << 62))

    var closed = false

    /// Creates a peer connection on `loop` (its sockets open with the first description or ``bindSockets()``).
    public init(
        loop: EventLoop, configuration: PeerConnectionConfiguration = .init(), certificate: DTLSCertificate? = nil
    )
        throws
    {
        self.loop = loop
        self.configuration = configuration
        let certificate = try certificate ?? DTLSCertificate.generate()
        self.certificate = certificate
        transport = MediaTransport(loop: loop, configuration: configuration, certificate: certificate)
        transport.delegate = self
    }
}

/// The connection hears its transport through one delegate (``MediaTransportDelegate``).
extension PeerConnection: MediaTransportDelegate {
    /// Maps the transport's progress onto the connection's state.
    func transport(_ transport: MediaTransport, didReport event: MediaTransport.Event) {
        switch event {
        case .iceChecking: if state == .new { setState(.connecting) }
        case .iceFailed:
            failureReason =
                failureReason
                ?? (transport.ice?.failureDescription ?? "ICE failed (no candidate pair answered)")
                + transport.relaySummary
            setState(.failed)
        case .iceDisconnected: if state == .connected { setState(.disconnected) }
        case .iceConnected: if state == .disconnected { setState(.connected) }
        case .connected: setState(.connected)
        case .failed(let reason):
            if let reason { failureReason = reason }
            setState(.failed)
        case .progress: notifyStateWaiters()
        case .loopStopped: close()
        }
    }

    func transport(_ transport: MediaTransport, didOpen stream: RTPStreamListener.Stream) {
        attachFrameHandler(stream)
    }

    var answersNACKs: Bool { onNACK != nil }

    func transport(
        _ transport: MediaTransport, nacked sequenceNumbers: [UInt16], on transceiver: RTPTransceiver, now: UInt64
    ) {
        onNACK?(transceiver, sequenceNumbers, now)
    }

    func transport(_ transport: MediaTransport, keyframeRequestedOn transceiver: RTPTransceiver) {
        onKeyframeRequest?(transceiver)
    }

    func transport(_ transport: MediaTransport, peerEnded ssrc: UInt32) { onBYE?(ssrc) }

    func transport(_ transport: MediaTransport, estimateChanged estimate: BandwidthEstimate) {
        onBandwidthEstimate?(estimate)
    }
}

extension PeerConnection {
    // MARK: Transceivers

    /// Adds a transceiver. `sendRIDs` (e.g. `["q","h","f"]`) makes a simulcast sender.
    @discardableResult
    public func addTransceiver(kind: MediaKind, direction: SDPDirection, sendRIDs: [String] = []) -> RTPTransceiver {
        loop.assertInLoop()
        let t = RTPTransceiver(kind: kind, direction: direction, sendRIDs: kind == .video ? sendRIDs : [])
        transceivers.append(t)
        return t
    }

    /// Stops `transceiver` (JSEP `stop()`, RFC 8829 §4.2.1.7): its senders stop at once, and every
    /// offer from now on rejects its m-line (port 0, outside BUNDLE). Once the peer answered such an
    /// offer the transceiver is ``RTPTransceiver/isReusable``. Loop thread only.
    public func stopTransceiver(_ transceiver: RTPTransceiver) {
        loop.assertInLoop()
        guard transceivers.contains(where: { $0 === transceiver }), !transceiver.writesRejected else { return }
        transport.forgetSendSSRCs(transceiver.localSSRCs + transceiver.localRTXSSRCs)
        transceiver.senders = []
        transceiver.direction = .inactive
        transceiver.stopping = true
        transceiver.stopOffered = false
    }

    /// Recycles the m-line of an ``RTPTransceiver/isReusable`` transceiver for a new outgoing track
    /// (an SFU reusing the m-line of a track that ended, so the session does not grow with every
    /// track), as JSEP recycles a rejected m-section (RFC 8829 §5.2.2): a new mid, fresh SSRCs and
    /// stream/track ids, `direction` from the next offer on. Every stack then sees a new transceiver
    /// on that m-line. New senders start when the next negotiation completes. Returns false (and
    /// changes nothing) when the transceiver cannot be reused.
    @discardableResult
    public func reuseTransceiver(_ transceiver: RTPTransceiver, direction: SDPDirection) -> Bool {
        loop.assertInLoop()
        guard transceivers.contains(where: { $0 === transceiver }), transceiver.isReusable else { return false }
        // The old track's SSRCs never send again: their SRTP state goes with them.
        transport.forgetSendSSRCs(transceiver.localSSRCs + transceiver.localRTXSSRCs)
        transceiver.senders = []
        transceiver.renewSendIdentity()
        transceiver.direction = direction
        transceiver.rejected = false
        transceiver.remoteSSRCs = []
        transceiver.remoteRTXSSRCs = [:]
        transceiver.remoteRIDs = []
        transceiver.mid = nil
        assignMids()
        return true
    }

    /// Forgets the rejected transceivers whose m-line a remote offer recycled under a new mid (it
    /// lists `mids`, not theirs): JSEP ends them for good (RFC 8829 §5.2.2), so a client that
    /// consumes and stops many tracks does not keep one transceiver per track.
    func dropRecycledTransceivers(keeping mids: [String]) {
        transceivers.removeAll { t in t.rejected && t.mid.map { !mids.contains($0) } ?? false }
    }

    // MARK: Sending

    /// Sends one encoded frame on `transceiver`, on encoding `layer` (0 for non-simulcast).
    ///
    /// Must run on the loop thread. Frames are dropped silently until DTLS completes or when the
    /// negotiated direction does not send.
    public func send(_ frame: EncodedFrame, on transceiver: RTPTransceiver, layer: Int = 0) {
        loop.assertInLoop()
        transport.send(frame, on: transceiver, layer: layer)
    }

    /// Whether a frame sent now would go out.
    public func canSend(on transceiver: RTPTransceiver) -> Bool { transport.canSend(on: transceiver) }

    /// Asks the remote sender of `transceiver` for a keyframe (PLI), on the loop thread.
    public func requestKeyframe(on transceiver: RTPTransceiver) {
        transport.requestKeyframe(on: transceiver, rid: nil, allEncodings: true)
    }

    /// Asks for a keyframe on one simulcast encoding (`rid`; nil for a single-encoding track).
    public func requestKeyframe(on transceiver: RTPTransceiver, rid: String?) {
        transport.requestKeyframe(on: transceiver, rid: rid, allEncodings: false)
    }

    /// Sends a PLI for one encoding with the next tick, bypassing the receiver's own throttle (see
    /// ``RTPReceiver/requestKeyframeNow()``). Returns false when no packet of that encoding arrived
    /// yet, so there is no stream to ask on.
    @discardableResult
    public func requestKeyframeNow(on transceiver: RTPTransceiver, rid: String?) -> Bool {
        transport.requestKeyframeNow(on: transceiver, rid: rid)
    }

    /// Gives every transceiver without a media id one now (as ``createOffer()`` would), so callers can
    /// name the m-line of a new transceiver before the offer is made.
    public func assignMids() {
        loop.assertInLoop()
        for t in transceivers where t.mid == nil {
            while transceivers.contains(where: { $0.mid == String(nextMid) }) { nextMid += 1 }
            t.mid = String(nextMid)
            nextMid += 1
        }
    }

    /// The header-extension id negotiated for `uri` (e.g. `urn:ietf:params:rtp-hdrext:ssrc-audio-level`)
    /// in any section of this connection (BUNDLE gives it one id wherever it is used). Whether one
    /// section's packets carry it is ``RTPTransceiver/negotiatedExtensionID(_:)``.
    public func negotiatedExtensionID(_ uri: String) -> UInt8? { extensionIDs[uri] }

    func attachFrameHandler(_ stream: RTPStreamListener.Stream) {
        guard onFrame != nil else {
            stream.receiver.onFrame = nil
            return
        }
        let t = stream.transceiver
        let rid = stream.rid
        stream.receiver.onFrame = { [unowned self, unowned t] frame, timing in
            self.onFrame?(t, rid, frame, timing)
        }
    }

    // MARK: State

    func setState(_ s: PeerConnectionState) {
        loop.assertInLoop()
        guard s != state, state != .closed else { return }
        state = s
        transport.isConnected = s == .connected
        onStateChange?(s)
        notifyStateWaiters()
    }

    /// Lets each wait (``waitUntilConnected(timeout:)``, …) look at the connection again; those
    /// that are over return true and go. Called on state changes and on ICE progress.
    func notifyStateWaiters() {
        if !stateWaiters.isEmpty { stateWaiters.removeAll { $0(state) } }
    }

    /// Closes the connection: sends an RTCP BYE for its sending SSRCs and DTLS close_notify, stops
    /// timers, closes sockets (``MediaTransport``).
    public func close() {
        loop.assertInLoop()
        guard !closed else { return }
        closed = true
        transport.close()
        setState(.closed)
    }

    /// ICE counters, including STUN requests dropped for bad integrity or unknown usernames.
    public var iceCounters: ICECounters? { transport.ice?.counters }
    /// The latest ICE check round-trip time to the peer, in nanoseconds (0 until known).
    public var iceRoundTripTime: UInt64 { transport.ice?.roundTripTime ?? 0 }

    /// The local address of the first media socket (for diagnostics and tests).
    public var localAddress: SocketAddress? { transport.sockets.first?.localAddress }

    /// The receiver of a remote media SSRC, once packets of it arrived (loop thread).
    public func receiver(forSSRC ssrc: UInt32) -> RTPReceiver? { transport.receiver(forSSRC: ssrc) }

    /// Aggregated receiver statistics, per (transceiver mid, rid).
    public func receiverStats() -> [(mid: String?, rid: String?, kind: MediaKind, stats: RTPReceiverStats)] {
        loop.assertInLoop()
        return transport.listener.streams.map { ($0.transceiver.mid, $0.rid, $0.transceiver.kind, $0.receiver.stats) }
    }

    /// Aggregated sender statistics, per (transceiver mid, layer).
    public func senderStats() -> [(mid: String?, layer: Int, kind: MediaKind, stats: RTPSenderStats)] {
        loop.assertInLoop()
        var out: [(mid: String?, layer: Int, kind: MediaKind, stats: RTPSenderStats)] = []
        for t in transceivers {
            for (i, s) in t.senders.enumerated() { out.append((t.mid, i, t.kind, s.stats)) }
        }
        return out
    }
}

/// Relayed candidates (TURN) and ICE-TCP: the transport gathers and runs them.
extension PeerConnection {
    /// Allocates on every configured TURN server and waits until each allocation succeeded or
    /// failed, or `timeout` passed, so that the next offer or answer lists the relayed candidates
    /// (this stack does not trickle). Host names are resolved here, off the loop. Without ICE
    /// servers it returns at once. Call it before ``createOffer(iceRestart:)`` or
    /// ``createAnswer()``; a connection that skips it still gathers relays with numeric
    /// addresses, adding them to its checks once they are allocated.
    public func gatherRelayCandidates(timeout seconds: Double = 5) async {
        let servers = configuration.iceServers
        guard !servers.isEmpty else { return }
        let resolved = LoopBound(servers.map { ($0, $0.resolve()) }, loop: loop)
        guard loop.execute({ self.transport.startRelays(resolved.value) }) else { return }
        // Woken by each allocation's outcome (a transport `progress` event); a timeout just ends the wait.
        try? await waitFor("TURN allocations", timeout: seconds) { [self] _ in
            closed || !transport.turnClients.contains { $0.state == .new || $0.state == .allocating }
                ? .success(()) : nil
        }
    }

    /// The TURN clients' counters, per server URL.
    public var relayCounters: [(server: String, state: TURNClient.State, counters: TURNCounters)] {
        transport.relayCounters
    }

    /// Whether the selected pair's local candidate is a TURN relayed one.
    public var isUsingRelay: Bool { transport.isUsingRelay }

    /// Whether the selected pair runs over ICE-TCP.
    public var isUsingICETCP: Bool { transport.isUsingICETCP }
}

/// Called on the loop thread with each received media packet; see ``PeerConnection/onRTP``.
public typealias RTPPacketHandler = (RTPTransceiver, _ rid: String?, ReceivedRTPPacket) -> Void

/// One received, decrypted RTP packet as seen by ``PeerConnection/onRTP``. Its buffers point into the
/// receive ring and are only valid during the call.
public struct ReceivedRTPPacket {
    /// The whole plaintext packet as received (the RTX packet for a repair).
    public let packet: UnsafeRawBufferPointer
    /// The parsed header of `packet`.
    public let header: RTPHeader
    /// The SSRC of the media stream (the primary SSRC also for RTX repairs).
    public let mediaSSRC: UInt32
    /// The media sequence number (the original one for an RTX repair).
    public let sequenceNumber: UInt16
    /// The codec payload (for VP8: payload descriptor and data), without the RTX header.
    public let payload: UnsafeRawBufferPointer
    /// The codec payload header, parsed once by the receiver (``RTPPayloadFormat``).
    public let info: RTPPayloadInfo
    /// Whether the packet arrived as an RTX retransmission.
    public let isRepair: Bool
    /// Arrival time on the loop clock (``EventLoop/now()``).
    public let arrival: UInt64

    /// The same packet with `info` in place of its payload info: a forwarder that learned more about
    /// it from a header extension (an AV1 dependency descriptor's layers) hands that on.
    public func with(info: RTPPayloadInfo) -> ReceivedRTPPacket {
        ReceivedRTPPacket(
            packet: packet, header: header, mediaSSRC: mediaSSRC, sequenceNumber: sequenceNumber, payload: payload,
            info: info, isRepair: isRepair, arrival: arrival)
    }

    /// A packet read by a receiver outside a ``PeerConnection`` (an SFU's node-to-node pipe).
    public init(
        packet: UnsafeRawBufferPointer, header: RTPHeader, mediaSSRC: UInt32, sequenceNumber: UInt16,
        payload: UnsafeRawBufferPointer, info: RTPPayloadInfo, isRepair: Bool, arrival: UInt64
    ) {
        self.packet = packet
        self.header = header
        self.mediaSSRC = mediaSSRC
        self.sequenceNumber = sequenceNumber
        self.payload = payload
        self.info = info
        self.isRepair = isRepair
        self.arrival = arrival
    }
}

func asciiString(_ packet: UnsafeRawBufferPointer, _ range: Range<Int>) -> String? {
    var s = ""
    for i in range {
        let b = packet[i]
        guard b >= 0x20 && b < 0x7F else { return nil }
        s.unicodeScalars.append(Unicode.Scalar(b))
    }
    return s.isEmpty ? nil : s
}
