import Foundation
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

    private init(upstream: WebSocketConnection, session: ClientSession) {
        self.upstream = upstream
        self.session = session
    }

    /// Connects to `peer` with the client's token and hands it the join message; nil when the
    /// peer cannot be reached.
    static func open(for session: ClientSession, to peer: ClusterPeer, joinText: String, proxyNode: String) async
        -> SignalProxy?
    {
        var url = peer.signalingURL
        if let token = session.queryToken {
            url += (url.contains("?") ? "&" : "?") + "token=" + token
        }
        let connection: WebSocketConnection
        do {
            connection = try await WebSocketConnection.connect(
                url: url, headers: HTTPHeaders([(header, proxyNode)]), timeout: 3,
                configuration: WebSocketConfiguration(
                    maxMessageBytes: session.configurationMaxMessageBytes + 1024 * 1024, idlePingSeconds: 30))
        } catch {
            return nil
        }
        let proxy = SignalProxy(upstream: connection, session: session)
        connection.onText = { [weak session] text in session?.connection.send(text: text) }
        connection.onClose = { [weak session] code, reason in
            // An owner that vanished (no close frame) is a restart to the client: it reconnects.
            let passed = (code == 1005 || code == 1006) ? WebSocketCloseCode.serviceRestart : code
            session?.close(code: passed, reason: reason.isEmpty ? "room owner closed the connection" : reason)
        }
        connection.start()
        connection.send(text: joinText)
        return proxy
    }

    func forward(_ text: String) { upstream.send(text: text) }

    func clientClosed() { upstream.close(code: WebSocketCloseCode.normal, reason: "client left") }
}
