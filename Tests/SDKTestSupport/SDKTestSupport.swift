import Foundation
import RTCWire
import RoomProtocol
import RoomServer
import Signaling
import TestSupport
import Testing
import Understudy

/// A real room server on an ephemeral loopback port.
public func startRoomServer() throws -> RoomServer { try startTestServer(secret: "sdk-test-secret") }

/// A token for `room` signed with the server's secret (join and moderation rights by default).
public func sdkToken(
    _ server: RoomServer, room: String, participant: String? = nil, permissions: [String] = ["allow_join", "allow_mod"]
) -> String {
    RoomToken.sign(
        RoomToken(apikey: "test", permissions: permissions, roomId: room, participantId: participant, lifetime: 3600),
        secret: server.secret)
}

/// An SDK room for participant `id` against `server`, not yet joined.
public func makeRoom(
    _ server: RoomServer, room: String, id: String, mode: Mode = .SIGNALLING_ONLY, mic: Bool = false,
    cam: Bool = false, autoConsume: Bool = true, multiStream: Bool = false
) throws -> Room {
    try Understudy.createRoom(
        roomId: room, token: sdkToken(server, room: room, participant: id), participantName: "name-\(id)",
        participantId: id,
        micEnabled: mic, camEnabled: cam, mode: mode, multiStream: multiStream, autoConsume: autoConsume,
        signalingBaseUrl: server.signalingURL)
}

/// Records every room, participant and PubSub event as a line of text, in delivery order.
public final class EventLog: RoomEventListener, ParticipantEventListener, PubSubMessageListener, @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    public private(set) var errors: [UnderstudyError] = []
    private var messages: [PubSubMessage] = []
    private var history: [([PubSubMessage], Bool)] = []
    public var onMessage: (@Sendable (PubSubMessage) -> Void)?
    public var onJoined: (@Sendable () -> Void)?

    public init() {}

    public func add(_ line: String) { lock.withLock { lines.append(line) } }
    public var events: [String] { lock.withLock { lines } }
    public var errorCodes: [Int] { lock.withLock { errors.map(\.code) } }
    public var received: [PubSubMessage] { lock.withLock { messages } }
    public var historyBatches: [([PubSubMessage], Bool)] { lock.withLock { history } }
    public func count(_ line: String) -> Int { events.filter { $0 == line }.count }
    public func has(_ line: String) -> Bool { events.contains(line) }

    public func onRoomJoined() {
        add("joined")
        onJoined?()
    }
    public func onRoomLeft(reason: Understudy.LeaveReason) { add("left:\(reason.rawValue)") }
    public func onParticipantJoined(_ participant: Participant) { add("pjoined:\(participant.id)") }
    public func onParticipantLeft(_ participant: Participant, reason: Understudy.LeaveReason) {
        add("pleft:\(participant.id):\(reason.rawValue)")
    }
    public func onParticipantModeChanged(participantId: String, mode: Mode) {
        add("mode:\(participantId):\(mode.rawValue)")
    }
    public func onRoomStateChanged(_ state: RoomState) { add("state:\(state.rawValue)") }
    public func onError(_ error: UnderstudyError) {
        lock.withLock { errors.append(error) }
        add("error:\(error.code)")
    }
    public func onPinStateChanged(participantId: String, pinState: PinState) {
        add("pin:\(participantId):\(pinState.cam)")
    }
    public func onPresenterChanged(participantId: String?) { add("presenter:\(participantId ?? "nil")") }
    public func onVideoQualityChanged(participantId: String, prevQuality: VideoQuality, currentQuality: VideoQuality) {
        add("quality:\(participantId):\(prevQuality.rawValue)->\(currentQuality.rawValue)")
    }
    public func onStreamEnabled(_ stream: MediaStream, participant: Participant) {
        add("streamOn:\(participant.id):\(stream.kind.rawValue)")
    }
    public func onStreamDisabled(_ stream: MediaStream, participant: Participant) {
        add("streamOff:\(participant.id):\(stream.kind.rawValue)")
    }
    public func onMediaStatusChanged(peerId: String, kind: StreamKind, newStatus: MediaStatus) {
        add("status:\(peerId):\(kind.rawValue):\(newStatus.rawValue)")
    }
    public func onMessageReceived(_ message: PubSubMessage) {
        lock.withLock { messages.append(message) }
        onMessage?(message)
    }
    public func onOldMessagesReceived(_ messages: [PubSubMessage], isLast: Bool) {
        lock.withLock { history.append((messages, isLast)) }
    }
}

/// Creates, listens to and joins a room; waits for `onRoomJoined`.
public func joinedRoom(
    _ server: RoomServer, room: String, id: String, mode: Mode = .SIGNALLING_ONLY, mic: Bool = false,
    cam: Bool = false, autoConsume: Bool = true, multiStream: Bool = false
) async throws -> (Room, EventLog) {
    let r = try makeRoom(
        server, room: room, id: id, mode: mode, mic: mic, cam: cam, autoConsume: autoConsume, multiStream: multiStream)
    let log = EventLog()
    r.addEventListener(log)
    r.localParticipant.addEventListener(log)
    await r.join()
    try await waitUntil("\(id) joined") { log.has("joined") }
    r.localParticipant.addEventListener(log)
    return (r, log)
}

/// Records mic/webcam requests and accepts them when `acceptRequests` is set.
public final class RequestLog: RoomEventListener, @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    public var acceptRequests = true
    public init() {}
    public var events: [String] { lock.withLock { lines } }
    public func onMicRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void
    ) {
        lock.withLock { lines.append("micRequested:\(participantId)") }
        if acceptRequests { accept() } else { reject() }
    }
    public func onWebcamRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void
    ) {
        lock.withLock { lines.append("webcamRequested:\(participantId)") }
        if acceptRequests { accept() } else { reject() }
    }
}

/// Runs `body` and expects an ``UnderstudyError`` with `code` and its canonical name.
public func expectCode(_ code: Int, _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation)
    async
{
    do {
        try await body()
        Issue.record("expected error \(code), got success", sourceLocation: sourceLocation)
    } catch let e as UnderstudyError {
        #expect(e.code == code, "\(e)", sourceLocation: sourceLocation)
        #expect(e.name == UnderstudyError.canonicalName(code), sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected UnderstudyError \(code), got \(error)", sourceLocation: sourceLocation)
    }
}
