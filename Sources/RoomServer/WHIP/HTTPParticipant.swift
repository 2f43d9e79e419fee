import Dispatch
import Foundation
import RTC
import RTCWire
import RoomProtocol
import SFU
import Signaling

/// A room member whose signalling is HTTP, not a WebSocket: a WHIP publisher or a WHEP viewer.
///
/// It talks to its ``Room`` exactly as a WebSocket client does, through requests (`join`, `produce`,
/// `consume`, `leave`) handled by the room's own code, so nothing of the room is duplicated. Responses
/// come back through ``ParticipantSignaling``; notifications have no one to go to and are dropped.
/// Every session has an unguessable id, which is the last segment of its resource URL.
// Safe: its state is guarded by `lock`.
final class HTTPParticipant: ParticipantSignaling, @unchecked Sendable {
    enum Kind: String, Sendable {
        case whip, whep
    }

    let kind: Kind
    let sessionId: String
    let roomId: String
    /// The resource URL path (`Location`), e.g. `/whip/ROOM/SESSION`.
    let resourcePath: String
    /// An HTTP member negotiates once, in its POST.
    var renegotiatesSubscriptions: Bool { false }
    private let server: RoomServer
    private let lock = NSLock()
    private var room: Room?
    private var participantIdValue: String?
    private var closedFlag = false
    private var nextRequestId = 1
    private var waiting: [Int: CheckedContinuation<Result<JSONValue, RoomError>, Never>] = [:]
    /// The join's continuation: resumed by ``markJoined(participantId:)`` or by the refusal.
    private var joinWaiter: (id: Int, continuation: CheckedContinuation<Result<JSONValue, RoomError>, Never>)?
    /// Bumped on every ICE restart; the `ETag` of the session.
    private(set) var iceGeneration = 0

    init(kind: Kind, roomId: String, endpointPath: String, server: RoomServer) {
        self.kind = kind
        self.roomId = roomId
        self.server = server
        sessionId = makeId(kind.rawValue).replacingOccurrences(of: "-", with: "")
        resourcePath = endpointPath + "/" + sessionId
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    var participantId: String? { locked { participantIdValue } }
    var isClosed: Bool { locked { closedFlag } }
    var joinedRoom: Room? { locked { room } }
    /// The key of this participant in the SFU (nil before the join).
    var mediaKey: String? { participantId.map { RoomMedia.key(room: roomId, participant: $0) } }

    var eTag: String { locked { "\"\(sessionId)-\(iceGeneration)\"" } }

    // MARK: ICE state for PATCH

    private var remoteUfragValue: String?
    private var answerCandidates: [String] = []
    private var firstMidValue: String?

    /// Keeps what PATCH needs: the client's ICE ufrag and the server's candidate lines.
    func remember(offer: SessionDescription, answer: String) {
        let ufrag = offer.iceCredentials(forMediaAt: 0)?.ufrag
        var seen: Set<String> = []
        let candidates = answer.split(whereSeparator: \.isNewline).map(String.init).filter {
            $0.hasPrefix("a=candidate:") && seen.insert($0).inserted
        }
        locked {
            remoteUfragValue = ufrag
            answerCandidates = candidates
            firstMidValue = offer.media.first?.mid
        }
    }

    var remoteUfrag: String? { locked { remoteUfragValue } }
    var localCandidates: [String] { locked { answerCandidates } }
    var firstMid: String? { locked { firstMidValue } }

    /// An ICE restart took the client's new credentials: a new ETag.
    func restarted(remoteUfrag: String) {
        locked {
            remoteUfragValue = remoteUfrag
            iceGeneration += 1
        }
    }

    // MARK: Requests to the room

    /// Joins through the server's normal join path; the result is the refusal, if any.
    func join(_ request: JoinRequest) async -> Result<JSONValue, RoomError> {
        let id = locked { () -> Int in
            defer { nextRequestId += 1 }
            return nextRequestId
        }
        var joinRequest = request
        joinRequest.id = .number(Double(id))
        return await withCheckedContinuation { continuation in
            locked { joinWaiter = (id, continuation) }
            server.routeJoin(session: self, request: joinRequest)
        }
    }

    /// Sends one request to the room, as a WebSocket client would, and waits for its response.
    func request(_ method: RoomMethod, _ data: JSONValue) async -> Result<JSONValue, RoomError> {
        guard let room = joinedRoom, !isClosed else {
            return .failure(RoomError(3035, "'\(method.rawValue)': the session is not in the room"))
        }
        return await withCheckedContinuation { continuation in
            let id: Int = locked {
                defer { nextRequestId += 1 }
                waiting[nextRequestId] = continuation
                return nextRequestId
            }
            room.submitRequest(session: self, id: .number(Double(id)), method: method, data: data)
        }
    }

    /// Runs `body` on the room's queue (ordered with every request) and returns its result.
    func onRoomQueue<T: Sendable>(_ body: @escaping @Sendable (Room) -> T) async -> T? {
        guard let room = joinedRoom else { return nil }
        return await withCheckedContinuation { continuation in
            room.enqueue { continuation.resume(returning: body(room)) }
        }
    }

    // MARK: Reaping a session whose media connection is not connected

    /// Whether the media connection (publish for WHIP, subscribe for WHEP) is connected now.
    private var mediaConnected = false
    /// Whether the media connection is connected, as the SFU last reported it.
    var isMediaConnected: Bool { locked { mediaConnected } }
    /// Set by ``watchICE(timeout:)``: from then on, leaving `connected` arms the deadline.
    private var iceTimeout: Double?
    /// Identifies the armed deadline; bumped to disarm it (a fired deadline that is no longer
    /// current does nothing).
    private var iceDeadline = 0

    /// Starts the watch once the answer is out: a session that is not connected within `timeout`
    /// seconds, or not again within `timeout` of losing its connection, leaves the room (1001).
    func watchICE(timeout: Double) {
        let armed: Int? = locked {
            iceTimeout = timeout
            return mediaConnected ? nil : armICEDeadline()
        }
        if let armed { scheduleICEDeadline(armed, after: timeout) }
    }

    /// The SFU's report of this session's media connection (loop thread): connecting disarms the
    /// deadline, leaving `connected` arms one.
    func mediaStateChanged(_ state: PeerConnectionState) {
        let armed: (Int, Double)? = locked {
            let wasConnected = mediaConnected
            mediaConnected = state == .connected
            if mediaConnected {
                iceDeadline += 1
                return nil
            }
            guard wasConnected, let timeout = iceTimeout else { return nil }
            return (armICEDeadline(), timeout)
        }
        if let (deadline, timeout) = armed { scheduleICEDeadline(deadline, after: timeout) }
    }

    /// Under the lock: a new deadline identity (any earlier one is void).
    private func armICEDeadline() -> Int {
        iceDeadline += 1
        return iceDeadline
    }

    private func scheduleICEDeadline(_ deadline: Int, after seconds: Double) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak self] in
            guard let self, self.locked({ self.iceDeadline == deadline && !self.mediaConnected }) else { return }
            self.transportLost()
        }
    }

    /// Leaves the room (DELETE): the room sees reason 1101, as for a client's `leave`.
    func leave() async {
        guard participantId != nil, !isClosed else { return markClosed() }
        _ = await request(.leave, [:])
        markClosed()
    }

    /// The media transport died or never came up: the room sees it go like a dropped WebSocket (1001).
    func transportLost() {
        guard !isClosed else { return }
        markClosed()
        if let room = joinedRoom { room.enqueue { room.connectionClosed(self) } }
    }

    private func markClosed() {
        let pending: [CheckedContinuation<Result<JSONValue, RoomError>, Never>] = locked {
            closedFlag = true
            var all = Array(waiting.values)
            if let join = joinWaiter { all.append(join.continuation) }
            waiting = [:]
            joinWaiter = nil
            return all
        }
        for continuation in pending { continuation.resume(returning: .failure(RoomError(3047, "the session closed"))) }
        server.httpSessions.remove(self)
    }

    // MARK: ParticipantSignaling (any thread, mostly the room's queue)

    func assign(room: Room) { locked { self.room = room } }

    func markJoined(participantId: String) {
        let waiter = locked { () -> CheckedContinuation<Result<JSONValue, RoomError>, Never>? in
            participantIdValue = participantId
            defer { joinWaiter = nil }
            return joinWaiter?.continuation
        }
        waiter?.resume(returning: .success(["participantId": .string(participantId)]))
    }

    func send(_ envelope: SignalEnvelope) {
        if case .response(let id, let result) = envelope {
            switch result {
            case .success(let data): respond(id, data)
            case .failure(let error): resolve(id, .failure(RoomError(error.code, error.message)))
            }
        }
    }

    /// Broadcasts (joins, producers, PubSub) have no reader on this transport.
    func send(_ message: PreparedTextMessage) {}

    func notify(_ notification: RoomNotification, _ data: JSONValue) {}

    func respond(_ id: JSONValue, _ data: JSONValue) { resolve(id, .success(data)) }

    func respond(_ id: JSONValue, error: RoomError) {
        server.counters.add(errors: 1)
        resolve(id, .failure(error))
    }

    private func resolve(_ id: JSONValue, _ result: Result<JSONValue, RoomError>) {
        guard let n = id.intValue else { return }
        let continuation = locked { () -> CheckedContinuation<Result<JSONValue, RoomError>, Never>? in
            if let join = joinWaiter, join.id == n {
                joinWaiter = nil
                return join.continuation
            }
            return waiting.removeValue(forKey: n)
        }
        continuation?.resume(returning: result)
    }

    /// The room ended the membership (leave, remove, room closed, replaced by a newer join).
    func close(code: UInt16, reason: String) {
        guard !isClosed else { return }
        markClosed()
    }

    func noteBadMessage() {}
}

/// The live HTTP sessions of one server, by session id, with their shares per room and per token.
// Safe: the sessions are guarded by `lock`.
final class HTTPSessionRegistry: @unchecked Sendable {
    /// Which share a new session would exceed (issue 31 item 7: one token must not take them all).
    enum Refusal: Equatable {
        /// `maxHTTPSessions` sessions are live on the server.
        case server(Int)
        /// `maxHTTPSessionsPerRoom` sessions are live in the session's room.
        case room(Int)
        /// `maxHTTPSessionsPerToken` sessions were opened with the same token and are live.
        case token(Int)
    }

    /// The caps ``reserve(_:token:limits:)`` checks.
    struct Limits {
        var server: Int
        var room: Int
        var token: Int
    }

    private let lock = NSLock()
    private var sessions: [String: HTTPParticipant] = [:]
    /// Per session id: the room and token key it is counted under.
    private var shares: [String: (room: String, token: String)] = [:]
    private var perRoom: [String: Int] = [:]
    private var perToken: [String: Int] = [:]

    /// Adds `session` unless the server, its room or `token` already holds its share of sessions;
    /// the check and the insertion are one step, so concurrent POSTs cannot overshoot a cap.
    /// `token` identifies the grant: the signed part of the JWT (header and claims as sent).
    func reserve(_ session: HTTPParticipant, token: String, limits: Limits) -> Refusal? {
        lock.withLock {
            if sessions.count >= limits.server { return .server(limits.server) }
            if perRoom[session.roomId, default: 0] >= limits.room { return .room(limits.room) }
            if perToken[token, default: 0] >= limits.token { return .token(limits.token) }
            sessions[session.sessionId] = session
            shares[session.sessionId] = (session.roomId, token)
            perRoom[session.roomId, default: 0] += 1
            perToken[token, default: 0] += 1
            return nil
        }
    }

    func remove(_ session: HTTPParticipant) {
        lock.withLock {
            guard sessions[session.sessionId] === session else { return }
            sessions[session.sessionId] = nil
            guard let share = shares.removeValue(forKey: session.sessionId) else { return }
            Self.decrement(&perRoom, share.room)
            Self.decrement(&perToken, share.token)
        }
    }

    private static func decrement(_ counts: inout [String: Int], _ key: String) {
        let left = counts[key, default: 1] - 1
        counts[key] = left > 0 ? left : nil
    }

    /// Live sessions in `room`.
    func count(room: String) -> Int { lock.withLock { perRoom[room, default: 0] } }
    func find(_ id: String) -> HTTPParticipant? { lock.withLock { sessions[id] } }
    /// The session whose participant has SFU key `mediaKey` (a rare lookup: state changes only).
    func find(mediaKey: String) -> HTTPParticipant? {
        // A session replaced under the same id may linger a moment: the open one is meant.
        lock.withLock { sessions.values.first { !$0.isClosed && $0.mediaKey == mediaKey } }
    }
    var count: Int { lock.withLock { sessions.count } }
    var all: [HTTPParticipant] { lock.withLock { Array(sessions.values) } }
}
