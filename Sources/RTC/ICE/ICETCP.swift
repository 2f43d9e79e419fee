import Glibc
import RTCWire
import SystemCalls

// ICE-TCP (RFC 6544): media over a TCP connection, each datagram framed by a 2-byte length
// (RFC 4571). A framed connection is presented to the ICE agent and the peer connection as a
// `UDPSocket` without a descriptor of its own (like a TURN relayed socket), so checks, DTLS and
// SRTP run unchanged over it.

/// One ICE-TCP connection: RFC 4571 framing between a `TCPConnection` and the socket the ICE
/// agent sees. Loop thread only.
// Safe: confined to its loop thread (see above); Sendable only to be handed to it.
public final class ICETCPStream: TCPConnectionHandler, RelayedSocketTransport, @unchecked Sendable {
    /// The largest datagram RFC 4571 can frame.
    static let maxFrame = 0xFFFF

    let connection: TCPConnection
    /// The socket the agent and the peer connection use; its `localAddress` is our end.
    public let socket: UDPSocket
    /// The first frame of an accepted connection goes here to find its peer connection.
    var onFirstFrame: ((ICETCPStream, UnsafeMutableRawBufferPointer) -> Bool)?
    /// Called once when an outgoing connection is established.
    var onConnected: ((ICETCPStream) -> Void)?
    /// Called once when the connection ends.
    var onClosed: ((ICETCPStream) -> Void)?
    /// When the stream was created (unrouted accepted streams are closed after a while).
    let createdAt = EventLoop.now()
    private(set) var isRouted = false
    private let scratch: UnsafeMutableRawBufferPointer

    init(connection: TCPConnection, localAddress: SocketAddress) {
        self.connection = connection
        scratch = .allocate(byteCount: Self.maxFrame + 2, alignment: 8)
        socket = UDPSocket(relay: PlaceholderRelay.shared, relayedAddress: localAddress, loop: connection.loop)
        socket.replaceRelay(self)
    }

    deinit { scratch.deallocate() }

    /// The peer's address (the remote candidate).
    public var remoteAddress: SocketAddress { connection.remoteAddress }

    func markRouted() { isRouted = true }

    // MARK: RelayedSocketTransport

    public func sendRelayed(_ bytes: UnsafeRawBufferPointer, to peer: SocketAddress) {
        guard bytes.count <= Self.maxFrame, connection.isConnected else { return }
        scratch[0] = UInt8(truncatingIfNeeded: bytes.count >> 8)
        scratch[1] = UInt8(truncatingIfNeeded: bytes.count)
        if let base = bytes.baseAddress, bytes.count > 0 {
            (scratch.baseAddress! + 2).copyMemory(from: base, byteCount: bytes.count)
        }
        connection.write(UnsafeRawBufferPointer(start: scratch.baseAddress, count: bytes.count + 2))
    }

    public func relayedSocketClosed() {
        connection.close()
        finish()
    }

    // MARK: TCPConnectionHandler

    public func tcpConnected(_ connection: TCPConnection) {
        onConnected?(self)
        onConnected = nil
    }

    public func tcpReceived(_ connection: TCPConnection, _ buffer: UnsafeMutableRawBufferPointer) -> Int {
        var offset = 0
        while buffer.count - offset >= 2 {
            let length = Int(buffer[offset]) << 8 | Int(buffer[offset + 1])
            guard buffer.count - offset - 2 >= length else { break }
            let frame = UnsafeMutableRawBufferPointer(rebasing: buffer[(offset + 2)..<(offset + 2 + length)])
            offset += 2 + length
            if !isRouted {
                guard let route = onFirstFrame, route(self, frame) else {
                    connection.close()
                    finish()
                    return buffer.count
                }
                isRouted = true
            }
            socket.deliverRelayed(frame, from: connection.remoteAddress)
            if socket.isClosed || connection.isClosed { return buffer.count }
        }
        return offset
    }

    public func tcpClosed(_ connection: TCPConnection, error: String?) {
        finish()
    }

    private func finish() {
        socket.close()
        socket.replaceRelay(PlaceholderRelay.shared)  // breaks the socket ↔ stream cycle
        let closed = onClosed
        onClosed = nil
        onFirstFrame = nil
        closed?(self)
    }
}

/// Stands in for the stream while `ICETCPStream.init` builds its socket.
final class PlaceholderRelay: RelayedSocketTransport, Sendable {
    static let shared = PlaceholderRelay()
    func sendRelayed(_ bytes: UnsafeRawBufferPointer, to peer: SocketAddress) {}
    func relayedSocketClosed() {}
}

/// The passive side of ICE-TCP on a server's shared port: a TCP listener on the same address and
/// port number as the `UDPPortMux`. A connection's first frame must be a STUN request naming a
/// registered ufrag; it is then handed to that peer connection. Connections that do not identify
/// themselves within ``routeTimeout`` are closed, and at most ``maxConnections`` are kept.
// Safe: confined to its loop thread; Sendable only to be handed to it.
public final class ICETCPListener: EventLoopDescriptorWatcher, EventLoopTicker, @unchecked Sendable {
    /// Accepted connections kept at once; further ones are refused.
    public static let maxConnections = 4096
    /// How long an accepted connection may stay silent or unrouted.
    public static let routeTimeout: UInt64 = 10_000_000_000

    public let loop: EventLoop
    /// The listening address (the passive candidate).
    public let localAddress: SocketAddress
    /// Routes a first frame: returns the peer connection that takes the stream, or nil.
    var route: ((ICETCPStream, UnsafeMutableRawBufferPointer) -> MediaTransport?)?
    /// Connections refused (over the limit, unroutable, or silent too long).
    public private(set) var refused: UInt64 = 0

    private let fd: Int32
    private var watchID: UInt64 = 0
    private var streams: [ObjectIdentifier: ICETCPStream] = [:]
    private var isClosed = false

    /// Listens on `address` (the UDP mux's address). Loop thread only.
    init(loop: EventLoop, address: SocketAddress) throws(SocketError) {
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let fd = socket(family, type, 0)
        guard fd >= 0 else { throw .system(call: "socket", errno: errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard address.withSockAddr({ bind(fd, $0, $1) }) == 0 else {
            let error = errno
            Glibc.close(fd)
            throw .system(call: "bind (ICE-TCP)", errno: error)
        }
        guard listen(fd, 256) == 0, let local = TCPConnection.localName(fd) else {
            let error = errno
            Glibc.close(fd)
            throw .system(call: "listen (ICE-TCP)", errno: error)
        }
        self.fd = fd
        self.loop = loop
        self.localAddress = local
        watchID = loop.watch(fd: fd, events: SystemConstants.epollIn, watcher: self)
        loop.addTicker(self)
    }

    /// Open ICE-TCP connections.
    public var connectionCount: Int { streams.count }

    func handleEvents(_ events: UInt32) {
        for _ in 0..<64 {
            var storage = sockaddr_in6()
            var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            let client = withUnsafeMutableBytes(of: &storage) {
                sys_accept4(
                    fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length,
                    Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            }
            guard client >= 0 else { return }
            guard streams.count < Self.maxConnections,
                let remote = withUnsafeBytes(of: &storage, { SocketAddress(raw: $0.baseAddress!, length: Int(length)) })
            else {
                refused &+= 1
                Glibc.close(client)
                continue
            }
            let connection = TCPConnection.accepted(fd: client, remote: remote, loop: loop)
            let stream = ICETCPStream(connection: connection, localAddress: connection.localAddress ?? localAddress)
            connection.handler = stream
            stream.onFirstFrame = { [weak self] stream, frame in
                guard let self, let transport = self.route?(stream, frame) else {
                    self?.refused &+= 1
                    return false
                }
                transport.adoptICETCP(stream)
                return true
            }
            stream.onClosed = { [weak self] stream in self?.streams[ObjectIdentifier(stream)] = nil }
            streams[ObjectIdentifier(stream)] = stream
        }
    }

    public func tick(now: UInt64) {
        for stream in streams.values where !stream.isRouted && now &- stream.createdAt > Self.routeTimeout {
            refused &+= 1
            stream.relayedSocketClosed()
        }
    }

    /// Stops listening and closes every connection. Loop thread only.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        loop.removeTicker(self)
        loop.unwatch(id: watchID, fd: fd)
        Glibc.close(fd)
        for stream in Array(streams.values) { stream.relayedSocketClosed() }
        streams.removeAll()
    }

    func loopClosing() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }
}
