import Foundation
import RTC
import RTCWire
import RoomProtocol
import SFU
import Signaling

/// Errors from starting a ``RoomServer``.
public enum RoomServerError: Error, Sendable, CustomStringConvertible {
    /// The configuration is inconsistent (which setting, and why).
    case invalidConfiguration(String)
    /// The listener could not be bound; `cause` is the HTTP server's error.
    case listenFailed(host: String, port: UInt16, cause: HTTPError)

    public var description: String {
        switch self {
        case .invalidConfiguration(let why): return "invalid configuration: \(why)"
        case .listenFailed(let host, let port, let cause): return "cannot listen on \(host):\(port): \(cause)"
        }
    }
}

/// Server-wide counters for `/metrics`.
// Safe: the counters are guarded by `lock`.
final class ServerCounters: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var connections = 0
    private(set) var messagesReceived = 0
    private(set) var messagesSent = 0
    private(set) var errorResponses = 0
    private(set) var abuseClosures = 0
    private(set) var pubsubMessages = 0
    private(set) var joins = 0
    private(set) var slowReaders = 0

    func add(
        connections c: Int = 0, received: Int = 0, sent: Int = 0, errors: Int = 0, abuseClosures a: Int = 0,
        pubsub: Int = 0, joins j: Int = 0, slowReaders s: Int = 0
    ) {
        lock.lock()
        connections += c
        messagesReceived += received
        messagesSent += sent
        errorResponses += errors
        abuseClosures += a
        pubsubMessages += pubsub
        joins += j
        slowReaders += s
        lock.unlock()
    }

    func snapshot() -> [String: Int] {
        lock.lock()
        defer { lock.unlock() }
        return [
            "connections": connections, "received": messagesReceived, "sent": messagesSent, "errors": errorResponses,
            "abuse": abuseClosures, "pubsub": pubsubMessages, "joins": joins, "slowReaders": slowReaders,
        ]
    }
}

/// The room service: signalling over WebSocket (`/v1/rtc`), room state and PubSub, health,
/// metrics and an admin API, on one ``HTTPServer``. Start it in-process for tests with
/// `listenPort = 0` and read ``httpPort``. The protocol is documented in `docs/protocol.md`.
///
/// Each room keeps its state on its own serial queue (control plane only); the SFU attaches media
/// through ``mediaHooks``.
// Safe: its shared tables are guarded by `lock`; each room's state lives on that room's queue.
public final class RoomServer: @unchecked Sendable {
    /// The server's settings (``RoomServerConfiguration``).
    public typealias Configuration = RoomServerConfiguration

    /// The newest signalling protocol version this server speaks.
    public static let protocolVersion = 2
    /// Every version a client may ask for in `join` (1 when it names none); see docs/protocol.md.
    public static let supportedProtocolVersions = 1...2

    public let configuration: RoomServerConfiguration
    /// The token secret in use (the configured one, or the generated dev secret).
    public let secret: String
    /// True when no secret was configured and ``secret`` was generated for this run.
    public let secretWasGenerated: Bool
    /// Media attachment points for the SFU; set before ``start()``.
    public var mediaHooks: RoomMediaHooks? {
        get { locked { hooks } }
        set { locked { hooks = newValue } }
    }

    /// Cluster mode: where rooms live (nil: every room is local). Set before ``start()``.
    public var directory: RoomDirectory? {
        get { locked { roomDirectory } }
        set { locked { roomDirectory = newValue } }
    }
    /// Agent jobs (recording, `--relay`, `--relay-room`) for `POST /admin/jobs` (nil: the routes
    /// answer 404). Set before ``start()``.
    public var jobService: RoomJobService? {
        get { locked { jobs } }
        set { locked { jobs = newValue } }
    }
    /// Where job and room events go (`serve --webhook`; nil: nowhere). Set before ``start()``.
    public var webhooks: WebhookSender? {
        get { locked { webhookSender } }
        set { locked { webhookSender = newValue } }
    }
    /// Log lines of the job lifecycle (auto-record, auto-stop).
    public var lifecycleLog: @Sendable (String) -> Void = { _ in }
    /// Cluster mode: this node's id, sent to owners on proxied connections.
    public var nodeId: String = "local"

    let counters = ServerCounters()
    private let lock = NSLock()
    private var roomDirectory: RoomDirectory?
    private var jobs: RoomJobService?
    private var webhookSender: WebhookSender?
    private let lifecycleLock = NSLock()
    /// Auto-started jobs by id, and the rooms that have one (guarded by `lifecycleLock`).
    var autoJobs: [String: AutoJob] = [:]
    var autoRooms: Set<String> = []
    private var proxiedConnections = 0
    private var hooks: RoomMediaHooks?
    private var rooms: [String: Room] = [:]
    /// Stored PubSub history bytes over all rooms (bounded by `maxPubSubHistoryBytesTotal`).
    private var historyBytesTotal = 0
    private var http: HTTPServer?
    private var stopping = false
    private var mediaPlane: RoomMedia?
    /// Live WHIP and WHEP sessions (WHIP/).
    let httpSessions = HTTPSessionRegistry()
    /// Audience members whose media this node serves as an edge of another node's room.
    let edges = EdgeRegistry()

    /// Creates a server; nothing listens until ``start()``.
    public init(configuration: RoomServerConfiguration = RoomServerConfiguration()) {
        self.configuration = configuration
        if let s = configuration.secret {
            secret = s
            secretWasGenerated = false
        } else {
            var bytes = [UInt8](repeating: 0, count: 24)
            for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
            secret = "dev-" + bytes.map { String(format: "%02x", $0) }.joined()
            secretWasGenerated = true
        }
    }

    func lifecycleLocked<T>(_ body: () -> T) -> T {
        lifecycleLock.lock()
        defer { lifecycleLock.unlock() }
        return body()
    }

    var isStopping: Bool { locked { stopping } }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    /// The server's SFU, created on the first media request (one per server, shared by all rooms);
    /// nil while stopping or when it cannot be created now.
    func media() -> RoomMedia? { try? requireMedia() }

    /// The SFU, or the error a media request gets: 3047 while stopping, 5000 when it cannot be
    /// created (e.g. the process is out of file descriptors; a later request tries again).
    func requireMedia() throws(RoomError) -> RoomMedia {
        let result: Result<RoomMedia, RoomError> = locked {
            if stopping { return .failure(RoomError(3047, "the server is shutting down")) }
            if let m = mediaPlane { return .success(m) }
            do {
                let m = try RoomMedia(configuration: configuration, server: self)
                mediaPlane = m
                return .success(m)
            } catch {
                return .failure(RoomError(5000, "the media server cannot start: \(error)", cause: error))
            }
        }
        return try result.get()
    }

    /// The SFU if one has been started (nil until the first SDP-carrying request).
    public var sfu: SFU? { locked { mediaPlane?.sfu } }

    /// Cluster mode: the audience this node serves per room as an edge of another node.
    public var edgeAudienceByRoom: [String: Int] { edges.audienceByRoom }
    /// Cluster mode: audience members this node has served as an edge since it started.
    public var edgeMembersServed: Int { edges.total }

    /// The bound TCP port (the ephemeral one when configured with port 0); 0 before ``start()``.
    public var httpPort: UInt16 { locked { http?.port ?? 0 } }

    /// The WebSocket URL clients join at, without the token.
    public var signalingURL: String { "ws://\(configuration.listenHost):\(httpPort)/v1/rtc" }

    /// Binds the listener and starts serving.
    public func start() throws(RoomServerError) {
        if let problem = configuration.validationProblem() { throw .invalidConfiguration(problem) }
        var httpConfiguration = HTTPServerConfiguration()
        // Messages between our limit and this one get a 3073 answer; only larger ones close (1009).
        httpConfiguration.webSocket = WebSocketConfiguration(
            maxMessageBytes: configuration.maxMessageBytes + 1024 * 1024,
            maxWriteBufferBytes: configuration.maxQueuedOutputBytes, idlePingSeconds: 30)
        httpConfiguration.webSocket.writeOverflowCloseCode = RoomServer.slowReaderCloseCode
        // Plain HTTP too: a client pipelining requests without reading is dropped at the same bound.
        httpConfiguration.maxWriteBufferBytes = configuration.maxQueuedOutputBytes
        let server = HTTPServer(
            host: configuration.listenHost, port: configuration.listenPort, configuration: httpConfiguration)
        installRoutes(on: server)
        do {
            try server.start()
        } catch {
            throw .listenFailed(host: configuration.listenHost, port: configuration.listenPort, cause: error)
        }
        locked { http = server }
        if !configuration.webhooks.isEmpty || configuration.autoRecord != nil {
            Task { [weak self] in await self?.runLifecycle() }
        }
    }

    /// Closes every room (participants get `roomClosed`) and stops listening.
    public func stop() {
        let (server, all): (HTTPServer?, [Room]) = locked {
            stopping = true
            let s = http
            return (s, Array(rooms.values))
        }
        let group = DispatchGroup()
        for room in all {
            group.enter()
            room.enqueue {
                room.close(reason: .ROOM_CLOSE)
                group.leave()
            }
        }
        _ = group.wait(timeout: .now() + 5)
        server?.stop()
        let media: RoomMedia? = locked {
            defer { mediaPlane = nil }
            return mediaPlane
        }
        media?.shutdown()
    }

    // MARK: Rooms

    /// WebSocket close code for a client that stopped reading (its unsent output passed
    /// `maxQueuedOutputBytes`): 1013 "try again later".
    public static let slowReaderCloseCode: UInt16 = 1013

    /// The live room `id`, created on first use; 3047 while stopping, 4009 when `maxRooms` are open.
    func room(for id: String) throws(RoomError) -> Room {
        let result: Result<Room, RoomError> = locked {
            if stopping { return .failure(RoomError(3047, "the server is shutting down")) }
            if let r = rooms[id] { return .success(r) }
            guard rooms.count < configuration.maxRooms else {
                return .failure(RoomError(4009, "the server has reached its limit of \(configuration.maxRooms) rooms"))
            }
            let r = Room(id: id, server: self, configuration: configuration, hooks: hooks)
            rooms[id] = r
            roomDirectory?.roomOpened(id)
            webhookSender?.post("room_started", fields: ["roomId": .string(id)])
            return .success(r)
        }
        return try result.get()
    }

    /// Takes `bytes` of the server-wide PubSub history budget; false when it is spent.
    func reserveHistoryBytes(_ bytes: Int) -> Bool {
        locked {
            guard historyBytesTotal + bytes <= configuration.maxPubSubHistoryBytesTotal else { return false }
            historyBytesTotal += bytes
            return true
        }
    }

    func releaseHistoryBytes(_ bytes: Int) { locked { historyBytesTotal -= bytes } }

    private var pubsubSequence: UInt64 = 0
    /// A server-wide increasing number for ordering stored PubSub messages.
    func nextPubSubSequence() -> UInt64 {
        locked {
            pubsubSequence += 1
            return pubsubSequence
        }
    }

    /// Stored PubSub history bytes over all rooms.
    public var pubsubHistoryBytes: Int { locked { historyBytesTotal } }

    func roomClosed(_ room: Room) {
        let directory: RoomDirectory? = locked {
            guard rooms[room.id] === room else { return nil }
            rooms[room.id] = nil
            webhookSender?.post("room_finished", fields: ["roomId": .string(room.id)])
            return roomDirectory
        }
        directory?.roomClosed(room.id)
    }

    func existingRoom(_ id: String) -> Room? { locked { rooms[id] } }

    /// Summaries of the live rooms, sorted by id. Each reflects every request its room received
    /// before this call.
    public func roomSummaries() async -> [RoomSummary] {
        var out: [RoomSummary] = []
        for room in locked({ Array(rooms.values) }) {
            if let summary = await room.currentSummary() { out.append(summary) }
        }
        return out.sorted { $0.roomId < $1.roomId }
    }

    /// Tells every member joined through this node the cluster's live nodes again (`clusterNodes`),
    /// after the list changed: a member that joined before a node registered, or while one was
    /// down, would otherwise reconnect only through the nodes it heard of at its join.
    public func clusterNodesChanged(_ signalingURLs: [String]) {
        let data: JSONValue = ["signalingUrls": .array(signalingURLs.map(JSONValue.string))]
        for room in locked({ Array(rooms.values) }) {
            room.enqueue { room.notifyClientsDirectly(.clusterNodes, data) }
        }
    }

    /// Ends room `id` for everyone (leave reason 1006), as the admin API does. False when no such room.
    @discardableResult
    public func endRoom(_ id: String) -> Bool {
        guard let room = existingRoom(id) else { return false }
        room.enqueue { room.close(reason: .ROOM_CLOSE) }
        return true
    }

    // MARK: Join (connection queue)

    func handleJoin(session: ClientSession, id: JSONValue, data: JSONValue) {
        guard session.beginJoin() else {
            return session.respond(
                id, error: RoomError(3054, "this connection has already joined (or is joining) a room"))
        }
        let request: JoinRequest
        do {
            request = try JoinRequest.parse(
                id: id, data: data, queryToken: session.queryToken, secret: secret,
                maxTokenLifetime: configuration.maxTokenLifetimeSeconds)
        } catch {
            return refuseJoin(session: session, id: id, error: error)
        }
        routeJoin(session: session, request: request)
    }

    func routeJoin(session: any ParticipantSignaling, request: JoinRequest) {
        // HTTP sessions (WHIP/WHEP) were placed by their endpoint already (WHIP/WHIPEndpoints.swift).
        if let directory, existingRoom(request.roomId) == nil, let client = session as? ClientSession {
            // Cluster mode: the room may live on another node (join flow in docs/cluster.md).
            Task { await self.placeAndJoin(session: client, request: request, directory: directory) }
            return
        }
        if let directory, configuration.edgeAudience > 0, request.mode == .recvOnly,
            let client = session as? ClientSession, client.proxiedBy == nil
        {
            // The room's origin, reached directly by an audience member: past its share, an edge.
            Task {
                if await self.placeOverOriginShare(session: client, request: request, directory: directory) { return }
                self.admitLocally(session: session, request: request)
            }
            return
        }
        admitLocally(session: session, request: request)
    }

    private func admitLocally(session: any ParticipantSignaling, request: JoinRequest) {
        let room: Room
        do { room = try self.room(for: request.roomId) } catch {
            return refuseJoin(session: session, id: request.id, error: error)
        }
        session.assign(room: room)
        room.enqueue { room.join(session: session, request: request) }
        if let directory, let client = session as? ClientSession {
            // Cluster mode: after the join answer, where else the client can reconnect (docs/protocol.md).
            room.enqueue {
                guard client.currentPhase == .joined else { return }
                client.notify(.clusterNodes, ["signalingUrls": .array(directory.signalingURLs.map(JSONValue.string))])
            }
        }
    }

    /// Finds the room's owner (placing the room when it has none) and joins here or proxies the connection there.
    /// An owner that cannot be reached is retried until its registration expires and the room is
    /// placed again; a connection that another node proxied here is never proxied on.
    private func placeAndJoin(session: ClientSession, request: JoinRequest, directory: RoomDirectory) async {
        let deadline = Date().addingTimeInterval(configuration.clusterPlacementTimeoutSeconds)
        var lastProblem = "no node could take the room"
        while Date() < deadline {
            switch await directory.locate(roomId: request.roomId) {
            case .here:
                // A room that opens here may have lived on a node that died: take over its state.
                if existingRoom(request.roomId) == nil, let snapshot = await directory.restore(roomId: request.roomId),
                    existingRoom(request.roomId) == nil, let room = try? room(for: request.roomId)
                {
                    room.enqueue { room.restore(snapshot) }
                }
                return admitLocally(session: session, request: request)
            case .peer(let peer):
                if configuration.edgeAudience > 0, request.mode == .recvOnly,
                    session.proxiedBy == nil || session.edgePlaced,
                    await joinThroughEdge(session: session, request: request, origin: peer, directory: directory)
                {
                    return
                }
                if let by = session.proxiedBy, !session.edgePlaced {
                    // The proxying node thought the room was here: ownership moved in between.
                    lastProblem = "room '\(request.roomId)' moved from this node (proxied by \(by)); retry"
                    return refuseJoin(session: session, id: request.id, error: RoomError(3047, lastProblem))
                }
                guard let text = session.joinText else { return }
                if let proxy = await SignalProxy.open(for: session, to: peer, joinText: text, proxyNode: nodeId) {
                    locked { proxiedConnections += 1 }
                    session.proxied(through: proxy)
                    return
                }
                lastProblem = "the node that holds room '\(request.roomId)' (\(peer.nodeId)) is unreachable"
            case .unavailable(let why):
                lastProblem = why
            }
            if session.currentPhase == .closed { return }
            try? await Task.sleep(nanoseconds: 250_000_000)
        }
        refuseJoin(session: session, id: request.id, error: RoomError(3047, lastProblem))
    }

    // MARK: Origin and edges (docs/cluster.md)

    /// Marks a join that another node placed on this one as an edge: it is proxied on to the
    /// origin once more, never placed again.
    static let edgePlacedHeader = "X-Understudy-Edge-Placed"

    /// An audience join (`--edge-audience`) for a room of `origin`: served here as an edge, proxied
    /// to the node placement chose as the edge, or (false) left to today's path (the origin serves it).
    private func joinThroughEdge(
        session: ClientSession, request: JoinRequest, origin: ClusterPeer, directory: RoomDirectory
    ) async -> Bool {
        guard let text = session.joinText else { return false }
        let share = configuration.edgeAudience
        // The node the member reached serves it while below its share (no extra hop); then placement
        // picks another carrier, a new edge, or the origin. A join placed here is never placed again.
        var placement = AudiencePlacement.here
        if edges.audienceByRoom[request.roomId, default: 0] >= share {
            placement = .origin
            if !session.edgePlaced, let chosen = await directory.audiencePlacement(roomId: request.roomId, share: share)
            {
                placement = chosen
            }
        }
        switch placement {
        case .origin:
            return false
        case .edge(let peer):
            return await proxyToEdge(session, peer: peer, joinText: text)
        case .here:
            guard edges.admit(roomId: request.roomId, limit: share) else { return false }
            let pipeID = EdgeWire.edgePipeID(origin: origin.nodeId)
            guard let media = try? requireMedia(),
                let pipe = try? media.callOnLoop("openPipe", { try $0.openPipeOnLoop(id: pipeID) })
            else {
                edges.release(roomId: request.roomId)
                return false
            }
            let host = EdgeHost(roomId: request.roomId, originNode: origin.nodeId, media: media, registry: edges)
            guard
                let proxy = await SignalProxy.open(
                    for: session, to: origin, joinText: text, proxyNode: nodeId, edge: (host, pipe))
            else {
                edges.release(roomId: request.roomId)
                return false
            }
            locked { proxiedConnections += 1 }
            session.proxied(through: proxy)
            return true
        }
    }

    /// An audience join that reached the origin directly, past its share of the room: proxied to
    /// the node placement chooses as its edge (which proxies it back here, keeping the media
    /// there), as a join reaching a full edge is. False: the origin serves it (below its share, no
    /// node below its share or free, or the edge unreachable).
    private func placeOverOriginShare(session: ClientSession, request: JoinRequest, directory: RoomDirectory)
        async -> Bool
    {
        let share = configuration.edgeAudience
        guard let text = session.joinText, let room = existingRoom(request.roomId),
            let summary = await room.currentSummary(), summary.localAudienceCount >= share,
            case .edge(let peer) = await directory.audiencePlacement(roomId: request.roomId, share: share)
        else { return false }
        return await proxyToEdge(session, peer: peer, joinText: text)
    }

    /// Proxies an audience join to the edge placement chose, marked as placed so that the edge
    /// serves it rather than placing it again. False when the edge is unreachable.
    private func proxyToEdge(_ session: ClientSession, peer: ClusterPeer, joinText: String) async -> Bool {
        guard
            let proxy = await SignalProxy.open(
                for: session, to: peer, joinText: joinText, proxyNode: nodeId,
                extraHeaders: [(Self.edgePlacedHeader, "1")])
        else { return false }
        locked { proxiedConnections += 1 }
        session.proxied(through: proxy)
        return true
    }

    /// A proxied join whose edge offers to serve the member's media: accepted when the edge is a
    /// live node of the cluster and its pipe is at that node's registered media address (so no
    /// client can have a stage sent to an address of its choosing).
    private func acceptEdge(_ session: ClientSession, node: String, pipe: String) {
        guard let directory, let address = EdgeWire.address(pipe),
            let registered = directory.mediaAddress(ofNode: node),
            SocketAddress(ip: registered, port: address.port) == address
        else { return }
        session.offerEdge(
            EdgeMediaLink(nodeId: node, pipeAddress: address, connection: session.connection, session: session))
    }

    /// Answers a failed join and closes the socket with the error code as its close code.
    func refuseJoin(session: any ParticipantSignaling, id: JSONValue, error: RoomError) {
        session.respond(id, error: error)
        session.close(code: UInt16(clamping: error.code), reason: error.name)
    }

    // MARK: HTTP

    private func installRoutes(on server: HTTPServer) {
        installWebRoutes(on: server)  // the browser page (Web/WebPage.swift)
        installJobRoutes(on: server)  // fleet jobs (RoomJobs.swift)
        installWHIPRoutes(on: server)  // WHIP and WHEP (WHIP/WHIPEndpoints.swift)
        server.webSocket(path: "/v1/rtc") { [weak self] request in
            guard let self else { return .reject(HTTPResponse.text("gone\n", status: 503)) }
            let token = request.query("token") ?? bearerToken(request)
            let proxiedBy = request.headers[SignalProxy.header]
            let edgePipe = request.headers[EdgeWire.pipeHeader]
            let edgePlaced = request.headers[RoomServer.edgePlacedHeader] != nil
            return .accept(onOpen: { connection in
                let session = ClientSession(
                    connection: connection, queryToken: token, server: self, configuration: self.configuration,
                    proxiedBy: proxiedBy, edgePlaced: edgePlaced && proxiedBy != nil)
                if let proxiedBy, let edgePipe { self.acceptEdge(session, node: proxiedBy, pipe: edgePipe) }
                self.counters.add(connections: 1)
                connection.onText = { text in session.received(text) }
                connection.onBinary = { _ in
                    session.reject(.null, RoomError(3073, "binary messages are not part of the protocol"))
                }
                connection.onClose = { code, _ in
                    if code == RoomServer.slowReaderCloseCode { self.counters.add(slowReaders: 1) }
                    session.closed()
                }
                let timeout = self.configuration.joinTimeoutSeconds
                DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                    if session.currentPhase == .new {
                        session.close(
                            code: WebSocketCloseCode.policyViolation, reason: "no join within \(Int(timeout)) s")
                    }
                }
            })
        }
        server.route(method: "GET", path: "/healthz") { _ in HTTPResponse.text("ok\n") }
        server.route(method: "GET", path: "/metrics") { [weak self] (_: HTTPRequest) async -> HTTPResponse in
            guard let self else { return HTTPResponse.text("", status: 503) }
            var response = HTTPResponse.text(await self.metricsText())
            response.headers = HTTPHeaders([("Content-Type", "text/plain; version=0.0.4; charset=utf-8")])
            return response
        }
        server.route(method: "GET", path: "/v1/rooms") { [weak self] (request: HTTPRequest) async -> HTTPResponse in
            guard let self else { return HTTPResponse.text("", status: 503) }
            if let refusal = self.adminRefusal(request, roomId: nil) { return refusal }
            // A token scoped to one room lists only that room.
            let scope = self.adminRoomScope(request)
            var list = await self.roomSummaries().filter { scope == nil || $0.roomId == scope }.map(\.json)
            if let directory = self.directory {
                let here = Set(list.compactMap { $0["roomId"]?.stringValue })
                for remote in await directory.remoteRooms()
                where !here.contains(remote.roomId) && (scope == nil || remote.roomId == scope) {
                    list.append(remote.json)
                }
            }
            return HTTPResponse.json(JSONValue.object(["rooms": .array(list)]).jsonString)
        }
        server.route(method: "GET", path: "/cluster") { [weak self] (request: HTTPRequest) async -> HTTPResponse in
            guard let self else { return HTTPResponse.text("", status: 503) }
            if let refusal = self.adminRefusal(request, roomId: nil) { return refusal }
            guard let directory = self.directory else {
                return adminError(404, RoomError(4003, "this server is not part of a cluster (serve --redis)"))
            }
            return HTTPResponse.json(await directory.status(roomScope: self.adminRoomScope(request)).jsonString)
        }
        // The body form, for room ids that are awkward in a path: {"roomId": "…"}.
        server.route(method: "POST", path: "/v1/rooms/end") {
            [weak self] (request: HTTPRequest) async -> HTTPResponse in
            guard let self else { return HTTPResponse.text("", status: 503) }
            guard let body = try? JSONValue.parse(request.body), let roomId = body["roomId"]?.stringValue else {
                return adminError(400, RoomError(3073, "body must be {\"roomId\": \"…\"}"))
            }
            if let forwarded = await self.forwardToOwner(request, roomId: roomId) { return forwarded }
            return self.adminEnd(request, roomId: roomId)
        }
        // `POST /v1/rooms/{id}/end`: one prefix route for every room, so no per-room table grows.
        server.route(method: "POST", pathPrefix: "/v1/rooms/") {
            [weak self] (request: HTTPRequest) async -> HTTPResponse in
            guard let self else { return HTTPResponse.text("", status: 503) }
            let parts = request.path.dropFirst("/v1/rooms/".count).split(
                separator: "/", omittingEmptySubsequences: false)
            // ROOM/end, or ROOM/participants/ID/remove
            let roomId = parts.first.map(String.init) ?? ""
            guard isValidIdentifier(roomId),
                parts.count == 2 && parts[1] == "end"
                    || parts.count == 4 && parts[1] == "participants" && parts[3] == "remove"
            else { return adminError(404, RoomError(4003, "no such admin route")) }
            if let forwarded = await self.forwardToOwner(request, roomId: roomId) { return forwarded }
            if parts.count == 2 { return self.adminEnd(request, roomId: roomId) }
            return await self.adminRemove(request, roomId: roomId, participantId: String(parts[2]))
        }
    }

    /// Cluster mode: an admin request for a room that lives on another node is answered by that node.
    private func forwardToOwner(_ request: HTTPRequest, roomId: String) async -> HTTPResponse? {
        guard let directory, existingRoom(roomId) == nil, request.headers[SignalProxy.header] == nil else {
            return nil
        }
        if let refusal = adminRefusal(request, roomId: roomId) { return refusal }
        guard let owner = await directory.owner(of: roomId) else { return nil }
        var headers = HTTPHeaders([(SignalProxy.header, nodeId), ("Content-Type", "application/json")])
        if let auth = request.headers["Authorization"] { headers.add("Authorization", auth) }
        do {
            let url = try HTTPURL(owner.httpURL + request.target)
            var response = try await HTTPClient.request(
                request.method, url, headers: headers, body: request.body, timeout: 5)
            // The reply is re-framed here: drop the owner's framing headers.
            response.headers = HTTPHeaders(
                response.headers.filter {
                    !["content-length", "connection", "transfer-encoding"].contains($0.0.lowercased())
                })
            return response
        } catch {
            return adminError(
                502, RoomError(3047, "the node that holds room '\(roomId)' is unreachable: \(error)", cause: error))
        }
    }

    /// `POST /v1/rooms/ROOM/participants/ID/remove`: the participant leaves with 1002 (REMOVE_PEER).
    private func adminRemove(_ request: HTTPRequest, roomId: String, participantId: String) async -> HTTPResponse {
        if let refusal = adminRefusal(request, roomId: roomId) { return refusal }
        guard let room = existingRoom(roomId) else { return adminError(404, RoomError(4003, "no room '\(roomId)'")) }
        let removed: Bool = await withCheckedContinuation { done in
            room.enqueue { done.resume(returning: room.adminRemove(participantId)) }
        }
        guard removed else {
            return adminError(404, RoomError(4004, "no participant '\(participantId)' in room '\(roomId)'"))
        }
        return HTTPResponse.json(
            JSONValue.object(["roomId": .string(roomId), "participantId": .string(participantId), "removed": true])
                .jsonString)
    }

    private func adminEnd(_ request: HTTPRequest, roomId: String) -> HTTPResponse {
        if let refusal = adminRefusal(request, roomId: roomId) { return refusal }
        guard endRoom(roomId) else { return adminError(404, RoomError(4003, "no room '\(roomId)'")) }
        return HTTPResponse.json(JSONValue.object(["roomId": .string(roomId), "ended": true]).jsonString)
    }

    /// The room a valid admin token is scoped to (nil: all rooms).
    func tokenRoomScope(_ request: HTTPRequest) -> String? {
        bearerToken(request).flatMap {
            try? RoomToken.verify($0, secret: secret, maxLifetime: configuration.maxTokenLifetimeSeconds)
        }?.roomId
    }

    /// The room an admin request's token is scoped to; nil for a server-wide token (call after
    /// ``adminRefusal(_:roomId:)`` accepted it).
    func adminRoomScope(_ request: HTTPRequest) -> String? {
        bearerToken(request).flatMap {
            try? RoomToken.verify($0, secret: secret, maxLifetime: configuration.maxTokenLifetimeSeconds)
        }?.roomId
    }

    /// Nil when the request carries a valid `allow_mod` token (for `roomId`, when the token names a room).
    func adminRefusal(_ request: HTTPRequest, roomId: String?) -> HTTPResponse? {
        guard let jwt = bearerToken(request) else {
            return adminError(401, RoomError(4002, "missing Authorization: Bearer token"))
        }
        let token: RoomToken
        do {
            token = try RoomToken.verify(jwt, secret: secret, maxLifetime: configuration.maxTokenLifetimeSeconds)
        } catch {
            return adminError(401, RoomError(error.code, error.description))
        }
        guard token.isModerator else {
            return adminError(403, RoomError(4024, "the admin API needs a token with allow_mod"))
        }
        if let roomId, let scoped = token.roomId, scoped != roomId {
            return adminError(403, RoomError(4022, "token is not valid for room '\(roomId)'"))
        }
        return nil
    }

    // MARK: Metrics

    /// What `GET /metrics` serves: the Prometheus text of the server's gauges and counters.
    public func metricsText() async -> String {
        let summaries = await roomSummaries()
        let c = counters.snapshot()
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: Int) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        metric("understudy_rooms", "gauge", "Rooms with at least one participant or lobby entry.", summaries.count)
        metric(
            "understudy_participants", "gauge", "Joined participants over all rooms.",
            summaries.reduce(0) { $0 + $1.participantCount })
        metric(
            "understudy_producers", "gauge", "Published tracks over all rooms.",
            summaries.reduce(0) { $0 + $1.producerCount })
        metric(
            "understudy_consumers", "gauge", "Subscriber-track pairs over all rooms.",
            summaries.reduce(0) { $0 + $1.consumerCount })
        metric("understudy_signaling_connections", "gauge", "Open signalling WebSockets.", c["connections"] ?? 0)
        metric("understudy_joins_total", "counter", "Successful joins.", c["joins"] ?? 0)
        metric(
            "understudy_signaling_messages_received_total", "counter", "Signalling messages received.",
            c["received"] ?? 0)
        metric("understudy_signaling_messages_sent_total", "counter", "Signalling messages sent.", c["sent"] ?? 0)
        metric("understudy_signaling_errors_total", "counter", "Error responses sent.", c["errors"] ?? 0)
        metric("understudy_signaling_abuse_closures_total", "counter", "Connections closed for abuse.", c["abuse"] ?? 0)
        metric("understudy_pubsub_messages_total", "counter", "PubSub messages published.", c["pubsub"] ?? 0)
        metric(
            "understudy_signaling_slow_reader_closures_total", "counter",
            "Connections closed (1013) because the client stopped reading.", c["slowReaders"] ?? 0)
        metric("understudy_pubsub_history_bytes", "gauge", "Stored PubSub history bytes.", pubsubHistoryBytes)
        // Media counters come from the SFU (zero until it starts).
        let media = await locked({ mediaPlane })?.sfu.counterSnapshot() ?? SFUCounters()
        func clamp(_ v: UInt64) -> Int { Int(clamping: v) }
        metric(
            "understudy_rtp_packets_received_total", "counter", "RTP packets received from producers.",
            clamp(media.packetsIn))
        metric(
            "understudy_rtp_bytes_received_total", "counter", "RTP bytes received from producers.", clamp(media.bytesIn)
        )
        metric(
            "understudy_rtp_packets_forwarded_total", "counter", "RTP packets forwarded to consumers and over pipes.",
            clamp(media.packetsOut))
        metric(
            "understudy_rtp_bytes_forwarded_total", "counter", "RTP bytes forwarded to consumers and over pipes.",
            clamp(media.bytesOut))
        metric("understudy_sfu_pipes", "gauge", "Node-to-node media pipes open.", media.pipes)
        metric(
            "understudy_sfu_pipe_packets_sent_total", "counter",
            "RTP packets sent over pipes to other nodes (also in understudy_rtp_packets_forwarded_total).",
            clamp(media.pipePacketsSent))
        metric(
            "understudy_sfu_pipe_packets_received_total", "counter",
            "Datagrams accepted on pipes from the connected node.", clamp(media.pipePacketsReceived))
        metric(
            "understudy_sfu_pipe_retransmissions_total", "counter", "Packets resent over pipes for NACKs.",
            clamp(media.pipeRetransmissions))
        metric(
            "understudy_sfu_pipe_plis_received_total", "counter",
            "Key-frame requests received over pipes (one per interval per layer, however many viewers ask).",
            clamp(media.pipePLIsReceived))
        metric(
            "understudy_sfu_pipe_datagrams_dropped_total", "counter",
            "Datagrams dropped on pipes: another address, malformed, unknown SSRC, too large.",
            clamp(media.pipeDatagramsDropped))
        metric(
            "understudy_rtp_packets_dropped_total", "counter",
            "RTP packets received but not forwarded to some consumer (no key frame yet, other layer, not connected).",
            clamp(media.dropped))
        metric(
            "understudy_rtcp_nacks_received_total", "counter", "NACKs received from subscribers.",
            clamp(media.nacksReceived))
        metric("understudy_rtcp_nacks_sent_total", "counter", "NACKs sent to publishers.", clamp(media.nacksSent))
        metric(
            "understudy_rtcp_plis_received_total", "counter", "PLI/FIR received from subscribers.",
            clamp(media.plisReceived))
        metric("understudy_rtcp_plis_sent_total", "counter", "PLIs sent to publishers.", clamp(media.plisSent))
        metric(
            "understudy_sfu_transport_feedback_sent_total", "counter",
            "Transport-cc feedback messages sent by the connections the SFU holds.",
            clamp(media.transportFeedbackSent))
        metric(
            "understudy_sfu_transport_feedback_received_total", "counter",
            "Transport-cc feedback messages the SFU's connections received about what they send.",
            clamp(media.transportFeedbackReceived))
        metric(
            "understudy_sfu_remb_received_total", "counter", "REMB messages the SFU's connections received.",
            clamp(media.rembReceived))
        metric(
            "understudy_sfu_remb_sent_total", "counter",
            "REMB messages the SFU's connections sent (peers that negotiated goog-remb, not transport-cc).",
            clamp(media.rembSent))
        metric(
            "understudy_sfu_subscriber_estimates", "gauge",
            "Subscribe connections with a send-side bandwidth estimate (their peers give feedback).",
            media.subscriberEstimates)
        metric(
            "understudy_sfu_subscriber_estimate_bits_per_second_sum", "gauge",
            "Sum of the subscribe connections' send-side bandwidth estimates (availableOutgoingBitrate).",
            clamp(media.subscriberEstimateBitrate))
        metric(
            "understudy_sfu_subscriber_estimates_decreasing", "gauge",
            "Subscribe connections whose estimate is decreasing (overuse, losses, or feedback stopped).",
            media.subscriberEstimatesDecreasing)
        metric(
            "understudy_sfu_paused_consumers", "gauge",
            "Video consumers the stream allocator paused (no layer fits the subscriber's estimate).",
            media.pausedConsumers)
        metric(
            "understudy_sfu_layer_raises_total", "counter", "Layer raises decided by the stream allocator.",
            clamp(media.allocationRaises))
        metric(
            "understudy_sfu_layer_decreases_total", "counter",
            "Layer decreases (pauses included) decided by the stream allocator.", clamp(media.allocationDecreases))
        metric(
            "understudy_sfu_layer_overload_decreases_total", "counter",
            "Layer decreases decided on an overloaded path (heavy loss on a full queue; in the decreases too).",
            clamp(media.allocationOverloadDecreases))
        metric(
            "understudy_sfu_probes_total", "counter", "Bandwidth probes the stream allocator started.",
            clamp(media.probes))
        metric(
            "understudy_sfu_probes_failed_total", "counter",
            "Bandwidth probes whose raise the estimate did not make room for.", clamp(media.failedProbes))
        metric(
            "understudy_sfu_probe_bytes_total", "counter", "Bytes sent as probe padding (RTX copies).",
            clamp(media.probeBytes))
        metric(
            "understudy_room_sfu_calls_total", "counter",
            "Calls rooms made onto the SFU's loop and waited for (consume, offers, answers, layers).",
            clamp(locked({ mediaPlane })?.loopCalls.load(ordering: .relaxed) ?? 0))
        // The SFU loop's send path (UDP GSO): datagrams per system call and per message.
        let sends = await locked({ mediaPlane })?.sfu.loop.sendStatistics() ?? EventLoopSendStatistics()
        metric(
            "understudy_udp_send_calls_total", "counter", "sendmmsg/sendmsg calls of the SFU's event loop.",
            clamp(sends.systemCalls))
        metric(
            "understudy_udp_messages_sent_total", "counter",
            "UDP messages sent by the SFU (a GSO message carries several datagrams).",
            clamp(sends.messages))
        metric(
            "understudy_udp_datagrams_sent_total", "counter", "UDP datagrams sent by the SFU.", clamp(sends.datagrams))
        metric(
            "understudy_udp_gso_messages_total", "counter",
            "UDP GSO messages (several datagrams each) sent by the SFU.",
            clamp(sends.segmentedMessages))
        metric(
            "understudy_udp_gso_datagrams_total", "counter", "UDP datagrams sent inside GSO messages by the SFU.",
            clamp(sends.segmentedDatagrams))
        if let port = await locked({ mediaPlane })?.sfu.sharedPortStatistics() {
            func seconds(_ name: String, _ type: String, _ help: String, _ nanoseconds: UInt64) {
                out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(Double(nanoseconds) / 1e9)\n"
            }
            metric(
                "understudy_udp_shared_port_datagrams_received_total", "counter",
                "Datagrams the SFU's loop read from the shared UDP port.", clamp(port.received))
            metric(
                "understudy_udp_shared_port_kernel_drops_total", "counter",
                "Datagrams the kernel dropped at the shared port's full receive buffer (SO_RXQ_OVFL).",
                clamp(port.kernelDrops))
            metric(
                "understudy_udp_shared_port_stale_media_dropped_total", "counter",
                "SRTP/SRTCP dropped unread after waiting longer than staleMediaMilliseconds in the receive queue.",
                clamp(port.staleMediaDropped))
            metric(
                "understudy_udp_shared_port_unroutable_total", "counter",
                "Datagrams on the shared port that matched no connection (unknown ufrag or address).",
                clamp(port.unroutable))
            metric(
                "understudy_udp_shared_port_unknown_ufrag_total", "counter",
                "STUN on the shared port naming a ufrag of no connection (not created yet, or closed).",
                clamp(port.unknownUfrag))
            seconds(
                "understudy_udp_shared_port_queue_delay_seconds_sum", "counter",
                "Time datagrams waited in the shared port's receive queue, summed.", port.queueDelaySum)
            metric(
                "understudy_udp_shared_port_queue_delay_seconds_count", "counter",
                "Datagrams whose wait in the receive queue was measured.", clamp(port.queueDelayCount))
            metric(
                "understudy_udp_shared_port_delayed_over_100ms_total", "counter",
                "Datagrams that waited 100 ms or more in the shared port's receive queue.",
                clamp(port.delayedOver100ms))
            metric(
                "understudy_udp_shared_port_delayed_over_1s_total", "counter",
                "Datagrams that waited 1 s or more in the shared port's receive queue.", clamp(port.delayedOver1s))
            seconds(
                "understudy_udp_shared_port_longest_wait_seconds", "gauge",
                "Longest wait of a datagram in the receive queue since the previous scrape.", port.longestWait)
            seconds(
                "understudy_udp_shared_port_longest_stun_wait_seconds", "gauge",
                "Longest wait of a STUN datagram (a connectivity check) since the previous scrape.",
                port.longestSTUNWait)
        }
        metric("understudy_sfu_producers", "gauge", "Producers receiving media in the SFU.", media.producers)
        metric("understudy_sfu_consumers", "gauge", "Consumers forwarding media in the SFU.", media.consumers)
        if let heap = MemoryTrim.heapUsage() {
            metric(
                "understudy_process_heap_in_use_bytes", "gauge", "Bytes of live allocations (glibc malloc_info).",
                heap.inUse)
            metric(
                "understudy_process_heap_arena_bytes", "gauge", "Bytes of glibc's malloc arenas, used and free.",
                heap.arenas)
        }
        metric(
            "understudy_sfu_publish_connections", "gauge", "Publish connections the SFU holds.",
            media.publishConnections)
        metric(
            "understudy_sfu_subscribe_connections", "gauge", "Subscribe connections the SFU holds.",
            media.subscribeConnections)
        if let directory {
            metric(
                "understudy_cluster_relayed_connections_total", "counter",
                "Signalling connections proxied to the node that holds their room.", locked { proxiedConnections })
            out += directory.metricsText()
        }
        if let webhooks { out += webhooks.metricsText() }
        return out
    }
}

extension RemoteRoomSummary {
    var json: JSONValue {
        [
            "roomId": .string(roomId), "node": .string(nodeId), "participantCount": .number(Double(participantCount)),
            "producerCount": .number(Double(producerCount)), "consumerCount": .number(Double(consumerCount)),
        ]
    }
}

/// A snapshot of one room for the admin API and metrics.
public struct RoomSummary: Sendable, Equatable {
    public var roomId: String
    public var participantIds: [String]
    public var lobbyCount: Int
    public var producerCount: Int
    public var consumerCount: Int
    public var createdAt: Int64
    /// `RECV_ONLY` members whose media this node serves (the rest of the audience is on edges).
    public var localAudienceCount: Int = 0
    /// `RECV_ONLY` members whose media an edge serves, by edge node id.
    public var edgeAudience: [String: Int] = [:]
    public var participantCount: Int { participantIds.count }

    var json: JSONValue {
        [
            "roomId": .string(roomId), "participants": .array(participantIds.map(JSONValue.string)),
            "participantCount": .number(Double(participantIds.count)), "lobbyCount": .number(Double(lobbyCount)),
            "producerCount": .number(Double(producerCount)), "consumerCount": .number(Double(consumerCount)),
            "createdAt": .number(Double(createdAt)),
        ]
    }
}

private func bearerToken(_ request: HTTPRequest) -> String? {
    guard let value = request.headers["Authorization"] else { return nil }
    let parts = value.split(separator: " ", maxSplits: 1)
    guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
    return String(parts[1])
}

/// An admin API error: `{"error": {code, name, message}}` with an HTTP status.
func adminError(_ status: Int, _ error: RoomError) -> HTTPResponse {
    let body: JSONValue = [
        "error": ["code": .number(Double(error.code)), "name": .string(error.name), "message": .string(error.message)]
    ]
    return HTTPResponse.json(body.jsonString, status: status)
}

/// A validated `join` request.
struct JoinRequest: Sendable {
    var id: JSONValue
    var protocolVersion: Int
    var roomId: String
    var participantId: String
    var name: String
    var mode: ParticipantMode
    var metaData: JSONValue
    var isAgent: Bool
    var agentId: String?
    var micEnabled: Bool
    var camEnabled: Bool
    var autoConsume: Bool
    var permissions: Set<String>
    /// True when the token's `participantId` claim names this id: only such a join may replace a
    /// participant already in the room.
    var idBoundByToken: Bool
    /// The video codecs it receives (`videoCodecs`; absent: VP8 only, see ``RoomVideoCodecs``).
    var videoCodecs: [MediaCodec] = [.vp8]

    static func parse(
        id: JSONValue, data: JSONValue, queryToken: String?, secret: String, maxTokenLifetime: Double
    ) throws(RoomError)
        -> JoinRequest
    {
        let version = try data.optionalInt("protocolVersion") ?? 1
        guard RoomServer.supportedProtocolVersions.contains(version) else {
            let range = RoomServer.supportedProtocolVersions
            throw RoomError(
                3073,
                "unsupported protocolVersion \(version); this server speaks \(range.lowerBound) to \(range.upperBound)")
        }
        let jwt = try data.optionalString("token", maxLength: 8192) ?? queryToken ?? ""
        let token: RoomToken
        do {
            token = try RoomToken.verify(jwt, secret: secret, maxLifetime: maxTokenLifetime)
        } catch {
            throw RoomError(error.code, error.description)
        }
        guard let roomId = try data.optionalString("roomId") ?? token.roomId else {
            throw RoomError(4003, "missing roomId")
        }
        guard isValidIdentifier(roomId) else {
            throw RoomError(4003, "invalid roomId (1-128 bytes, no whitespace or '/')")
        }
        let requested = try data.optionalString("participantId")
        do {
            try token.check(room: roomId, participant: requested)
        } catch {
            throw RoomError(error.code, error.description)
        }
        let participantId = requested ?? token.participantId ?? makeId("p")
        guard isValidIdentifier(participantId) else {
            throw RoomError(4004, "invalid participantId (1-128 bytes, no whitespace or '/')")
        }
        guard token.canJoin || token.mustAskToJoin else {
            throw RoomError(4008, "the token allows neither allow_join nor ask_join")
        }
        let modeName = try data.optionalString("mode") ?? ParticipantMode.sendAndRecv.rawValue
        guard let mode = ParticipantMode(wireName: modeName) else {
            throw RoomError(3067, "unknown mode '\(modeName.prefix(40))'")
        }
        let name = try data.optionalString("name", maxLength: 256) ?? participantId
        let isAgent = try data.optionalBool("isAgent") ?? false
        let agentId = try data.optionalString("agentId")
        if agentId != nil && !isAgent { throw RoomError(3073, "agentId needs isAgent: true") }
        var request = JoinRequest(
            id: id, protocolVersion: version, roomId: roomId, participantId: participantId, name: name, mode: mode,
            metaData: data["metaData"] ?? .null,
            isAgent: isAgent, agentId: agentId, micEnabled: try data.optionalBool("micEnabled") ?? true,
            camEnabled: try data.optionalBool("camEnabled") ?? true,
            autoConsume: try data.optionalBool("autoConsume") ?? true,
            permissions: Set(token.permissions), idBoundByToken: token.participantId == participantId)
        if let codecs = data["videoCodecs"] {
            guard let names = codecs.arrayValue, names.count <= 64,
                let strings = Optional(names.compactMap { $0.stringValue.map { $0.prefix(64) } }),
                strings.count == names.count
            else {
                throw RoomError(3073, "videoCodecs must be an array of at most 64 codec names")
            }
            // Names this server does not know are left out; a list of none of ours still counts as
            // "accepts no video codec of this room" (nothing makes such a receiver the VP8 default).
            request.videoCodecs = MediaCodec.videoCodecs(named: strings.map(String.init))
        }
        return request
    }
}
