import RTCWire

/// The media transport under one ``PeerConnection`` (mediasoup's `WebRtcTransport`, pion's
/// ICETransport + DTLSTransport + SRTP session): the ICE agent (full or lite) with its sockets,
/// TURN relays and ICE-TCP streams, DTLS, the two SRTP sessions, the RTP listener
/// (``RTPStreamListener``: receive streams by SSRC / mid / rid), the send streams by SSRC, the RTCP
/// router and the send path.
///
/// It knows no SDP. Its owner (``PeerConnection``, which keeps JSEP: descriptions, transceivers,
/// m-line and mid bookkeeping, negotiation, restart) starts it with the remote ICE and DTLS
/// parameters, hands it the m-lines as ``transceivers`` (the listener's routes, the senders' home)
/// and hears of its progress through its ``MediaTransportDelegate``. A forwarder (the SFU) writes to its send path
/// and reads its receive path directly.
///
/// Loop-thread confined, like everything on an ``EventLoop``. The per-packet paths allocate nothing.
/// What a ``MediaTransport`` tells its owner, on the loop thread: one delegate in place of a
/// closure per callback, as mediasoup's `RTC::Transport::Listener`. The owner (``PeerConnection``)
/// maps the events onto its state and hands the rest to its public `on…` hooks. The per-packet
/// receive sink (``PeerConnection/onRTP``) is not here: it is installed on the transport, so a
/// forwarded packet costs one indirect call, not two.
protocol MediaTransportDelegate: AnyObject {
    /// ICE, DTLS or the loop moved on (``MediaTransport/Event``).
    func transport(_ transport: MediaTransport, didReport event: MediaTransport.Event)
    /// A receive stream was bound to a new remote SSRC.
    func transport(_ transport: MediaTransport, didOpen stream: RTPStreamListener.Stream)
    /// Whether the owner answers NACKs itself (``transport(_:nacked:on:now:)``) instead of the
    /// senders' own histories.
    var answersNACKs: Bool { get }
    /// The peer lost `sequenceNumbers` of `transceiver`'s sender (only when ``answersNACKs``).
    func transport(
        _ transport: MediaTransport, nacked sequenceNumbers: [UInt16], on transceiver: RTPTransceiver, now: UInt64)
    /// The peer asked `transceiver`'s sender for a keyframe (PLI or FIR).
    func transport(_ transport: MediaTransport, keyframeRequestedOn transceiver: RTPTransceiver)
    /// The peer's RTCP BYE named `ssrc`.
    func transport(_ transport: MediaTransport, peerEnded ssrc: UInt32)
    /// The send-side estimate's target or state changed.
    func transport(_ transport: MediaTransport, estimateChanged estimate: BandwidthEstimate)
}

// Safe: loop-confined; its entry points assert the loop in debug builds (EventLoop.assertInLoop).
public final class MediaTransport: @unchecked Sendable, DatagramHandler, EventLoopTicker {
    /// What the transport tells its owner, on the loop thread.
    enum Event {
        /// ICE started checking, failed, lost or regained its pair.
        case iceChecking, iceFailed, iceDisconnected, iceConnected
        /// DTLS is done and SRTP keyed: media can flow.
        case connected
        /// DTLS or SRTP setup failed (with a reason when one is known).
        case failed(String?)
        /// ICE made progress without a state change (a restart's new pair, a relay allocated).
        case progress
        /// The loop is stopping under the transport.
        case loopStopped
    }

    /// The loop whose thread owns the transport, its sockets and its timers.
    public let loop: EventLoop
    let configuration: PeerConnectionConfiguration
    let certificate: DTLSCertificate
    /// Packet and drop counters.
    public internal(set) var counters = PeerConnectionCounters()
    /// Negotiated SRTP profile, once DTLS completes.
    public internal(set) var srtpProfile: SRTPProfile?
    /// The owner (weak: it owns the transport).
    weak var delegate: (any MediaTransportDelegate)?
    /// Whether the owner's state is `connected`: media and RTCP go out only then.
    var isConnected = false {
        didSet { tickDeadline.wake() }
    }
    var closed = false

    // MARK: Packet-path sinks (see PeerConnection's properties of the same names)

    var onRTP: RTPPacketHandler?
    var outboundRTPTap: ((UnsafeRawBufferPointer, UDPSocket, SocketAddress) -> Bool)?

    // MARK: ICE

    var sockets: [UDPSocket] = []
    /// Our ICE credentials; an ICE restart replaces them (``restartLocalICE()``).
    var localUfrag: String
    var localPassword: String
    var ice: ICEAgent?
    /// One TURN allocation per configured ICE server (``PeerConnectionConfiguration/iceServers``).
    var turnClients: [TURNClient] = []
    /// ICE-TCP connections (accepted on a server, opened by a client).
    var iceTCPStreams: [ICETCPStream] = []
    /// Why TURN servers could not be used (unresolvable names, refused allocations).
    var relayErrors: [String] = []
    /// Where media, DTLS and RTCP go: the selected pair (or the first validated address on ICE-lite).
    var mediaTarget: (socket: UDPSocket, remote: SocketAddress)?
    /// DTLS that came from a checked address before ``start(remoteUfrag:remotePassword:remoteCandidates:role:fingerprint:)``
    /// (a lite server's peer connects as soon as it has the offer, and its ClientHello can beat its
    /// answer); handed to DTLS once it exists, so the client need not wait to retransmit.
    var dtlsBeforeStart: [(bytes: [UInt8], socket: UDPSocket, from: SocketAddress)] = []
    static let dtlsBeforeStartLimit = 4

    // MARK: DTLS and SRTP

    var dtls: DTLSTransport?
    var dtlsRole: DTLSTransport.Role?
    var srtpOut: SRTPSession?
    var srtpIn: SRTPSession?
    /// Set when DTLS connects; cleared when the first authentic packet lets it give its state back.
    var dtlsReleasePending = false

    // MARK: RTP streams

    /// The m-lines (set by the owner): where new SSRCs are bound and where the senders live.
    var transceivers: [RTPTransceiver] = [] {
        didSet { tickDeadline.wake() }
    }
    /// Receive routing (hot path): SSRC -> stream.
    let listener: RTPStreamListener
    /// Send streams by SSRC, for RTCP feedback (a negotiation adds senders here, whose timers start).
    var sendBySSRC: [UInt32: RTPSender] = [:] {
        didSet { tickDeadline.wake() }
    }

    /// From when ``tick(now:)`` has work (``nextTimer(now:)``); lowered by the ICE agent, the
    /// receive streams and the input paths below when work becomes due sooner.
    let tickDeadline = TickDeadline()
    /// How often the timers of a transport with a sender that has sent nothing yet run at most (its
    /// first sender report is due soon after its first packet, which no timer foresees).
    static let idleTickInterval: UInt64 = 50_000_000

    /// The negotiated id of the transport-wide sequence number extension (0: not negotiated). A
    /// transport that receives it reports arrivals in transport-cc feedback (``transportFeedback``).
    var transportCCExtensionID: UInt8 = 0 {
        didSet {
            guard transportCCExtensionID != 0, transportFeedback == nil else { return }
            // Made only when negotiated; its ring waits for the first packet, since most audience
            // transports never receive media.
            let generator = TransportFeedbackGenerator()
            generator.tickDeadline = tickDeadline
            transportFeedback = generator
            // The peer reports what we send in transport-cc feedback: estimate from it.
            if bandwidthEstimator == nil {
                bandwidthEstimator = SendSideBandwidthEstimator(configuration: configuration.bandwidth)
            }
        }
    }
    /// The transport-wide sequence numbers of every sender of this transport; the number of the
    /// packet being sent waits here until ``protectAndSendRTP(_:length:)`` records it.
    let transportSequence = TransportSequenceCounter()
    /// The buffer this transport's senders build their packets in, one at a time: each goes out
    /// through ``protectAndSendRTP(_:length:)`` before the next is built.
    let packetScratch = RTPPacketScratch()
    /// The send-side bandwidth estimator, once the peer can give feedback (transport-cc
    /// negotiated, or a REMB received).
    private(set) var bandwidthEstimator: SendSideBandwidthEstimator?
    /// What the path to the peer carries, as this transport's estimator sees it (nil: the peer
    /// gives no feedback). Loop thread.
    public var bandwidthEstimate: BandwidthEstimate? { bandwidthEstimator?.estimate }
    /// Transport-cc feedback for what this transport receives, once negotiated.
    private(set) var transportFeedback: TransportFeedbackGenerator?
    /// Whether the peer negotiated `goog-remb` (and not transport-cc): what this transport receives
    /// is then judged by ``rembGenerator``.
    var sendsREMB = false {
        didSet {
            guard sendsREMB != oldValue else { return }
            if sendsREMB {
                let generator = REMBGenerator()
                generator.tickDeadline = tickDeadline
                rembGenerator = generator
            } else {
                rembGenerator = nil
            }
        }
    }
    /// The receive-side estimate sent in REMB, while ``sendsREMB``.
    private(set) var rembGenerator: REMBGenerator?

    /// Scratch buffer for outgoing RTCP, reused (no per-packet allocation).
    let rtcpScratch: UnsafeMutableRawBufferPointer

    init(loop: EventLoop, configuration: PeerConnectionConfiguration, certificate: DTLSCertificate) {
        self.loop = loop
        self.configuration = configuration
        self.certificate = certificate
        let creds = ICEAgent.randomCredentials()
        localUfrag = creds.ufrag
        localPassword = creds.password
        rtcpScratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        listener = RTPStreamListener(maxSSRCs: configuration.maxRemoteSSRCs, loop: loop)
        listener.measuresQuality = configuration.measuresReceiveQuality
        listener.tickDeadline = tickDeadline
        listener.onNewStream = { [unowned self] stream in delegate?.transport(self, didOpen: stream) }
    }

    deinit {
        rtcpScratch.deallocate()
    }

    // MARK: Starting

    /// Opens the UDP sockets (or registers on the shared port); nothing when they are open.
    func bindSockets() throws {
        loop.assertInLoop()
        guard !closed else { throw PeerConnectionError.closed }
        guard sockets.isEmpty else { return }
        if let mux = configuration.portMux {
            guard let shared = mux.socket else { throw PeerConnectionError.socket("the shared port is closed") }
            mux.register(self, ufrag: localUfrag)
            sockets = [shared]
            return
        }
        var opened: [UDPSocket] = []
        for address in configuration.bindAddresses {
            guard let bind = SocketAddress(ip: address, port: configuration.port) else {
                for s in opened { s.close() }
                throw PeerConnectionError.socket("bad bind address \(address)")
            }
            do {
                let socket = try loop.openUDP(bindTo: bind, handler: self)
                if let impairment = configuration.impairment { socket.impairment = impairment }
                opened.append(socket)
            } catch {
                for s in opened { s.close() }
                throw PeerConnectionError.socket("cannot bind \(address): \(error)")
            }
        }
        sockets = opened
    }

    /// Creates the ICE agent in `role` with every local candidate (host, TURN relays, ICE-TCP
    /// passive), once, and starts the timers.
    func gatherIfNeeded(role: ICEAgent.Role) throws {
        loop.assertInLoop()
        if ice != nil { return }
        let agent = ICEAgent(role: role, localUfrag: localUfrag, localPassword: localPassword)
        agent.timeouts = configuration.iceTimeouts
        agent.tickDeadline = tickDeadline
        try bindSockets()
        for s in sockets { agent.addLocalSocket(s) }
        startRelays(configuration.iceServers.map { ($0, SocketAddress(ip: $0.host, port: $0.port)) })
        if let listener = configuration.portMux?.iceTCPListener { agent.addPassiveTCPCandidate(listener.localAddress) }
        for client in turnClients where client.state == .allocated {
            if let relayed = client.relayedSocket {
                agent.addLocalSocket(relayed, relatedAddress: client.mappedAddress)
            }
        }
        agent.onSelectedPair = { [unowned self] socket, remote in
            mediaTarget = (socket, remote)
            startDTLSIfReady()
            releaseHeldDTLS()  // a ClientHello that came before the response that validated its sender
            delegate?.transport(self, didReport: .progress)  // a restart's new pair (the state may not change)
        }
        agent.onStateChange = { [unowned self] s in
            switch s {
            case .checking: delegate?.transport(self, didReport: .iceChecking)
            case .failed: delegate?.transport(self, didReport: .iceFailed)
            case .disconnected: delegate?.transport(self, didReport: .iceDisconnected)
            case .connected: delegate?.transport(self, didReport: .iceConnected)
            default: break
            }
            delegate?.transport(self, didReport: .progress)
        }
        ice = agent
        loop.addTicker(self)
    }

    /// Starts connectivity checks against the peer's credentials and candidates, and prepares DTLS
    /// in `role` against the peer's certificate `fingerprint` (the handshake starts once ICE has a
    /// pair: ``startDTLSIfReady()``).
    func start(
        remoteUfrag: String, remotePassword: String, remoteCandidates: [ICECandidate], role: DTLSTransport.Role,
        fingerprint: DTLSFingerprint
    ) throws {
        loop.assertInLoop()
        guard let ice else { throw PeerConnectionError.invalidState("transports need local and remote descriptions") }
        dtlsRole = role
        if dtls == nil {
            let transport: DTLSTransport
            do {
                transport = try DTLSTransport(
                    role: role, certificate: certificate, remoteFingerprint: fingerprint,
                    profiles: configuration.srtpProfiles)
            } catch {
                throw PeerConnectionError.invalidState("DTLS setup failed: \(error)")
            }
            transport.sendDatagram = { [unowned self] bytes in
                guard let target = mediaTarget else { return }
                target.socket.send(bytes, to: target.remote)
            }
            transport.onConnected = { [unowned self] keys in dtlsConnected(keys) }
            transport.onFailed = { [unowned self] error in
                delegate?.transport(self, didReport: .failed("DTLS failed: \(error)"))
            }
            dtls = transport
        }
        ice.setRemoteCredentials(ufrag: remoteUfrag, password: remotePassword)
        for c in remoteCandidates { ice.addRemoteCandidate(c) }
        connectICETCP(to: remoteCandidates)
        releaseHeldDTLS()
        tickDeadline.wake()
    }

    /// Keeps a DTLS datagram in ``dtlsBeforeStart`` for ``releaseHeldDTLS()``; false when that already
    /// holds ``dtlsBeforeStartLimit`` (a genuine peer retransmits its flight).
    private func holdDTLS(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) -> Bool {
        guard dtlsBeforeStart.count < Self.dtlsBeforeStartLimit else { return false }
        dtlsBeforeStart.append((Array(data), socket, from))
        return true
    }

    /// Hands the DTLS kept in ``dtlsBeforeStart`` whose sender ICE has validated to the handshake,
    /// once it exists; the rest stays (bounded) until a check validates its sender.
    func releaseHeldDTLS() {
        guard let dtls, let ice, !dtlsBeforeStart.isEmpty else { return }
        let held = dtlsBeforeStart
        dtlsBeforeStart = held.filter { !ice.isValidRemote($0.from) }
        for datagram in held where ice.isValidRemote(datagram.from) {
            datagram.bytes.withUnsafeBytes { handDTLS($0, to: dtls, from: datagram.from, socket: datagram.socket) }
        }
    }

    /// DTLS from an address ICE checked: the first such address is where DTLS answers go until ICE
    /// selects a pair.
    private func handDTLS(
        _ bytes: UnsafeRawBufferPointer, to dtls: DTLSTransport, from: SocketAddress, socket: UDPSocket
    ) {
        if mediaTarget == nil { mediaTarget = (socket, from) }
        tickDeadline.wake()  // the handshake's state (and its retransmission timer) moves
        dtls.handleDatagram(bytes)
    }

    /// The DTLS client starts its handshake once ICE has selected a pair. On an ICE-lite agent that
    /// is the moment it answers the check that selects it (the nominating one, or the first
    /// authenticated one until a peer nominates), so the ClientHello leaves right behind that
    /// response, over UDP, a TURN relay's address or ICE-TCP alike, to the address that checked.
    func startDTLSIfReady() {
        guard mediaTarget != nil, let dtls, dtlsRole == .client, dtls.state == .new else { return }
        dtls.start()
        tickDeadline.wake()  // its retransmission timer runs from now
    }

    func dtlsConnected(_ keys: SRTPKeyingMaterial) {
        do {
            let pair = try SRTPSession.pair(keys)
            srtpOut = pair.outbound
            srtpIn = pair.inbound
            srtpProfile = keys.profile
            dtlsReleasePending = true
            tickDeadline.wake()
            delegate?.transport(self, didReport: .connected)
        } catch {
            delegate?.transport(self, didReport: .failed(nil))
        }
    }

    /// The peer sent a packet under the new keys, so its handshake is over: DTLS can give back
    /// the memory it kept for retransmitting flights (``DTLSTransport/releaseHandshakeState()``).
    func releaseDTLSHandshakeState() {
        dtlsReleasePending = false
        dtls?.releaseHandshakeState()
    }

    /// Fresh local ICE credentials; the agent restarts its checks (DTLS and SRTP stay).
    func restartLocalICE() {
        loop.assertInLoop()
        let fresh = ICEAgent.randomCredentials()
        localUfrag = fresh.ufrag
        localPassword = fresh.password
        ice?.restart(localUfrag: fresh.ufrag, localPassword: fresh.password)
        tickDeadline.wake()
        // A shared server port must route STUN naming the new ufrag here as well.
        configuration.portMux?.register(self, ufrag: fresh.ufrag)
    }

    /// The peer's new ICE credentials after a restart signalled outside SDP: checks start again
    /// against the candidates already known.
    func setRemoteICECredentials(ufrag: String, password: String, candidates: [ICECandidate]) {
        loop.assertInLoop()
        guard let ice else { return }
        if ice.remoteUfrag != nil && ice.remoteUfrag != ufrag && !ice.isRestarting {
            // The peer restarted without us: our credentials stay, the checklist starts over.
            ice.restart(localUfrag: localUfrag, localPassword: localPassword)
        }
        ice.setRemoteCredentials(ufrag: ufrag, password: password)
        for c in candidates { ice.addRemoteCandidate(c) }
        tickDeadline.wake()
    }

    /// Whether ICE has validated `address` as the peer.
    func iceAccepts(_ address: SocketAddress) -> Bool { ice?.isValidRemote(address) ?? false }

    // MARK: Sending

    /// Whether a packet sent now on `transceiver` would go out.
    public func canSend(on transceiver: RTPTransceiver) -> Bool {
        loop.assertInLoop()
        return isConnected && transceiver.sends && !transceiver.senders.isEmpty
    }

    /// Sends one encoded frame on `transceiver`'s encoding `layer` (see ``PeerConnection/send(_:on:layer:)``).
    func send(_ frame: EncodedFrame, on transceiver: RTPTransceiver, layer: Int) {
        loop.assertInLoop()
        guard isConnected, srtpOut != nil, transceiver.sends, layer < transceiver.senders.count else { return }
        let now = EventLoop.now()
        transceiver.senders[layer].send(frame, now: now) { buffer, length in
            self.protectAndSendRTP(buffer, length: length)
        }
    }

    /// Forwards one already-packetized media payload (an SFU's relay path) on `transceiver`'s first
    /// sender: rewritten sequence number and timestamp, this transport's header extensions (with the
    /// source's abs-capture-time `captureTime` and AV1 `dependencyDescriptor`), kept in the sender's history (if it has one),
    /// SRTP-protected and sent. Loop thread only.
    ///
    /// - Returns: whether the packet went out (false before DTLS completes or when not sending).
    @discardableResult
    public func sendForwarded(
        on transceiver: RTPTransceiver, payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32,
        sequenceNumber: UInt16, rewrite: RTPPayloadRewrite = .none, audioLevel: RTPAudioLevel? = nil,
        captureTime: UInt64? = nil, dependencyDescriptor: UnsafeRawBufferPointer? = nil, now: UInt64
    ) -> Bool {
        loop.assertInLoop()
        guard isConnected, srtpOut != nil, transceiver.sends, let sender = transceiver.senders.first else {
            return false
        }
        sender.forwardedCaptureTime = captureTime
        if let audioLevel {
            sender.audioLevel = audioLevel.level
            sender.voiceActivity = audioLevel.voiceActivity
        }
        return sender.sendForwarded(
            payload: payload, marker: marker, timestamp: timestamp, sequenceNumber: sequenceNumber,
            rewrite: rewrite, dependencyDescriptor: dependencyDescriptor, now: now
        ) { buffer, length in
            self.protectAndSendRTP(buffer, length: length)
        }
    }

    /// Sends about `bytes` of padding-only RTX packets (up to 255 padding bytes each) on
    /// `transceiver`'s first sender: an upward bandwidth probe. The packets carry transport-wide
    /// numbers, so the peer's feedback acknowledges them and an application-limited estimate can
    /// grow past what the media alone shows. Returns the bytes sent (0: not connected, or no RTX).
    @discardableResult
    public func sendPadding(on transceiver: RTPTransceiver, bytes: Int, now: UInt64) -> Int {
        loop.assertInLoop()
        guard isConnected, srtpOut != nil, transceiver.sends, let sender = transceiver.senders.first,
            sender.rtx != nil
        else { return 0 }
        var sent = 0
        while sent < bytes {
            let n = sender.sendPadding(bytes: min(255, bytes - sent), now: now) { buffer, length in
                self.protectAndSendRTP(buffer, length: length)
            }
            guard n > 0 else { break }
            sent += n
        }
        return sent
    }

    /// Resends one packet on `transceiver`'s first sender from a payload the caller keeps (an SFU's
    /// shared per-producer buffer): see ``RTPSender/sendRetransmission(payload:marker:timestamp:sequenceNumber:rewrite:dependencyDescriptor:now:emit:)``.
    /// Loop thread only.
    @discardableResult
    public func sendRetransmission(
        on transceiver: RTPTransceiver, payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32,
        sequenceNumber: UInt16, rewrite: RTPPayloadRewrite = .none, dependencyDescriptor: UnsafeRawBufferPointer? = nil,
        now: UInt64
    ) -> Bool {
        loop.assertInLoop()
        guard isConnected, srtpOut != nil, transceiver.sends, let sender = transceiver.senders.first else {
            return false
        }
        return sender.sendRetransmission(
            payload: payload, marker: marker, timestamp: timestamp, sequenceNumber: sequenceNumber,
            rewrite: rewrite, dependencyDescriptor: dependencyDescriptor, now: now
        ) { buffer, length in
            self.protectAndSendRTP(buffer, length: length)
        }
    }

    func protectAndSendRTP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) {
        guard let srtp = srtpOut, let target = mediaTarget, let base = buffer.baseAddress else { return }
        var estimateChanged = false
        // Told once the packet is out: the delegate may send (a probe, a key frame request), and
        // this transport's senders build in ``packetScratch``, which may hold this packet.
        defer {
            if estimateChanged, let bandwidthEstimator {
                delegate?.transport(self, estimateChanged: bandwidthEstimator.estimate)
            }
        }
        do {
            let n = try srtp.protectRTP(base, length: length, capacity: buffer.count)
            let packet = UnsafeRawBufferPointer(start: base, count: n)
            if transportSequence.hasPending {
                // The packet carries a transport-wide number: remember it for the feedback.
                transportSequence.hasPending = false
                estimateChanged =
                    bandwidthEstimator?.packetSent(
                        transportSequence.pendingSequence, size: n, now: transportSequence.pendingTime) ?? false
            }
            if let tap = outboundRTPTap, tap(packet, target.socket, target.remote) { return }
            target.socket.send(packet, to: target.remote)
            counters.packetsSent &+= 1
            counters.bytesSent &+= UInt64(n)
        } catch {
            transportSequence.hasPending = false
            counters.droppedSRTP &+= 1
        }
    }

    func protectAndSendRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) {
        guard let srtp = srtpOut, let target = mediaTarget, let base = buffer.baseAddress else { return }
        do {
            let n = try srtp.protectRTCP(base, length: length, capacity: buffer.count)
            target.socket.send(UnsafeRawBufferPointer(start: base, count: n), to: target.remote)
            counters.packetsSent &+= 1
            counters.bytesSent &+= UInt64(n)
        } catch {
            counters.droppedSRTP &+= 1
        }
    }

    // MARK: Asking the remote senders

    /// Asks the remote sender(s) of `transceiver` for a keyframe (PLI with the receiver's throttle);
    /// `rid` nil with `allEncodings` asks every encoding.
    func requestKeyframe(on transceiver: RTPTransceiver, rid: String?, allEncodings: Bool) {
        loop.assertInLoop()
        for s in listener.streams where s.transceiver === transceiver && (allEncodings || s.rid == rid) {
            s.receiver.requestKeyframe()
        }
    }

    /// Sends a PLI for one encoding with the next tick, bypassing the receiver's own throttle
    /// (``RTPReceiver/requestKeyframeNow()``). False when no packet of that encoding arrived yet.
    @discardableResult
    public func requestKeyframeNow(on transceiver: RTPTransceiver, rid: String?) -> Bool {
        loop.assertInLoop()
        var asked = false
        for s in listener.streams where s.transceiver === transceiver && s.rid == rid {
            s.receiver.requestKeyframeNow()
            asked = true
        }
        return asked
    }

    /// Stops receiving on `transceiver` for good: its receive streams are freed and packets that
    /// still arrive for it are dropped as unroutable. For an SFU whose producer on that m-line closed.
    public func stopReceiving(on transceiver: RTPTransceiver) {
        loop.assertInLoop()
        for ssrc in listener.stopReceiving(on: transceiver) { srtpIn?.forget(ssrc: ssrc) }
    }

    /// Frees the receive streams (and their SRTP state) of the tracks a new remote description
    /// ended (``RTPStreamListener/endStreams(announcedBefore:)``).
    func endReceiveStreams(announcedBefore: [ObjectIdentifier: [UInt32]]) {
        loop.assertInLoop()
        for ssrc in listener.endStreams(announcedBefore: announcedBefore) { srtpIn?.forget(ssrc: ssrc) }
    }

    /// Forgets the SRTP state of local SSRCs that will never send again (a reused m-line's old track).
    func forgetSendSSRCs(_ ssrcs: [UInt32]) {
        loop.assertInLoop()
        for ssrc in ssrcs {
            sendBySSRC[ssrc] = nil
            srtpOut?.forget(ssrc: ssrc)
        }
    }

    /// The receiver of a remote media SSRC, once packets of it arrived.
    public func receiver(forSSRC ssrc: UInt32) -> RTPReceiver? {
        loop.assertInLoop()
        return listener.bySSRC[ssrc]?.receiver
    }

    /// The counters of every receive stream on `transceiver` (one per encoding that sent a packet).
    public func receiverStats(on transceiver: RTPTransceiver) -> [RTPReceiverStats] {
        loop.assertInLoop()
        return listener.streams.compactMap { $0.transceiver === transceiver ? $0.receiver.stats : nil }
    }

    // MARK: Receive path

    /// Demultiplexes one datagram (RFC 7983: STUN to ICE, DTLS to DTLS, SRTP/SRTCP to the RTP
    /// streams and the RTCP router). Loop thread only; allocation-free for media.
    public func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        loop.assertInLoop()
        handleDatagram(data, from: from, socket: socket, now: EventLoop.now())
    }

    /// ``handleDatagram(_:from:socket:)`` at `now` (``EventLoop/now()``, read once per receive batch).
    public func handleDatagram(
        _ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64
    ) {
        loop.assertInLoop()
        guard !closed, let first = data.first else { return }
        counters.packetsReceived &+= 1
        counters.bytesReceived &+= UInt64(data.count)
        if first < 4 {
            tickDeadline.wake()
            if ice?.handleSTUN(UnsafeRawBufferPointer(data), from: from, socket: socket) != true {
                counters.droppedMalformed &+= 1
            }
            return
        }
        if first >= 20 && first <= 63 {
            guard let ice else {
                counters.droppedUnknownAddress &+= 1
                return
            }
            guard ice.isValidRemote(from) else {
                // A lite peer sends its ClientHello right behind its answer to our check: when that
                // answer is lost, the hello comes from an address we checked but have not validated.
                // Kept (not used) until a response validates it, so the handshake need not wait
                // for the peer's retransmission.
                if ice.isPairedRemote(from), holdDTLS(data, from: from, socket: socket) {
                    counters.dtlsHeldUntilValid &+= 1
                } else {
                    counters.droppedUnknownAddress &+= 1
                }
                return
            }
            guard let dtls else {
                if holdDTLS(data, from: from, socket: socket) {
                    counters.dtlsHeldUntilStart &+= 1
                } else {
                    counters.dtlsDroppedBeforeStart &+= 1
                }
                return
            }
            handDTLS(UnsafeRawBufferPointer(data), to: dtls, from: from, socket: socket)
            return
        }
        guard first >= 128 && first <= 191 else {
            counters.droppedMalformed &+= 1
            return
        }
        // Media is accepted only from the address ICE validated for this transport.
        guard let remote = mediaTarget?.remote, remote == from || (ice?.isValidRemote(from) ?? false) else {
            counters.droppedUnknownAddress &+= 1
            return
        }
        guard let srtp = srtpIn, let base = data.baseAddress else {
            counters.droppedUnroutable &+= 1
            return
        }
        if RTPHeader.isRTCP(UnsafeRawBufferPointer(data)) {
            let n: Int
            do { n = try srtp.unprotectRTCP(base, length: data.count) } catch {
                counters.droppedSRTP &+= 1
                return
            }
            if dtlsReleasePending { releaseDTLSHandshakeState() }
            // Rare next to media; feedback can change what the senders and receivers do next.
            tickDeadline.wake()
            handleRTCP(UnsafeRawBufferPointer(start: base, count: n), now: now)
            return
        }
        let n: Int
        do { n = try srtp.unprotectRTP(base, length: data.count) } catch {
            counters.droppedSRTP &+= 1
            return
        }
        if dtlsReleasePending { releaseDTLSHandshakeState() }
        let packet = UnsafeRawBufferPointer(start: base, count: n)
        let header: RTPHeader
        do { header = try RTPHeader.parse(packet) } catch {
            counters.droppedMalformed &+= 1
            return
        }
        // The estimators get the kernel's arrival time: this loop's own delay is not the network's.
        let arrival = socket.kernelArrival != 0 && socket.kernelArrival <= now ? socket.kernelArrival : now
        // Every packet that carries a transport-wide number counts, padding probes on unbound SSRCs too.
        if let transportFeedback, let range = header.extensionElement(id: transportCCExtensionID, in: packet),
            let sequence = RTPExtensions.transportSequenceNumber(packet, range)
        {
            transportFeedback.record(sequence, ssrc: header.ssrc, now: arrival)
        }
        rembGenerator?.record(ssrc: header.ssrc, sequence: header.sequenceNumber, length: n, now: arrival)
        // Streams are dropped only between datagrams: borrowed without a retain and release per packet.
        guard
            let reference = listener.boundStream(header.ssrc)
                ?? listener.bind(packet, header: header, routes: transceivers).map(Unmanaged.passUnretained)
        else {
            counters.droppedUnroutable &+= 1
            return
        }
        reference._withUnsafeGuaranteedRef { stream in
            // The receiver unwraps RTX and parses the codec header once; a forwarder reuses both.
            let read = stream.receiver.receive(packet, header: header, now: now)
            if let onRTP, let read { deliverRaw(stream, packet, header: header, read, now: now, to: onRTP) }
        }
    }

    /// Hands a media packet to ``onRTP`` as its receiver read it (RTX unwrapped, codec header parsed).
    @inline(__always)
    func deliverRaw(
        _ stream: RTPStreamListener.Stream, _ packet: UnsafeRawBufferPointer, header: RTPHeader,
        _ read: RTPReceivedPayload, now: UInt64, to handler: RTPPacketHandler
    ) {
        // Padding carries no media to forward.
        guard !read.payload.isEmpty else { return }
        handler(
            stream.transceiver, stream.rid,
            ReceivedRTPPacket(
                packet: packet, header: header, mediaSSRC: stream.receiver.ssrc, sequenceNumber: read.sequenceNumber,
                payload: read.payload, info: read.info, isRepair: read.isRepair, arrival: now))
    }

    /// Routes one decrypted compound RTCP packet to the senders and receivers (``RTCPRouter``).
    /// NACKs go to the delegate when it answers them (as an array: NACKs are rare next to media).
    func handleRTCP(_ packet: UnsafeRawBufferPointer, now: UInt64) {
        do throws(RTCPError) {
            try RTCPRouter.route(
                packet, now: now, sender: { sendBySSRC[$0] }, receiver: { listener.bySSRC[$0]?.receiver },
                nack: { sender, view throws(RTCPError) in
                    guard let delegate, delegate.answersNACKs, let t = transceiver(of: sender) else { return false }
                    var lost: [UInt16] = []
                    try view.forEachNACKSequence { lost.append($0) }
                    delegate.transport(self, nacked: lost, on: t, now: now)
                    return true
                },
                keyframeRequested: { sender in
                    if let delegate, let t = transceiver(of: sender) {
                        delegate.transport(self, keyframeRequestedOn: t)
                    }
                },
                goodbye: { ssrc in delegate?.transport(self, peerEnded: ssrc) },
                transportFeedback: { view throws(RTCPError) in
                    counters.transportFeedbackReceived &+= 1
                    guard let bandwidthEstimator else { return }
                    if let rtt = roundTripTime() { bandwidthEstimator.roundTripTimeMs = rtt }
                    if try bandwidthEstimator.handleTransportFeedback(view, now: now) {
                        delegate?.transport(self, estimateChanged: bandwidthEstimator.estimate)
                    }
                },
                remb: { bitrate in
                    counters.rembReceived &+= 1
                    let estimator: SendSideBandwidthEstimator
                    if let existing = bandwidthEstimator {
                        estimator = existing
                    } else {
                        estimator = SendSideBandwidthEstimator(configuration: configuration.bandwidth)
                        bandwidthEstimator = estimator
                    }
                    if estimator.handleREMB(bitrate, now: now) {
                        delegate?.transport(self, estimateChanged: estimator.estimate)
                    }
                },
                emit: { buffer, length in protectAndSendRTP(buffer, length: length) })
        } catch {
            counters.droppedMalformed &+= 1
        }
    }

    /// The round-trip time (ms) the first sender with a receiver report measured; nil: none yet.
    func roundTripTime() -> Double? {
        for t in transceivers {
            for s in t.senders where s.reportedRoundTripTime > 0 {
                return Double(s.reportedRoundTripTime) / 1_000_000
            }
        }
        return nil
    }

    func transceiver(of sender: RTPSender) -> RTPTransceiver? {
        transceivers.first { $0.senders.contains { $0 === sender } }
    }

    // MARK: Timers

    /// Runs ICE, DTLS, sender-report and receiver-report timers, once one is due (``tickDeadline``).
    public func tick(now: UInt64) {
        loop.assertInLoop()
        // Hundreds of transports share a loop that ticks every 10 ms, and most have nothing due
        // (a report about once a second, a consent check every few seconds): visiting each of their
        // streams at every tick was a fixed cost that grew with the audience.
        guard !closed, now >= tickDeadline.at else { return }
        ice?.tick(now: now)
        dtls?.tick(now: now)
        if isConnected, srtpOut != nil {
            for t in transceivers {
                for s in t.senders {
                    s.tick(now: now) { buffer, length in self.protectAndSendRTCP(buffer, length: length) }
                }
            }
            for s in listener.streams {
                s.receiver.tick(now: now) { buffer, length in self.protectAndSendRTCP(buffer, length: length) }
            }
            if let transportFeedback, now >= transportFeedback.nextTimer {
                transportFeedback.senderSSRC = transceivers.first?.localSSRCs.first ?? 1
                transportFeedback.tick(now: now) { buffer, length in
                    self.protectAndSendRTCP(buffer, length: length)
                    self.counters.transportFeedbackSent &+= 1
                }
            }
            if let rembGenerator, now >= rembGenerator.nextTimer {
                rembGenerator.senderSSRC = transceivers.first?.localSSRCs.first ?? 1
                rembGenerator.tick(now: now) { buffer, length in
                    self.protectAndSendRTCP(buffer, length: length)
                    self.counters.rembSent &+= 1
                }
            }
        }
        // From the state after this tick (callbacks above may have changed it).
        tickDeadline.at = nextTimer(now: now)
    }

    /// The loop time from which ``tick(now:)`` has something to do: the earliest timer of the ICE
    /// agent, the DTLS handshake, the senders and the receive streams (`now`: at the next tick).
    func nextTimer(now: UInt64) -> UInt64 {
        // ICE-TCP framing and DTLS retransmissions keep their own clocks: every tick while they run.
        guard iceTCPStreams.isEmpty, dtls?.state != .connecting else { return now }
        var due = ice?.nextTimer(now: now) ?? .max
        guard isConnected, srtpOut != nil else { return due }
        for t in transceivers {
            for s in t.senders { due = min(due, s.nextTimer ?? now &+ Self.idleTickInterval) }
        }
        for s in listener.streams { due = min(due, s.receiver.nextTimer) }
        if let transportFeedback { due = min(due, transportFeedback.nextTimer) }
        if let rembGenerator { due = min(due, rembGenerator.nextTimer) }
        return due
    }

    /// The loop is shutting down under the transport: its owner closes.
    public func loopStopped() { delegate?.transport(self, didReport: .loopStopped) }

    // MARK: Closing

    /// Sends an RTCP BYE for the sending SSRCs and DTLS close_notify, stops timers, closes sockets.
    func close() {
        loop.assertInLoop()
        guard !closed else { return }
        sendGoodbye()
        dtls?.close()
        ice?.close()
        closed = true
        loop.removeTicker(self)
        for client in turnClients { client.close() }
        closeICETCP()
        if let mux = configuration.portMux {
            mux.unregister(self)  // the shared socket stays open for the others
        } else {
            for s in sockets { s.close() }
        }
    }

    /// RFC 3550 §6.6: tells the peer that every local sending SSRC (RTX ones included) is gone, so
    /// it need not wait for a timeout. Each compound starts with a report as §6.1 requires (an SR
    /// with SDES CNAME when its first source has sent media, else an RR with the CNAME) and ends
    /// with a BYE for up to 31 sources. Only a transport with SRTP keys can send it.
    func sendGoodbye() {
        guard srtpOut != nil, mediaTarget != nil else { return }
        var sources: [(sender: RTPSender, ssrc: UInt32)] = []
        for t in transceivers {
            for sender in t.senders {
                sources.append((sender, sender.ssrc))
                if let rtx = sender.rtx { sources.append((sender, rtx.ssrc)) }
            }
        }
        let now = EventLoop.now()
        var start = 0
        while start < sources.count {
            let group = sources[start..<min(start + 31, sources.count)]
            start += group.count
            let reporter = group[group.startIndex].sender
            do throws(RTCPError) {
                var end = 0
                if reporter.stats.packetsSent > 0 {
                    end = reporter.makeSenderReport(
                        now: now, wallClock: reporter.wallClock(now), into: rtcpScratch, at: 0)
                }
                if end == 0 {
                    end = try RTCPWriter.writeReceiverReport(into: rtcpScratch, at: 0, ssrc: reporter.ssrc)
                    end = try RTCPWriter.writeSDESCNAME(
                        into: rtcpScratch, at: end, ssrc: reporter.ssrc, cname: reporter.cname)
                }
                end = try RTCPWriter.writeBYE(into: rtcpScratch, at: end, ssrcs: group.map(\.ssrc))
                protectAndSendRTCP(rtcpScratch, length: end)
            } catch {
                // Only a too-small buffer fails (2 KB holds a report, a CNAME and 31 sources).
            }
        }
    }
}
