import RTCWire

/// Called on the loop thread with each complete frame received on a transceiver.
public typealias FrameHandler = (RTPTransceiver, _ rid: String?, EncodedFrame, FrameTiming) -> Void

/// The JSEP subset a headless client and an SFU need: offers and answers with BUNDLE and rtcp-mux,
/// transceivers with directions, simulcast send by RID and receive by mid/rid, over ICE + DTLS-SRTP.
///
/// A `PeerConnection` belongs to one ``EventLoop``. Its synchronous methods must be called on that
/// loop's thread; the `async` variants hop onto it. Media arrives through ``onFrame`` on the loop
/// thread with no hop per packet.
public final class PeerConnection: @unchecked Sendable, DatagramHandler, EventLoopTicker {
    public let loop: EventLoop
    public let configuration: PeerConnectionConfiguration
    public let certificate: DTLSCertificate
    public private(set) var transceivers: [RTPTransceiver] = []
    public internal(set) var state: PeerConnectionState = .new
    public private(set) var counters = PeerConnectionCounters()
    /// Why the connection failed, when it did.
    public internal(set) var failureReason: String?
    /// Negotiated SRTP profile, once DTLS completes.
    public internal(set) var srtpProfile: SRTPProfile?

    /// Frames received, on the loop thread.
    ///
    /// While it is nil the receivers skip frame assembly copies entirely (an SFU only forwards).
    public var onFrame: FrameHandler? {
        didSet {
            if (oldValue == nil) != (onFrame == nil) {
                for s in receiveStreams { attachFrameHandler(s) }
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
    public var outboundRTPTap: ((UnsafeRawBufferPointer, UDPSocket, SocketAddress) -> Bool)?
    /// The peer's RTCP BYE (RFC 3550 §6.6) said this remote SSRC is gone; on the loop thread, once per
    /// source named. A closing ``PeerConnection`` sends one for each of its sending SSRCs.
    public var onBYE: ((UInt32) -> Void)?
    /// A keyframe was requested by the remote (PLI/FIR) for this transceiver; on the loop thread.
    public var onKeyframeRequest: ((RTPTransceiver) -> Void)?
    /// When set, NACKs for this connection's senders go here (transceiver, lost sequence numbers,
    /// now) instead of being answered from the senders' own history: an SFU answers them from its
    /// shared per-producer buffer (``PeerConnectionConfiguration/senderHistory`` is then usually off).
    public var onNACK: ((RTPTransceiver, [UInt16], UInt64) -> Void)?
    /// Every received media packet (after SRTP, RTX unwrapping and the receiver's bookkeeping), on
    /// the loop thread, for forwarding without frame assembly (an SFU). The packet's bytes are only
    /// valid during the call. The receiver still sends NACK, PLI and receiver reports upstream.
    public var onRTP: RTPPacketHandler?

    // Transport.
    var sockets: [UDPSocket] = []
    /// Our ICE credentials; an ICE restart replaces them (``restartICE()``).
    var localUfrag: String
    var localPassword: String
    var ice: ICEAgent?
    var dtls: DTLSTransport?
    var srtpOut: SRTPSession?
    var srtpIn: SRTPSession?
    /// Set when DTLS connects; cleared when the first authentic packet lets it give its state back.
    var dtlsReleasePending = false
    var remoteFingerprint: SDPFingerprint?
    var remoteUfrag: String?
    var remotePassword: String?
    var remoteCandidates: [ICECandidate] = []
    var remoteIsLite = false
    var dtlsRole: DTLSTransport.Role?
    var mediaTarget: (socket: UDPSocket, remote: SocketAddress)?
    /// One TURN allocation per configured ICE server (``PeerConnectionConfiguration/iceServers``).
    var turnClients: [TURNClient] = []
    /// ICE-TCP connections (accepted on a server, opened by a client).
    var iceTCPStreams: [ICETCPStream] = []
    /// Why TURN servers could not be used (unresolvable names, refused allocations).
    var relayErrors: [String] = []

    // Negotiation.
    var pendingLocalOffer: Bool = false
    var isOfferer = false
    var nextMid = 0
    var remoteMidOrder: [String] = []
    var extensionIDs: [String: UInt8] = [:]  // uri -> id, negotiated
    var midExtID: UInt8 {
        get { listener.midExtensionID }
        set { listener.midExtensionID = newValue }
    }
    var ridExtID: UInt8 {
        get { listener.ridExtensionID }
        set { listener.ridExtensionID = newValue }
    }
    var repairedRIDExtID: UInt8 {
        get { listener.repairedRIDExtensionID }
        set { listener.repairedRIDExtensionID = newValue }
    }
    var sessionVersion: UInt64 = 1
    let sessionID: UInt64 = UInt64.random(in: 1...(UInt64(1) << 62))

    // Receive routing (hot path): SSRC -> stream, in the transport's listener (no JSEP inside).
    typealias ReceiveStream = RTPStreamListener.Stream
    let listener: RTPStreamListener
    var receiveBySSRC: [UInt32: ReceiveStream] { listener.bySSRC }
    var receiveStreams: [ReceiveStream] { listener.streams }
    var sendBySSRC: [UInt32: RTPSender] = [:]

    /// Until when ``tick(now:)`` has nothing to do on a send-only ICE-lite connection (0: every tick).
    var nextIdleTick: UInt64 = 0
    /// How often a send-only ICE-lite connection runs its timers.
    static let idleTickInterval: UInt64 = 50_000_000

    /// Scratch buffer for outgoing RTCP and for re-encrypting, reused (no per-packet allocation).
    let rtcpScratch: UnsafeMutableRawBufferPointer
    var closed = false

    /// Creates a peer connection and opens its UDP sockets on `loop`.
    public init(
        loop: EventLoop, configuration: PeerConnectionConfiguration = .init(), certificate: DTLSCertificate? = nil
    )
        throws
    {
        self.loop = loop
        self.configuration = configuration
        self.certificate = try certificate ?? DTLSCertificate.generate()
        let creds = ICEAgent.randomCredentials()
        self.localUfrag = creds.ufrag
        self.localPassword = creds.password
        self.rtcpScratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        listener = RTPStreamListener(maxSSRCs: configuration.maxRemoteSSRCs)
        listener.onNewStream = { [unowned self] stream in attachFrameHandler(stream) }
    }

    deinit {
        rtcpScratch.deallocate()
    }

    // MARK: Transceivers

    /// Adds a transceiver. `sendRIDs` (e.g. `["q","h","f"]`) makes a simulcast sender.
    @discardableResult
    public func addTransceiver(kind: MediaKind, direction: SDPDirection, sendRIDs: [String] = []) -> RTPTransceiver {
        let t = RTPTransceiver(kind: kind, direction: direction, sendRIDs: kind == .video ? sendRIDs : [])
        transceivers.append(t)
        return t
    }

    /// Puts a new outgoing track on the m-line of an ``RTPTransceiver/isReusable`` transceiver (an SFU
    /// recycling the m-line of a track that ended, so the session does not grow with every track):
    /// fresh SSRCs and stream/track ids, `direction` from the next offer on. Its old senders stop at
    /// once; new ones start when the next negotiation completes. Returns false (and changes nothing)
    /// when the transceiver cannot be reused.
    @discardableResult
    public func reuseTransceiver(_ transceiver: RTPTransceiver, direction: SDPDirection) -> Bool {
        guard transceivers.contains(where: { $0 === transceiver }), transceiver.isReusable else { return false }
        for ssrc in transceiver.localSSRCs { sendBySSRC[ssrc] = nil }
        transceiver.senders = []
        transceiver.renewSendIdentity()
        transceiver.direction = direction
        return true
    }

    // MARK: Sending

    /// Sends one encoded frame on `transceiver`, on encoding `layer` (0 for non-simulcast).
    ///
    /// Must run on the loop thread. Frames are dropped silently until DTLS completes or when the
    /// negotiated direction does not send.
    public func send(_ frame: EncodedFrame, on transceiver: RTPTransceiver, layer: Int = 0) {
        guard state == .connected, srtpOut != nil, transceiver.sends, layer < transceiver.senders.count else { return }
        let now = EventLoop.now()
        transceiver.senders[layer].send(frame, now: now) { buffer, length in
            self.protectAndSendRTP(buffer, length: length)
        }
    }

    /// Whether a frame sent now would go out.
    public func canSend(on transceiver: RTPTransceiver) -> Bool {
        state == .connected && transceiver.sends && !transceiver.senders.isEmpty
    }

    func protectAndSendRTP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) {
        guard let srtp = srtpOut, let target = mediaTarget, let base = buffer.baseAddress else { return }
        do {
            let n = try srtp.protectRTP(base, length: length, capacity: buffer.count)
            let packet = UnsafeRawBufferPointer(start: base, count: n)
            if let tap = outboundRTPTap, tap(packet, target.socket, target.remote) { return }
            target.socket.send(packet, to: target.remote)
            counters.packetsSent &+= 1
            counters.bytesSent &+= UInt64(n)
        } catch {
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

    /// Asks the remote sender of `transceiver` for a keyframe (PLI), on the loop thread.
    public func requestKeyframe(on transceiver: RTPTransceiver) {
        for s in receiveStreams where s.transceiver === transceiver { s.receiver.requestKeyframe() }
    }

    /// Asks for a keyframe on one simulcast encoding (`rid`; nil for a single-encoding track).
    public func requestKeyframe(on transceiver: RTPTransceiver, rid: String?) {
        for s in receiveStreams where s.transceiver === transceiver && s.rid == rid { s.receiver.requestKeyframe() }
    }

    /// Sends a PLI for one encoding with the next tick, bypassing the receiver's own throttle (see
    /// ``RTPReceiver/requestKeyframeNow()``). Returns false when no packet of that encoding arrived
    /// yet, so there is no stream to ask on.
    @discardableResult
    public func requestKeyframeNow(on transceiver: RTPTransceiver, rid: String?) -> Bool {
        var asked = false
        for s in receiveStreams where s.transceiver === transceiver && s.rid == rid {
            s.receiver.requestKeyframeNow()
            asked = true
        }
        return asked
    }

    /// Forwards one already-packetized media payload (an SFU's relay path) on `transceiver`'s first
    /// sender: rewritten sequence number and timestamp, this connection's header extensions (with the
    /// source's abs-capture-time `captureTime`), kept in the sender's history (if it has one),
    /// SRTP-protected and sent. Loop thread only.
    ///
    /// - Returns: whether the packet went out (false before DTLS completes or when not sending).
    @discardableResult
    public func sendForwarded(
        on transceiver: RTPTransceiver, payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32,
        sequenceNumber: UInt16, rewrite: RTPPayloadRewrite = .none, audioLevel: RTPAudioLevel? = nil,
        captureTime: UInt64? = nil, now: UInt64
    ) -> Bool {
        guard state == .connected, srtpOut != nil, transceiver.sends, let sender = transceiver.senders.first else {
            return false
        }
        sender.forwardedCaptureTime = captureTime
        if let audioLevel {
            sender.audioLevel = audioLevel.level
            sender.voiceActivity = audioLevel.voiceActivity
        }
        return sender.sendForwarded(
            payload: payload, marker: marker, timestamp: timestamp, sequenceNumber: sequenceNumber,
            rewrite: rewrite, now: now
        ) { buffer, length in
            self.protectAndSendRTP(buffer, length: length)
        }
    }

    /// Resends one packet on `transceiver`'s first sender from a payload the caller keeps (an SFU's
    /// shared per-producer buffer): see ``RTPSender/sendRetransmission(payload:marker:timestamp:sequenceNumber:rewrite:now:emit:)``.
    /// Loop thread only.
    @discardableResult
    public func sendRetransmission(
        on transceiver: RTPTransceiver, payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32,
        sequenceNumber: UInt16, rewrite: RTPPayloadRewrite = .none, now: UInt64
    ) -> Bool {
        guard state == .connected, srtpOut != nil, transceiver.sends, let sender = transceiver.senders.first else {
            return false
        }
        return sender.sendRetransmission(
            payload: payload, marker: marker, timestamp: timestamp, sequenceNumber: sequenceNumber,
            rewrite: rewrite, now: now
        ) { buffer, length in
            self.protectAndSendRTP(buffer, length: length)
        }
    }

    /// Gives every transceiver without a media id one now (as ``createOffer()`` would), so callers can
    /// name the m-line of a new transceiver before the offer is made.
    public func assignMids() {
        for t in transceivers where t.mid == nil {
            while transceivers.contains(where: { $0.mid == String(nextMid) }) { nextMid += 1 }
            t.mid = String(nextMid)
            nextMid += 1
        }
    }

    /// The header-extension id negotiated for `uri` (e.g. `urn:ietf:params:rtp-hdrext:ssrc-audio-level`).
    public func negotiatedExtensionID(_ uri: String) -> UInt8? { extensionIDs[uri] }

    // MARK: Receive path

    public func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        guard !closed, let first = data.first else { return }
        counters.packetsReceived &+= 1
        counters.bytesReceived &+= UInt64(data.count)
        if first < 4 {
            if ice?.handleSTUN(UnsafeRawBufferPointer(data), from: from, socket: socket) != true {
                counters.droppedMalformed &+= 1
            }
            return
        }
        if first >= 20 && first <= 63 {
            guard let ice, ice.isValidRemote(from), let dtls else {
                counters.droppedUnknownAddress &+= 1
                return
            }
            if mediaTarget == nil { mediaTarget = (socket, from) }
            dtls.handleDatagram(UnsafeRawBufferPointer(data))
            return
        }
        guard first >= 128 && first <= 191 else {
            counters.droppedMalformed &+= 1
            return
        }
        // Media is accepted only from the address ICE validated for this connection.
        guard let remote = mediaTarget?.remote, remote == from || (ice?.isValidRemote(from) ?? false) else {
            counters.droppedUnknownAddress &+= 1
            return
        }
        guard let srtp = srtpIn, let base = data.baseAddress else {
            counters.droppedUnroutable &+= 1
            return
        }
        let now = EventLoop.now()
        if RTPHeader.isRTCP(UnsafeRawBufferPointer(data)) {
            let n: Int
            do { n = try srtp.unprotectRTCP(base, length: data.count) } catch {
                counters.droppedSRTP &+= 1
                return
            }
            if dtlsReleasePending { releaseDTLSHandshakeState() }
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
        // Streams live as long as the listener: borrowed without a retain and release per packet.
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
        _ stream: ReceiveStream, _ packet: UnsafeRawBufferPointer, header: RTPHeader, _ read: RTPReceivedPayload,
        now: UInt64, to handler: RTPPacketHandler
    ) {
        // Padding carries no media to forward.
        guard !read.payload.isEmpty else { return }
        handler(
            stream.transceiver, stream.rid,
            ReceivedRTPPacket(
                packet: packet, header: header, mediaSSRC: stream.receiver.ssrc, sequenceNumber: read.sequenceNumber,
                payload: read.payload, info: read.info, isRepair: read.isRepair, arrival: now))
    }

    /// Binds a new SSRC to a receive stream (see ``RTPStreamListener/bind(_:header:routes:)``).
    func routeUnknownSSRC(_ packet: UnsafeRawBufferPointer, header: RTPHeader) -> ReceiveStream? {
        listener.bind(packet, header: header, routes: transceivers)
    }

    func attachFrameHandler(_ stream: ReceiveStream) {
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

    /// Routes one decrypted compound RTCP packet to this connection's senders and receivers
    /// (``RTCPRouter``). NACKs go to ``onNACK`` when set (as an array: NACKs are rare next to media).
    func handleRTCP(_ packet: UnsafeRawBufferPointer, now: UInt64) {
        do throws(RTCPError) {
            try RTCPRouter.route(
                packet, now: now, sender: { sendBySSRC[$0] }, receiver: { receiveBySSRC[$0]?.receiver },
                nack: { sender, view throws(RTCPError) in
                    guard let onNACK, let t = transceiver(of: sender) else { return false }
                    var lost: [UInt16] = []
                    try view.forEachNACKSequence { lost.append($0) }
                    onNACK(t, lost, now)
                    return true
                },
                keyframeRequested: { sender in
                    if let onKeyframeRequest, let t = transceiver(of: sender) { onKeyframeRequest(t) }
                },
                goodbye: { ssrc in onBYE?(ssrc) },
                emit: { buffer, length in protectAndSendRTP(buffer, length: length) })
        } catch {
            counters.droppedMalformed &+= 1
        }
    }

    func transceiver(of sender: RTPSender) -> RTPTransceiver? {
        transceivers.first { $0.senders.contains { $0 === sender } }
    }

    // MARK: Timers

    public func tick(now: UInt64) {
        guard !closed else { return }
        // A connected ICE-lite connection that only sends (an SFU's subscribe connection, hundreds per
        // server) has only coarse timers left: consent expiry and sender reports (about 1 s apart).
        // Visiting each one every 10 ms was a fixed cost that grew with the audience.
        if now < nextIdleTick { return }
        if configuration.iceLite, state == .connected, receiveStreams.isEmpty, iceTCPStreams.isEmpty {
            nextIdleTick = now &+ Self.idleTickInterval
        } else {
            nextIdleTick = 0
        }
        ice?.tick(now: now)
        dtls?.tick(now: now)
        guard state == .connected, srtpOut != nil else { return }
        for t in transceivers {
            for s in t.senders {
                s.tick(now: now) { buffer, length in self.protectAndSendRTCP(buffer, length: length) }
            }
        }
        for s in receiveStreams {
            s.receiver.tick(now: now) { buffer, length in self.protectAndSendRTCP(buffer, length: length) }
        }
    }

    /// The loop is shutting down under the connection: it closes, so that waits on it end.
    public func loopStopped() { close() }

    func setState(_ s: PeerConnectionState) {
        guard s != state, state != .closed else { return }
        state = s
        onStateChange?(s)
        notifyStateWaiters()
    }

    /// Lets each wait (``waitUntilConnected(timeout:)``, …) look at the connection again; those
    /// that are over return true and go. Called on state changes and on ICE progress.
    func notifyStateWaiters() {
        if !stateWaiters.isEmpty { stateWaiters.removeAll { $0(state) } }
    }

    /// Closes the connection: sends an RTCP BYE for its sending SSRCs and DTLS close_notify, stops
    /// timers, closes sockets.
    public func close() {
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
        setState(.closed)
    }

    /// RFC 3550 §6.6: tells the peer that every local sending SSRC (RTX ones included) is gone, so
    /// it need not wait for a timeout. Each compound starts with a report as §6.1 requires (an SR
    /// with SDES CNAME when its first source has sent media, else an RR with the CNAME) and ends
    /// with a BYE for up to 31 sources. Only a connection with SRTP keys can send it.
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

    /// Whether ICE has validated `address` as this connection's peer.
    func iceAccepts(_ address: SocketAddress) -> Bool { ice?.isValidRemote(address) ?? false }

    /// ICE counters, including STUN requests dropped for bad integrity or unknown usernames.
    public var iceCounters: ICECounters? { ice?.counters }
    /// The latest ICE check round-trip time to the peer, in nanoseconds (0 until known).
    public var iceRoundTripTime: UInt64 { ice?.roundTripTime ?? 0 }

    /// The local address of the first media socket (for diagnostics and tests).
    public var localAddress: SocketAddress? { sockets.first?.localAddress }

    /// The receiver of a remote media SSRC, once packets of it arrived (loop thread).
    public func receiver(forSSRC ssrc: UInt32) -> RTPReceiver? { receiveBySSRC[ssrc]?.receiver }

    /// Aggregated receiver statistics, per (transceiver mid, rid).
    public func receiverStats() -> [(mid: String?, rid: String?, kind: MediaKind, stats: RTPReceiverStats)] {
        receiveStreams.map { ($0.transceiver.mid, $0.rid, $0.transceiver.kind, $0.receiver.stats) }
    }

    /// Aggregated sender statistics, per (transceiver mid, layer).
    public func senderStats() -> [(mid: String?, layer: Int, kind: MediaKind, stats: RTPSenderStats)] {
        var out: [(mid: String?, layer: Int, kind: MediaKind, stats: RTPSenderStats)] = []
        for t in transceivers {
            for (i, s) in t.senders.enumerated() { out.append((t.mid, i, t.kind, s.stats)) }
        }
        return out
    }
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
