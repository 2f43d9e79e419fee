import RTCWire

extension PeerConnection {
    // MARK: Offer / answer

    /// Creates an offer for the current transceivers (non-trickle: all host candidates included).
    /// With `iceRestart` the offer carries fresh ICE credentials and the agent restarts its checks
    /// (RFC 8445 §2.4); DTLS, SRTP and every RTP sender and receiver are kept.
    public func createOffer(iceRestart: Bool = false) throws -> SessionDescription {
        loop.assertInLoop()
        guard !closed else { throw PeerConnectionError.closed }
        try transport.gatherIfNeeded(role: configuration.iceLite ? .lite : .controlling)
        if iceRestart { transport.restartLocalICE() }
        isOfferer = true
        for t in transceivers where t.mid == nil {
            while transceivers.contains(where: { $0.mid == String(nextMid) }) { nextMid += 1 }
            t.mid = String(nextMid)
            nextMid += 1
        }
        // This offer rejects the stopped m-lines: its answer settles their stop.
        for t in transceivers where t.stopping { t.stopOffered = true }
        reserveOfferedExtensionIDs()
        let text = renderDescription(setup: .actpass, isOffer: true)
        do { return try SessionDescription.parse(text) } catch {
            throw PeerConnectionError.badDescription("internal offer did not parse: \(error)")
        }
    }

    /// Creates an answer to the remote offer set with ``setRemoteDescription(_:type:)``.
    public func createAnswer() throws -> SessionDescription {
        loop.assertInLoop()
        guard !closed else { throw PeerConnectionError.closed }
        guard !isOfferer, remoteUfrag != nil else { throw PeerConnectionError.invalidState("no remote offer") }
        let setup: SDPSetup = dtlsRole == .server ? .passive : .active
        let text = renderDescription(setup: setup, isOffer: false)
        do { return try SessionDescription.parse(text) } catch {
            throw PeerConnectionError.badDescription("internal answer did not parse: \(error)")
        }
    }

    /// Applies our own description. With the non-trickle flow used here this only starts the
    /// transports when the remote description is already known (the answerer's case).
    public func setLocalDescription(_ description: SessionDescription) throws {
        loop.assertInLoop()
        guard !closed else { throw PeerConnectionError.closed }
        if !isOfferer { try startTransports() }
    }

    /// The offer/answer type of a remote description.
    public enum DescriptionType: String, Sendable { case offer, answer }

    /// Applies the remote description: codecs, extensions, SSRCs, ICE and DTLS parameters.
    public func setRemoteDescription(_ description: SessionDescription, type: DescriptionType) throws {
        loop.assertInLoop()
        guard !closed else { throw PeerConnectionError.closed }
        let remote = try RemoteDescription(description)
        // New remote credentials on an established connection mean the peer restarted ICE.
        let remoteRestarted = transport.ice != nil && remoteUfrag != nil && remoteUfrag != remote.iceUfrag
        if remoteRestarted {
            if type == .offer {
                // JSEP 5.3.1: the answer to a restart offer carries fresh credentials too.
                transport.restartLocalICE()
            } else if transport.ice?.isRestarting != true {
                transport.ice?.restart(localUfrag: transport.localUfrag, localPassword: transport.localPassword)
            }
        }
        remoteUfrag = remote.iceUfrag
        remotePassword = remote.icePassword
        remoteFingerprint = remote.fingerprint
        remoteCandidates = remote.candidates
        remoteIsLite = remote.iceLite
        // Receive streams of tracks this description ends are freed below, with their buffers.
        let announcedBefore = Dictionary(
            transceivers.map { (ObjectIdentifier($0), $0.remoteSSRCs) }, uniquingKeysWith: { first, _ in first })
        defer { transport.endReceiveStreams(announcedBefore: announcedBefore) }
        switch type {
        case .offer:
            isOfferer = false
            try applyRemoteOffer(remote)
            if let running = transport.dtls?.role {
                // RFC 8842 §5.5: a later offer keeps the DTLS association, so its roles, whoever
                // offered first; the answer says which role that is.
                dtlsRole = running
            } else {
                switch remote.setup {
                case .active: dtlsRole = .server
                case .passive: dtlsRole = .client
                default: dtlsRole = configuration.answerDTLSRole
                }
            }
            try transport.gatherIfNeeded(
                role: configuration.iceLite ? .lite : (remote.iceLite ? .controlling : .controlled))
        case .answer:
            guard isOfferer else { throw PeerConnectionError.invalidState("answer without a local offer") }
            try applyRemoteAnswer(remote)
            switch remote.setup {
            case .active: dtlsRole = .server
            case .passive: dtlsRole = .client
            default: throw PeerConnectionError.badDescription("answer must say a=setup:active or passive")
            }
            try startTransports()
        }
    }

    // MARK: Remote description handling

    func applyRemoteOffer(_ remote: RemoteDescription) throws {
        remoteMidOrder = remote.media.map(\.mid)
        dropRecycledTransceivers(keeping: remoteMidOrder)
        for m in remote.media {
            var t = transceivers.first { $0.mid == m.mid }
            if t == nil, m.kind != nil {
                // Associate a not-yet-negotiated transceiver of the same kind, else create a receiver.
                t = m.rejected ? nil : transceivers.first { $0.mid == nil && $0.kind == m.kind }
                if t == nil, let kind = m.kind {
                    t = addTransceiver(kind: kind, direction: .recvonly)
                }
                t?.mid = m.mid
            }
            guard let t else { continue }
            guard !m.rejected, let kind = m.kind, kind == t.kind,
                let (codec, format) = m.firstFormat(of: t.codecPreferences)
            else {
                // Rejected or stopped by the offerer (port 0), or no codec we take: its receive
                // streams end below.
                t.rejected = true
                t.currentDirection = .inactive
                t.remoteSSRCs = []
                t.remoteRTXSSRCs = [:]
                t.extensionIDs = [:]
                t.remoteExtensionDirections = [:]
                continue
            }
            t.rejected = false
            // The answer's section takes from this offered section only (RFC 8285 §5).
            t.extensionIDs = Self.usableExtensions(m.extensions, kind: kind)
            t.remoteExtensionDirections = m.extensionDirections.filter { t.extensionIDs[$0.key] != nil }
            adopt(codec, format, of: m, for: t)
        }
        for t in transceivers where t.mid == nil { t.rejected = true }
        adoptExtensions()
        prepareSenders()
    }

    func applyRemoteAnswer(_ remote: RemoteDescription) throws {
        for t in transceivers {
            guard let m = remote.media.first(where: { $0.mid == t.mid }) else { continue }
            if t.stopping {
                // Stopped here: the answer to an offer that rejected it settles the stop.
                t.currentDirection = .inactive
                if t.stopOffered { (t.stopping, t.stopOffered, t.rejected) = (false, false, true) }
                continue
            }
            guard !m.rejected, let (codec, format) = m.firstFormat(of: t.codecPreferences) else {
                t.rejected = true
                t.currentDirection = .inactive
                t.extensionIDs = [:]
                t.remoteExtensionDirections = [:]
                continue
            }
            // Our offers list every extension both ways; an answer that made one one-way is
            // not one we handle, so it is left out.
            t.remoteExtensionDirections = [:]
            // What the answer kept of what our offer listed in this section, with the offered id; an
            // extension the answer adds on its own is not one the section may use (RFC 8285 §5).
            t.extensionIDs = Self.usableExtensions(m.extensions, kind: t.kind).filter {
                t.offeredExtensionIDs[$0.key] == $0.value && m.extensionDirections[$0.key] == nil
            }
            adopt(codec, format, of: m, for: t)
        }
        adoptExtensions()
        prepareSenders()
    }

    /// What a remote section settles for `t`, offer or answer alike: the codec and its payload
    /// types, the direction, and the remote sender's RIDs and SSRCs.
    func adopt(_ codec: MediaCodec, _ format: RTPCodec, of m: RemoteDescription.Media, for t: RTPTransceiver) {
        t.codec = codec
        t.codecParameters = codec.formatParametersMatter ? format.parameters : nil
        t.remoteREMB = t.kind == .video && format.feedback.contains(.googREMB)
        t.payloadType = format.payloadType
        t.rtxPayloadType = configuration.enableRTX ? m.rtxPayloadType(for: format.payloadType) : nil
        // Our direction is the intersection of what we want and what the remote side allows.
        t.currentDirection = intersect(t.direction, m.direction.reversed)
        t.remoteRIDs = m.sendRIDs
        t.remoteSSRCs = m.ssrcs
        t.remoteRTXSSRCs = m.rtxToPrimary
    }

    /// The extensions of one remote m-section that a transceiver of `kind` can use: those this stack
    /// implements for that kind, with the section's ids (the first one for a uri listed twice).
    static func usableExtensions(_ listed: [(uri: String, id: UInt8)], kind: MediaKind) -> [String: UInt8] {
        var ids: [String: UInt8] = [:]
        for (uri, id) in listed where ids[uri] == nil && !ids.values.contains(id) {
            guard LocalCapabilities.offeredExtensions.contains(where: { $0.uri == uri && $0.kinds.contains(kind) })
            else { continue }
            ids[uri] = id
        }
        return ids
    }

    /// The connection-wide view of the sections' negotiated extensions, after a description was
    /// applied: the receive path parses mid, rid and transport-wide sequence numbers with these ids
    /// (BUNDLE gives an extension one id in every section that uses it, RFC 8843 §9.2), and offers
    /// keep them. Each section sends only its own (``RTPTransceiver/extensionIDs``).
    func adoptExtensions() {
        var ids: [String: UInt8] = [:]
        for t in transceivers where !t.writesRejected {
            for (uri, id) in t.extensionIDs.sorted(by: { $0.value < $1.value }) where ids[uri] == nil {
                ids[uri] = id
            }
        }
        extensionIDs = ids
        transport.listener.midExtensionID = ids[LocalCapabilities.midURI] ?? 0
        transport.listener.ridExtensionID = ids[LocalCapabilities.ridURI] ?? 0
        transport.listener.repairedRIDExtensionID = ids[LocalCapabilities.repairedRIDURI] ?? 0
        transport.listener.captureTimeExtensionID = ids[LocalCapabilities.absCaptureTimeURI] ?? 0
        transport.transportCCExtensionID = ids[LocalCapabilities.transportWideCCURI] ?? 0
        // REMB only where transport-cc is not negotiated: a sender with both runs its own estimator,
        // which a receive-side bound would only cap.
        transport.sendsREMB =
            transport.transportCCExtensionID == 0 && transceivers.contains { !$0.writesRejected && $0.remoteREMB }
    }

    /// Before an offer: gives every extension we implement an id, keeping those already negotiated
    /// and never reusing one the peer gave to another extension.
    func reserveOfferedExtensionIDs() {
        for e in LocalCapabilities.offeredExtensions where extensionIDs[e.uri] == nil {
            let used = Set(extensionIDs.values)
            if let id = used.contains(e.id) ? (1...14).first(where: { !used.contains($0) }) : e.id {
                extensionIDs[e.uri] = id
            }
        }
    }

    /// The extensions an offer lists in `t`'s section: every one we implement for its kind, with the
    /// connection's ids.
    func offerExtensions(for t: RTPTransceiver) -> [String: UInt8] {
        var ids: [String: UInt8] = [:]
        for e in LocalCapabilities.offeredExtensions where e.kinds.contains(t.kind) {
            guard let id = extensionIDs[e.uri] else { continue }
            // rid extensions only matter where simulcast is in play.
            if (e.uri == LocalCapabilities.ridURI || e.uri == LocalCapabilities.repairedRIDURI) && t.sendRIDs.isEmpty
                && t.direction.sends
            {
                continue
            }
            ids[e.uri] = id
        }
        return ids
    }

    /// The header extensions `t`'s packets carry: those negotiated for its own section.
    static func sendExtensions(for t: RTPTransceiver) -> RTPSendExtensions {
        // Not those the peer offered to send only (RFC 8285 §6).
        let ids = t.extensionIDs.filter { t.remoteExtensionDirections[$0.key] != .sendonly }
        var exts = RTPSendExtensions()
        exts.mid = ids[LocalCapabilities.midURI]
        exts.rid = t.sendRIDs.isEmpty ? nil : ids[LocalCapabilities.ridURI]
        exts.repairedRID = t.sendRIDs.isEmpty ? nil : ids[LocalCapabilities.repairedRIDURI]
        exts.absSendTime = ids[LocalCapabilities.absSendTimeURI]
        exts.absCaptureTime = ids[LocalCapabilities.absCaptureTimeURI]
        exts.dependencyDescriptor = t.kind == .video ? ids[LocalCapabilities.dependencyDescriptorURI] : nil
        // Transport-wide numbers on everything we send: the peer's transport-cc feedback feeds the
        // transport's bandwidth estimator.
        exts.transportWideCC = ids[LocalCapabilities.transportWideCCURI]
        exts.audioLevel = t.kind == .audio ? ids[LocalCapabilities.audioLevelURI] : nil
        return exts
    }

    /// Creates the RTP senders for every transceiver that now sends; senders that exist already take
    /// their section's extensions as this negotiation left them.
    func prepareSenders() {
        for t in transceivers {
            let exts = Self.sendExtensions(for: t)
            if !t.senders.isEmpty {
                for sender in t.senders { sender.updateExtensions(exts) }
                continue
            }
            guard t.sends, !t.writesRejected else { continue }
            let layers = max(1, t.sendRIDs.count)
            for i in 0..<layers {
                let rtx: (payloadType: UInt8, ssrc: UInt32)? = t.rtxPayloadType.map { ($0, t.localRTXSSRCs[i]) }
                // Audio is never NACKed (no `nack` feedback is negotiated for Opus): a small history
                // saves ~700 KB per audio sender, which adds up on an SFU with many consumers.
                let sender = RTPSender(
                    ssrc: t.localSSRCs[i], payloadType: t.payloadType, codec: t.codec, rtx: rtx, extensions: exts,
                    mid: t.mid, rid: t.sendRIDs.isEmpty ? nil : t.sendRIDs[i],
                    historySize: !configuration.senderHistory ? 0 : t.kind == .audio ? 32 : 512,
                    cname: configuration.cname, scratch: transport.packetScratch)
                sender.transportSequence = transport.transportSequence
                sender.loop = loop
                sender.reportSource = t.reportSource
                t.senders.append(sender)
                transport.sendBySSRC[t.localSSRCs[i]] = sender
            }
        }
    }

    func intersect(_ mine: SDPDirection, _ allowed: SDPDirection) -> SDPDirection {
        let send = mine.sends && allowed.sends
        let recv = mine.receives && allowed.receives
        switch (send, recv) {
        case (true, true): return .sendrecv
        case (true, false): return .sendonly
        case (false, true): return .recvonly
        case (false, false): return .inactive
        }
    }

    // MARK: Transports

    /// Opens the UDP sockets now (otherwise the first offer or remote offer does), so a caller that
    /// allocates ports from a range learns at once whether the configured port is free.
    /// Loop thread only; does nothing when the sockets are already open.
    public func bindSockets() throws {
        loop.assertInLoop()
        guard !closed else { throw PeerConnectionError.closed }
        try transport.bindSockets()
    }

    /// Starts the transport with the peer's ICE and DTLS parameters from its description.
    func startTransports() throws {
        guard transport.ice != nil, let ufrag = remoteUfrag, let pwd = remotePassword else {
            throw PeerConnectionError.invalidState("transports need local and remote descriptions")
        }
        guard let role = dtlsRole else { throw PeerConnectionError.invalidState("DTLS role unknown") }
        guard let fp = remoteFingerprint else { throw PeerConnectionError.badDescription("no a=fingerprint") }
        let dtlsFingerprint: DTLSFingerprint
        do { dtlsFingerprint = try DTLSFingerprint(algorithm: fp.algorithm, value: fp.value) } catch {
            throw PeerConnectionError.badDescription("bad fingerprint: \(error)")
        }
        transport.ice?.peerIsLite = remoteIsLite
        try transport.start(
            remoteUfrag: ufrag, remotePassword: pwd, remoteCandidates: remoteCandidates, role: role,
            fingerprint: dtlsFingerprint)
        if state == .new { setState(.connecting) }
        transport.startDTLSIfReady()
    }

    // MARK: Rendering

    func renderDescription(setup: SDPSetup, isOffer: Bool) -> String {
        sessionVersion += 1
        var s = "v=0\r\n"
        s += "o=- \(sessionID) \(sessionVersion) IN IP4 127.0.0.1\r\n"
        s += "s=-\r\nt=0 0\r\n"
        // An answer must list m-lines in the offer's order (JSEP 5.3.1).
        let ordered =
            isOffer ? transceivers : remoteMidOrder.compactMap { mid in transceivers.first { $0.mid == mid } }
        let bundled = ordered.filter { !$0.writesRejected && $0.mid != nil }.compactMap(\.mid)
        if !bundled.isEmpty { s += "a=group:BUNDLE \(bundled.joined(separator: " "))\r\n" }
        if configuration.iceLite { s += "a=ice-lite\r\n" }
        s += "a=extmap-allow-mixed\r\n"
        s += "a=msid-semantic: WMS *\r\n"
        let candidates = transport.ice?.localCandidates ?? []
        let fp = certificate.fingerprint
        for t in ordered {
            guard let mid = t.mid else { continue }
            // The formats of this section: an offer lists the transceiver's codecs with our payload
            // types; an answer the one negotiated, with the offer's payload types and parameters.
            var formats: [(codec: MediaCodec, pt: UInt8, rtx: UInt8?, parameters: [SDPParameter]?)] = []
            if isOffer {
                for codec in t.codecPreferences {
                    let (pt, rtx) = LocalCapabilities.payloadTypes(codec)
                    let parameters = t.offeredParameters[codec] ?? LocalCapabilities.defaultParameters(codec)
                    formats.append((codec, pt, configuration.enableRTX ? rtx : nil, parameters))
                }
            } else {
                formats.append((t.codec, t.payloadType, t.rtxPayloadType, t.codecParameters))
            }
            var pts: [String] = []
            for f in formats {
                pts.append(String(f.pt))
                if let rtx = f.rtx { pts.append(String(rtx)) }
            }
            let rejected = t.writesRejected
            let port = rejected ? 0 : (candidates.first.map { Int($0.port) } ?? 9)
            s += "m=\(t.kind == .audio ? "audio" : "video") \(port) UDP/TLS/RTP/SAVPF \(pts.joined(separator: " "))\r\n"
            s += "c=IN IP4 \(candidates.first?.address ?? "0.0.0.0")\r\n"
            s += "a=rtcp:9 IN IP4 0.0.0.0\r\n"
            for c in candidates where !rejected { s += "a=candidate:\(c.attributeValue)\r\n" }
            if !rejected && !candidates.isEmpty { s += "a=end-of-candidates\r\n" }
            s += "a=ice-ufrag:\(transport.localUfrag)\r\na=ice-pwd:\(transport.localPassword)\r\n"
            s += "a=fingerprint:\(fp.algorithm) \(fp.value)\r\n"
            s += "a=setup:\(setup.rawValue)\r\n"
            s += "a=mid:\(mid)\r\n"
            // Each section lists its own extensions: an offer what we implement for its kind, an
            // answer only what the same section of the offer listed, with its id (RFC 8285 §5).
            let sectionExtensions: [String: UInt8]
            if isOffer {
                sectionExtensions = offerExtensions(for: t)
                t.offeredExtensionIDs = sectionExtensions
            } else {
                sectionExtensions = rejected ? [:] : t.extensionIDs
            }
            let sectionHasTransportCC = sectionExtensions[LocalCapabilities.transportWideCCURI] != nil
            for (uri, id) in sectionExtensions.sorted(by: { $0.value < $1.value }) {
                // A one-way extension of the offer is answered the other way (RFC 8285 §6).
                let direction = isOffer ? nil : t.remoteExtensionDirections[uri]
                s += "a=extmap:\(id)\(direction.map { "/" + $0.reversed.rawValue } ?? "") \(uri)\r\n"
            }
            let dir = isOffer ? t.direction : (t.currentDirection ?? .inactive)
            s += "a=\(rejected ? "inactive" : dir.rawValue)\r\n"
            if dir.sends { s += "a=msid:\(t.msid) \(t.trackID)\r\n" }
            s += "a=rtcp-mux\r\n"
            if t.kind == .video { s += "a=rtcp-rsize\r\n" }
            if t.kind == .audio {
                let codecPT = formats[0].pt
                s += "a=rtpmap:\(codecPT) opus/48000/2\r\n"
                if sectionHasTransportCC { s += "a=rtcp-fb:\(codecPT) transport-cc\r\n" }
                s += "a=fmtp:\(codecPT) minptime=10;useinbandfec=1\r\n"
            } else {
                for f in formats {
                    let codecPT = f.pt
                    s += "a=rtpmap:\(codecPT) \(f.codec.rtpName)/90000\r\n"
                    if sectionHasTransportCC { s += "a=rtcp-fb:\(codecPT) transport-cc\r\n" }
                    // Offered always (as browsers do); answered where the offer listed it.
                    if isOffer || t.remoteREMB { s += "a=rtcp-fb:\(codecPT) goog-remb\r\n" }
                    s += "a=rtcp-fb:\(codecPT) nack\r\n"
                    s += "a=rtcp-fb:\(codecPT) nack pli\r\n"
                    s += "a=rtcp-fb:\(codecPT) ccm fir\r\n"
                    if let parameters = f.parameters, !parameters.isEmpty {
                        let text = parameters.map { p in p.value.map { "\(p.key)=\($0)" } ?? p.key }
                        s += "a=fmtp:\(codecPT) \(text.joined(separator: ";"))\r\n"
                    }
                    if let rtxPT = f.rtx {
                        s += "a=rtpmap:\(rtxPT) rtx/90000\r\n"
                        s += "a=fmtp:\(rtxPT) apt=\(codecPT)\r\n"
                    }
                }
            }
            let rtxPT = formats.first?.rtx
            if dir.sends && !rejected {
                if t.sendRIDs.isEmpty {
                    let ssrc = t.localSSRCs[0]
                    if rtxPT != nil {
                        s += "a=ssrc-group:FID \(ssrc) \(t.localRTXSSRCs[0])\r\n"
                    }
                    s += "a=ssrc:\(ssrc) cname:\(configuration.cname)\r\n"
                    s += "a=ssrc:\(ssrc) msid:\(t.msid) \(t.trackID)\r\n"
                    if rtxPT != nil {
                        s += "a=ssrc:\(t.localRTXSSRCs[0]) cname:\(configuration.cname)\r\n"
                        s += "a=ssrc:\(t.localRTXSSRCs[0]) msid:\(t.msid) \(t.trackID)\r\n"
                    }
                } else if isOffer || !t.remoteRIDs.isEmpty || t.sendRIDs.count > 0 {
                    for rid in t.sendRIDs { s += "a=rid:\(rid) send\r\n" }
                    s += "a=simulcast:send \(t.sendRIDs.joined(separator: ";"))\r\n"
                }
            }
            if !isOffer && dir.receives && !t.remoteRIDs.isEmpty {
                for rid in t.remoteRIDs { s += "a=rid:\(rid) recv\r\n" }
                s += "a=simulcast:recv \(t.remoteRIDs.joined(separator: ";"))\r\n"
            }
        }
        return s
    }
}
