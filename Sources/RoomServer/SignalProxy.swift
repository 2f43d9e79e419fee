import Foundation
import RTC
import Signaling

/// Proxies one client's signalling WebSocket to the node that owns its room (cluster mode): the
/// messages pass through unchanged in both directions, so any client works with any node. Media
/// never passes here: the owner's SDP names its own UDP address.
// Safe: both WebSocket connections synchronize themselves; the proxy keeps no other mutable state.
final class SignalProxy: @unchecked Sendable {
    /// Marks a proxied handshake, so that the owner never proxies it again (the header keeps its
    /// first name, `Relayed-By`, on the wire).
    static let header = "X-Understudy-Relayed-By"

    private let upstream: WebSocketConnection
    private weak var session: ClientSession?
    /// Edge mode: this node serves the member's media (docs/cluster.md, "Origin and edges").
    private let edge: EdgeHost?

    private init(upstream: WebSocketConnection, session: ClientSession, edge: EdgeHost?) {
        self.upstream = upstream
        self.session = session
        self.edge = edge
    }

    /// Connects to `peer` with the client's token and hands it the join message; nil when the
    /// peer cannot be reached. With `edge` (and this node's pipe socket at `edgePipe`), the owner
    /// may run the member's media here: its calls (`edge:` messages) go to `edge`, not the client.
    static func open(
        for session: ClientSession, to peer: ClusterPeer, joinText: String, proxyNode: String,
        edge: (host: EdgeHost, pipe: SocketAddress)? = nil, extraHeaders: [(String, String)] = []
    ) async
        -> SignalProxy?
    {
        var url = peer.signalingURL
        if let token = session.queryToken {
            url += (url.contains("?") ? "&" : "?") + "token=" + token
        }
        let connection: WebSocketConnection
        do {
            connection = try await WebSocketConnection.connect(
                url: url,
                headers: HTTPHeaders(
                    [(header, proxyNode)] + extraHeaders
                        + (edge.map { [(EdgeWire.pipeHeader, EdgeWire.text($0.pipe))] } ?? [])),
                timeout: 3,
                configuration: WebSocketConfiguration(
                    maxMessageBytes: session.configurationMaxMessageBytes + 1024 * 1024, idlePingSeconds: 30))
        } catch {
            return nil
        }
        let host = edge?.host
        let proxy = SignalProxy(upstream: connection, session: session, edge: host)
        host?.connect { [weak connection] text in connection?.send(text: text) }
        connection.onText = { [weak session] text in
            if let host, text.hasPrefix(EdgeWire.prefix) { return host.handle(text) }
            session?.connection.send(text: text)
        }
        connection.onClose = { [weak session] code, reason in
            host?.close()
            // An owner that vanished (no close frame) is a restart to the client: it reconnects.
            let passed = (code == 1005 || code == 1006) ? WebSocketCloseCode.serviceRestart : code
            session?.close(code: passed, reason: reason.isEmpty ? "room owner closed the connection" : reason)
        }
        connection.start()
        connection.send(text: joinText)
        return proxy
    }

    func forward(_ text: String) { upstream.send(text: text) }

    func clientClosed() {
        edge?.close()
        upstream.close(code: WebSocketCloseCode.normal, reason: "client left")
    }
}
