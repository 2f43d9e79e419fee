import Foundation
import RTCWire
import RoomProtocol
import SFU
import Signaling

/// One room's control-plane state: participants, lobby, producers/consumers, pins and PubSub.
/// Everything here runs on `queue`, so handlers never race and notifications go out in the order
/// the state changed. Media packets never pass through here.
// Safe: all state is touched on `queue` only (see above).
final class Room: @unchecked Sendable {
    let id: String
    let server: RoomServer
    let configuration: RoomServerConfiguration
    private let hooks: RoomMediaHooks?
    private let queue: DispatchQueue
    private let createdAt = nowMilliseconds()

    // Queue-confined state.
    private var closed = false
    private var participants: [String: ParticipantState] = [:]
    private var lobby: [String: (session: any ParticipantSignaling, request: JoinRequest)] = [:]
    /// Pin states by participant (internal for RoomPersistence.swift).
    var pins: [String: (cam: Bool, share: Bool)] = [:]
    private var presenterId: String?
    /// The video codecs every receiver accepts (`roomVideoCodecs`).
    private var videoCodecs = RoomVideoCodecs()
    /// Persisted PubSub messages (internal for RoomPersistence.swift).
    var history = PubSubHistory()
    /// Joined participants in join order (kept, not sorted per broadcast).
    private var participantsInOrder: [ParticipantState] = []
    /// Joins, leaves and mode changes, encoded once and coalesced for protocol-2 clients.
    private let participantEvents: ParticipantEventFanout
    /// A flush of the leaves is queued behind the room's waiting work (``flushAfterQueuedWork()``).
    private var leaveFlushQueued = false

    init(id: String, server: RoomServer, configuration: RoomServerConfiguration, hooks: RoomMediaHooks?) {
        self.id = id
        self.server = server
        self.configuration = configuration
        self.hooks = hooks
        queue = DispatchQueue(label: "room.\(id)")
        participantEvents = ParticipantEventFanout(
            windowMilliseconds: configuration.participantEventWindowMilliseconds, queue: queue)
        participantEvents.onWindowElapsed = { [unowned self] in flushParticipantEvents() }
    }

    func enqueue(_ work: @escaping @Sendable () -> Void) { queue.async(execute: work) }

    /// Stage requests first, then other requests, then subscribe renegotiations (see ``RoomWorkLanes``).
    private let lanes = RoomWorkLanes()

    /// Members' requests submitted and not yet run.
    var waitingRequestCount: Int { lanes.waitingRequestCount }

    /// Queues a member's request in its lane (stage changes ahead of the room's bulk work).
    func submitRequest(session: any ParticipantSignaling, id: JSONValue, method: RoomMethod, data: JSONValue) {
        let shared =
            RoomWorkLanes.sharesSFUCalls(method)
            ? RoomWorkLanes.SharedRequest(session: session, id: id, method: method, data: data) : nil
        lanes.submit(session: ObjectIdentifier(session), method: method, shared: shared) { [self] in
            handle(session: session, id: id, method: method, data: data)
        }
        queue.async { [self] in runNextWork() }
    }

    /// The SFU wants a new subscribe offer for `participantId` (its consumers changed). Called on any
    /// thread; several calls before the offer is made ask once.
    func renegotiationNeeded(participantId: String) {
        guard lanes.submitRenegotiation(participantId) else { return }
        queue.async { [self] in runNextWork() }
    }

    private func runNextWork() {
        jobMark = lanes.mark
        switch lanes.next() {
        case .request(let work): work()
        case .sharingSFUCall(let requests): runSharingSFUCall(requests)
        case .renegotiations(let participantIds): subscribeRenegotiationsNeeded(participantIds)
        case .nothing: break
        }
    }

    /// The room's state once every request queued before this call has been handled; nil once
    /// the room has closed.
    func currentSummary() async -> RoomSummary? {
        await withCheckedContinuation { continuation in
            enqueue { continuation.resume(returning: self.closed ? nil : self.makeSummary()) }
        }
    }

    /// Who is in the room (nil once it has closed), after every request queued before this call.
    func occupancy() async -> [RoomOccupant]? {
        await withCheckedContinuation { continuation in
            enqueue {
                continuation.resume(
                    returning: self.closed
                        ? nil
                        : self.participantsInOrder.map {
                            RoomOccupant(id: $0.id, isAgent: $0.isAgent, publishing: !$0.producers.isEmpty)
                        })
            }
        }
    }

    /// Sends `method` to every joined member whose socket is on this node (not to proxied or HTTP
    /// sessions). On the room's queue.
    func notifyClientsDirectly(_ method: RoomNotification, _ data: JSONValue) {
        for p in participantsInOrder {
            guard let client = p.session as? ClientSession, client.currentPhase == .joined else { continue }
            client.notify(method, data)
        }
    }

    private func makeSummary() -> RoomSummary {
        var summary = RoomSummary(
            roomId: id, participantIds: participantsInOrder.map(\.id), lobbyCount: lobby.count,
            producerCount: participants.values.reduce(0) { $0 + $1.producers.count },
            consumerCount: participants.values.reduce(0) { $0 + $1.consumers.count }, createdAt: createdAt)
        for p in participantsInOrder where p.mode == .recvOnly {
            if let edge = p.edge {
                summary.edgeAudience[edge.nodeId, default: 0] += 1
            } else {
                summary.localAudienceCount += 1
            }
        }
        return summary
    }

    /// The edge that serves `participantId`'s subscribe connection (nil: this node). On the room's queue.
    func edgeLink(of participantId: String) -> EdgeMediaLink? { participants[participantId]?.edge }

    /// Sends `method` to everyone (but `except`), encoded once. Pending participant events go first,
    /// so nobody hears of a producer or a pin before the join of its participant.
    private func broadcast(_ method: RoomNotification, _ data: JSONValue, except: String? = nil) {
        flushParticipantEvents()
        let message = PreparedTextMessage(SignalEnvelope.notification(method: method.rawValue, data: data).text)
        for p in participantsInOrder where p.id != except { p.session.send(message) }
    }

    /// A join, leave or mode change, for everyone in the room but `except` (see ``ParticipantEventFanout``).
    private func announce(_ method: RoomNotification, _ data: JSONValue, except: String? = nil) {
        if participantEvents.post(
            method: method.rawValue, dataText: data.jsonString, except: except, recipients: participantsInOrder)
        {
            flushParticipantEvents()
        }
    }

    private func flushParticipantEvents() {
        guard participantEvents.hasPending else { return }
        participantEvents.flush(to: participantsInOrder)
    }

    /// Flushes the pending participant events once the work queued now has run, without waiting
    /// for the window: the members of an edge that died leave in one burst, and their leaves then
    /// go to the room in a few messages rather than one each to every member (N² sends, which held
    /// up their own rejoins behind them). Anything broadcast meanwhile flushes them first.
    private func flushAfterQueuedWork() {
        guard participantEvents.hasPending, !leaveFlushQueued else { return }
        leaveFlushQueued = true
        queue.async { [self] in
            leaveFlushQueued = false
            flushParticipantEvents()
        }
    }

    // MARK: Join, lobby, leave

    func join(session: any ParticipantSignaling, request: JoinRequest) {
        if closed {
            // The room emptied or ended while this join was queued: start a fresh one.
            server.routeJoin(session: session, request: request)
            return
        }
        guard !session.isClosed else { return closeIfEmpty() }
        if let refusal = takeoverRefusal(request) {
            server.refuseJoin(session: session, id: request.id, error: refusal)
            return closeIfEmpty()
        }
        if request.permissions.contains("ask_join") {
            guard lobby[request.participantId] != nil || lobby.count < configuration.maxParticipantsPerRoom else {
                server.refuseJoin(
                    session: session, id: request.id, error: RoomError(4009, "the lobby of room '\(id)' is full"))
                return closeIfEmpty()
            }
            lobby[request.participantId]?.session.close(code: 4005, reason: RoomError.canonicalName(4005))
            lobby[request.participantId] = (session, request)
            expireLobbyEntry(request.participantId, session: session)
            // The requester learns that it waits and for how long: a lobby wait is no request timeout.
            session.notify(
                .entryPending,
                [
                    "participantId": .string(request.participantId),
                    "timeoutSeconds": .number(configuration.lobbyTimeoutSeconds),
                ])
            let data: JSONValue = ["participantId": .string(request.participantId), "name": .string(request.name)]
            for p in participantsInOrder where p.permissions.contains("allow_join") {
                p.session.notify(.entryRequested, data)
            }
            return
        }
        admit(session: session, request: request)
    }

    private func admit(session: any ParticipantSignaling, request: JoinRequest) {
        if let refusal = takeoverRefusal(request) {
            server.refuseJoin(session: session, id: request.id, error: refusal)
            return closeIfEmpty()
        }
        if let old = participants[request.participantId] {
            old.session.notify(
                .error, RoomError(4005, "participant '\(old.id)' joined from another connection").errorJSON)
            old.session.notify(.roomLeft, .object(leaveJSON(.DUPLICATE_PARTICIPANT)))
            remove(old, reason: .DUPLICATE_PARTICIPANT)
            old.session.close(code: 4005, reason: RoomError.canonicalName(4005))
        }
        guard participants.count < configuration.maxParticipantsPerRoom else {
            server.refuseJoin(
                session: session, id: request.id,
                error: RoomError(4009, "room '\(id)' has reached \(configuration.maxParticipantsPerRoom) participants"))
            return closeIfEmpty()
        }
        let sends = request.mode == .sendAndRecv
        let p = ParticipantState(
            id: request.participantId, session: session, name: request.name, mode: request.mode,
            metaData: request.metaData,
            isAgent: request.isAgent, agentId: request.agentId, micEnabled: sends && request.micEnabled,
            camEnabled: sends && request.camEnabled, autoConsume: request.autoConsume, permissions: request.permissions)
        // An audience member proxied by an edge that offered its media plane keeps its media there.
        if request.mode == .recvOnly, let link = (session as? ClientSession)?.edgeLink { p.edge = link }
        // Existing participants first, then the answer: the joiner's onParticipantJoined for them
        // precedes its onRoomJoined.
        // Protocol 2 gets the roster as bounded `participantEvents` pages and a response without
        // it; protocol 1 one notification per participant and the full list in the response.
        p.protocolVersion = request.protocolVersion
        let existing = participantsInOrder
        for message in ParticipantEventFanout.roster(of: existing, protocolVersion: p.protocolVersion) {
            session.send(message)
        }
        p.joinSerial = server.nextPubSubSequence()  // unique in the server: tells this join from a later one
        p.idBoundByToken = request.idBoundByToken
        p.videoCodecs = request.videoCodecs
        let codecsBefore = videoCodecs.accepted
        if p.mode.consumes { videoCodecs.add(p.videoCodecs) }
        participants[p.id] = p
        participantsInOrder.append(p)
        session.markJoined(participantId: p.id)
        server.counters.add(joins: 1)
        server.memberJoined(roomId: id, participantId: p.id, isAgent: p.isAgent)
        var fields: [String: JSONValue] = [
            "protocolVersion": .number(Double(p.protocolVersion)), "roomId": .string(id),
            "participant": p.json, "participantCount": .number(Double(existing.count)),
            "permissions": .array(p.permissions.sorted().map(JSONValue.string)),
            "pinStates": .array(pins.keys.sorted().map { pinJSON($0) }),
            "presenterId": presenterId.map(JSONValue.string) ?? .null,
            "roomVideoCodecs": Self.codecsJSON(videoCodecs.accepted),
        ]
        if p.protocolVersion < 2 { fields["participantCount"] = nil }
        if !configuration.iceServers.isEmpty { fields["iceServers"] = .array(configuration.iceServers.map(\.json)) }
        session.send(
            ParticipantEventFanout.joinResponse(
                id: request.id, fields: fields, participants: p.protocolVersion < 2 ? existing : nil))
        p.eventMark = participantEvents.lastSequence + 1  // its own join, the event posted next
        announce(.participantJoined, p.json, except: p.id)
        videoCodecsMayHaveChanged(from: codecsBefore, except: p.id)
        for other in existing {
            for producer in other.producers.values.sorted(by: { $0.producerId < $1.producerId }) where p.wants(producer)
            {
                createConsumer(for: p, of: producer)
            }
        }
        lanes.expediteRenegotiation(p.id)  // the joiner's first offer is part of its join
        if let edge = p.edge {
            // Its edge's allocator learns the room's pins (a new edge knows none).
            for pinned in pins.keys.sorted() {
                edge.send(
                    .pin(participantKey: RoomMedia.key(room: id, participant: pinned), pinned: true),
                    key: RoomMedia.key(room: id, participant: p.id))
            }
        }
        if p.permissions.contains("allow_join") {
            for (pid, entry) in lobby.sorted(by: { $0.key < $1.key }) {
                p.session.notify(
                    .entryRequested, ["participantId": .string(pid), "name": .string(entry.request.name)])
            }
        }
    }

    /// Tells everyone (but `except`, whose join response has it) the room's new `roomVideoCodecs`
    /// when a join, leave or mode change moved it: publishers with `--video-codec auto` follow it.
    private func videoCodecsMayHaveChanged(from before: [MediaCodec], except: String? = nil) {
        let now = videoCodecs.accepted
        guard now != before else { return }
        broadcast(.roomVideoCodecsChanged, ["roomVideoCodecs": Self.codecsJSON(now)], except: except)
    }

    private static func codecsJSON(_ codecs: [MediaCodec]) -> JSONValue {
        .array(codecs.map { .string($0.rawValue) })
    }

    /// Drops `p` from the room: its producers and consumers close, everyone else hears why.
    private func remove(_ p: ParticipantState, reason: RoomLeaveCode) {
        guard participants[p.id] === p else { return }
        for producer in p.producers.values.sorted(by: { $0.producerId < $1.producerId }) {
            closeProducer(producer, of: p)
        }
        for consumer in p.consumers.values {
            if let edge = p.edge { releaseOnEdge(consumer.producerId, edge) }
            hooks?.consumerClosed(roomId: id, consumer: consumer)
        }
        p.consumers.removeAll()
        closeInSFU(p)
        participantEvents.deliverPending(to: p)
        participants[p.id] = nil
        participantsInOrder.removeAll { $0 === p }
        let codecsBefore = videoCodecs.accepted
        if p.mode.consumes { videoCodecs.remove(p.videoCodecs) }
        forgetWants(of: p.id)
        if pins.removeValue(forKey: p.id) != nil {
            pinsChanged()
            pinnedToMedia(p.id)
        }
        var data = leaveJSON(reason)
        data["participantId"] = .string(p.id)
        data["name"] = .string(p.name)
        announce(.participantLeft, .object(data))
        // Joins are what floods a live stream; a leave goes out at once (with the pending joins), so
        // nobody acts on a participant that is gone: not held for the window, only behind the work
        // already queued, which shares it (a dead edge's members leave together).
        flushAfterQueuedWork()
        videoCodecsMayHaveChanged(from: codecsBefore)
        answerAsks(of: p, kind: nil) { kind in
            RoomError(kind == .mic ? 4067 : 4069, "'\(p.id)' left before turning its \(kind.rawValue) on")
        }
    }

    func connectionClosed(_ session: any ParticipantSignaling) {
        if let pid = session.participantId, let p = participants[pid], p.session === session {
            remove(p, reason: .WEBSOCKET_DISCONNECTED)
        }
        for (pid, entry) in lobby where entry.session === session {
            // A requester whose socket went away gave up as if it had sent `leave`.
            lobby[pid] = nil
            announceWithdrawn(pid)
        }
        closeIfEmpty()
    }

    /// Tells `allow_join` holders that `participantId`'s entry request went away unanswered.
    private func announceWithdrawn(_ participantId: String) {
        let event: JSONValue = ["participantId": .string(participantId), "decision": "withdrawn"]
        for p in participantsInOrder where p.permissions.contains("allow_join") {
            p.session.notify(.entryResponded, event)
        }
    }

    private func closeIfEmpty() {
        guard !closed, participants.isEmpty, lobby.isEmpty else { return }
        closed = true
        server.roomClosed(self)
        dropAllHistory()
    }

    /// Ends the room for everyone (`end`, the admin API, server stop).
    func close(reason: RoomLeaveCode) {
        guard !closed else { return }
        closed = true
        server.roomClosed(self)
        let data: JSONValue = .object(leaveJSON(reason))
        for p in participantsInOrder {
            for producer in p.producers.values { hooks?.producerClosed(roomId: id, producer: producer) }
            for consumer in p.consumers.values { hooks?.consumerClosed(roomId: id, consumer: consumer) }
            p.session.notify(.roomClosed, data)
            p.session.close(code: WebSocketCloseCode.normal, reason: reason.name)
            closeInSFU(p)
        }
        for entry in lobby.values {
            entry.session.notify(.roomClosed, data)
            entry.session.close(code: WebSocketCloseCode.normal, reason: reason.name)
        }
        participants.removeAll()
        participantsInOrder.removeAll()
        lobby.removeAll()
        dropAllHistory()
    }

    // MARK: Requests

    func handle(session: any ParticipantSignaling, id: JSONValue, method: RoomMethod, data: JSONValue) {
        guard !closed, let pid = session.participantId, let p = participants[pid], p.session === session else {
            let waiting = lobby.first { $0.value.session === session }
            if let waiting, method == .leave, !closed {
                // Giving up while in the lobby: the entry request is withdrawn.
                lobby[waiting.key] = nil
                announceWithdrawn(waiting.key)
                session.respond(id, [:])
                session.close(code: WebSocketCloseCode.normal, reason: RoomLeaveCode.MANUAL_LEAVE_CALLED.name)
                return closeIfEmpty()
            }
            let why = waiting != nil ? "is waiting in the lobby" : "has not joined the room"
            return session.respond(id, error: RoomError(3035, "'\(method.rawValue)' refused: this connection \(why)"))
        }
        finish(
            p, session: session, id: id,
            Result { () throws(RoomError) in try dispatch(p, method: method, data: data, id: id) })
    }

    /// Members' requests whose SFU work shares one call on the loop (``RoomWorkLanes/sharesSFUCalls(_:)``):
    /// each call waits for the loop to get between two datagrams, so a live stream's bursts (every
    /// member consuming a new stage track, then answering its offer) cost one wait per batch, not per
    /// member. Each request is checked and answered as when run alone, in order.
    private func runSharingSFUCall(_ requests: [RoomWorkLanes.SharedRequest]) {
        var waiting: [(request: RoomWorkLanes.SharedRequest, member: ParticipantState, step: SFUStep)] = []
        for r in requests {
            guard let p = joinedMember(r.session) else {
                handle(session: r.session, id: r.id, method: r.method, data: r.data)  // refused there
                continue
            }
            switch Result(catching: { () throws(RoomError) in
                try dispatchStep(p, method: r.method, data: r.data, id: r.id)
            }) {
            case .success(.answered(let result)): finish(p, session: r.session, id: r.id, .success(result))
            case .success(.needsSFU(let step)): waiting.append((r, p, step))
            case .failure(let error): finish(p, session: r.session, id: r.id, .failure(error))
            }
        }
        guard !waiting.isEmpty else { return }
        let onLoop = waiting.compactMap(\.step.onLoop)
        // Edge members' steps alone need no hop onto this node's loop.
        let failure =
            onLoop.isEmpty
            ? nil
            : callOnSFU(waiting[0].request.method.rawValue) { sfu in
                for body in onLoop { body(sfu) }
            }
        for w in waiting {
            finish(
                w.member, session: w.request.session, id: w.request.id,
                Result { () throws(RoomError) in try w.step.then(failure) })
        }
    }

    /// Makes one waited-for call onto the SFU's loop; the error when it did not happen.
    private func callOnSFU(_ what: String, _ body: @escaping @Sendable (SFU) -> Void) -> RoomError? {
        guard let media = server.media() else { return RoomError(5000, "\(what): the media server is not running") }
        do {
            try media.callOnLoop(what, body)
            return nil
        } catch {
            return error
        }
    }

    /// The member `session` belongs to, if it has joined and the room is open.
    private func joinedMember(_ session: any ParticipantSignaling) -> ParticipantState? {
        guard !closed, let pid = session.participantId, let p = participants[pid], p.session === session else {
            return nil
        }
        return p
    }

    /// Answers a request (unless its handler did) and sends what follows its answer.
    private func finish(
        _ p: ParticipantState, session: any ParticipantSignaling, id: JSONValue,
        _ outcome: Result<JSONValue?, RoomError>
    ) {
        switch outcome {
        case .success(let result): if let result { session.respond(id, result) }
        case .failure(let error):
            session.respond(id, error: error)
            if error.code == 3073 { session.noteBadMessage() }
        }
        let offers = offersAfterResponse
        offersAfterResponse.removeAll()
        for (member, offer) in offers { offerMade(member, offer) }
        // A new offer for the caller's own subscribe connection is part of its request's answer (not
        // one the room's fan-out asked for before: that goes with the bulk, in batches).
        lanes.expediteRenegotiation(p.id, askedSince: jobMark)
    }

    /// ``RoomWorkLanes/mark`` when the running job started.
    private var jobMark: UInt64 = 0

    /// Subscribe offers a request's SFU call made along with its own work, sent after its response.
    private var offersAfterResponse: [(ParticipantState, SessionDescription)] = []

    /// A request's work on the SFU's loop and what follows it on the room's queue. The room's queue
    /// waits meanwhile, so nothing changes between the two; several members' steps share one call.
    private struct SFUStep {
        /// Runs on the SFU's loop (nil: the step's work is elsewhere, an edge member's on its edge).
        let onLoop: (@Sendable (SFU) -> Void)?
        /// Runs after the call (`failure`: the call did not happen); returns the response, or nil when
        /// it answered itself.
        let then: (_ failure: RoomError?) throws(RoomError) -> JSONValue?
    }

    private enum Handled {
        case answered(JSONValue?)
        case needsSFU(SFUStep)
    }

    /// ``dispatch(_:method:data:id:)``, except that the requests batches share (a `consume`, a
    /// `subscriberAnswer`) hand back their SFU work instead of calling the SFU.
    private func dispatchStep(_ p: ParticipantState, method: RoomMethod, data: JSONValue, id: JSONValue)
        throws(RoomError) -> Handled
    {
        switch method {
        case .consume: return try consume(p, data)
        case .subscriberAnswer: return .needsSFU(try subscriberAnswer(p, data, requestId: id))
        case .setViewPort: return try setViewPort(p, data)
        default: return .answered(try dispatch(p, method: method, data: data, id: id))
        }
    }

    /// Runs one request; returns the response data, or nil when the handler answered itself.
    private func dispatch(_ p: ParticipantState, method: RoomMethod, data: JSONValue, id: JSONValue) throws(RoomError)
        -> JSONValue?
    {
        switch method {
        case .ping:
            return ["time": .number(Double(nowMilliseconds()))]
        case .leave:
            var reason = RoomLeaveCode.MANUAL_LEAVE_CALLED
            if let code = try data.optionalInt("reason") {
                guard let r = RoomLeaveCode(rawValue: code), r.isClientReason else {
                    throw .invalidParameter("leave reason must be 1101, 1102 or 1103")
                }
                reason = r
            }
            remove(p, reason: reason)
            p.session.respond(id, [:])
            p.session.close(code: WebSocketCloseCode.normal, reason: reason.name)
            closeIfEmpty()
            return nil
        case .end:
            guard configuration.anyoneMayEnd || p.permissions.contains("allow_mod") else {
                throw RoomError(4024, "ending the room needs the allow_mod permission")
            }
            p.session.respond(id, [:])
            close(reason: .ROOM_CLOSE)
            return nil
        case .changeMode: return try changeMode(p, data)
        case .setMediaStatus: return try setMediaStatus(p, data)
        case .produce:
            if data["sdp"] != nil || data["tracks"] != nil { return try producePublishing(p, data) }
            return try produce(p, data)
        case .subscriberAnswer, .consume, .setViewPort:
            // Alone: the step's SFU call is its own.
            switch try dispatchStep(p, method: method, data: data, id: id) {
            case .answered(let result): return result
            case .needsSFU(let step):
                guard let onLoop = step.onLoop else { return try step.then(nil) }
                return try step.then(callOnSFU(method.rawValue) { onLoop($0) })
            }
        case .closeProducer:
            guard p.mode == .sendAndRecv else {
                throw RoomError(3066, "closeProducer is not supported in \(p.mode.rawValue)")
            }
            let producerId = try data.requiredString("producerId")
            guard let producer = p.producers[producerId] else {
                throw .invalidParameter("no producer '\(producerId)' of yours")
            }
            closeProducer(producer, of: p)
            return ["producerId": .string(producerId)]
        case .stopConsuming: return try stopConsuming(p, data)
        case .setQuality: return try setQuality(p, data)
        case .getStats:
            // `participantId` (optional): another member's totals, for its `getTransportStats()`.
            guard let other = try data.optionalString("participantId") else { return try getStats(p) }
            guard let target = participants[other] else {
                throw .invalidParameter("no participant '\(other.prefix(128))' in the room")
            }
            return try getStats(target)
        case .publish: return try publish(p, data, requestId: id)
        case .subscribe: return try subscribe(p, data, id: id)
        case .unsubscribe:
            let topic = try data.requiredString("topic")
            guard p.topics.remove(topic) != nil else {
                throw RoomError(4089, "not subscribed to '\(topic.prefix(64))'")
            }
            return ["topic": .string(topic)]
        case .requestMic, .requestCam, .disableMic, .disableCam: return try moderateMedia(p, method, data, id: id)
        case .remove: return try removeParticipant(p, data)
        case .pin, .unpin: return try pin(p, data, pin: method == .pin, id: id)
        case .respondEntry: return try respondEntry(p, data)
        case .join, .restartIce:
            // Both are answered before a request reaches the room's queue (`RoomServer.handleJoin`,
            // `ClientSession.handleRestartICE`); a transport that forwards them anyway gets 3068.
            throw RoomError(3068, "'\(method.rawValue)' is not handled by the room")
        }
    }

    // MARK: Modes and media status

    private func changeMode(_ p: ParticipantState, _ data: JSONValue) throws(RoomError) -> JSONValue {
        let name = try data.requiredString("mode")
        guard let mode = ParticipantMode(wireName: name) else {
            throw RoomError(3067, "unknown mode '\(name.prefix(40))'")
        }
        guard mode != p.mode else { throw RoomError(3054, "already in \(mode.rawValue)") }
        let closingPublish = try data.optionalBool("closePublishConnection") ?? false
        let previous = p.mode
        var publishConnectionClosed = false
        if previous == .sendAndRecv {
            for producer in p.producers.values.sorted(by: { $0.producerId < $1.producerId }) {
                closeProducer(producer, of: p)
            }
            setStatus(p, .mic, false)
            setStatus(p, .webcam, false)
            // A guest back in the audience may never publish again: on request its publish connection
            // (ICE, DTLS, SRTP state and its share of the port) goes now, not when it leaves the room.
            if closingPublish, let edge = p.edge {
                let answer = try? edge.call(.closePublishConnection, key: RoomMedia.key(room: id, participant: p.id))
                publishConnectionClosed = answer?["closed"]?.boolValue ?? false
            } else if closingPublish, p.inSFU, let media = server.media() {
                let key = RoomMedia.key(room: id, participant: p.id)
                publishConnectionClosed =
                    (try? media.call("closePublishConnection") { await $0.closePublishConnectionIfUnused(key) })
                    ?? false
            }
        }
        let codecsBefore = videoCodecs.accepted
        if previous.consumes != mode.consumes {
            if mode.consumes { videoCodecs.add(p.videoCodecs) } else { videoCodecs.remove(p.videoCodecs) }
        }
        p.mode = mode
        if mode == .signallingOnly {
            for consumer in p.consumers.values.sorted(by: { $0.consumerId < $1.consumerId }) {
                closeConsumer(consumer, of: p)
            }
        } else if previous == .signallingOnly {
            for other in participantsInOrder where other.id != p.id {
                for producer in other.producers.values.sorted(by: { $0.producerId < $1.producerId })
                where p.wants(producer) {
                    createConsumer(for: p, of: producer)
                }
            }
        }
        announce(.participantModeChanged, ["participantId": .string(p.id), "mode": .string(mode.rawValue)])
        flushParticipantEvents()  // rare, and a stage invite should take effect at once
        videoCodecsMayHaveChanged(from: codecsBefore)
        var response: [String: JSONValue] = [
            "mode": .string(mode.rawValue), "previousMode": .string(previous.rawValue),
        ]
        if closingPublish { response["publishConnectionClosed"] = .bool(publishConnectionClosed) }
        return .object(response)
    }

    private func setMediaStatus(_ p: ParticipantState, _ data: JSONValue) throws(RoomError) -> JSONValue {
        let kindName = try data.requiredString("kind")
        guard let kind = TrackKind(wireName: kindName), kind == .mic || kind == .webcam else {
            throw .invalidParameter("kind must be 'mic' or 'webcam'")
        }
        guard let enabled = try data.optionalBool("enabled") else { throw .invalidParameter("missing field 'enabled'") }
        if enabled, p.mode != .sendAndRecv {
            throw RoomError(3066, "cannot turn on the \(kind.rawValue) in \(p.mode.rawValue)")
        }
        setStatus(p, kind, enabled)
        return ["kind": .string(kind.rawValue), "enabled": .bool(enabled)]
    }

    /// Updates a mic/webcam status and tells everyone (consumers or not) when it changed.
    private func setStatus(_ p: ParticipantState, _ kind: TrackKind, _ on: Bool) {
        let changed: Bool
        switch kind {
        case .mic:
            changed = p.micEnabled != on
            p.micEnabled = on
        case .webcam:
            changed = p.camEnabled != on
            p.camEnabled = on
        default: return
        }
        guard changed else { return }
        broadcast(
            .mediaStatusChanged,
            [
                "participantId": .string(p.id), "kind": .string(kind.rawValue), "enabled": .bool(on),
                "status": .string(on ? "on" : "off"),
            ])
        if on { answerAsks(of: p, kind: kind, error: nil) }
    }

    /// Answers the `requestMic`/`requestCam` asks waiting for `p`'s `kind` (all kinds when nil):
    /// success once the device is on, `error` when `p` leaves.
    private func answerAsks(of p: ParticipantState, kind: TrackKind?, error: ((TrackKind) -> RoomError)?) {
        let answered = p.pendingAsks.filter { kind == nil || $0.kind == kind }
        guard !answered.isEmpty else { return }
        p.pendingAsks.removeAll { kind == nil || $0.kind == kind }
        for ask in answered {
            if let error {
                ask.session.respond(ask.requestId, error: error(ask.kind))
            } else {
                ask.session.respond(ask.requestId, ["participantId": .string(p.id)])
            }
        }
    }

    // MARK: Producers and consumers

    private func produce(_ p: ParticipantState, _ data: JSONValue) throws(RoomError) -> JSONValue {
        let kindName = try data.requiredString("kind")
        guard let kind = TrackKind(wireName: kindName) else {
            throw .invalidParameter("unknown kind '\(kindName.prefix(40))'")
        }
        guard p.mode == .sendAndRecv else { throw RoomError(3066, "produce is not supported in \(p.mode.rawValue)") }
        let failure: Int = kind == .mic ? 3058 : kind == .webcam ? 3049 : 3061
        guard !p.producers.values.contains(where: { $0.kind == kind }) else {
            throw RoomError(failure, "already producing \(kind.rawValue); close that producer first")
        }
        if kind == .screen, let presenterId, presenterId != p.id {
            throw RoomError(3061, "participant '\(presenterId)' is already sharing a screen")
        }
        var appData = data.objectValue ?? [:]
        appData["kind"] = nil
        appData["paused"] = nil
        let producer = RoomProducer(
            producerId: makeId("pr"), participantId: p.id, kind: kind, paused: try data.optionalBool("paused") ?? false,
            appData: .object(appData))
        add(producer, of: p)
        return producer.json
    }

    /// A new producer of `p` in the room: kept, announced (the presenter too, for a screen) and
    /// consumed by every participant that wants it.
    private func add(_ producer: RoomProducer, of p: ParticipantState) {
        p.producers[producer.producerId] = producer
        hooks?.producerCreated(roomId: id, producer: producer)
        broadcast(.producerAdded, producer.json)
        if producer.kind == .screen {
            presenterId = p.id
            broadcast(.presenterChanged, ["participantId": .string(p.id)])
        }
        createConsumers(of: producer, for: participantsInOrder.filter { $0.wants(producer) })
    }

    private func closeProducer(_ producer: RoomProducer, of p: ParticipantState) {
        guard p.producers.removeValue(forKey: producer.producerId) != nil else { return }
        // Closing the producer in the SFU closes its consumers there too, in one hop.
        for other in participantsInOrder {
            for consumer in other.consumers.values where consumer.producerId == producer.producerId {
                closeConsumer(consumer, of: other, inSFU: false)
            }
        }
        if producer.hasMedia, let media = server.media() {
            let producerId = producer.producerId
            _ = try? media.call("closeProducer") { try await $0.closeProducer(producerId) }
            // An edge guest's track: its mirror here is closed, the track itself on its edge.
            p.edge?.send(.closeProducer(producerId: producerId), key: RoomMedia.key(room: id, participant: p.id))
        }
        hooks?.producerClosed(roomId: id, producer: producer)
        broadcast(.producerClosed, producer.json)
        if producer.kind == .screen, presenterId == p.id {
            presenterId = nil
            broadcast(.presenterChanged, ["participantId": nil])
        }
    }

    /// Creates a consumer; when the SFU cannot, the subscriber gets 4050 `CREATE_CONSUMER_FAILED`:
    /// returned here for an explicit `consume` to refuse, else sent as an `error` notification.
    @discardableResult
    private func createConsumer(for subscriber: ParticipantState, of producer: RoomProducer, explicit: Bool = false)
        -> RoomError?
    {
        createConsumers(of: producer, for: [subscriber], explicit: explicit)
    }

    /// Creates a consumer of `producer` for each of `subscribers` that has none yet, with one SFU hop
    /// for all of them: a stage track goes to the whole audience at once, and a hop per member kept
    /// the room's queue (and the `produce` of a guest invited on stage) waiting on the SFU's loop
    /// once per member. Failures as in ``createConsumer(for:of:explicit:)``; returns the last one.
    @discardableResult
    private func createConsumers(of producer: RoomProducer, for subscribers: [ParticipantState], explicit: Bool = false)
        -> RoomError?
    {
        let targets = subscribers.filter { !$0.consumes(producer) }
        guard !targets.isEmpty else { return nil }
        // Without media (no SFU), or the SFU's answer for each target in order.
        var results: [Result<ConsumerInfo, RoomError>]?
        // An explicit consume (one member's request) also makes that member's next subscribe offer in the
        // same call when no round is under way; a fan-out to many members leaves their offers to the
        // renegotiation lane (one call makes many).
        let offering =
            explicit && targets.count == 1 && !targets[0].subscribe.outstanding
            && targets[0].session.renegotiatesSubscriptions
        var offer: SessionDescription?
        if producer.hasMedia, let media = server.media() {
            let producerId = producer.producerId
            var outcomes = [Result<ConsumerInfo, RoomError>](
                repeating: .failure(RoomError(5000, "consume: not run")), count: targets.count)
            // This node's members in one hop onto its SFU's loop, edge members through their edges.
            let local = targets.indices.filter { targets[$0].edge == nil }
            let onEdges = targets.indices.filter { targets[$0].edge != nil }
            if !local.isEmpty {
                let keys = local.map { RoomMedia.key(room: id, participant: targets[$0].id) }
                for i in local { targets[i].inSFU = true }
                do {
                    let (made, localOffer) = try media.callOnLoop("consume") { sfu in
                        Self.consumeOnLoop(sfu, keys: keys, producerId: producerId, offering: offering)
                    }
                    for (j, i) in local.enumerated() { outcomes[i] = made[j] }
                    offer = localOffer
                } catch {
                    for i in local { outcomes[i] = .failure(error) }
                }
            }
            if !onEdges.isEmpty {
                let (made, edgeOffer) = consumeOnEdges(
                    producer, onEdges.map { targets[$0] }, offering: offering, media: media)
                for (j, i) in onEdges.enumerated() { outcomes[i] = made[j] }
                if offer == nil { offer = edgeOffer }
            }
            results = outcomes
        }
        // After the request's response (and the consumerCreated notifications before it), as when the
        // offer had its own call.
        if let offer { offersAfterResponse.append((targets[0], offer)) }
        return recordConsumers(of: producer, for: targets, results, explicit: explicit)
    }

    /// On the SFU's loop: a consumer of `producerId` for each of `keys`, and with `offering` the first
    /// one's next subscribe offer (a live stream's audience consumes each new stage track at once, and a
    /// second call per member kept the room's queue waiting on the busy loop again).
    private static func consumeOnLoop(_ sfu: SFU, keys: [String], producerId: String, offering: Bool) -> (
        [Result<ConsumerInfo, RoomError>], SessionDescription?
    ) {
        let infos = keys.map { key in
            Result { try sfu.consumeOnLoop(subscriber: key, producerID: producerId) }
                .mapError { RoomError(5000, "consume: \(($0 as? SFUError)?.description ?? "\($0)")") }
        }
        let made = infos.contains { (try? $0.get())?.renegotiationNeeded == true }
        return (infos, offering && made ? try? sfu.subscriberOfferOnLoop(participantID: keys[0]) : nil)
    }

    /// Consumers of `producer` for edge members: the producer piped to each edge concerned (one hop
    /// onto this SFU's loop), then every member's call sent at once and the answers awaited.
    private func consumeOnEdges(
        _ producer: RoomProducer, _ members: [ParticipantState], offering: Bool, media: RoomMedia
    ) -> ([Result<ConsumerInfo, RoomError>], SessionDescription?) {
        let producerId = producer.producerId
        let edges = members.compactMap(\.edge).map { (node: $0.nodeId, address: $0.pipeAddress) }
        let piped: [String: Result<(SFUPipedProducer?, String), RoomError>]
        do {
            piped = try media.callOnLoop("pipe") { sfu in EdgeMediaLink.pipe(sfu, producerId: producerId, edges: edges)
            }
        } catch {
            return (members.map { _ in .failure(error) }, nil)
        }
        let calls: [Result<EdgePending, RoomError>] = members.map { m in
            guard let edge = m.edge, let route = piped[edge.nodeId] else {
                return .failure(RoomError(5000, "consume: no pipe to the member's edge"))
            }
            return route.map { (description, originPipe) in
                edge.start(
                    .consume(
                        producerId: producerId, piped: description, originPipe: originPipe,
                        offering: offering && members.count == 1),
                    key: RoomMedia.key(room: id, participant: m.id))
            }
        }
        let deadline = DispatchTime.now() + 10
        var offer: SessionDescription?
        let results = zip(members, calls).map { (m, call) -> Result<ConsumerInfo, RoomError> in
            Result { () throws(RoomError) -> ConsumerInfo in
                let (info, madeOffer) = try edgeConsumer(of: producer, for: m, call.get().wait(until: deadline))
                if let madeOffer { offer = madeOffer }
                return info
            }
        }
        return (results, offer)
    }

    /// The consumer an edge made for member `m` (its `consume` call's answer), and the subscribe
    /// offer made with it, if any.
    private func edgeConsumer(of producer: RoomProducer, for m: ParticipantState, _ answer: JSONValue)
        throws(RoomError) -> (ConsumerInfo, SessionDescription?)
    {
        guard let consumerId = answer["consumerId"]?.stringValue, let mid = answer["mid"]?.stringValue else {
            throw RoomError(5000, "consume: the edge's answer has no consumer")
        }
        let info = ConsumerInfo(
            id: consumerId, producerID: producer.producerId, subscriberID: RoomMedia.key(room: id, participant: m.id),
            publisherID: RoomMedia.key(room: id, participant: producer.participantId),
            kind: producer.kind == .mic ? .audio : .video,
            source: producer.kind == .mic ? .microphone : producer.kind == .screen ? .screen : .webcam,
            mid: mid,
            renegotiationNeeded: answer["renegotiationNeeded"]?.boolValue ?? true)
        return (info, answer["sdp"]?.stringValue.flatMap { try? SessionDescription.parse($0) })
    }

    /// Edge consumers per producer and edge node: the producer is piped to an edge while any of its
    /// members there consumes it.
    private var edgeConsumers: [String: [String: Int]] = [:]

    /// One fewer consumer of `producerId` on `edge`; the last one unpipes it.
    private func releaseOnEdge(_ producerId: String, _ edge: EdgeMediaLink) {
        guard let count = edgeConsumers[producerId]?[edge.nodeId] else { return }
        if count > 1 {
            edgeConsumers[producerId]?[edge.nodeId] = count - 1
            return
        }
        edgeConsumers[producerId]?[edge.nodeId] = nil
        if edgeConsumers[producerId]?.isEmpty == true { edgeConsumers[producerId] = nil }
        guard let media = server.media() else { return }
        let pipeID = edge.pipeID
        _ = try? media.callOnLoop("unpipe") { try $0.unpipeProducerOnLoop(pipeID: pipeID, producerID: producerId) }
    }

    /// Records the consumers the SFU created (or all of them, without media) and announces them; a
    /// failure gives the subscriber 4050 `CREATE_CONSUMER_FAILED`: returned for an explicit `consume`
    /// to refuse, else sent as an `error` notification. Returns the last failure.
    private func recordConsumers(
        of producer: RoomProducer, for targets: [ParticipantState], _ results: [Result<ConsumerInfo, RoomError>]?,
        explicit: Bool
    ) -> RoomError? {
        var lastFailure: RoomError?
        for (i, subscriber) in targets.enumerated() {
            var consumer = RoomConsumer(
                consumerId: makeId("co"), producerId: producer.producerId,
                producerParticipantId: producer.participantId, subscriberId: subscriber.id, kind: producer.kind)
            switch results?[i] {
            case .success(let info):
                consumer.consumerId = info.id
                consumer.mid = info.mid
                if let edge = subscriber.edge {
                    edgeConsumers[producer.producerId, default: [:]][edge.nodeId, default: 0] += 1
                }
            case .failure(let error):
                // No consumer then: announcing one would promise media that never comes.
                let failure = RoomError(
                    4050,
                    "cannot forward \(producer.kind.rawValue) of '\(producer.participantId)' to '\(subscriber.id)': \(error.message)"
                )
                if !explicit {
                    var event = failure.errorJSON.objectValue ?? [:]
                    event["participantId"] = .string(producer.participantId)
                    event["kind"] = .string(producer.kind.rawValue)
                    subscriber.session.notify(.error, .object(event))
                }
                lastFailure = failure
                continue
            case nil: break
            }
            subscriber.consumers[consumer.consumerId] = consumer
            hooks?.consumerCreated(roomId: id, consumer: consumer)
            subscriber.session.notify(.consumerCreated, consumer.json)
        }
        return lastFailure
    }

    /// Closes a consumer; `inSFU` false when the SFU closes it itself (its producer closes).
    private func closeConsumer(_ consumer: RoomConsumer, of subscriber: ParticipantState, inSFU: Bool = true) {
        guard subscriber.consumers.removeValue(forKey: consumer.consumerId) != nil else { return }
        if let edge = subscriber.edge, consumer.hasMedia {
            // Its edge closes it even when the producer closes here (the edge's mirror goes with
            // its last consumer).
            edge.send(
                .stopConsuming(producerId: consumer.producerId),
                key: RoomMedia.key(room: id, participant: subscriber.id))
            releaseOnEdge(consumer.producerId, edge)
        } else if inSFU, consumer.hasMedia, let media = server.media() {
            let key = RoomMedia.key(room: id, participant: subscriber.id)
            let producerId = consumer.producerId
            _ = try? media.callOnLoop("stopConsuming") {
                try $0.stopConsumingOnLoop(subscriber: key, producerID: producerId)
            }
        }
        hooks?.consumerClosed(roomId: id, consumer: consumer)
        subscriber.session.notify(.consumerClosed, consumer.json)
    }

    /// The peer and kind a `consume` or `stopConsuming` names, checked; nil with autoConsume on (the
    /// call then does nothing).
    private func consumeTarget(_ p: ParticipantState, _ data: JSONValue, start: Bool) throws(RoomError)
        -> (peer: ParticipantState, kind: TrackKind)?
    {
        let kindName = try data.requiredString("kind")
        guard let kind = TrackKind(wireName: kindName), kind == .mic || kind == .webcam else {
            throw .invalidParameter("kind must be 'mic' or 'webcam' (screen shares are always consumed)")
        }
        let code = start ? (kind == .mic ? 4080 : 4081) : (kind == .mic ? 4082 : 4083)
        let peerId = try data.requiredString("participantId")
        guard let peer = participants[peerId], peer.id != p.id else {
            throw RoomError(code, "no remote participant '\(peerId.prefix(128))'")
        }
        guard p.mode.consumes else {
            throw RoomError(3066, "\(start ? "consume" : "stopConsuming") is not supported in \(p.mode.rawValue)")
        }
        // With autoConsume on, everything is already received; the call does nothing.
        return p.autoConsume ? nil : (peer, kind)
    }

    private static func consumeResponse(_ data: JSONValue, autoConsume: Bool) -> JSONValue {
        ["participantId": data["participantId"] ?? nil, "kind": data["kind"] ?? nil, "autoConsume": .bool(autoConsume)]
    }

    /// `consume`: the one new consumer of a track with media is an ``SFUStep`` (batches share its call).
    private func consume(_ p: ParticipantState, _ data: JSONValue) throws(RoomError) -> Handled {
        guard let (peer, kind) = try consumeTarget(p, data, start: true) else {
            return .answered(Self.consumeResponse(data, autoConsume: true))
        }
        let response = Self.consumeResponse(data, autoConsume: false)
        p.wanted.insert(ParticipantState.wantKey(peer.id, kind))
        let producers = peer.producers.values.sorted { $0.producerId < $1.producerId }.filter {
            $0.kind == kind && !p.consumes($0)
        }
        if producers.count == 1, producers[0].hasMedia, server.media() != nil {
            guard let edge = p.edge else { return .needsSFU(consumeStep(p, of: producers[0], response: response)) }
            return .needsSFU(edgeConsumeStep(p, edge, of: producers[0], response: response))
        }
        for producer in producers {
            if let failure = createConsumer(for: p, of: producer, explicit: true) { throw failure }
        }
        return .answered(response)
    }

    /// `p`'s explicit consume of `producer` on the SFU's loop, with its next subscribe offer when no round
    /// is under way (sent after the response).
    private func consumeStep(_ p: ParticipantState, of producer: RoomProducer, response: JSONValue) -> SFUStep {
        let key = RoomMedia.key(room: id, participant: p.id)
        let producerId = producer.producerId
        let offering = !p.subscribe.outstanding && p.session.renegotiatesSubscriptions
        p.inSFU = true
        let box = MediaResultBox<([Result<ConsumerInfo, RoomError>], SessionDescription?)>()
        return SFUStep(
            onLoop: { sfu in
                box.result = .success(Self.consumeOnLoop(sfu, keys: [key], producerId: producerId, offering: offering))
            },
            then: { [self] failure throws(RoomError) in
                // After a failed call the box is not read: a call that timed out may still run.
                var (outcomes, offer): ([Result<ConsumerInfo, RoomError>], SessionDescription?) = ([], nil)
                if let failure { outcomes = [.failure(failure)] } else { (outcomes, offer) = try box.value("consume") }
                if let offer { offersAfterResponse.append((p, offer)) }
                if let failure = recordConsumers(of: producer, for: [p], outcomes, explicit: true) { throw failure }
                return response
            })
    }

    /// An edge member's explicit consume of `producer`: on this SFU's loop the producer is piped to the
    /// member's edge and the edge's call sent; `then` awaits its answer. A batch of members' consumes
    /// thus crosses to their edges together instead of one round trip after another on the room's
    /// queue (a live stream's edge audience consuming a new guest waited seconds for its turn).
    private func edgeConsumeStep(
        _ p: ParticipantState, _ edge: EdgeMediaLink, of producer: RoomProducer, response: JSONValue
    ) -> SFUStep {
        let key = RoomMedia.key(room: id, participant: p.id)
        let producerId = producer.producerId
        let offering = !p.subscribe.outstanding && p.session.renegotiatesSubscriptions
        let route = (node: edge.nodeId, address: edge.pipeAddress)
        let box = MediaResultBox<EdgePending>()
        return SFUStep(
            onLoop: { sfu in
                let piped = EdgeMediaLink.pipe(sfu, producerId: producerId, edges: [route])
                box.result = (piped[route.node] ?? .failure(RoomError(5000, "consume: no pipe to the member's edge")))
                    .map { description, originPipe in
                        edge.start(
                            .consume(
                                producerId: producerId, piped: description, originPipe: originPipe, offering: offering),
                            key: key)
                    }
                    .mapError { $0 as any Error }
            },
            then: { [self] failure throws(RoomError) in
                let outcome = Result { () throws(RoomError) -> ConsumerInfo in
                    if let failure { throw failure }
                    let (info, offer) = try edgeConsumer(
                        of: producer, for: p, box.value("consume").wait(until: .now() + 10))
                    if let offer { offersAfterResponse.append((p, offer)) }
                    return info
                }
                if let failure = recordConsumers(of: producer, for: [p], [outcome], explicit: true) { throw failure }
                return response
            })
    }

    /// A consume names a participant, not a seat: when it leaves, every subscriber's wish to receive it
    /// goes (a rejoin is a new participant, consumed anew, as the SDK and the agent do). Without this a
    /// live stream kept one entry per member per guest that ever came and went.
    private func forgetWants(of leaverId: String) {
        let keys = [ParticipantState.wantKey(leaverId, .mic), ParticipantState.wantKey(leaverId, .webcam)]
        for other in participantsInOrder where !other.wanted.isEmpty {
            for key in keys { other.wanted.remove(key) }
        }
    }

    private func stopConsuming(_ p: ParticipantState, _ data: JSONValue) throws(RoomError) -> JSONValue {
        guard let (peer, kind) = try consumeTarget(p, data, start: false) else {
            return Self.consumeResponse(data, autoConsume: true)
        }
        p.wanted.remove(ParticipantState.wantKey(peer.id, kind))
        for consumer in p.consumers.values where consumer.producerParticipantId == peer.id && consumer.kind == kind {
            closeConsumer(consumer, of: p)
        }
        return Self.consumeResponse(data, autoConsume: false)
    }

    /// The caller's consumers of `peerId`'s `kind`, or 3068 when it receives none.
    private func consumers(of p: ParticipantState, peerId: String, kind: TrackKind, action: String, unknownCode: Int)
        throws(RoomError) -> [RoomConsumer]
    {
        guard let peer = participants[peerId], peer.id != p.id else {
            throw RoomError(unknownCode, "no remote participant '\(peerId.prefix(128))'")
        }
        // docs/spec/room-api.md §7 refuses setQuality on an agent; setScreenShareQuality is not in that list.
        if peer.isAgent, action == "setQuality", kind == .webcam {
            throw RoomError(3068, "setQuality is not supported on an agent")
        }
        let found = p.consumers.values.filter { $0.producerParticipantId == peerId && $0.kind == kind }
        guard !found.isEmpty else {
            throw RoomError(3068, "\(action): this connection receives no \(kind.rawValue) from '\(peerId)'")
        }
        return found.sorted { $0.consumerId < $1.consumerId }
    }

    private func setQuality(_ p: ParticipantState, _ data: JSONValue) throws(RoomError) -> JSONValue {
        let peerId = try data.requiredString("participantId")
        let quality = try data.requiredString("quality")
        guard ["low", "medium", "high"].contains(quality) else {
            throw .invalidParameter("quality must be low, medium or high")
        }
        let kindName = try data.optionalString("kind") ?? TrackKind.webcam.rawValue
        guard let kind = TrackKind(wireName: kindName), kind == .webcam || kind == .screen else {
            throw .invalidParameter("kind must be 'webcam' or 'screen'")
        }
        var previous: String?
        for var consumer in try consumers(of: p, peerId: peerId, kind: kind, action: "setQuality", unknownCode: 4073) {
            previous = consumer.preferredQuality
            consumer.preferredQuality = quality
            p.consumers[consumer.consumerId] = consumer
            let layer: SFULayerQuality = quality == "low" ? .low : quality == "medium" ? .medium : .high
            if let edge = p.edge, consumer.hasMedia {
                _ = try edge.call(
                    .setQuality(producerId: consumer.producerId, quality: layer),
                    key: RoomMedia.key(room: id, participant: p.id))
            } else if consumer.hasMedia, let media = server.media() {
                let key = RoomMedia.key(room: id, participant: p.id)
                let producerId = consumer.producerId
                try media.callOnLoop("setQuality") {
                    try $0.setPreferredLayerOnLoop(subscriber: key, producerID: producerId, quality: layer)
                }
            }
            hooks?.consumerPreferencesChanged(roomId: id, consumer: consumer)
        }
        return [
            "participantId": .string(peerId), "kind": .string(kind.rawValue), "quality": .string(quality),
            "previousQuality": previous.map(JSONValue.string) ?? .null,
        ]
    }

    /// `setViewPort`: the choice is kept here, and applied to each webcam consumer with media on the
    /// SFU's loop, or on the member's edge, as an ``SFUStep`` (batches share its call; an edge
    /// member's calls go out at once and are awaited in `then`).
    private func setViewPort(_ p: ParticipantState, _ data: JSONValue) throws(RoomError) -> Handled {
        let peerId = try data.requiredString("participantId")
        guard let width = try data.optionalInt("width"), let height = try data.optionalInt("height"),
            (1...16384).contains(width), (1...16384).contains(height)
        else { throw .invalidParameter("width and height must be integers in 1...16384 (pixels)") }
        var changed: [RoomConsumer] = []
        for var consumer in try consumers(
            of: p, peerId: peerId, kind: .webcam, action: "setViewPort", unknownCode: 3068)
        {
            consumer.viewportWidth = width
            consumer.viewportHeight = height
            p.consumers[consumer.consumerId] = consumer
            changed.append(consumer)
        }
        let response: JSONValue = [
            "participantId": .string(peerId), "width": .number(Double(width)), "height": .number(Double(height)),
        ]
        let key = RoomMedia.key(room: id, participant: p.id)
        let producerIds = changed.filter(\.hasMedia).map(\.producerId)
        // The hooks hear of the consumers once the choice is applied.
        let applied = { [self] in
            for consumer in changed { hooks?.consumerPreferencesChanged(roomId: id, consumer: consumer) }
        }
        guard !producerIds.isEmpty else {
            applied()
            return .answered(response)
        }
        if let edge = p.edge {
            let calls = producerIds.map {
                edge.start(.setViewport(producerId: $0, width: width, height: height), key: key)
            }
            return .needsSFU(
                SFUStep(
                    onLoop: nil,
                    then: { _ throws(RoomError) in
                        let deadline = DispatchTime.now() + 10
                        for call in calls { _ = try call.wait(until: deadline) }
                        applied()
                        return response
                    }))
        }
        guard server.media() != nil else {
            applied()
            return .answered(response)
        }
        let box = MediaResultBox<Void>()
        return .needsSFU(
            SFUStep(
                onLoop: { sfu in
                    box.result = Result {
                        for producerId in producerIds {
                            try sfu.setViewportOnLoop(
                                subscriber: key, producerID: producerId, width: width, height: height)
                        }
                    }
                },
                then: { failure throws(RoomError) in
                    if let failure { throw failure }
                    try box.value("setViewPort")
                    applied()
                    return response
                }))
    }

    /// `getStats`: the SFU's counters for the caller's own producers and consumers, the server-side
    /// half of the client's getVideoStats/getAudioStats/getTransportStats.
    private func getStats(_ p: ParticipantState) throws(RoomError) -> JSONValue {
        let key = RoomMedia.key(room: id, participant: p.id)
        if let edge = p.edge {
            // Its connections are on its edge: the edge's figures, named with the room's kinds and ids.
            let answer = try edge.call(.stats, key: key)
            return Self.namedStats(answer, producers: p.producers, consumers: Array(p.consumers.values))
        }
        guard let media = server.media() else { return ["producers": [], "consumers": []] }
        let stats = try media.call("getStats") { await $0.stats() }
        return Self.namedStats(
            Self.statsJSON(stats, key: key), producers: p.producers, consumers: Array(p.consumers.values))
    }

    /// `getStats`' figures of member `key` from an SFU's stats (its producers, consumers and subscribe
    /// transport); kinds and peers are the SFU's until ``namedStats(_:producers:consumers:)``.
    static func statsJSON(_ stats: SFUStats, key: String) -> JSONValue {
        var producers: [JSONValue] = []
        for s in stats.producers where s.participantID == key {
            producers.append([
                "producerId": .string(s.id), "kind": .string(s.kind.rawValue),
                "packetsReceived": .number(Double(s.packetsReceived)),
                "bytesReceived": .number(Double(s.bytesReceived)),
                "retransmissionsReceived": .number(Double(s.repairsReceived)),
                "nacksSent": .number(Double(s.nacksSent)), "plisSent": .number(Double(s.plisSent)),
                "layers": .array(s.layers.map { .string($0.rid ?? "") }),
            ])
        }
        var consumers: [JSONValue] = []
        for s in stats.consumers where s.subscriberID == key {
            consumers.append([
                "consumerId": .string(s.id), "producerId": .string(s.producerID), "participantId": .null,
                "kind": .null, "packetsSent": .number(Double(s.packetsSent)), "bytesSent": .number(Double(s.bytesSent)),
                "nacksReceived": .number(Double(s.nacksReceived)),
                "retransmissions": .number(Double(s.retransmissions)),
                "plisReceived": .number(Double(s.plisReceived)), "packetsDropped": .number(Double(s.packetsDropped)),
                "layerSwitches": .number(Double(s.layerSwitches)),
                "currentLayer": s.currentRID.map(JSONValue.string) ?? .null,
                "targetLayer": s.targetRID.map(JSONValue.string) ?? .null,
                "allocatedLayer": s.allocatedRID.map(JSONValue.string) ?? .null, "paused": .bool(s.paused),
                "currentSpatialLayer": s.currentSpatialLayer.map { .number(Double($0)) } ?? .null,
                "currentTemporalLayer": s.currentTemporalLayer.map { .number(Double($0)) } ?? .null,
                "targetSpatialLayer": s.targetSpatialLayer.map { .number(Double($0)) } ?? .null,
                "targetTemporalLayer": s.targetTemporalLayer.map { .number(Double($0)) } ?? .null,
            ])
        }
        var result: [String: JSONValue] = ["producers": .array(producers), "consumers": .array(consumers)]
        if let t = stats.transports.first(where: { $0.participantID == key }) {
            result["transport"] = [
                "estimate": t.estimate.map { .number(Double($0)) } ?? .null, "estimateBinds": .bool(t.estimateBinds),
                "allocatedBitrate": .number(Double(t.allocatedBitrate)),
                "probeBitrate": .number(Double(t.probeBitrate)),
                "pausedConsumers": .number(Double(t.pausedConsumers)),
                "layerRaises": .number(Double(t.raises)), "layerDecreases": .number(Double(t.decreases)),
                "probes": .number(Double(t.probes)), "failedProbes": .number(Double(t.failedProbes)),
                "overloadDecreases": .number(Double(t.overloadDecreases)),
            ]
        }
        return .object(result)
    }

    /// ``statsJSON(_:key:)`` with the room's names: each producer's track kind, each consumer's peer
    /// and kind (an edge's figures arrive without them).
    static func namedStats(_ raw: JSONValue, producers: [String: RoomProducer], consumers: [RoomConsumer]) -> JSONValue
    {
        var result = raw.objectValue ?? [:]
        let named: [JSONValue] = (raw["producers"]?.arrayValue ?? []).map { item in
            guard var o = item.objectValue, let producerId = o["producerId"]?.stringValue else { return item }
            if let kind = producers[producerId]?.kind.rawValue { o["kind"] = .string(kind) }
            return .object(o)
        }
        let namedConsumers: [JSONValue] = (raw["consumers"]?.arrayValue ?? []).map { item in
            guard var o = item.objectValue, let producerId = o["producerId"]?.stringValue else { return item }
            let roomConsumer = consumers.first { $0.producerId == producerId }
            o["participantId"] = roomConsumer.map { .string($0.producerParticipantId) } ?? .null
            o["kind"] = roomConsumer.map { .string($0.kind.rawValue) } ?? .null
            return .object(o)
        }
        result["producers"] = .array(named)
        result["consumers"] = .array(namedConsumers)
        return .object(result)
    }

    // MARK: Media negotiation (SFU)

    /// `produce` carrying an SDP offer: the SFU answers and every new m-line becomes a producer.
    ///
    /// `{"kind": "webcam", "sdp": "…"}` publishes one track; `{"tracks": [{"kind": "mic"}, {"kind":
    /// "webcam"}], "sdp": "…"}` several, labelled in the order of the offer's new m-lines.
    private func producePublishing(_ p: ParticipantState, _ data: JSONValue) throws(RoomError) -> JSONValue {
        var kinds: [TrackKind] = []
        if let tracks = data["tracks"], !tracks.isNull {
            guard let list = tracks.arrayValue, !list.isEmpty, list.count <= 8 else {
                throw .invalidParameter("tracks must be an array of 1-8 {kind} objects")
            }
            for item in list {
                let name = try item.requiredString("kind")
                guard let kind = TrackKind(wireName: name) else {
                    throw .invalidParameter("unknown kind '\(name.prefix(40))'")
                }
                kinds.append(kind)
            }
        } else {
            let name = try data.requiredString("kind")
            guard let kind = TrackKind(wireName: name) else {
                throw .invalidParameter("unknown kind '\(name.prefix(40))'")
            }
            kinds = [kind]
        }
        guard p.mode == .sendAndRecv else { throw RoomError(3066, "produce is not supported in \(p.mode.rawValue)") }
        for (i, kind) in kinds.enumerated() {
            let failure: Int = kind == .mic ? 3058 : kind == .webcam ? 3049 : 3061
            guard !p.producers.values.contains(where: { $0.kind == kind }), !kinds[..<i].contains(kind) else {
                throw RoomError(failure, "already producing \(kind.rawValue); close that producer first")
            }
            if kind == .screen, let presenterId, presenterId != p.id {
                throw RoomError(3061, "participant '\(presenterId)' is already sharing a screen")
            }
        }
        let sdpText = try data.requiredString("sdp", maxLength: SessionDescription.maximumInputSize)
        let offer: SessionDescription
        do { offer = try SessionDescription.parse(sdpText) } catch {
            throw .invalidParameter("sdp is not a valid offer: \(error)", cause: error)
        }
        let media = try server.requireMedia()
        let key = RoomMedia.key(room: id, participant: p.id)
        let sources: [SFUMediaSource] = kinds.map {
            switch $0 {
            case .mic, .screenAudio: return .microphone
            case .webcam: return .webcam
            case .screen: return .screen
            }
        }
        // An audio or video m-line must offer a codec the SFU forwards (Opus, VP8, H.264).
        for section in offer.media where !section.isRejected && section.kind != nil {
            guard section.codecs.contains(where: { $0.usableCodec != nil }) else {
                let offered = section.codecs.map(\.name).joined(separator: ", ")
                throw RoomError(4051, "no supported codec in the offer's \(section.type) m-line (offered: \(offered))")
            }
        }
        if let edge = p.edge {
            return try produceOnEdge(p, edge, kinds: kinds, sources: sources, sdp: sdpText, data: data, media: media)
        }
        p.inSFU = true
        let (answer, infos) = try media.call("produce") {
            try await $0.publish(participantID: key, offer: offer, sources: sources)
        }
        // Every new m-line must be one of the announced tracks, of the right media kind.
        let mismatch =
            infos.count != kinds.count
            || zip(infos, kinds).contains { info, kind in
                info.kind != (kind == .mic || kind == .screenAudio ? MediaKind.audio : MediaKind.video)
            }
        if mismatch {
            for info in infos {
                let producerId = info.id
                _ = try? media.call("closeProducer") { try await $0.closeProducer(producerId) }
            }
            _ = try? media.call("closePublishConnection") { await $0.closePublishConnectionIfUnused(key) }
            throw .invalidParameter(
                "the offer's new m-lines (\(infos.map(\.kind.rawValue))) do not match tracks \(kinds.map(\.rawValue))")
        }
        var appData = data.objectValue ?? [:]
        for field in ["kind", "paused", "sdp", "tracks"] { appData[field] = nil }
        let paused = try data.optionalBool("paused") ?? false
        return announceProducers(
            zip(infos, kinds).map { (id: $0.id, mid: $0.mid, kind: $1) }, of: p, paused: paused, appData: appData,
            answer: answer.serialize(), media: media)
    }

    /// Adds a member's new tracks (`produce`, here or on its edge) to the room and answers with them:
    /// each mic joins the room's audio-level group, and the response carries the SDP answer.
    private func announceProducers(
        _ tracks: [(id: String, mid: String?, kind: TrackKind)], of p: ParticipantState, paused: Bool,
        appData: [String: JSONValue], answer: String, media: RoomMedia
    ) -> JSONValue {
        var created: [RoomProducer] = []
        for track in tracks {
            var producer = RoomProducer(
                producerId: track.id, participantId: p.id, kind: track.kind, paused: paused, appData: .object(appData))
            producer.mid = track.mid
            created.append(producer)
            add(producer, of: p)
            if track.kind == .mic {
                // The SFU samples this mic with the room's others and pushes changes (`speakerChanged`).
                let (producerId, roomId, label) = (track.id, id, p.id)
                _ = try? media.callOnLoop("observeAudioLevel") {
                    try $0.observeAudioLevelOnLoop(producerID: producerId, group: roomId, label: label)
                }
            }
        }
        var response = created.count == 1 ? (created[0].json.objectValue ?? [:]) : [:]
        response["sdp"] = .string(answer)
        response["producers"] = .array(created.map(\.json))
        return .object(response)
    }

    /// `produce` of an edge member on stage: its publish connection is made on its edge, whose SFU
    /// pipes each new track here; this node mirrors them and the room announces the mirrors, which
    /// reach the other edges like any stage track (docs/cluster.md, "On stage from an edge").
    private func produceOnEdge(
        _ p: ParticipantState, _ edge: EdgeMediaLink, kinds: [TrackKind], sources: [SFUMediaSource], sdp: String,
        data: JSONValue, media: RoomMedia
    ) throws(RoomError) -> JSONValue {
        let key = RoomMedia.key(room: id, participant: p.id)
        let (node, address, pipeID) = (edge.nodeId, edge.pipeAddress, edge.pipeID)
        let originPipe = try media.callOnLoop("openPipe") {
            try EdgeMediaLink.openPipe($0, node: node, address: address)
        }
        let result = try edge.call(.publish(sdp: sdp, sources: sources, originPipe: originPipe), key: key)
        var tracks: [(producerId: String, kind: MediaKind, mid: String, piped: SFUPipedProducer)] = []
        for item in result["producers"]?.arrayValue ?? [] {
            guard let producerId = item["producerId"]?.stringValue, let kind = item["kind"]?.stringValue,
                let mediaKind = MediaKind(rawValue: kind), let mid = item["mid"]?.stringValue,
                let piped = item["piped"],
                let description = try? SFUPipedProducer(edgeJSON: piped), description.producerID == producerId
            else { continue }
            tracks.append((producerId, mediaKind, mid, description))
        }
        let mismatch =
            tracks.count != kinds.count
            || zip(tracks, kinds).contains { track, kind in
                track.kind != (kind == .mic || kind == .screenAudio ? MediaKind.audio : MediaKind.video)
            }
        func undo() {
            for track in tracks { edge.send(.closeProducer(producerId: track.producerId), key: key) }
            edge.send(.closePublishConnection, key: key)
        }
        guard !mismatch, let answer = result["sdp"]?.stringValue else {
            undo()
            throw .invalidParameter(
                "the offer's new m-lines (\(tracks.map(\.kind.rawValue))) do not match tracks \(kinds.map(\.rawValue))")
        }
        let descriptions = tracks.map(\.piped)
        do {
            try media.callOnLoop("mirror") { sfu in
                for description in descriptions { try sfu.ensurePipedProducerOnLoop(pipeID: pipeID, description) }
            }
        } catch {
            undo()
            throw error
        }
        var appData = data.objectValue ?? [:]
        for field in ["kind", "paused", "sdp", "tracks"] { appData[field] = nil }
        let paused = try data.optionalBool("paused") ?? false
        return announceProducers(
            zip(tracks, kinds).map { (id: $0.producerId, mid: $0.mid, kind: $1) }, of: p, paused: paused,
            appData: appData, answer: answer, media: media)
    }

    /// The SFU forwards another simulcast layer to `subscriberId`: it is told what it now receives.
    func consumerLayerChanged(subscriberId: String, producerId: String, _ quality: SFULayerQuality) {
        guard !closed, let p = participants[subscriberId],
            let consumer = p.consumers.values.first(where: { $0.producerId == producerId })
        else { return }
        let name = ["low", "medium", "high"][quality.rawValue]
        p.session.notify(
            .consumerLayerChanged,
            [
                "consumerId": .string(consumer.consumerId), "participantId": .string(consumer.producerParticipantId),
                "kind": .string(consumer.kind.rawValue), "quality": .string(name),
            ])
    }

    /// The subscriber's answer refused the codec of a consumer's producer: the consumer closes, and
    /// its `consumerClosed` says why (`reason: "codecNotAccepted"`, `codec`), rather than an m-line
    /// that stays silent.
    func consumerRefused(subscriberId: String, producerId: String, codec: MediaCodec) {
        guard !closed, let p = participants[subscriberId],
            let consumer = p.consumers.values.first(where: { $0.producerId == producerId })
        else { return }
        p.consumers.removeValue(forKey: consumer.consumerId)
        if let edge = p.edge, consumer.hasMedia {
            edge.send(.stopConsuming(producerId: producerId), key: RoomMedia.key(room: id, participant: subscriberId))
            releaseOnEdge(producerId, edge)
        } else if consumer.hasMedia, let media = server.media() {
            let key = RoomMedia.key(room: id, participant: subscriberId)
            _ = try? media.callOnLoop("stopConsuming") {
                try $0.stopConsumingOnLoop(subscriber: key, producerID: producerId)
            }
        }
        hooks?.consumerClosed(roomId: id, consumer: consumer)
        guard case .object(var o) = consumer.json else { return }
        o["reason"] = .string("codecNotAccepted")
        o["codec"] = .string(codec.rawValue)
        p.session.notify(.consumerClosed, .object(o))
    }

    /// The producers with media of `participantId`, for a WHEP viewer; nil when no such participant.
    func mediaProducers(of participantId: String) -> [RoomProducer]? {
        guard !closed, let p = participants[participantId] else { return nil }
        return p.producers.values.filter(\.hasMedia).sorted { $0.producerId < $1.producerId }
    }

    /// These participants' subscribe connections need new offers (their consumers changed).
    private func subscribeRenegotiationsNeeded(_ participantIds: [String]) {
        guard !closed else { return }
        var changed: [ParticipantState] = []
        for participantId in participantIds {
            // A WHEP viewer negotiated once, up front; it never gets a re-offer.
            guard let p = participants[participantId], p.session.renegotiatesSubscriptions else { continue }
            p.subscribe.wanted = true
            changed.append(p)
        }
        sendSubscriberOffers(changed)
    }

    /// Sends `subscriberOffer` to each of `members` whose consumer set changed and that has no offer
    /// waiting for its answer; one SFU hop makes all the offers.
    private func sendSubscriberOffers(_ members: [ParticipantState]) {
        let all = members.filter { $0.subscribe.wanted && !$0.subscribe.outstanding }
        guard !all.isEmpty, let media = server.media() else { return }
        for p in all { p.subscribe.wanted = false }
        // Edge members' offers come from their edges: every call sent at once, then awaited.
        let onEdges = all.filter { $0.edge != nil }
        let calls = onEdges.map { $0.edge!.start(.offer, key: RoomMedia.key(room: id, participant: $0.id)) }
        let deadline = DispatchTime.now() + 10
        for (p, call) in zip(onEdges, calls) {
            guard let sdp = (try? call.wait(until: deadline))?["sdp"]?.stringValue,
                let offer = try? SessionDescription.parse(sdp)
            else { continue }
            offerMade(p, offer)
        }
        let ready = all.filter { $0.edge == nil }
        guard !ready.isEmpty else { return }
        let keys = ready.map { RoomMedia.key(room: id, participant: $0.id) }
        let offers =
            (try? media.callOnLoop("subscriberOffer") { sfu in
                keys.map { try? sfu.subscriberOfferOnLoop(participantID: $0) }
            }) ?? []
        for (p, offer) in zip(ready, offers) {
            guard let offer else { continue }  // nothing to offer (every consumer gone before the first offer)
            offerMade(p, offer)
        }
    }

    /// Sends `p` the subscribe offer the SFU just made. It covers every consumer change until then, so
    /// a renegotiation still waiting for `p` would make an empty round: it goes.
    private func offerMade(_ p: ParticipantState, _ offer: SessionDescription) {
        p.subscribe.revision += 1
        p.subscribe.outstanding = true
        p.subscribe.wanted = false
        lanes.cancelRenegotiation(p.id)
        p.session.notify(
            .subscriberOffer, ["sdp": .string(offer.serialize()), "revision": .number(Double(p.subscribe.revision))])
    }

    /// `subscriberAnswer`: checked here, applied on the SFU's loop (batches share the call), whose
    /// changes made while the offer was out go into the next offer in the same call. The response goes
    /// before that offer.
    private func subscriberAnswer(_ p: ParticipantState, _ data: JSONValue, requestId: JSONValue) throws(RoomError)
        -> SFUStep
    {
        let sdpText = try data.requiredString("sdp", maxLength: SessionDescription.maximumInputSize)
        guard let revision = try data.optionalInt("revision") else {
            throw .invalidParameter("missing field 'revision'")
        }
        guard p.subscribe.outstanding, revision == p.subscribe.revision else {
            throw RoomError(
                3054,
                "no subscriberOffer revision \(revision) is waiting for an answer (latest: \(p.subscribe.revision))")
        }
        let answer: SessionDescription
        do { answer = try SessionDescription.parse(sdpText) } catch {
            throw .invalidParameter("sdp is not a valid answer: \(error)", cause: error)
        }
        let key = RoomMedia.key(room: id, participant: p.id)
        if let edge = p.edge {
            // Applied on its edge. The call goes out now and is awaited in `then`: the answers of a
            // batch cross to their edges together, not one round trip after another on the room's
            // queue (a live stream's edge audience answered one by one, seconds per invite).
            let call = edge.start(.answer(sdp: sdpText), key: key)
            return SFUStep(
                onLoop: nil,
                then: { [self] _ throws(RoomError) in
                    let answer = try call.wait(until: .now() + 10)
                    let next = answer["next"]?.stringValue.flatMap { try? SessionDescription.parse($0) }
                    p.subscribe.outstanding = false
                    p.session.respond(requestId, ["revision": .number(Double(revision))])
                    if let next { offerMade(p, next) } else { sendSubscriberOffers([p]) }
                    return nil
                })
        }
        _ = try server.requireMedia()
        let box = MediaResultBox<SessionDescription?>()
        return SFUStep(
            onLoop: { sfu in
                box.result = Result {
                    guard try sfu.subscriberAnswerOnLoop(participantID: key, answer: answer) else { return nil }
                    return try? sfu.subscriberOfferOnLoop(participantID: key)
                }
            },
            then: { [self] failure throws(RoomError) in
                if let failure { throw failure }
                let next = try box.value("subscriberAnswer")
                p.subscribe.outstanding = false
                p.session.respond(requestId, ["revision": .number(Double(revision))])
                if let next { offerMade(p, next) } else { sendSubscriberOffers([p]) }
                return nil
            })
    }

    /// Closes both SFU connections of `p` (its producers and consumers are already closed here).
    private func closeInSFU(_ p: ParticipantState) {
        p.edge?.send(.close, key: RoomMedia.key(room: id, participant: p.id))
        guard p.inSFU, let media = server.media() else { return }
        p.inSFU = false
        let key = RoomMedia.key(room: id, participant: p.id)
        _ = try? media.call("closeParticipant", timeout: 3) { await $0.closeParticipant(key) }
    }

    // MARK: Active speaker

    /// The SFU's audio-level observer picked a new speaker for this room (nil: silence); on the room's
    /// queue. A label that is no longer a participant (it left meanwhile) is not announced.
    func speakerChanged(_ participantId: String?) {
        guard !closed else { return }
        if let participantId, participants[participantId] == nil { return }
        broadcast(.speakerChanged, ["participantId": participantId.map(JSONValue.string) ?? .null])
    }

    // MARK: PubSub

    private func validTopic(_ data: JSONValue, code: Int) throws(RoomError) -> String {
        guard let topic = data["topic"]?.stringValue else { throw RoomError(code, "missing string field 'topic'") }
        guard !topic.isEmpty, topic.utf8.count <= 256 else { throw RoomError(code, "topic must be 1-256 bytes") }
        return topic
    }

    /// A persisted message is answered once the cluster's store has it (see ``pin``).
    private func publish(_ p: ParticipantState, _ data: JSONValue, requestId: JSONValue) throws(RoomError)
        -> JSONValue?
    {
        let topic = try validTopic(data, code: 4087)
        guard let message = data["message"]?.stringValue else {
            throw RoomError(4087, "missing string field 'message'")
        }
        // A WebSocket request carries it raw (`ClientSession`); other transports may hand a parsed one.
        let payload = data["payload"].flatMap { $0.isNull ? nil : RawJSON($0) }
        if let payload, !payload.isObject { throw RoomError(4087, "payload must be a JSON object") }
        let size = message.utf8.count + (payload?.byteCount ?? 0)
        guard size <= configuration.maxPubSubMessageBytes else {
            throw RoomError(
                4087, "message of \(size) bytes exceeds the limit of \(configuration.maxPubSubMessageBytes)")
        }
        let options = data["options"] ?? .object([:])
        let persistValue = data["persist"] ?? options["persist"]
        let sendOnlyValue = data["sendOnly"] ?? options["sendOnly"]
        var persist = false
        if let persistValue, !persistValue.isNull {
            guard let b = persistValue.boolValue else { throw RoomError(4087, "persist must be a boolean") }
            persist = b
        }
        var sendOnly: [String] = []
        if let sendOnlyValue, !sendOnlyValue.isNull {
            guard let list = sendOnlyValue.arrayValue else {
                throw RoomError(4087, "sendOnly must be an array of participant ids")
            }
            for item in list {
                guard let s = item.stringValue else {
                    throw RoomError(4087, "sendOnly must be an array of participant ids")
                }
                sendOnly.append(s)
            }
        }
        guard sendOnly.count <= configuration.maxParticipantsPerRoom else {
            throw RoomError(4087, "sendOnly lists more ids than a room can hold")
        }
        var stored = StoredPubSubMessage(
            message: PubSubMessage(
                id: makeId("m"), topic: topic, message: message, senderId: p.id, senderName: p.name,
                timestamp: Int(nowMilliseconds()), rawPayload: payload, sendOnly: sendOnly,
                senderIsModerator: p.permissions.contains("allow_mod")),
            sequence: server.nextPubSubSequence())
        if !sendOnly.isEmpty {
            // Who the listed ids (and the sender) are now: a later holder of an id gets the replay only
            // when it is this same join, or its token is bound to the id (StoredPubSubMessage.isVisible).
            stored.joins[p.id] = p.joinSerial
            for id in sendOnly { if let present = participants[id] { stored.joins[id] = present.joinSerial } }
        }
        stored.measure()
        if persist {
            let server = self.server
            try history.store(
                stored, configuration: configuration, reserve: { server.reserveHistoryBytes($0) },
                release: { server.releaseHistoryBytes($0) })
        }
        server.counters.add(pubsub: 1)
        flushParticipantEvents()  // the sender's join goes first
        let delivery = PreparedTextMessage(
            SignalEnvelope.notification(method: RoomNotification.pubsubMessage.rawValue, data: stored.json).text)
        for other in participantsInOrder where other.topics.contains(topic) && stored.isVisible(to: other) {
            // Behind the member's history replay, if one is under way.
            if let replay = other.replay { replay.deliver(delivery) } else { other.session.send(delivery) }
        }
        let answer: JSONValue = [
            "id": .string(stored.message.id), "topic": .string(topic),
            "timestamp": .number(Double(stored.message.timestamp)),
        ]
        guard persist, let directory = server.directory else { return answer }
        let session = p.session
        directory.saveMessage(roomId: id, message: stored.json, topicLimit: configuration.pubsubHistoryLimit) {
            [self] in enqueue { session.respond(requestId, answer) }
        }
        return nil
    }

    private func subscribe(_ p: ParticipantState, _ data: JSONValue, id requestId: JSONValue) throws(RoomError)
        -> JSONValue?
    {
        let topic = try validTopic(data, code: 4088)
        if !p.topics.contains(topic) {
            guard p.topics.count < configuration.maxTopicsPerParticipant else {
                throw RoomError(4088, "subscribed to the limit of \(configuration.maxTopicsPerParticipant) topics")
            }
        }
        let visible = history.messages(topic).filter { $0.isVisible(to: p) }
        // The replay is encoded and sent on the member's own queue at the pace it reads (PubSubReplay):
        // the room's queue only takes the snapshot. What may wait behind a replay under way is bounded.
        let replayLimit = 2 * configuration.maxPubSubHistoryBytesPerRoom
        let replay =
            visible.isEmpty
            ? nil
            : p.replay
                ?? PubSubReplay(
                    session: p.session, batchSize: configuration.pubsubHistoryBatchSize,
                    batchBytes: configuration.maxQueuedOutputBytes / 2)
        if let replay {
            guard replay.accepts(visible.reduce(0) { $0 + $1.storedBytes }, limit: replayLimit) else {
                throw RoomError(4088, "the history replays of earlier subscribes are still being sent; try again later")
            }
            p.replay = replay
        }
        p.topics.insert(topic)
        p.session.respond(requestId, ["topic": .string(topic), "historyCount": .number(Double(visible.count))])
        _ = replay?.enqueue(topic: topic, messages: visible, limit: replayLimit)
        return nil
    }

    // MARK: Moderation

    private func target(_ data: JSONValue, code: Int, caller: ParticipantState, needsMod: Bool) throws(RoomError)
        -> ParticipantState
    {
        if needsMod, !caller.permissions.contains("allow_mod") {
            throw RoomError(code, "acting on another participant needs the allow_mod permission")
        }
        let peerId = try data.requiredString("participantId")
        guard let peer = participants[peerId] else {
            throw RoomError(code, "no participant '\(peerId.prefix(128))' in the room")
        }
        return peer
    }

    /// `requestMic`/`requestCam` are answered when the target turns the device on (nil here).
    private func moderateMedia(_ p: ParticipantState, _ method: RoomMethod, _ data: JSONValue, id requestId: JSONValue)
        throws(RoomError) -> JSONValue?
    {
        let (code, kind, ask): (Int, TrackKind, Bool) =
            switch method {
            case .requestMic: (4067, .mic, true)
            case .disableMic: (4068, .mic, false)
            case .requestCam: (4069, .webcam, true)
            default: (4070, .webcam, false)
            }
        let peer = try target(data, code: code, caller: p, needsMod: true)
        guard peer.id != p.id else {
            throw .invalidParameter("\(method) acts on remote participants; use setMediaStatus for your own")
        }
        guard !peer.isAgent else { throw RoomError(3068, "\(method) is not supported on an agent") }
        let by: JSONValue = ["participantId": .string(p.id), "name": .string(p.name)]
        if ask {
            guard peer.mode == .sendAndRecv else {
                throw RoomError(3066, "'\(peer.id)' is in \(peer.mode.rawValue) and cannot publish")
            }
            peer.session.notify(kind == .mic ? .micRequested : .webcamRequested, by)
            // Already on: nothing to wait for.
            if kind == .mic ? peer.micEnabled : peer.camEnabled { return ["participantId": .string(peer.id)] }
            peer.pendingAsks.append((kind, p.session, requestId))
            return nil
        } else {
            peer.session.notify(kind == .mic ? .micDisabled : .webcamDisabled, by)
            for producer in peer.producers.values where producer.kind == kind { closeProducer(producer, of: peer) }
            setStatus(peer, kind, false)
        }
        return ["participantId": .string(peer.id)]
    }

    private func removeParticipant(_ p: ParticipantState, _ data: JSONValue) throws(RoomError) -> JSONValue {
        let peer = try target(data, code: 4066, caller: p, needsMod: true)
        guard peer.id != p.id else { throw .invalidParameter("use leave to leave the room") }
        peer.session.notify(.roomLeft, .object(leaveJSON(.REMOVE_PEER)))
        remove(peer, reason: .REMOVE_PEER)
        peer.session.close(code: WebSocketCloseCode.normal, reason: RoomLeaveCode.REMOVE_PEER.name)
        return ["participantId": .string(peer.id)]
    }

    /// The admin API's remove (`POST /v1/rooms/ROOM/participants/ID/remove`), as a moderator's
    /// `remove`: reason 1002 to the participant and to everyone else. False when not in the room.
    func adminRemove(_ participantId: String) -> Bool {
        guard let peer = participants[participantId] else { return false }
        peer.session.notify(.roomLeft, .object(leaveJSON(.REMOVE_PEER)))
        remove(peer, reason: .REMOVE_PEER)
        peer.session.close(code: WebSocketCloseCode.normal, reason: RoomLeaveCode.REMOVE_PEER.name)
        return true
    }

    /// Answers once the pins are stored where the room's next holder finds them (cluster mode), so
    /// that a pin the caller saw acknowledged survives this node being killed.
    private func pin(_ p: ParticipantState, _ data: JSONValue, pin: Bool, id: JSONValue) throws(RoomError)
        -> JSONValue?
    {
        let peer = try target(data, code: pin ? 4071 : 4072, caller: p, needsMod: false)
        let typeName = try data.optionalString("pinType") ?? "SHARE_AND_CAM"
        let (cam, share): (Bool, Bool)
        switch typeName {
        case "SHARE_AND_CAM": (cam, share) = (true, true)
        case "CAM": (cam, share) = (true, false)
        case "SHARE": (cam, share) = (false, true)
        default: throw .invalidParameter("pinType must be SHARE_AND_CAM, CAM or SHARE")
        }
        var state = pins[peer.id] ?? (false, false)
        if pin {
            state = (state.cam || cam, state.share || share)
        } else {
            state = (state.cam && !cam, state.share && !share)
        }
        pins[peer.id] = (state.cam || state.share) ? state : nil
        pinnedToMedia(peer.id)
        let answer = pinJSON(peer.id)
        let session = p.session
        var event = answer.objectValue ?? [:]
        event["pinnedBy"] = .string(p.id)
        broadcast(.pinStateChanged, .object(event))
        pinsChanged { session.respond(id, answer) }
        return nil
    }

    /// Tells the SFU's stream allocator whether `participantId` is pinned (its webcam then comes
    /// first, after screen shares, in every subscriber's share of the bandwidth). Not waited for.
    private func pinnedToMedia(_ participantId: String) {
        guard let media = server.media() else { return }
        let key = RoomMedia.key(room: id, participant: participantId)
        let pinned = pins[participantId] != nil
        media.fire { sfu in await sfu.loop.submit { sfu.setPinnedOnLoop(participantID: key, pinned: pinned) } }
        // Each edge's allocator too, through one of its members.
        var told: Set<String> = []
        for p in participantsInOrder {
            guard let edge = p.edge, told.insert(edge.nodeId).inserted else { continue }
            edge.send(.pin(participantKey: key, pinned: pinned), key: RoomMedia.key(room: id, participant: p.id))
        }
    }

    private func pinJSON(_ participantId: String) -> JSONValue {
        let state = pins[participantId] ?? (false, false)
        return [
            "participantId": .string(participantId),
            "pinState": ["cam": .bool(state.cam), "share": .bool(state.share)],
        ]
    }

    private func respondEntry(_ p: ParticipantState, _ data: JSONValue) throws(RoomError) -> JSONValue {
        guard p.permissions.contains("allow_join") else {
            throw RoomError(4024, "answering entry requests needs allow_join")
        }
        let peerId = try data.requiredString("participantId")
        let decision = try data.requiredString("decision")
        guard decision == "allowed" || decision == "denied" else {
            throw .invalidParameter("decision must be 'allowed' or 'denied'")
        }
        guard let entry = lobby.removeValue(forKey: peerId) else {
            throw .invalidParameter("no entry request from '\(peerId.prefix(128))'")
        }
        let event: JSONValue = [
            "participantId": .string(peerId), "decision": .string(decision), "decidedBy": .string(p.id),
        ]
        entry.session.notify(.entryResponded, event)
        for other in participantsInOrder where other.permissions.contains("allow_join") {
            other.session.notify(.entryResponded, event)
        }
        if decision == "allowed" {
            admit(session: entry.session, request: entry.request)
        } else {
            server.refuseJoin(session: entry.session, id: entry.request.id, error: RoomError(3047, "entry was denied"))
        }
        return event
    }
}

// MARK: Identity, lobby expiry, history release

extension Room {
    /// Replacing a participant (or lobby entry) needs a token bound to its id; a token without
    /// `participantId` may only take free ids (4005 otherwise).
    fileprivate func takeoverRefusal(_ request: JoinRequest) -> RoomError? {
        guard !request.idBoundByToken, isTaken(request.participantId) else { return nil }
        return RoomError(
            4005,
            "participant id '\(request.participantId)' is in use; replacing it needs a token bound to that id")
    }

    private func isTaken(_ participantId: String) -> Bool {
        participants[participantId] != nil || lobby[participantId] != nil
    }

    /// A lobby entry nobody answers within `lobbyTimeoutSeconds` fails with 3047; `allow_join`
    /// holders see `entryResponded {decision: "timeout"}`.
    fileprivate func expireLobbyEntry(_ participantId: String, session: any ParticipantSignaling) {
        queue.asyncAfter(deadline: .now() + configuration.lobbyTimeoutSeconds) { [self] in
            guard !closed, let entry = lobby[participantId], entry.session === session else { return }
            lobby[participantId] = nil
            let event: JSONValue = ["participantId": .string(participantId), "decision": "timeout"]
            for p in participantsInOrder where p.permissions.contains("allow_join") {
                p.session.notify(.entryResponded, event)
            }
            server.refuseJoin(
                session: session, id: entry.request.id,
                error: RoomError(
                    3047, "nobody answered the entry request within \(Int(configuration.lobbyTimeoutSeconds)) s"))
            closeIfEmpty()
        }
    }

    /// Returns the room's stored history bytes to the server-wide budget.
    fileprivate func dropAllHistory() {
        let server = self.server
        history.removeAll { server.releaseHistoryBytes($0) }
    }
}

private func leaveJSON(_ reason: RoomLeaveCode) -> [String: JSONValue] {
    ["reason": .number(Double(reason.rawValue)), "reasonName": .string(reason.name)]
}

extension RoomError {
    var errorJSON: JSONValue { ["code": .number(Double(code)), "name": .string(name), "message": .string(message)] }
}
