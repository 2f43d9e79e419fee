import COpenSSL

/// A DTLS 1.2 endpoint for DTLS-SRTP (RFC 5764), built on OpenSSL with a custom datagram write BIO.
///
/// It does no I/O of its own: the owner feeds received datagrams into ``handleDatagram(_:)``,
/// sends what ``sendDatagram`` hands out, and calls ``tick(now:)`` regularly so that lost flights
/// are retransmitted. Confined to the EventLoop thread; it takes no locks and is not reentrant
/// (``sendDatagram`` must not synchronously feed a datagram back into this transport).
///
/// The peer is authenticated only by its certificate fingerprint from signalling: any self-signed
/// certificate is accepted during the handshake and then compared with ``remoteFingerprint``.
// Safe: confined to its transport's loop thread; Sendable only to be handed to it.
public final class DTLSTransport: @unchecked Sendable {
    /// Which side of the handshake we play (`a=setup:active` is the client).
    public enum Role: Sendable, Hashable {
        case client, server
    }

    /// Lifecycle of the transport.
    public enum State: Sendable, Hashable {
        /// Created; ``start()`` not yet called.
        case new
        /// Handshake running (or finished and waiting for ``remoteFingerprint``).
        case connecting
        /// Handshake done, peer verified, keys exported.
        case connected
        /// Gave up; ``onFailed`` was called. Final.
        case failed
        /// Closed by either side. Final.
        case closed
    }

    /// Largest datagram we emit; fits any path WebRTC runs over, with room for TURN headers.
    public static let defaultMTU = 1200
    /// Handshake time budget after ``start()``; then ``onFailed`` gets ``DTLSError/timeout``.
    public static let defaultHandshakeTimeout: UInt64 = 30_000_000_000

    /// Our role.
    public let role: Role
    /// Our identity.
    public let certificate: DTLSCertificate
    /// SRTP profiles we accept, most preferred first.
    public let profiles: [SRTPProfile]
    /// Fingerprint the peer's certificate must match. May be set late (for example when the SDP
    /// answer arrives after the handshake started); keys are released only once it is known and matches.
    public var remoteFingerprint: DTLSFingerprint? {
        didSet { if awaitingFingerprint { verifyPeerAndExportKeys() } }
    }

    /// Called once per outgoing datagram (at most ``defaultMTU`` bytes). The buffer is only valid during the call.
    public var sendDatagram: ((UnsafeRawBufferPointer) -> Void)?
    /// Called once when the handshake has finished and the peer matched its fingerprint.
    public var onConnected: ((SRTPKeyingMaterial) -> Void)?
    /// Called once when the transport gives up.
    public var onFailed: ((DTLSError) -> Void)?
    /// Called once when the transport closes (peer's close_notify or ``close()``).
    public var onClosed: (() -> Void)?
    /// Called for DTLS application data after the handshake (unused by plain WebRTC media).
    public var onApplicationData: ((UnsafeRawBufferPointer) -> Void)?

    /// Current lifecycle state.
    public private(set) var state: State = .new
    /// Keys exported at connection time, for owners that attach late.
    public private(set) var keyingMaterial: SRTPKeyingMaterial?
    /// Number of datagrams handed to ``sendDatagram`` so far.
    public private(set) var datagramsSent = 0
    /// Number of datagrams given to ``handleDatagram(_:)`` so far.
    public private(set) var datagramsReceived = 0

    /// `SSL*`; nil once given back after the handshake (see ``releaseHandshakeState()``).
    private var ssl: OpaquePointer?
    private let readBIO: OpaquePointer  // memory BIO, one datagram at a time
    private let handshakeTimeout: UInt64
    private var handshakeDeadline: UInt64?
    private var awaitingFingerprint = false
    /// Set by the verify callback when the peer's certificate did not match, so that the
    /// resulting handshake error is reported as a fingerprint mismatch.
    private var rejectedPeerCertificate = false
    private var readScratch = [UInt8](repeating: 0, count: 2048)

    /// Creates a transport. Call ``start()`` to begin.
    /// - Parameters:
    ///   - role: client (sends ClientHello) or server (waits for it).
    ///   - certificate: our certificate; its fingerprint goes into our SDP.
    ///   - remoteFingerprint: the peer's `a=fingerprint`, if already known.
    ///   - profiles: SRTP profiles to offer or accept, most preferred first. As server, the first
    ///     one the client also offers wins.
    ///   - mtu: largest datagram to emit.
    ///   - handshakeTimeout: nanoseconds after ``start()`` before giving up.
    public init(
        role: Role,
        certificate: DTLSCertificate,
        remoteFingerprint: DTLSFingerprint?,
        profiles: [SRTPProfile] = [.aeadAES128GCM, .aes128CMHMACSHA1_80],
        mtu: Int = DTLSTransport.defaultMTU,
        handshakeTimeout: UInt64 = DTLSTransport.defaultHandshakeTimeout
    ) throws {
        guard !profiles.isEmpty else { throw DTLSError.setupFailed("no SRTP profiles") }
        self.role = role
        self.certificate = certificate
        self.remoteFingerprint = remoteFingerprint
        self.profiles = profiles
        self.handshakeTimeout = handshakeTimeout

        ERR_clear_error()
        let context = try certificate.dtlsContext(profiles: profiles)
        guard let ssl = SSL_new(context) else {
            throw DTLSError.setupFailed("SSL_new: \(openSSLErrors())")
        }
        guard let readBIO = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw DTLSError.setupFailed("BIO_new: \(openSSLErrors())")
        }
        guard let writeBIO = BIO_new(Self.datagramBIOMethod) else {
            BIO_free(readBIO)
            SSL_free(ssl)
            throw DTLSError.setupFailed("BIO_new: \(openSSLErrors())")
        }
        // Empty read BIO means "no datagram yet", not end of stream.
        _ = shim_BIO_set_mem_eof_return(readBIO, -1)
        SSL_set_bio(ssl, readBIO, writeBIO)  // ssl owns both BIOs now
        self.ssl = ssl
        self.readBIO = readBIO

        let unmanagedSelf = Unmanaged.passUnretained(self).toOpaque()
        BIO_set_data(writeBIO, unmanagedSelf)
        _ = SSL_set_ex_data(ssl, 0, unmanagedSelf)
        _ = shim_DTLS_set_link_mtu(ssl, mtu)
        // OpenSSL sizes its write buffer for 16 KB records (about 17 KB per connection), but no
        // record we send is larger than a datagram: handshake flights are cut to the MTU.
        _ = shim_SSL_set_max_send_fragment(ssl, max(512, mtu))
        DTLS_set_timer_cb(ssl) { _, previousMicroseconds in
            DTLSTransport.nextRetransmitTimeout(previousMicroseconds: previousMicroseconds)
        }
        switch role {
        case .client: SSL_set_connect_state(ssl)
        case .server: SSL_set_accept_state(ssl)
        }
    }

    deinit {
        if let ssl { SSL_free(ssl) }  // frees both BIOs and drops its reference to the shared context
    }

    /// RFC 7983 demultiplexing: a first byte in 20...63 is DTLS.
    public static func isDTLS(_ firstByte: UInt8) -> Bool {
        (20...63).contains(firstByte)
    }

    /// Begins the handshake. A client sends its ClientHello now; a server waits for one.
    public func start() {
        guard state == .new else { return }
        state = .connecting
        if role == .client { continueHandshake() }
    }

    /// Feeds one received datagram (first byte 20...63) into the engine.
    public func handleDatagram(_ bytes: UnsafeRawBufferPointer) {
        // A ClientHello may arrive before the owner called start() on the passive side.
        if state == .new && role == .server { start() }
        guard state == .connecting || state == .connected, let base = bytes.baseAddress,
            bytes.count > 0, bytes.count <= 65_535
        else { return }
        datagramsReceived += 1
        guard ssl != nil else { return }  // released: the peer has its keys, nothing left to answer
        // Keep datagram boundaries: never let a leftover be glued to the next datagram.
        if BIO_ctrl_pending(readBIO) > 0 { _ = BIO_ctrl(readBIO, BIO_CTRL_RESET, 0, nil) }
        guard BIO_write(readBIO, base, Int32(bytes.count)) == Int32(bytes.count) else { return }
        if state == .connecting && !awaitingFingerprint {
            continueHandshake()
        } else if state == .connected || awaitingFingerprint {
            // Also answers a peer that retransmits its last flight because ours was lost.
            readApplicationData()
        }
    }

    /// Drives retransmissions and the overall handshake timeout. `now` is a monotonic nanosecond
    /// clock (``EventLoop``'s); retransmission timers themselves follow OpenSSL's own clock.
    public func tick(now: UInt64) {
        guard state == .connecting else { return }
        guard let deadline = handshakeDeadline else {
            handshakeDeadline = now &+ handshakeTimeout
            return
        }
        if now >= deadline {
            fail(.timeout)
            return
        }
        guard !awaitingFingerprint, let ssl else { return }
        var seconds = 0
        var microseconds = 0
        guard shim_DTLSv1_get_timeout(ssl, &seconds, &microseconds) == 1, seconds == 0,
            microseconds == 0
        else {
            return
        }
        ERR_clear_error()
        if shim_DTLSv1_handle_timeout(ssl) < 0 {
            // OpenSSL gives up after too many retransmissions.
            fail(.timeout)
        }
    }

    /// True once ``releaseHandshakeState()`` gave the OpenSSL connection back.
    public var isHandshakeStateReleased: Bool { ssl == nil && state == .connected }

    /// Frees the OpenSSL connection (about 45 KB: the handshake buffer OpenSSL keeps for
    /// retransmissions, a 17 KB record buffer, the connection itself) once the SRTP keys are in use.
    ///
    /// Call it when an authentic SRTP or SRTCP packet arrived from the peer: that proves the peer
    /// finished its handshake, so it will never again need a retransmitted flight from us. After
    /// it, DTLS datagrams from the peer are ignored and ``close()`` sends no close_notify (the peer
    /// learns of the end through signalling or ICE consent, as after a lost close_notify).
    public func releaseHandshakeState() {
        guard state == .connected, let ssl else { return }
        SSL_free(ssl)
        self.ssl = nil
    }

    /// Sends close_notify and moves to ``State/closed``.
    public func close() {
        guard state != .closed && state != .failed else { return }
        let wasRunning = state != .new
        state = .closed
        if wasRunning, let ssl {
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
        }
        onClosed?()
    }

    // MARK: - Handshake

    private func continueHandshake() {
        guard let ssl else { return }
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            awaitingFingerprint = true
            verifyPeerAndExportKeys()
            return
        }
        let error = SSL_get_error(ssl, result)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return }
        if rejectedPeerCertificate {
            fail(.fingerprintMismatch)
        } else if error == SSL_ERROR_ZERO_RETURN {
            fail(.handshakeFailed("peer closed during handshake"))
        } else {
            fail(.handshakeFailed(openSSLErrors()))
        }
    }

    /// Runs once the handshake is done and again when a late ``remoteFingerprint`` arrives.
    private func verifyPeerAndExportKeys() {
        guard awaitingFingerprint, state == .connecting, let expected = remoteFingerprint, let ssl else {
            return
        }
        awaitingFingerprint = false
        guard let peerCertificate = SSL_get1_peer_certificate(ssl) else {
            failAfterHandshake(.handshakeFailed("peer sent no certificate"))
            return
        }
        defer { X509_free(peerCertificate) }
        guard
            let actual = DTLSFingerprint.of(certificate: peerCertificate, algorithm: expected.algorithm),
            actual.matches(expected)
        else {
            failAfterHandshake(.fingerprintMismatch)
            return
        }
        guard let selected = SSL_get_selected_srtp_profile(ssl),
            let profile = SRTPProfile(protectionProfileID: UInt(selected.pointee.id)),
            profiles.contains(profile)
        else {
            failAfterHandshake(.srtpNegotiationFailed("no common SRTP profile"))
            return
        }
        let length = 2 * (profile.keyLength + profile.saltLength)
        var exported = [UInt8](repeating: 0, count: length)
        let label = "EXTRACTOR-dtls_srtp"
        ERR_clear_error()
        let status = SSL_export_keying_material(
            ssl, &exported, length, label, label.utf8.count, nil, 0, 0)
        guard status == 1,
            let material = SRTPKeyingMaterial(
                profile: profile, exported: exported, isClient: role == .client)
        else {
            failAfterHandshake(.srtpNegotiationFailed("key export: \(openSSLErrors())"))
            return
        }
        keyingMaterial = material
        state = .connected
        onConnected?(material)
        // Application data may have arrived in the same datagram as the last handshake message.
        if state == .connected { readApplicationData() }
    }

    private func readApplicationData() {
        while state == .connected || awaitingFingerprint, let ssl {
            ERR_clear_error()
            let count = readScratch.withUnsafeMutableBytes { buffer in
                SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
            }
            if count > 0 {
                guard state == .connected else { continue }  // peer not verified yet: drop
                readScratch.withUnsafeBytes { buffer in
                    onApplicationData?(UnsafeRawBufferPointer(rebasing: buffer[0..<Int(count)]))
                }
                continue
            }
            let error = SSL_get_error(ssl, count)
            switch error {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                return
            case SSL_ERROR_ZERO_RETURN:
                // Peer's close_notify: answer it and stop.
                state = .closed
                awaitingFingerprint = false
                _ = SSL_shutdown(ssl)
                onClosed?()
                return
            default:
                fail(.handshakeFailed("after handshake: \(openSSLErrors())"))
                return
            }
        }
    }

    /// The handshake completed but we refuse the peer: tell it with close_notify so it stops too.
    private func failAfterHandshake(_ error: DTLSError) {
        ERR_clear_error()
        if let ssl { _ = SSL_shutdown(ssl) }
        fail(error)
    }

    private func fail(_ error: DTLSError) {
        guard state != .failed && state != .closed else { return }
        state = .failed
        awaitingFingerprint = false
        onFailed?(error)
    }

    // MARK: - Callbacks from OpenSSL

    fileprivate func emit(_ datagram: UnsafeRawBufferPointer) {
        datagramsSent += 1
        sendDatagram?(datagram)
    }

    /// Verify callback decision for the certificate at depth 0: accept any self-signed
    /// certificate; reject only one that contradicts an already known fingerprint.
    fileprivate func acceptsPeerCertificate(_ certificate: OpaquePointer) -> Bool {
        guard let expected = remoteFingerprint else { return true }  // checked after the handshake
        guard let actual = DTLSFingerprint.of(certificate: certificate, algorithm: expected.algorithm),
            actual.matches(expected)
        else {
            rejectedPeerCertificate = true
            return false
        }
        return true
    }

    /// Retransmission back-off: start at 250 ms (ICE already proved the path), double, cap at 8 s.
    static func nextRetransmitTimeout(previousMicroseconds: UInt32) -> UInt32 {
        if previousMicroseconds == 0 { return 250_000 }
        return min(previousMicroseconds.multipliedReportingOverflow(by: 2).partialValue, 8_000_000)
    }

    /// Configures a context for DTLS-SRTP with `certificate`. Nothing in it is per connection: the
    /// verify callback finds its transport through the `SSL`'s ex-data.
    static func configure(
        context: OpaquePointer,
        certificate: DTLSCertificate,
        profiles: [SRTPProfile]
    ) throws(DTLSError) {
        func setupError(_ step: String) -> DTLSError { .setupFailed("\(step): \(openSSLErrors())") }
        // OpenSSL 3.0 has no DTLS 1.3; pin 1.2 so a 1.3-capable ClientHello settles on it.
        guard shim_SSL_CTX_set_min_proto_version(context, shim_DTLS1_2_VERSION()) == 1,
            shim_SSL_CTX_set_max_proto_version(context, shim_DTLS1_2_VERSION()) == 1
        else { throw setupError("protocol version") }
        _ = shim_SSL_CTX_set_options(
            context,
            shim_SSL_OP_NO_QUERY_MTU() | shim_SSL_OP_NO_TICKET() | shim_SSL_OP_NO_RENEGOTIATION()
                | shim_SSL_OP_CIPHER_SERVER_PREFERENCE())
        _ = shim_SSL_CTX_disable_session_cache(context)
        guard SSL_CTX_use_certificate(context, certificate.x509) == 1,
            SSL_CTX_use_PrivateKey(context, certificate.privateKey) == 1,
            SSL_CTX_check_private_key(context) == 1
        else { throw setupError("certificate") }
        let ciphers = [
            "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305",
            "ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA", "ECDHE-RSA-AES128-SHA",
            "ECDHE-RSA-AES256-SHA",
        ].joined(separator: ":")
        guard SSL_CTX_set_cipher_list(context, ciphers) == 1 else { throw setupError("cipher list") }
        guard shim_SSL_CTX_set1_groups_list(context, "X25519:P-256:P-384") == 1 else {
            throw setupError("groups")
        }
        // Note the inverted convention: this one returns 0 on success.
        let srtpProfiles = profiles.map(\.opensslName).joined(separator: ":")
        guard SSL_CTX_set_tlsext_use_srtp(context, srtpProfiles) == 0 else {
            throw setupError("use_srtp")
        }
        // Ask the client for its certificate too; trust comes from the fingerprint, not a CA.
        SSL_CTX_set_verify(context, shim_SSL_VERIFY_PEER_FAIL_IF_NO_PEER_CERT()) { _, store in
            guard let store else { return 0 }
            // Only the leaf is pinned; intermediates, if any, are irrelevant.
            guard X509_STORE_CTX_get_error_depth(store) == 0 else { return 1 }
            guard
                let sslPointer = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()),
                let owner = SSL_get_ex_data(OpaquePointer(sslPointer), 0),
                let leaf = X509_STORE_CTX_get_current_cert(store)
            else { return 0 }
            let transport = Unmanaged<DTLSTransport>.fromOpaque(owner).takeUnretainedValue()
            return transport.acceptsPeerCertificate(leaf) ? 1 : 0
        }
    }

    /// A write-only BIO that turns each OpenSSL write (one DTLS record, at most the MTU) into
    /// one ``sendDatagram`` call. A memory BIO would glue a whole flight together.
    nonisolated(unsafe) private static let datagramBIOMethod: OpaquePointer = {
        guard
            let method = BIO_meth_new(
                BIO_get_new_index() | shim_BIO_TYPE_SOURCE_SINK(), "understudy-dtls-datagram")
        else { fatalError("BIO_meth_new failed: out of memory") }
        _ = BIO_meth_set_create(method) { bio in
            BIO_set_init(bio, 1)
            return 1
        }
        _ = BIO_meth_set_write(method) { bio, data, length in
            guard let bio, let data, length > 0, let owner = BIO_get_data(bio) else { return 0 }
            let transport = Unmanaged<DTLSTransport>.fromOpaque(owner).takeUnretainedValue()
            transport.emit(UnsafeRawBufferPointer(start: data, count: Int(length)))
            return length
        }
        _ = BIO_meth_set_ctrl(method) { _, command, _, _ in
            // Flush is the only request that needs a yes; everything else (MTU queries, peer
            // addresses, timeouts) is handled by the owner.
            command == shim_BIO_CTRL_FLUSH() ? 1 : 0
        }
        return method
    }()
}
