import Foundation
import RoomProtocol
import RoomServer
import Signaling

/// A signalling proxy between load bots and a real room server that holds back chosen responses, as
/// a slow server would, so a test can keep a bot's request outstanding while the bot has to act on
/// whatever else arrives. Every other message passes through unchanged and in order; the server
/// itself is the real one.
final class HoldingProxy: @unchecked Sendable {
    enum Hold {
        /// A `consume` response waits until the same connection has sent a `subscriberAnswer` after
        /// the `consume` (the bot answered an offer while its consume was outstanding).
        case consumeUntilAnswered
        /// `changeMode` responses wait until ``releaseChangeModes()``.
        case changeModeUntilReleased
    }

    /// One bot's connection to the proxy and the proxy's to the server (state guarded by the proxy's lock).
    private final class Pair: @unchecked Sendable {
        let client: WebSocketConnection
        let upstream: WebSocketConnection
        /// Ids of the held method's requests sent and not answered by the server yet.
        var watched: Set<JSONValue> = []
        /// Ids whose responses may pass (their condition was met before the server answered).
        var released: Set<JSONValue> = []
        /// Responses held back, in arrival order.
        var parked: [(id: JSONValue, text: String)] = []
        init(client: WebSocketConnection, upstream: WebSocketConnection) {
            self.client = client
            self.upstream = upstream
        }
    }

    private let hold: Hold
    private let upstreamBase: String
    private let http: HTTPServer
    private let lock = NSLock()
    private var pairs: [Pair] = []
    private var changeModesReleased = false
    private var heldCount = 0
    private var releasedByAnswerCount = 0

    /// Starts a proxy on an ephemeral loopback port in front of `server`.
    static func start(to server: RoomServer, hold: Hold) throws -> HoldingProxy {
        let proxy = HoldingProxy(to: server, hold: hold)
        proxy.http.webSocket(path: "/v1/rtc") { [weak proxy] request in
            let current = proxy
            return .accept(onOpen: { client in current?.open(client, target: request.target) })
        }
        try proxy.http.start()
        return proxy
    }

    private init(to server: RoomServer, hold: Hold) {
        self.hold = hold
        var base = server.signalingURL
        if base.hasSuffix("/v1/rtc") { base.removeLast("/v1/rtc".count) }
        upstreamBase = base
        http = HTTPServer(host: "127.0.0.1", port: 0)
    }

    /// The proxy's signalling URL (for ``LoadConfiguration/signalingURL``).
    var url: String { "ws://127.0.0.1:\(http.port)/v1/rtc" }

    /// Responses that were held back (whatever released them later).
    var held: Int { lock.withLock { heldCount } }
    /// Held `consume` responses released because the bot answered an offer meanwhile.
    var releasedByAnswer: Int { lock.withLock { releasedByAnswerCount } }

    /// Lets every held and future `changeMode` response through.
    func releaseChangeModes() {
        let out: [(WebSocketConnection, String)] = lock.withLock {
            changeModesReleased = true
            var out: [(WebSocketConnection, String)] = []
            for p in pairs {
                out += p.parked.map { (p.client, $0.text) }
                p.parked.removeAll()
                p.watched.removeAll()
            }
            return out
        }
        for (client, text) in out { client.send(text: text) }
    }

    func stop() {
        let all = lock.withLock { pairs }
        for p in all {
            p.client.close()
            p.upstream.close()
        }
        http.stop()
    }

    // MARK: Proxying

    /// Called on the new connection's callback queue before any of its messages: connects upstream
    /// with the same target (path and token), so the bot's messages wait until that is done.
    private func open(_ client: WebSocketConnection, target: String) {
        let upstream: WebSocketConnection
        do { upstream = try WebSocketConnection.connectBlocking(url: upstreamBase + target, timeout: 30) } catch {
            client.close(code: WebSocketCloseCode.normal, reason: "upstream: \(error)")
            return
        }
        let pair = Pair(client: client, upstream: upstream)
        lock.withLock { pairs.append(pair) }
        client.onText = { [weak self] text in self?.fromClient(pair, text) }
        client.onClose = { _, _ in upstream.close() }
        upstream.onText = { [weak self] text in self?.fromServer(pair, text) }
        upstream.onClose = { _, _ in client.close() }
        upstream.start()
    }

    private var heldMethod: String { hold == .consumeUntilAnswered ? "consume" : "changeMode" }

    private func fromClient(_ pair: Pair, _ text: String) {
        guard case .request(let id, let method, _)? = try? SignalEnvelope.parse(text) else {
            pair.upstream.send(text: text)
            return
        }
        if method == heldMethod {
            lock.withLock { if !(hold == .changeModeUntilReleased && changeModesReleased) { pair.watched.insert(id) } }
        }
        pair.upstream.send(text: text)
        guard hold == .consumeUntilAnswered, method == "subscriberAnswer" else { return }
        // The answer is on its way to the server first: every consume sent before it may now be answered.
        let out: [String] = lock.withLock {
            pair.released.formUnion(pair.watched)
            pair.watched.removeAll()
            releasedByAnswerCount += pair.parked.count
            defer { pair.parked.removeAll() }
            return pair.parked.map(\.text)
        }
        for t in out { pair.client.send(text: t) }
    }

    private func fromServer(_ pair: Pair, _ text: String) {
        guard case .response(let id, _)? = try? SignalEnvelope.parse(text) else {
            pair.client.send(text: text)
            return
        }
        let park: Bool = lock.withLock {
            if pair.released.remove(id) != nil { return false }
            guard pair.watched.remove(id) != nil else { return false }
            pair.parked.append((id, text))
            heldCount += 1
            return true
        }
        if !park { pair.client.send(text: text) }
    }
}
