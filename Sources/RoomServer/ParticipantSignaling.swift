import RoomProtocol
import Signaling

/// What a room needs from a member's signalling transport, whatever carries it: a WebSocket
/// (``ClientSession``) or an HTTP endpoint (WHIP/WHEP sessions, `WHIP/`). The room sends responses
/// and notifications through it and never learns which transport is behind.
protocol ParticipantSignaling: AnyObject, Sendable {
    /// The participant id once joined (nil before).
    var participantId: String? { get }
    /// True once the transport has gone; a join queued behind the close is dropped.
    var isClosed: Bool { get }
    /// False for a transport that negotiates its subscribe connection once, up front (WHEP): the room
    /// never sends it `subscriberOffer`.
    var renegotiatesSubscriptions: Bool { get }

    func send(_ envelope: SignalEnvelope)
    /// A message encoded once for many recipients (a room broadcast).
    func send(_ message: PreparedTextMessage)
    /// The join was routed to `room`: later requests go there.
    func assign(room: Room)
    /// The room admitted the participant.
    func markJoined(participantId: String)
    /// Ends the transport after what is queued; `code` is a WebSocket close code or a room error code.
    func close(code: UInt16, reason: String)
    /// A request was malformed (3073): abuse accounting.
    func noteBadMessage()
    func notify(_ notification: RoomNotification, _ data: JSONValue)
    func respond(_ id: JSONValue, _ data: JSONValue)
    func respond(_ id: JSONValue, error: RoomError)
    /// Runs `body` (on any thread; it must only hand work on) once the output sent so far has left
    /// the transport's queue, or the transport is gone: the pace of a PubSub history replay.
    func whenOutputDrained(_ body: @escaping @Sendable () -> Void)
}

extension ParticipantSignaling {
    func notify(_ notification: RoomNotification, _ data: JSONValue) {
        send(.notification(method: notification.rawValue, data: data))
    }
    func respond(_ id: JSONValue, _ data: JSONValue) { send(.response(id: id, result: .success(data))) }
    func respond(_ id: JSONValue, error: RoomError) { send(.response(id: id, result: .failure(error))) }
    /// A transport without an output queue of its own has nothing to wait for.
    func whenOutputDrained(_ body: @escaping @Sendable () -> Void) { body() }
}
