import COpenSSL
import Glibc
import RTCWire

/// What a ``TURNClient`` hears from its link to the TURN server. Loop thread only.
protocol TURNLinkDelegate: AnyObject {
    /// The link can carry requests (at once for UDP; once connected for TCP, after the handshake
    /// for TLS).
    func linkReady()
    /// One STUN message or ChannelData frame from the server (may be modified in place).
    func linkReceived(_ frame: UnsafeMutableRawBufferPointer)
    /// The link failed or the server closed it.
    func linkFailed(_ reason: String)
}

/// The client's transport to the TURN server: UDP datagrams, or a TCP or TLS byte stream carrying
/// STUN messages and ChannelData padded to 4 bytes (RFC 8656 §12.5).
protocol TURNServerLink: AnyObject {
    /// Streams are reliable: requests are not retransmitted and ChannelData is padded.
    var isStream: Bool { get }
    /// The local end (the relay candidate's related address), once known.
    var localAddress: SocketAddress? { get }
    /// Opens the link; the delegate hears `linkReady` or `linkFailed`.
    func open() throws(SocketError)
    /// Sends one complete frame (padding included on streams).
    func send(_ frame: UnsafeRawBufferPointer)
    /// Closes the link after flushing what was sent (no delegate call).
    func close()
}

/// TURN over UDP: one socket, datagrams from anyone but the server dropped.
final class TURNUDPLink: TURNServerLink, DatagramHandler {
    weak var delegate: (any TURNLinkDelegate)?
    let server: SocketAddress
    let bindAddress: SocketAddress
    let loop: EventLoop
    var socket: UDPSocket?
    /// Datagrams from anyone but the server.
    var droppedForeign: UInt64 = 0

    init(server: SocketAddress, bindAddress: SocketAddress, loop: EventLoop) {
        self.server = server
        self.bindAddress = bindAddress
        self.loop = loop
    }

    var isStream: Bool { false }
    var localAddress: SocketAddress? { socket?.localAddress }

    func open() throws(SocketError) {
        socket = try loop.openUDP(bindTo: bindAddress, handler: self)
        delegate?.linkReady()
    }

    func send(_ frame: UnsafeRawBufferPointer) { socket?.send(frame, to: server) }

    func close() {
        socket?.close()
        socket = nil
    }

    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        guard from == server else {
            droppedForeign &+= 1
            return
        }
        delegate?.linkReceived(data)
    }
}

/// TURN over TCP, or over TLS when `tls` is set (TLS 1.2 or later through OpenSSL, the server's
/// certificate verified against the system's trust store, or `SSL_CERT_FILE`/`SSL_CERT_DIR`,
/// for the host name or IP address of the `turns:` URL).
final class TURNStreamLink: TURNServerLink, TCPConnectionHandler {
    weak var delegate: (any TURNLinkDelegate)?
    let server: SocketAddress
    let bindAddress: SocketAddress
    let loop: EventLoop
    /// The name to verify the certificate against (and send as SNI when it is not an address).
    let tlsHost: String?
    var connection: TCPConnection?
    private var tls: TLSClientSession?
    private var ready = false

    init(server: SocketAddress, bindAddress: SocketAddress, loop: EventLoop, tlsHost: String?) {
        self.server = server
        self.bindAddress = bindAddress
        self.loop = loop
        self.tlsHost = tlsHost
    }

    var isStream: Bool { true }
    var localAddress: SocketAddress? { connection?.localAddress }

    func open() throws(SocketError) {
        if let tlsHost {
            do { tls = try TLSClientSession(host: tlsHost) } catch {
                throw .system(call: "TLS setup: \(error)", errno: 0)
            }
        }
        connection = try TCPConnection.connect(to: server, bindTo: bindAddress, loop: loop, handler: self)
    }

    func send(_ frame: UnsafeRawBufferPointer) {
        guard let connection, ready else { return }
        if let tls {
            guard tls.encrypt(frame) else {
                fail("TLS write failed: \(openSSLErrors())")
                return
            }
            tls.drainOutput { connection.write($0) }
        } else {
            connection.write(frame)
        }
    }

    func close() {
        connection?.close()
        connection = nil
        tls = nil
        ready = false
    }

    private func fail(_ reason: String) {
        close()
        delegate?.linkFailed(reason)
    }

    // MARK: TCPConnectionHandler

    func tcpConnected(_ connection: TCPConnection) {
        guard let tls else {
            ready = true
            delegate?.linkReady()
            return
        }
        _ = tls.handshake()
        tls.drainOutput { connection.write($0) }
    }

    func tcpReceived(_ connection: TCPConnection, _ buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let tls else { return deliverFrames(buffer) }
        // TLS: everything received goes into OpenSSL; complete frames come out of its plaintext.
        tls.absorb(UnsafeRawBufferPointer(buffer))
        if !ready {
            switch tls.handshake() {
            case .done:
                tls.drainOutput { connection.write($0) }
                ready = true
                delegate?.linkReady()
            case .wantMore:
                tls.drainOutput { connection.write($0) }
                return buffer.count
            case .failed(let reason):
                fail("TLS handshake with \(server) failed: \(reason)")
                return buffer.count
            }
        }
        guard tls.decryptAvailable() else {
            fail("TLS read failed: \(openSSLErrors())")
            return buffer.count
        }
        tls.drainOutput { connection.write($0) }
        let consumed = deliverFrames(tls.plaintextBuffer)
        tls.consumePlaintext(consumed)
        return buffer.count
    }

    func tcpClosed(_ connection: TCPConnection, error: String?) {
        self.connection = nil
        ready = false
        delegate?.linkFailed(error ?? "the TURN server closed the connection")
    }

    /// Hands every complete frame at the front of `buffer` to the delegate; returns the bytes used.
    private func deliverFrames(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        var offset = 0
        while offset < buffer.count {
            let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[offset...])
            switch TURNChannelData.streamFrame(UnsafeRawBufferPointer(rest)) {
            case .complete(let length):
                delegate?.linkReceived(UnsafeMutableRawBufferPointer(rebasing: rest[0..<length]))
                offset += length
                if connection == nil { return buffer.count }
            case .needMore:
                return offset
            case .invalid:
                fail("the TURN server sent something that is neither STUN nor ChannelData")
                return buffer.count
            }
        }
        return offset
    }
}

/// A TLS client over memory BIOs: ciphertext in and out by the caller, plaintext kept in a
/// preallocated buffer until complete frames are taken from it.
final class TLSClientSession {
    enum Handshake {
        case done, wantMore
        case failed(String)
    }

    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private let readBIO: OpaquePointer
    private let writeBIO: OpaquePointer
    private let plaintext: UnsafeMutableRawBufferPointer
    private var plaintextCount = 0
    private let outBuffer: UnsafeMutableRawBufferPointer

    init(host: String) throws(SocketError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw .system(call: "SSL_CTX_new \(openSSLErrors())", errno: 0)
        }
        _ = shim_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION)
        SSL_CTX_set_default_verify_paths(context)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        guard let ssl = SSL_new(context), let readBIO = BIO_new(BIO_s_mem()), let writeBIO = BIO_new(BIO_s_mem())
        else {
            SSL_CTX_free(context)
            throw .system(call: "SSL_new \(openSSLErrors())", errno: 0)
        }
        SSL_set_bio(ssl, readBIO, writeBIO)  // ssl owns both BIOs now
        SSL_set_connect_state(ssl)
        if SocketAddress(ip: host, port: 0) != nil {
            X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
        } else {
            SSL_set1_host(ssl, host)
            // SSL_set_tlsext_host_name is a macro over SSL_ctrl.
            _ = host.withCString {
                SSL_ctrl(
                    ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name),
                    UnsafeMutableRawPointer(mutating: $0))
            }
        }
        self.context = context
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
        plaintext = .allocate(byteCount: TCPConnection.receiveCapacity, alignment: 16)
        outBuffer = .allocate(byteCount: 64 << 10, alignment: 16)
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
        plaintext.deallocate()
        outBuffer.deallocate()
    }

    /// Feeds received ciphertext.
    func absorb(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        _ = BIO_write(readBIO, base, Int32(bytes.count))
    }

    func handshake() -> Handshake {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        let error = SSL_get_error(ssl, result)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return .wantMore }
        let verify = SSL_get_verify_result(ssl)
        if verify != X509_V_OK {
            return .failed("certificate: \(String(cString: X509_verify_cert_error_string(verify)))")
        }
        return .failed(openSSLErrors())
    }

    /// Decrypts whatever is available into the plaintext buffer; false on a TLS error.
    func decryptAvailable() -> Bool {
        while plaintextCount < plaintext.count {
            ERR_clear_error()
            let n = SSL_read(ssl, plaintext.baseAddress! + plaintextCount, Int32(plaintext.count - plaintextCount))
            if n > 0 {
                plaintextCount += Int(n)
                continue
            }
            let error = SSL_get_error(ssl, n)
            return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_ZERO_RETURN
        }
        return true
    }

    var plaintextBuffer: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: plaintext[0..<plaintextCount])
    }

    func consumePlaintext(_ count: Int) {
        let used = min(max(0, count), plaintextCount)
        let rest = plaintextCount - used
        if used > 0 && rest > 0 {
            plaintext.baseAddress!.copyMemory(from: plaintext.baseAddress! + used, byteCount: rest)
        }
        plaintextCount = rest
    }

    /// Encrypts one frame; false on a TLS error.
    func encrypt(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return true }
        ERR_clear_error()
        return SSL_write(ssl, base, Int32(bytes.count)) == Int32(bytes.count)
    }

    /// Hands the ciphertext OpenSSL produced to `write`, in chunks of the preallocated buffer.
    func drainOutput(_ write: (UnsafeRawBufferPointer) -> Void) {
        while true {
            let n = BIO_read(writeBIO, outBuffer.baseAddress, Int32(outBuffer.count))
            guard n > 0 else { return }
            write(UnsafeRawBufferPointer(start: outBuffer.baseAddress, count: Int(n)))
        }
    }
}
