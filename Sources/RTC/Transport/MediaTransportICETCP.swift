import RTCWire

/// ICE-TCP (RFC 6544): the server advertises a passive candidate on its shared port and adopts
/// the connections routed to it; a full agent opens an active connection to each passive
/// candidate the peer signals (with ``PeerConnectionConfiguration/iceTCP``) and checks it like
/// any other pair. UDP stays preferred by priority.
extension MediaTransport {
    /// Server: takes an accepted ICE-TCP connection whose first STUN request named our ufrag.
    /// Loop thread only.
    func adoptICETCP(_ stream: ICETCPStream) {
        guard !closed, let ice else {
            stream.relayedSocketClosed()
            return
        }
        stream.socket.handler = self
        ice.addICETCPSocket(stream.socket, remote: stream.remoteAddress, remotePriority: 0)
        iceTCPStreams.append(stream)
    }

    /// Client: opens an active connection to every passive TCP candidate of the peer (component
    /// 1, numeric address, once each). Loop thread only.
    func connectICETCP(to candidates: [ICECandidate]) {
        guard configuration.iceTCP, configuration.portMux == nil, !configuration.iceLite, !closed, let ice else {
            return
        }
        for candidate in candidates
        where candidate.transport.lowercased() == "tcp" && candidate.component == 1
            && candidate.value(forExtension: "tcptype") == "passive"
        {
            guard let remote = SocketAddress(ip: candidate.address, port: candidate.port),
                !iceTCPStreams.contains(where: { $0.remoteAddress == remote }), iceTCPStreams.count < 8
            else { continue }
            let bindIP = configuration.bindAddresses.first { SocketAddress(ip: $0, port: 0)?.isIPv6 == remote.isIPv6 }
            let bind = bindIP.flatMap { SocketAddress(ip: $0, port: 0) }
            let placeholder = bind ?? SocketAddress(ip: remote.isIPv6 ? "::" : "0.0.0.0", port: 0)!
            let connection: TCPConnection
            do {
                connection = try TCPConnection.connect(
                    to: remote, bindTo: bind, loop: loop, handler: PlaceholderTCPHandler.shared)
            } catch {
                relayErrors.append("ICE-TCP to \(remote): \(error)")
                continue
            }
            let stream = ICETCPStream(connection: connection, localAddress: placeholder)
            connection.handler = stream
            stream.socket.handler = self
            let priority = candidate.priority
            stream.onConnected = { [weak self, weak ice] stream in
                guard let self, !self.closed, let ice else { return }
                ice.addICETCPSocket(stream.socket, remote: stream.remoteAddress, remotePriority: priority)
            }
            // Accepted frames need no routing on the active side.
            stream.markRouted()
            iceTCPStreams.append(stream)
        }
    }

    /// Closes every ICE-TCP connection of this transport.
    func closeICETCP() {
        let streams = iceTCPStreams
        iceTCPStreams = []
        for stream in streams { stream.relayedSocketClosed() }
    }

    /// Whether the selected pair runs over ICE-TCP.
    var isUsingICETCP: Bool {
        guard let socket = ice?.selectedPair?.socket else { return false }
        return iceTCPStreams.contains { $0.socket === socket }
    }
}

/// Holds a `TCPConnection`'s handler slot until its stream exists.
final class PlaceholderTCPHandler: TCPConnectionHandler, Sendable {
    static let shared = PlaceholderTCPHandler()
    func tcpConnected(_ connection: TCPConnection) {}
    func tcpReceived(_ connection: TCPConnection, _ buffer: UnsafeMutableRawBufferPointer) -> Int { buffer.count }
    func tcpClosed(_ connection: TCPConnection, error: String?) {}
}
