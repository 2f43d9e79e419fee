import Dispatch
import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol
import Signaling

/// Entry point of the SDK.
public enum Understudy {
    /// The SDK's leave reason, the room protocol's one shape (``LeaveReason``).
    public typealias LeaveReason = RoomLeaveCode

    /// Builds a ``Room``; connects to nothing until ``Room/join()``. An empty `roomId` throws 3073.
    /// A non-nil `agentId` joins as an agent participant (`isAgent()` is true for everyone).
    /// `reconnect` says how long a dropped connection is retried (``ReconnectPolicy``).
    /// `lobbyWait` is how long a join with an `ask_join` token waits in the lobby, in seconds, before
    /// it withdraws its entry request and fails with 3079; nil (the default) waits as long as the
    /// server's lobby does (the server says so when it queues the request). It is not a request
    /// timeout: a join outside the lobby still gets 3079 after 30 s without an answer.
    ///
    /// `signalingBaseUrl` is the server's `ws://host:port` (the path `/v1/rtc` is appended when absent).
    public static func createRoom(
        roomId: String, token: String, participantName: String, participantId: String? = nil,
        micEnabled: Bool = true, camEnabled: Bool = true, mode: Mode = .SEND_AND_RECV, multiStream: Bool = true,
        autoConsume: Bool = true, metaData: JSONValue? = nil, signalingBaseUrl: String = "ws://127.0.0.1:7880",
        agentId: String? = nil, reconnect: ReconnectPolicy = .default, lobbyWait: Double? = nil
    ) throws(UnderstudyError) -> Room {
        guard !roomId.isEmpty else { throw UnderstudyError(code: 3073, message: "roomId must not be empty") }
        if let lobbyWait, !(lobbyWait > 0) {
            throw UnderstudyError(code: 3073, message: "lobbyWait must be a positive number of seconds")
        }
        if let participantId, participantId.isEmpty || participantId.contains(where: \.isWhitespace) {
            // docs/spec/room-api.md §1: an id with whitespace is rejected with INVALID_PARTICIPANT_ID.
            throw UnderstudyError(code: 4004, message: "participantId must be non-empty without whitespace")
        }
        return Room(
            roomId: roomId, token: token, participantName: participantName, participantId: participantId,
            micEnabled: micEnabled, camEnabled: camEnabled, mode: mode.canonical, multiStream: multiStream,
            autoConsume: autoConsume, metaData: metaData, signalingBaseUrl: signalingBaseUrl, agentId: agentId,
            reconnect: reconnect, lobbyWait: lobbyWait)
    }
}

/// A room session of one local participant.
///
/// Threading: all room state changes and every listener callback run on ``eventQueue``, one serial
/// queue per room, in the order the server reported the changes. Public methods are `async` and may be
/// called from anywhere except that they must not be awaited *synchronously* on ``eventQueue``.
/// Received media frames are delivered on the subscribe connection's event loop, to the sinks of
/// each consumed stream's ``RemoteTrack`` (``onTrack``; ``onFrame`` is one such sink).
// Safe: state is guarded by `lock` or confined to `eventQueue`; media state to the connections' loops.
public final class Room: @unchecked Sendable {
    /// The room's id (`createRoom(roomId:)`).
    public let roomId: String
    let token: String
    let participantName: String
    let requestedParticipantId: String?
    let micEnabled: Bool
    let camEnabled: Bool
    let initialMode: Mode
    /// Whether the local webcam is published as simulcast (three layers the server can choose from).
    public let multiStream: Bool
    /// Whether remote streams are received without asking (else `consume…Streams()` per participant).
    public let autoConsume: Bool
    let metaData: JSONValue?
    let signalingURL: String
    let agentId: String?
    /// Cluster mode: the other nodes' signalling URLs (`clusterNodes`), tried in order when
    /// ``signalingURL`` cannot be reached, so a client outlives the node it first connected to.
    private var clusterURLs: [String] {
        get { lock.withLock { _clusterURLs } }
        set { lock.withLock { _clusterURLs = newValue } }
    }
    private var _clusterURLs: [String] = []

    /// TURN servers for this room's media connections. Nil (the default) uses those the room
    /// server hands out in its join response (`iceServers`); set it before ``join()`` to override
    /// them (an empty list then means host candidates only).
    public var iceServers: [ICEServer]? {
        get { lock.withLock { _iceServers } }
        set {
            lock.withLock { _iceServers = newValue }
            if let newValue { media.iceServers = newValue }
        }
    }
    private var _iceServers: [ICEServer]?

    /// The network this room's media connections see (rate limit, delay, jitter, loss, …; see
    /// ``Impairment``), applied at their sockets in both directions so that ICE, DTLS, RTCP and
    /// media all cross it. Set before ``join()`` it holds from the first connectivity check; set
    /// later it replaces the link at once (nil: none). Signalling is not affected.
    public var impairment: Impairment? {
        get { media.connectionConfiguration.impairment }
        set {
            media.connectionConfiguration.impairment = newValue
            for (_, pc) in media.connections { pc.loop.execute { pc.setImpairment(newValue) } }
        }
    }

    /// The serial queue on which every event is delivered.
    public let eventQueue = DispatchQueue(label: "understudy.room.events")

    // Readable from any thread (guarded by `lock`).
    private let lock = NSLock()
    private var _state: RoomState?
    private var _joined = false
    private var _finished = false
    private var _participants: [String: Participant] = [:]
    private var _local: Participant
    private var _frameHandler: RoomFrameHandler?
    private var _trackHandler: (@Sendable (RemoteTrack) -> Void)?
    private var _sourceFactory: MediaSourceFactory?
    private var _presenterId: String?
    private var _speakerId: String?
    /// Calls made while `join()` runs, waiting for its outcome (``awaitJoinIfConnecting()``).
    private var _joinWaiters: [CheckedContinuation<Void, Never>] = []

    // Confined to `eventQueue`.
    private var listeners: [RoomEventListener] = []
    /// The signalling connection (the room protocol's shared client core); nil between connections.
    var client: RoomProtocolClient?
    var exitReason: LeaveReason?
    var leaving = false
    var ending = false
    let operationLock = NSLock()
    let operationFlag = ResultBoxFlag()
    /// The join request while it waits for its answer (``armJoinTimer(_:)``); nil otherwise.
    var pendingJoin: PendingJoin?
    /// How long a join waits in the lobby before withdrawing its entry request (nil: as long as the
    /// server's lobby waits; `createRoom(lobbyWait:)`).
    let lobbyWait: Double?
    /// The local participant's mode event held while leaving the stage (``releaseOwnModeEvent()``).
    let ownModeEvents = HeldModeEvent()
    /// Mic/cam state to restore when returning to SEND_AND_RECV.
    let savedMediaState = SavedMedia()
    let media: RoomMedia
    /// The PubSub API of this room.
    public let pubSub = PubSub()

    init(
        roomId: String, token: String, participantName: String, participantId: String?, micEnabled: Bool,
        camEnabled: Bool, mode: Mode, multiStream: Bool, autoConsume: Bool, metaData: JSONValue?,
        signalingBaseUrl: String, agentId: String? = nil, reconnect: ReconnectPolicy = .default,
        lobbyWait: Double? = nil
    ) {
        self.agentId = agentId
        self.lobbyWait = lobbyWait
        self.reconnect = reconnect
        self.roomId = roomId
        self.token = token
        self.participantName = participantName
        requestedParticipantId = participantId
        self.micEnabled = micEnabled
        self.camEnabled = camEnabled
        initialMode = mode
        self.multiStream = multiStream
        self.autoConsume = autoConsume
        self.metaData = metaData
        var base = signalingBaseUrl
        while base.hasSuffix("/") { base.removeLast() }
        if !base.hasSuffix("/v1/rtc") { base += "/v1/rtc" }
        signalingURL = base
        _local = Participant(
            id: participantId ?? "", name: participantName, isLocal: true,
            json: ["mode": .string(mode.participantMode.rawValue), "micEnabled": false, "camEnabled": false])
        media = RoomMedia()
        media.room = self
        pubSub.room = self
        _local.room = self
    }

    deinit {
        // A released room stops delivering events; release its socket and media threads too.
        client?.setNotificationHandler(nil)
        client?.close()
        media.close()
    }

    // MARK: Public state

    /// The current connection state (nil before ``join()``).
    public var state: RoomState? { lock.withLock { _state } }
    /// Remote participants only, keyed by id.
    public var participants: [String: Participant] { lock.withLock { _participants } }
    /// The local participant (its id is the server's once joined).
    public var localParticipant: Participant { lock.withLock { _local } }
    /// Who shares a screen now.
    public var presenterId: String? { lock.withLock { _presenterId } }
    /// The active speaker.
    public var activeSpeakerId: String? { lock.withLock { _speakerId } }
    var isJoined: Bool { lock.withLock { _joined && !_finished } }

    /// Received media: `(participantId, kind, frame, arrivalNanos)` on the subscribe loop thread.
    ///
    /// A convenience over the tracks' sinks (``onTrack``, ``RemoteTrack/addSink(_:)``): every consumed
    /// stream's track has a sink that calls this handler. Setting it waits until the subscribe loop
    /// uses the new value, so no frame reaches a handler after it was replaced.
    public var onFrame: RoomFrameHandler? {
        get { lock.withLock { _frameHandler } }
        set {
            lock.withLock { _frameHandler = newValue }
            media.setFrameHandler(newValue)
        }
    }

    /// Called on the subscribe loop thread with each new ``RemoteTrack`` (a consumer the server
    /// confirmed), before its first frame: add sinks to it there. Set it before ``join()``.
    public var onTrack: (@Sendable (RemoteTrack) -> Void)? {
        get { lock.withLock { _trackHandler } }
        set { lock.withLock { _trackHandler = newValue } }
    }

    /// Makes the local tracks' media each time one starts (mic/camera on, joining the stage): files,
    /// a capture device, or anything else that yields encoded frames. Nil (the default) sends the
    /// synthetic test pattern and tone with their sync markers. Set it before ``join()``.
    public var mediaSourceFactory: MediaSourceFactory? {
        get { lock.withLock { _sourceFactory } }
        set { lock.withLock { _sourceFactory = newValue } }
    }

    /// The video codecs this participant receives, declared at join (`videoCodecs`, docs/protocol.md
    /// "Video codecs a room accepts"): the server keeps the room's intersection
    /// (``roomVideoCodecs``) for publishers that choose by it. Default: every codec the SDK
    /// records and decodes. Set it before ``join()``.
    public var receiveVideoCodecs: [MediaCodec] {
        get { lock.withLock { _receiveVideoCodecs } }
        set { lock.withLock { _receiveVideoCodecs = newValue } }
    }
    private var _receiveVideoCodecs = MediaCodec.videoCodecs

    /// The video codecs every receiver in the room accepts, from the join response and
    /// `roomVideoCodecsChanged` (``RoomEventListener/onRoomVideoCodecsChanged(_:)``); every codec
    /// before the join.
    public var roomVideoCodecs: [MediaCodec] { lock.withLock { _roomVideoCodecs } }
    private var _roomVideoCodecs = MediaCodec.videoCodecs

    /// What the local webcam's test pattern (the default source, or a factory that asks
    /// ``publishVideoCodec``) is encoded in: VP8 (the default), another codec, or `auto`, which
    /// follows ``roomVideoCodecs``: when the room's choice changes, a running webcam is stopped and
    /// published again in the new codec (its receivers get a new stream). Set it before ``join()``.
    public var videoCodec: VideoCodecChoice {
        get { lock.withLock { _videoCodec } }
        set { lock.withLock { _videoCodec = newValue } }
    }
    private var _videoCodec = VideoCodecChoice.fixed(.vp8)

    /// The codec the webcam is published in now: ``videoCodec`` resolved against ``roomVideoCodecs``.
    public var publishVideoCodec: MediaCodec {
        lock.withLock { _videoCodec.resolve(roomVideoCodecs: _roomVideoCodecs) }
    }

    /// Adds a room listener (held strongly until removed). Add listeners before ``join()``.
    public func addEventListener(_ listener: RoomEventListener) {
        let box = UncheckedSendable(listener)
        eventQueue.async { self.listeners.append(box.value) }
    }

    /// Removes a listener added with ``addEventListener(_:)``.
    public func removeEventListener(_ listener: RoomEventListener) {
        let box = UncheckedSendable(listener)
        eventQueue.async { self.listeners.removeAll { $0 === box.value } }
    }

    func emit(_ call: (RoomEventListener) -> Void) {
        dispatchPrecondition(condition: .onQueue(eventQueue))
        for l in listeners { call(l) }
    }

    func setState(_ s: RoomState) {
        lock.withLock { _state = s }
        emit { $0.onRoomStateChanged(s) }
    }

    // MARK: Gating

    /// Throws (and reports to `onError`) 3035 before the join / after leaving, 3065 while reconnecting.
    func gate(_ api: String) throws {
        let (state, joined, finished) = lock.withLock { (_state, _joined, _finished) }
        var error: UnderstudyError?
        if !joined || finished {
            error = UnderstudyError(
                code: 3035, message: "\(api) was called before the room was joined or after it was left")
        } else if state == .RECONNECTING {
            error = UnderstudyError(code: 3065, message: "\(api) was refused while the room is reconnecting")
        }
        if let error {
            eventQueue.async { self.emit { $0.onError(error) } }
            throw error
        }
    }

    // MARK: Requests

    /// Sends a request; `handler` runs on the event queue with the response. Call on the event queue.
    /// Returns the request's id while it waits for its answer (nil when it was refused at once).
    ///
    /// A request cut off by the socket closing fails with 3056 when the room was left meanwhile and
    /// with 3065 when the connection dropped (the close is handled first, so the room knows which).
    @discardableResult
    func send(_ method: RoomMethod, _ data: JSONValue, handler: @escaping (Result<JSONValue, RoomError>) -> Void)
        -> Int?
    {
        dispatchPrecondition(condition: .onQueue(eventQueue))
        guard let client, exitReason == nil || method == .leave || method == .end else {
            handler(.failure(RoomError(3056, "\(method.rawValue): the room is closed")))
            return nil
        }
        let queue = eventQueue
        let deliver = UncheckedSendable(handler)
        return client.send(method, data) { [weak self] result in
            let room = self
            queue.async {
                guard case .failure(let error) = result, error == RoomProtocolClient.closedError else {
                    return deliver.value(result)
                }
                let left = room.map { $0.exitReason != nil } ?? true
                deliver.value(
                    .failure(
                        left
                            ? RoomError(3056, "\(method.rawValue): the room was left")
                            : RoomError(3065, "\(method.rawValue): the connection dropped")))
            }
        }
    }

    /// Sends a request and awaits its response data (server refusals become ``UnderstudyError``).
    /// A request the server has not answered within ``requestTimeout`` fails with 3079
    /// `ERROR_OPERATION_TIMED_OUT`; a late answer is then ignored.
    func call(_ method: RoomMethod, _ data: JSONValue = [:]) async throws -> JSONValue {
        let timeout = requestTimeout
        let result: Result<JSONValue, RoomError> = await withCheckedContinuation { cont in
            eventQueue.async {
                let once = OnceFlag()
                let sent = self.send(method, data) { result in
                    if once.claim() { cont.resume(returning: result) }
                }
                guard let id = sent, let client = self.client else { return }  // refused already
                // Weak: a released room does not wait for its timers.
                self.eventQueue.asyncAfter(deadline: .now() + timeout) { [weak client] in
                    guard let client, client.cancel(id), once.claim() else { return }
                    cont.resume(
                        returning: .failure(
                            RoomError(
                                3079, "\(method.rawValue): no answer from the server within \(timeout) s")))
                }
            }
        }
        switch result {
        case .success(let d): return d
        case .failure(let e): throw UnderstudyError(code: e.code, name: e.name, message: e.message, underlyingError: e)
        }
    }

    /// Gated request on behalf of public method `api`.
    func gatedCall(_ api: String, _ method: RoomMethod, _ data: JSONValue = [:]) async throws -> JSONValue {
        try gate(api)
        return try await call(method, data)
    }

    /// Lets a call made while `join()` runs (e.g. from `onParticipantJoined`) wait for the join to finish.
    /// Resumed by `joinSucceeded` or `finish`, whichever comes first (join outcomes are bounded by
    /// the connect timeout and ``requestTimeout``).
    func awaitJoinIfConnecting() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let waiting = lock.withLock {
                guard _state == .CONNECTING && !_joined && !_finished else { return false }
                _joinWaiters.append(c)
                return true
            }
            if !waiting { c.resume() }
        }
    }

    /// The join has an outcome (joined, or finished): calls waiting for it go on.
    private func releaseJoinWaiters() {
        let waiters = lock.withLock {
            defer { _joinWaiters = [] }
            return _joinWaiters
        }
        for w in waiters { w.resume() }
    }

    func participantRequest(api: String, method: RoomMethod, data: JSONValue, target: Participant, agentRefused: Bool)
        async throws
    {
        try gate(api)
        if agentRefused && target.isAgent() {
            throw UnderstudyError(code: 3068, message: "\(api) is not supported on an agent participant")
        }
        _ = try await call(method, data)
        noteConsumeChoice(method, data)
    }

    // MARK: Join / leave / end

    /// Connects and joins. Returns when the join finished or failed; `onRoomJoined` (or `onRoomLeft`
    /// with `JOIN_ROOM_FAILED`) reports the outcome. A second call does nothing.
    public func join() async {
        let started: Bool = lock.withLock {
            if _state != nil { return false }
            _state = .CONNECTING
            return true
        }
        guard started else { return }
        await onQueue { self.emit { $0.onRoomStateChanged(.CONNECTING) } }
        let sends = initialMode == .SEND_AND_RECV
        let announced = (mic: sends && micEnabled, cam: sends && camEnabled)
        await connectAndJoin(participantId: requestedParticipantId, mic: announced.mic, cam: announced.cam) { result in
            switch result {
            case .success(let response): self.joinSucceeded(response)
            case .failure(let e): self.failJoin(e)
            }
        }
        await publishAtJoin()
    }

    /// The join's own publishing (`micEnabled`/`camEnabled`), awaited by ``join()``. It holds the
    /// operation slot claimed in `joinSucceeded`, so a toggle or `changeMode` made from
    /// `onRoomJoined` meanwhile gets 3054/3055 instead of racing it. A failure goes to `onError`
    /// (3058/3049/3059/3051/3044) and the room is told that the device is off after all.
    private func publishAtJoin() async {
        let kinds = media.joinPublishing
        guard !kinds.isEmpty else { return }
        defer {
            media.joinPublishing = []
            endOperation()
        }
        guard isJoined, localParticipant.mode == .SEND_AND_RECV else { return }
        do {
            try await media.produce(kinds, reportStatus: false)
        } catch let error as UnderstudyError {
            // Overtaken by leaving (3056) or by a reconnect (3065, whose rejoin publishes them again).
            if isFinished || error.code == 3056 || error.code == 3065 { return }
            await onQueue { self.emit { $0.onError(error) } }
            for kind in kinds where !media.producingKinds.contains(kind) {
                _ = try? await call(.setMediaStatus, ["kind": .string(kind.wireKind), "enabled": false])
            }
        } catch {}  // `produce` throws only UnderstudyErrors
    }

    /// Opens a signalling socket and sends `join`; `handle` runs on the event queue with the outcome,
    /// before any later message is processed.
    func connectAndJoin(
        participantId: String?, mic: Bool, cam: Bool, _ handle: @escaping (Result<JSONValue, UnderstudyError>) -> Void
    ) async {
        let handler = UncheckedSendable(handle)
        let connection: RoomProtocolClient
        do {
            let urls = ReconnectPolicy.nodeOrder(own: signalingURL, cluster: clusterURLs)
            connection = try await RoomProtocolClient.connect(urls: urls.map { $0 + "?token=" + token }, timeout: 10)
        } catch {
            let failure = UnderstudyError(
                code: 3047, message: "cannot reach the room server: \(error)", underlyingError: error)
            await onQueue { handler.value(.failure(failure)) }
            return
        }
        var data: [String: JSONValue] = [
            "protocolVersion": 2, "roomId": .string(roomId), "name": .string(participantName),
            "mode": .string(localParticipant.mode.participantMode.rawValue), "autoConsume": .bool(autoConsume),
            "micEnabled": .bool(mic), "camEnabled": .bool(cam), "token": .string(token),
        ]
        if let participantId, !participantId.isEmpty { data["participantId"] = .string(participantId) }
        data["videoCodecs"] = .array(receiveVideoCodecs.map { .string($0.rawValue) })
        if let metaData { data["metaData"] = metaData }
        if let agentId {
            data["isAgent"] = true
            data["agentId"] = .string(agentId)
        }
        let payload = JSONValue.object(data)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            eventQueue.async {
                guard self.exitReason == nil else {
                    connection.close()
                    return done.resume()
                }
                self.client = connection
                connection.setNotificationHandler { [weak self] notification, data in
                    guard let room = self else { return }
                    room.eventQueue.async { if room.exitReason == nil { room.handleNotification(notification, data) } }
                }
                let closing = WeakClient(connection)
                connection.setCloseHandler { [weak self] in
                    guard let room = self else { return }
                    room.eventQueue.async { room.socketClosed(closing.value) }
                }
                let once = OnceFlag()
                let complete: (Result<JSONValue, UnderstudyError>) -> Void = { result in
                    guard once.claim() else { return }
                    self.pendingJoin = nil
                    handler.value(result)
                    done.resume()
                }
                let sent = self.send(.join, payload) { result in
                    switch result {
                    case .success(let response): complete(.success(response))
                    case .failure(let e):
                        if self.client === connection { self.client = nil }
                        connection.close()
                        complete(
                            .failure(
                                UnderstudyError(code: e.code, name: e.name, message: e.message, underlyingError: e)))
                    }
                }
                // A server that takes the socket but never answers the join fails it with 3079; a
                // lobby wait (`entryPending`) moves that deadline (``lobbyWait``).
                guard let id = sent else { return }
                let pending = PendingJoin(
                    id: id, connection: connection, deadline: .now() + self.requestTimeout, complete: complete)
                self.pendingJoin = pending
                self.armJoinTimer(pending)
            }
        }
    }

    /// The pending join gives up at its deadline, which `entryPending` may have moved meanwhile. Giving
    /// up in the lobby withdraws the entry request first, so moderators hear that it went away.
    private func armJoinTimer(_ pending: PendingJoin) {
        eventQueue.asyncAfter(deadline: pending.deadline) { [weak self] in
            guard let self, self.pendingJoin === pending else { return }
            if DispatchTime.now() < pending.deadline { return self.armJoinTimer(pending) }
            guard let connection = pending.connection, connection.cancel(pending.id) else { return }
            if self.client === connection { self.client = nil }
            let message: String
            if let wait = pending.lobbyWait {
                message = "join: nobody answered the entry request within \(wait) s; it was withdrawn"
                // The server closes the socket after answering; its close tells moderators as well.
                _ = connection.send(.leave, ["reason": 1101]) { _ in connection.close() }
            } else {
                message = "join: no answer from the server within \(self.requestTimeout) s"
                connection.close()
            }
            pending.complete(.failure(UnderstudyError(code: 3079, message: message)))
        }
    }

    /// On the event queue: the server put the pending join in the lobby for up to `serverWait`
    /// seconds. The join now waits ``lobbyWait`` (nil: as long as the server, plus a request timeout
    /// for its answer to arrive).
    private func enteredLobby(serverWait: Double?) {
        guard let pending = pendingJoin, pending.lobbyWait == nil else { return }
        let wait = lobbyWait ?? ((serverWait ?? 300) + requestTimeout)
        pending.lobbyWait = wait
        pending.deadline = pending.started + wait
    }

    func onQueue(_ work: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            eventQueue.async {
                work()
                c.resume()
            }
        }
    }

    private func failJoin(_ error: UnderstudyError) {
        guard exitReason == nil else { return }
        setState(.FAILED)
        emit { $0.onError(error) }
        finish(.JOIN_ROOM_FAILED)
    }

    private func joinSucceeded(_ response: JSONValue) {
        guard exitReason == nil else { return }
        let me = response["participant"]
        let local = Participant(
            id: me?["participantId"]?.stringValue ?? requestedParticipantId ?? "",
            name: me?["name"]?.stringValue ?? participantName, isLocal: true, json: me)
        local.room = self
        // Listeners added to `localParticipant` before the join stay with it.
        local.adoptListeners(from: localParticipant)
        lock.withLock {
            _local = local
            _joined = true
            _presenterId = response["presenterId"]?.stringValue
            // An older server sends none: it forwards what it forwards, VP8 is what every receiver takes.
            _roomVideoCodecs = Self.videoCodecs(response["roomVideoCodecs"]) ?? [.vp8]
        }
        releaseJoinWaiters()
        if iceServers == nil {
            // The server's TURN servers; entries this client cannot use (stun:, bad URLs) are skipped.
            media.iceServers = ICEServerDescription.list(from: response["iceServers"]).flatMap { entry in
                entry.urls.compactMap {
                    try? ICEServer(url: $0, username: entry.username, credential: entry.credential)
                }
            }
        }
        for entry in response["pinStates"]?.arrayValue ?? [] {
            if let id = entry["participantId"]?.stringValue, let p = participant(id) {
                p.update(pin: PinState(entry["pinState"]))
            }
        }
        if local.mode == .SEND_AND_RECV {
            var kinds: [StreamKind] = []
            if micEnabled { kinds.append(.audio) }
            if camEnabled { kinds.append(.video) }
            // Claimed before `onRoomJoined`, so the app's first toggle sees the publishing under way.
            if !kinds.isEmpty, (try? beginOperation("join")) != nil { media.joinPublishing = kinds }
        }
        setState(.CONNECTED)
        emit { $0.onRoomJoined() }
    }

    /// The local participant leaves (`onRoomLeft(MANUAL_LEAVE_CALLED)`). Allowed while reconnecting.
    public func leave() async {
        let joined = lock.withLock { _joined && !_finished }
        if !joined {
            if await withdrawFromLobby() { return }
            let error = UnderstudyError(
                code: 3035, message: "leave was called before the room was joined or after it was left")
            await onQueue { self.emit { $0.onError(error) } }
            return
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            eventQueue.async {
                guard self.exitReason == nil else { return c.resume() }
                self.leaving = true
                self.send(.leave, ["reason": 1101]) { _ in
                    self.finish(.MANUAL_LEAVE_CALLED)
                    c.resume()
                }
            }
        }
    }

    /// `leave()` while the join waits in the lobby: the entry request is withdrawn (moderators get
    /// `onEntryResponded(.withdrawn)`) and the room is left with `MANUAL_LEAVE_CALLED`. False when
    /// the join is not waiting in the lobby.
    private func withdrawFromLobby() async -> Bool {
        await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            eventQueue.async {
                guard self.exitReason == nil, let pending = self.pendingJoin, pending.lobbyWait != nil,
                    let connection = pending.connection, connection.cancel(pending.id)
                else { return c.resume(returning: false) }
                self.leaving = true
                self.send(.leave, ["reason": 1101]) { _ in
                    self.finish(.MANUAL_LEAVE_CALLED)
                    pending.complete(.failure(UnderstudyError(code: 3056, message: "join: left the lobby")))
                    c.resume(returning: true)
                }
            }
        }
    }

    /// Ends the room for everyone (`onRoomLeft(ROOM_CLOSE)` everywhere).
    public func end() async throws {
        try gate("end")
        await onQueue { self.ending = true }
        do { _ = try await call(.end) } catch let e as UnderstudyError {
            throw UnderstudyError(code: 3057, message: "end failed: \(e.message)", underlyingError: e)
        }
        await onQueue { self.finish(.ROOM_CLOSE) }
    }

    /// Every way out ends here: local streams stop, DISCONNECTED once, then `onRoomLeft`.
    func finish(_ reason: LeaveReason) {
        dispatchPrecondition(condition: .onQueue(eventQueue))
        guard exitReason == nil else { return }
        exitReason = reason
        lock.withLock { _finished = true }
        releaseJoinWaiters()
        media.stopAllLocal(announce: true)
        // Requests still waiting fail with 3056 (`send`), after the close below.
        client?.setNotificationHandler(nil)
        setState(.DISCONNECTED)
        emit { $0.onRoomLeft(reason: reason) }
        media.close()
        client?.close()
    }

    private func socketClosed(_ connection: RoomProtocolClient?) {
        guard exitReason == nil, let connection, connection === client else { return }
        if leaving || ending {
            finish(leaving ? .MANUAL_LEAVE_CALLED : .ROOM_CLOSE)
        } else if reconnection.rejoining
            || (isJoined && (state == .CONNECTED || state == .RECONNECTING) && reconnectAttempts > 0)
        {
            // A socket lost during a rejoin attempt fails that attempt; the rejoin loop decides what follows.
            startReconnect()
        } else {
            finish(.WEBSOCKET_DISCONNECTED)
        }
    }

    // MARK: Reconnection

    /// How long a request may wait for the server's answer before it fails with 3079, in seconds.
    /// Asking a remote participant to turn its mic or camera on waits for its answer as well.
    var requestTimeout: Double = 30

    /// How a dropped signalling connection is ridden out (set with `createRoom(reconnect:)`).
    var reconnect: ReconnectPolicy
    /// Test convenience: caps the rejoin attempts (0 disables reconnection).
    var reconnectAttempts: Int {
        get { reconnect.window > 0 ? (reconnect.maxAttempts ?? Int.max) : 0 }
        set { reconnect.maxAttempts = newValue }
    }
    /// Test convenience: the pause before the first rejoin attempt, in seconds (within the jitter,
    /// not spread from 0, so that a test sees the room reconnecting for about that long).
    var reconnectDelay: Double {
        get { reconnect.initialDelay }
        set {
            reconnect.initialDelay = newValue
            reconnect.spreadsFirstPause = false
            reconnect.maxDelay = max(reconnect.maxDelay, newValue)
        }
    }
    /// Ids re-announced by the server during a rejoin.
    var rejoinSeen: Set<String>?
    /// ICE restart and rejoin bookkeeping (RoomReconnection.swift).
    let reconnection = ReconnectionState()

    var isFinished: Bool { lock.withLock { _finished } }

    /// After a rejoin: drops the remote participants the server did not announce again.
    func dropParticipants(notIn seen: Set<String>) -> [Participant] {
        lock.withLock {
            let gone = _participants.values.filter { !seen.contains($0.id) }
            for p in gone { _participants[p.id] = nil }
            return gone
        }
    }

    /// Test hook: drops the signalling socket as a network failure would.
    func simulateConnectionDrop() {
        eventQueue.async { self.client?.close(code: 1001, reason: "simulated drop") }
    }

    // MARK: Incoming

    /// A `roomVideoCodecs` list; nil when absent or not a list.
    private static func videoCodecs(_ value: JSONValue?) -> [MediaCodec]? {
        guard let list = value?.arrayValue else { return nil }
        return MediaCodec.videoCodecs(named: list.compactMap(\.stringValue))
    }

    func participant(_ id: String) -> Participant? {
        lock.withLock { id == _local.id ? _local : _participants[id] }
    }

    /// One notification, in arrival order (the client core unpacked protocol 2's batches already).
    private func handleNotification(_ method: RoomNotification, _ data: JSONValue) {
        let pid = data["participantId"]?.stringValue
        switch method {
        case .participantJoined:
            guard let pid, pid != localParticipant.id else { return }
            if let known = lock.withLock({ _participants[pid] }), rejoinSeen != nil {
                // Re-announced during a rejoin: the same participant, not a new one.
                rejoinSeen?.insert(pid)
                if let mode = data["mode"]?.stringValue.flatMap(Mode.init(rawValue:)) {
                    known.update(mode: mode.canonical)
                }
                known.update(mic: data["micEnabled"]?.boolValue ?? false)
                known.update(webcam: data["camEnabled"]?.boolValue ?? false)
                return
            }
            rejoinSeen?.insert(pid)
            let p = Participant(id: pid, name: data["name"]?.stringValue ?? pid, isLocal: false, json: data)
            p.room = self
            lock.withLock { _participants[pid] = p }
            emit { $0.onParticipantJoined(p) }
        case .participantLeft:
            guard let pid, let p = lock.withLock({ _participants.removeValue(forKey: pid) }) else { return }
            media.forgetRemote(pid)
            emit { $0.onParticipantLeft(p, reason: LeaveReason(code: data["reason"]?.intValue ?? 1007)) }
        case .participantModeChanged:
            guard let pid, let mode = data["mode"]?.stringValue.flatMap(Mode.init(wireName:)) else { return }
            if pid == localParticipant.id, ownModeEvents.held(mode) { return }
            participant(pid)?.update(mode: mode)
            emit { $0.onParticipantModeChanged(participantId: pid, mode: mode) }
        case .mediaStatusChanged:
            guard let pid, let p = participant(pid),
                let kind = data["kind"]?.stringValue.flatMap(StreamKind.init(wire:))
            else { return }
            let on = data["enabled"]?.boolValue ?? (data["status"]?.stringValue == "on")
            if kind == .audio { p.update(mic: on) } else { p.update(webcam: on) }
            for l in p.liveListeners { l.onMediaStatusChanged(peerId: pid, kind: kind, newStatus: on ? .on : .off) }
        case .clusterNodes:
            clusterURLs = data["signalingUrls"]?.arrayValue?.compactMap(\.stringValue) ?? []
        case .consumerLayerChanged:
            guard let pid, data["kind"]?.stringValue.flatMap(StreamKind.init(wire:)) == .video,
                let quality = data["quality"]?.stringValue.flatMap(VideoQuality.init(rawValue:))
            else { return }
            participant(pid)?.receivedLayer(quality)
        case .consumerCreated:
            media.consumerCreated(data)
        case .consumerClosed:
            media.consumerClosed(data)
        case .subscriberOffer:
            media.answer(data)
        case .presenterChanged:
            lock.withLock { _presenterId = pid }
            emit { $0.onPresenterChanged(participantId: pid) }
        case .speakerChanged:
            lock.withLock { _speakerId = pid }
            emit { $0.onSpeakerChanged(participantId: pid) }
        case .roomVideoCodecsChanged:
            guard let codecs = Self.videoCodecs(data["roomVideoCodecs"]) else { return }
            lock.withLock { _roomVideoCodecs = codecs }
            emit { $0.onRoomVideoCodecsChanged(codecs) }
            followVideoCodec()
        case .pinStateChanged:
            guard let pid else { return }
            let pin = PinState(data["pinState"])
            participant(pid)?.update(pin: pin)
            emit { $0.onPinStateChanged(participantId: pid, pinState: pin) }
        case .micRequested, .webcamRequested:
            guard let pid else { return }
            let kind: StreamKind = method == .micRequested ? .audio : .video
            let accept: @Sendable () -> Void = {
                Task {
                    if kind == .audio { try? await self.unmuteMic() } else { try? await self.enableCam() }
                }
            }
            let reject: @Sendable () -> Void = {}
            if kind == .audio {
                emit { $0.onMicRequested(participantId: pid, accept: accept, reject: reject) }
            } else {
                emit { $0.onWebcamRequested(participantId: pid, accept: accept, reject: reject) }
            }
        case .micDisabled, .webcamDisabled:
            media.stopLocalNow(method == .micDisabled ? .audio : .video)
        case .entryRequested:
            guard let pid else { return }
            let answer: @Sendable (String) -> Void = { decision in
                Task {
                    _ = try? await self.gatedCall(
                        "respondEntry", .respondEntry, ["participantId": .string(pid), "decision": .string(decision)])
                }
            }
            emit {
                $0.onEntryRequested(
                    participantId: pid, name: data["name"]?.stringValue ?? pid, allow: { answer("allowed") },
                    deny: { answer("denied") })
            }
        case .entryPending:
            enteredLobby(serverWait: data["timeoutSeconds"]?.doubleValue)
        case .entryResponded:
            guard let pid, let decision = data["decision"]?.stringValue.flatMap(EntryDecision.init(rawValue:)) else {
                return
            }
            emit { $0.onEntryResponded(participantId: pid, decision: decision) }
        case .pubsubMessage:
            pubSub.deliver(data)
        case .pubsubHistory:
            pubSub.deliverHistory(data)
        case .roomLeft:
            finish(LeaveReason(code: data["reason"]?.intValue ?? 1007))
        case .roomClosed:
            finish(.ROOM_CLOSE)
        case .error:
            let code = data["code"]?.intValue ?? 4000
            emit {
                $0.onError(
                    UnderstudyError(
                        code: code, name: data["name"]?.stringValue ?? UnderstudyError.canonicalName(code),
                        message: data["message"]?.stringValue ?? ""))
            }
        default:
            break
        }
    }
}

extension PinState {
    init(_ json: JSONValue?) {
        self.init(cam: json?["cam"]?.boolValue ?? false, share: json?["share"]?.boolValue ?? false)
    }
}

// Safe as used: carries a value to the one thread (queue or loop) that alone touches it afterwards.
struct UncheckedSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

// Safe: touched only under the room's `operationLock`.
final class ResultBoxFlag: @unchecked Sendable { var value = false }

/// A join request waiting for its answer. Confined to the room's event queue.
// Safe: confined to the room's event queue (see above).
final class PendingJoin: @unchecked Sendable {
    let id: Int
    weak var connection: RoomProtocolClient?
    let started = DispatchTime.now()
    /// When the join gives up (moved by `entryPending`).
    var deadline: DispatchTime
    /// Set once the server put the join in the lobby: how long it waits there, in seconds.
    var lobbyWait: Double?
    /// Delivers the join's outcome (once).
    let complete: (Result<JSONValue, UnderstudyError>) -> Void

    init(
        id: Int, connection: RoomProtocolClient, deadline: DispatchTime,
        complete: @escaping (Result<JSONValue, UnderstudyError>) -> Void
    ) {
        self.id = id
        self.connection = connection
        self.deadline = deadline
        self.complete = complete
    }
}

/// The local participant's `participantModeChanged`, held while ``Room/changeMode(_:)`` stops its
/// streams. Confined to the room's event queue.
// Safe: confined to the room's event queue (see above).
final class HeldModeEvent: @unchecked Sendable {
    private var holding = false
    private var mode: Mode?
    /// From now on the local participant's mode event is kept, not delivered.
    func hold() {
        holding = true
        mode = nil
    }
    /// Keeps `mode` when holding; false when the event should be delivered now.
    func held(_ mode: Mode) -> Bool {
        guard holding else { return false }
        self.mode = mode
        return true
    }
    /// Stops holding; returns the kept event, if one arrived.
    func release() -> Mode? {
        holding = false
        defer { mode = nil }
        return mode
    }
}
// Safe: the value is guarded by `lock`.
final class SavedMedia: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: (mic: Bool, cam: Bool)?
    var value: (mic: Bool, cam: Bool)? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// The connection a close handler belongs to, without keeping it alive from its own callback.
final class WeakClient: Sendable {
    weak let value: RoomProtocolClient?
    init(_ value: RoomProtocolClient) { self.value = value }
}
