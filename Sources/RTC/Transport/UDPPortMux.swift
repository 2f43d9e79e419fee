import RTCWire

/// Shares one UDP port among many server-side (ICE-lite) transports (one per peer connection).
///
/// STUN binding requests name their target in USERNAME (`<our ufrag>:<their ufrag>`), so they are
/// routed by ufrag. Once a connection's ICE agent has validated a source address, every other
/// datagram from that address (DTLS, SRTP, SRTCP) goes to that connection. Anything else is dropped
/// and counted. Confined to its loop thread, like the connections it serves.
// Safe: confined to its loop thread (see above); Sendable only to be handed to it.
public final class UDPPortMux: DatagramHandler, @unchecked Sendable {
    /// The shared socket.
    public private(set) var socket: UDPSocket?
    private var byUfrag: [String: MediaTransport] = [:]
    private var byAddress: [SocketAddress: MediaTransport] = [:]
    /// Datagrams that matched no connection (unknown ufrag or address).
    public private(set) var droppedUnroutable: UInt64 = 0
    /// Of those, STUN naming a ufrag no connection has (yet, or any more).
    public private(set) var droppedUnknownUfrag: UInt64 = 0

    /// The ICE-TCP listener on the same address and port number, when enabled.
    public private(set) var iceTCPListener: ICETCPListener?

    /// Opens the shared socket on `loop`; with `iceTCP`, also a TCP listener on the same address
    /// and port for ICE-TCP passive candidates (RFC 6544). Loop thread only when `iceTCP` is set.
    public init(loop: EventLoop, bindTo address: SocketAddress, iceTCP: Bool = false) throws {
        // With an ephemeral port the kernel picks the UDP port; the same number may already be taken
        // for TCP (another process's connection), so a few fresh picks are tried before giving up.
        let attempts = iceTCP && address.port == 0 ? 8 : 1
        var lastError: (any Error)?
        for _ in 0..<attempts {
            let udp = try loop.openUDP(bindTo: address, handler: self)
            guard iceTCP else {
                socket = udp
                return
            }
            do {
                let listener = try ICETCPListener(loop: loop, address: udp.localAddress)
                listener.route = { [unowned self] _, frame in
                    guard let ufrag = Self.localUfrag(UnsafeRawBufferPointer(frame)) else { return nil }
                    return self.byUfrag[ufrag]
                }
                socket = udp
                iceTCPListener = listener
                return
            } catch {
                udp.close()
                lastError = error
            }
        }
        throw lastError ?? SocketError.loopClosed
    }

    /// Routes STUN naming `ufrag` to `connection`. After an ICE restart a connection has its old and
    /// new ufrags registered; checks with the old one are then refused by its agent.
    func register(_ connection: MediaTransport, ufrag: String) {
        byUfrag[ufrag] = connection
    }

    func unregister(_ connection: MediaTransport) {
        byUfrag = byUfrag.filter { $0.value !== connection }
        byAddress = byAddress.filter { $0.value !== connection }
    }

    /// Number of connections currently registered.
    public var connectionCount: Int { Set(byUfrag.values.map { ObjectIdentifier($0) }).count }

    /// Closes the shared socket; the connections must be closed first.
    public func close() {
        socket?.loop.assertInLoop()
        socket?.close()
        socket = nil
        iceTCPListener?.close()
        iceTCPListener = nil
        byUfrag.removeAll()
        byAddress.removeAll()
    }

    public func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        handleDatagram(data, from: from, socket: socket, now: EventLoop.now())
    }

    public func handleDatagram(
        _ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64
    ) {
        guard let first = data.first else { return }
        if let connection = byAddress[from] {
            connection.handleDatagram(data, from: from, socket: socket, now: now)
            return
        }
        // Only STUN can introduce a new address; route it by the ufrag it names.
        guard first < 4, let ufrag = Self.localUfrag(UnsafeRawBufferPointer(data)),
            let connection = byUfrag[ufrag]
        else {
            droppedUnroutable &+= 1
            if first < 4 { droppedUnknownUfrag &+= 1 }
            return
        }
        connection.handleDatagram(data, from: from, socket: socket, now: now)
        // Learn the address only once that connection's ICE agent accepted it (integrity checked).
        if connection.iceAccepts(from) { byAddress[from] = connection }
    }

    /// The first half of a STUN USERNAME (`local:remote`), read without a full parse.
    static func localUfrag(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let message = try? STUNMessage.parse(bytes), let username = message.username,
            let colon = username.firstIndex(of: ":")
        else { return nil }
        return String(username[..<colon])
    }
}
