import RTCWire

/// ICE restart (RFC 8445 §2.4, JSEP §3.5.1) and media-loss observation.
///
/// A restart replaces only the ICE credentials and the checklist. DTLS, the SRTP sessions and every
/// RTP sender and receiver (SSRCs, sequence numbers, timestamps, NACK history) are kept, and media
/// keeps flowing on the old pair until the new checks select one, so a receiver sees at most the
/// packets lost while the path was down.
///
/// Two ways to run one:
/// - with SDP: ``createOffer(iceRestart:)`` on the offerer; the answerer notices the new remote
///   credentials in ``setRemoteDescription(_:type:)`` and answers with fresh ones of its own;
/// - without SDP (the room protocol's `restartIce`): ``restartICE()`` on both sides, each then
///   given the other's new credentials with ``setRemoteICECredentials(ufrag:password:)``.
extension PeerConnection {
    /// Fresh local ICE credentials now; checks stop until the peer's new credentials are set.
    /// Loop thread only.
    ///
    /// - Returns: the new local ufrag and password, for the peer.
    @discardableResult
    public func restartICE() throws -> (ufrag: String, password: String) {
        loop.assertInLoop()
        guard !closed else { throw PeerConnectionError.closed }
        guard transport.ice != nil else { throw PeerConnectionError.invalidState("ICE restart before ICE started") }
        transport.restartLocalICE()
        return (transport.localUfrag, transport.localPassword)
    }

    /// Gives the agent the peer's credentials after a restart (signalled outside SDP) and starts the
    /// checks against the candidates already known. Loop thread only.
    public func setRemoteICECredentials(ufrag: String, password: String) throws {
        loop.assertInLoop()
        guard !closed else { throw PeerConnectionError.closed }
        guard transport.ice != nil else { throw PeerConnectionError.invalidState("no ICE agent") }
        guard !ufrag.isEmpty, !password.isEmpty, ufrag.utf8.count <= 256, password.utf8.count <= 256 else {
            throw PeerConnectionError.badDescription("ICE ufrag/pwd must be 1-256 characters")
        }
        remoteUfrag = ufrag
        remotePassword = password
        transport.setRemoteICECredentials(ufrag: ufrag, password: password, candidates: remoteCandidates)
    }

    /// Our current ICE credentials (as our next description will carry them).
    public var localICECredentials: (ufrag: String, password: String) {
        (transport.localUfrag, transport.localPassword)
    }

    /// The peer's current ICE credentials (nil before its description or `restartIce` reply).
    public var remoteICECredentials: (ufrag: String, password: String)? {
        guard let remoteUfrag, let remotePassword else { return nil }
        return (remoteUfrag, remotePassword)
    }

    /// The ICE agent's state (nil before gathering).
    public var iceState: ICEState? { transport.ice?.state }

    /// True while an ICE restart has not yet selected a pair.
    public var isRestartingICE: Bool { transport.ice?.isRestarting ?? false }

    /// Connected with a pair selected by the current ICE credentials: a restart, if any, is over.
    public var isFullyConnected: Bool {
        state == .connected && transport.ice?.state == .connected && transport.ice?.hasSelectedPair == true
    }

    /// Applies `impairment` to this connection's own sockets (not to a shared port), replacing
    /// what they had (nil: none); tests use a receive drop rate of 1 to cut the media path while
    /// signalling stays up. Loop thread only.
    public func setImpairment(_ impairment: Impairment?) {
        loop.assertInLoop()
        guard configuration.portMux == nil else { return }
        for s in transport.sockets { s.impairment = impairment }
    }
}
