import Foundation
import RoomProtocol
import Signaling

/// One signalling WebSocket. Parsing, size checks, rate limiting and abuse accounting run on the
/// connection's own serial callback queue, so a misbehaving client costs its room nothing; only
/// well-formed requests are handed to the room's queue, in arrival order.
// Safe: its state is guarded by `lock` or confined to the connection's serial callback queue.
final class ClientSession: ParticipantSignaling, @unchecked Sendable {
    enum Phase { case new, joining, joined, closed }

    let connection: WebSocketConnection
    let queryToken: String?
    let server: RoomServer
    private let configuration: RoomServerConfiguration
    private let lock = NSLock()
    private var phase: Phase = .new
    private var room: Room?
    private var participantIdValue: String?
    private var badMessageTimes: [UInt64] = []
    private var bucketTokens: Double
    private var bucketUpdatedNS: UInt64
    /// Cluster mode: the node that proxied this connection here (nil for a direct client).
    let proxiedBy: String?
    /// Cluster mode: the text of the join request, kept until the room's owner is known.
    private var joinTextValue: String?
    /// Cluster mode: set when the room lives on another node; everything then goes there.
    private var proxy: SignalProxy?
    /// Cluster mode: another node placed this audience join on this one as its edge.
    let edgePlaced: Bool
    /// Cluster mode, on the origin: the proxying edge offers to serve this member's media.
    private var edgeLinkValue: EdgeMediaLink?

    init(
        connection: WebSocketConnection, queryToken: String?, server: RoomServer,
        configuration: RoomServerConfiguration,
        proxiedBy: String? = nil, edgePlaced: Bool = false
    ) {
        self.proxiedBy = proxiedBy
        self.edgePlaced = edgePlaced
        self.connection = connection
        self.queryToken = queryToken
        self.server = server
        self.configuration = configuration
        bucketTokens = configuration.rateLimitBurst
        bucketUpdatedNS = DispatchTime.now().uptimeNanoseconds
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    var currentPhase: Phase { locked { phase } }
    var joinText: String? { locked { joinTextValue } }
    var configurationMaxMessageBytes: Int { configuration.maxMessageBytes }

    /// Hands the connection to a proxy: from now on its messages go to the room's owner node.
    func proxied(through proxy: SignalProxy) {
        let closedAlready: Bool = locked {
            self.proxy = proxy
            joinTextValue = nil
            return phase == .closed
        }
        if closedAlready { proxy.clientClosed() }
    }
    /// The edge that offers to serve this member's media (set before its first message).
    func offerEdge(_ link: EdgeMediaLink) { locked { edgeLinkValue = link } }
    var edgeLink: EdgeMediaLink? { locked { edgeLinkValue } }

    /// The room this session joined (nil before).
    var joinedRoom: Room? { locked { room } }
    var participantId: String? { locked { participantIdValue } }

    /// Claims the session for a join; false when a join is already under way or done.
    func beginJoin() -> Bool {
        locked {
            guard phase == .new else { return false }
            phase = .joining
            return true
        }
    }

    /// Routes later requests to `room` (requests queue behind the join there).
    func assign(room: Room) { locked { self.room = room } }

    func markJoined(participantId: String) {
        locked {
            if phase != .closed { phase = .joined }
            participantIdValue = participantId
        }
    }

    // MARK: Sending

    func send(_ envelope: SignalEnvelope) {
        server.counters.add(sent: 1)
        connection.send(text: envelope.text)
    }

    func notify(_ notification: RoomNotification, _ data: JSONValue) {
        send(.notification(method: notification.rawValue, data: data))
    }

    /// Sends a message that was encoded once for many recipients (a room broadcast).
    func send(_ message: PreparedTextMessage) {
        server.counters.add(sent: 1)
        connection.send(prepared: message)
    }

    func respond(_ id: JSONValue, _ data: JSONValue) { send(.response(id: id, result: .success(data))) }

    func respond(_ id: JSONValue, error: RoomError) {
        server.counters.add(errors: 1)
        send(.response(id: id, result: .failure(error)))
    }

    func whenOutputDrained(_ body: @escaping @Sendable () -> Void) { connection.whenOutputDrained(body) }

    /// Closes the socket after everything queued so far has been sent.
    func close(code: UInt16, reason: String) {
        locked { phase = .closed }
        connection.close(code: code, reason: String(reason.prefix(100)))
    }

    // MARK: Receiving (connection queue)

    func received(_ text: String) {
        if let proxy = locked({ proxy }) { return proxy.forward(text) }
        if let link = edgeLink, text.hasPrefix(EdgeWire.prefix) { return link.received(text) }
        server.counters.add(received: 1)
        guard text.utf8.count <= configuration.maxMessageBytes else {
            return reject(
                .null,
                RoomError(
                    3073, "message of \(text.utf8.count) bytes exceeds the limit of \(configuration.maxMessageBytes)"))
        }
        let envelope: SignalEnvelope
        do {
            // A PubSub payload is checked, not built: it is passed on as written.
            envelope = try SignalEnvelope.parse(text, keepingRaw: .pubsubPayloads)
        } catch {
            return reject(.null, RoomError(3073, error.description))
        }
        guard case .request(let id, let methodName, let data) = envelope else {
            var id = JSONValue.null
            if case .response(let rid, _) = envelope { id = rid }
            return reject(id, RoomError(3073, "expected a request {id, method, data}"))
        }
        guard takeRateToken() else { return reject(id, RoomError(4000, "rate limit exceeded: slow down")) }
        guard let method = RoomMethod(rawValue: methodName) else {
            return reject(id, RoomError(3068, "unknown method '\(methodName.prefix(64))'"))
        }
        if method == .restartIce, data.objectValue != nil { return handleRestartICE(id: id, data: data) }
        guard data.objectValue != nil else { return reject(id, RoomError(3073, "data must be a JSON object")) }
        if method == .join {
            locked { joinTextValue = text }
            server.handleJoin(session: self, id: id, data: data)
            return
        }
        guard let room = locked({ room }) else {
            return respond(id, error: RoomError(3035, "'\(method.rawValue)' was called before the room was joined"))
        }
        room.submitRequest(session: self, id: id, method: method, data: data)
    }

    /// Answers a bad message and counts it; too many within the window close the connection.
    /// Messages without a usable id are answered with an `error` notification instead.
    func reject(_ id: JSONValue, _ error: RoomError) {
        if id.isNull {
            server.counters.add(errors: 1)
            notify(.error, error.errorJSON)
        } else {
            respond(id, error: error)
        }
        noteBadMessage()
    }

    func noteBadMessage() {
        let now = DispatchTime.now().uptimeNanoseconds
        let window = UInt64(configuration.abuseWindowSeconds * 1e9)
        let abusive: Bool = locked {
            guard phase != .closed else { return false }
            badMessageTimes.append(now)
            badMessageTimes.removeAll { now &- $0 > window }
            return badMessageTimes.count >= configuration.abuseThreshold
        }
        if abusive {
            server.counters.add(abuseClosures: 1)
            close(code: WebSocketCloseCode.policyViolation, reason: "too many invalid messages")
        }
    }

    private func takeRateToken() -> Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        return locked {
            let elapsed = Double(now &- bucketUpdatedNS) / 1e9
            bucketUpdatedNS = now
            bucketTokens = min(configuration.rateLimitBurst, bucketTokens + elapsed * configuration.rateLimitPerSecond)
            guard bucketTokens >= 1 else { return false }
            bucketTokens -= 1
            return true
        }
    }

    /// The socket is gone: the room (if any) drops the participant with reason 1001.
    func closed() {
        let (room, proxy): (Room?, SignalProxy?) = locked {
            phase = .closed
            return (self.room, self.proxy)
        }
        proxy?.clientClosed()
        edgeLink?.close()
        server.counters.add(connections: -1)
        if let room { room.enqueue { room.connectionClosed(self) } }
    }

    var isClosed: Bool { locked { phase == .closed } }
    var renegotiatesSubscriptions: Bool { true }
}
