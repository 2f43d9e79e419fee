import Foundation
import RTCWire
import RoomServer
import Signaling
import TestSupport
import Testing

@testable import Understudy

/// A real room server on an ephemeral loopback port.
func startRoomServer() throws -> RoomServer { try startTestServer(secret: "sdk-test-secret") }

func sdkToken(
    _ server: RoomServer, room: String, participant: String? = nil, permissions: [String] = ["allow_join", "allow_mod"]
) -> String {
    RoomToken.sign(
        RoomToken(apikey: "test", permissions: permissions, roomId: room, participantId: participant, lifetime: 3600),
        secret: server.secret)
}

func makeRoom(
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
final class EventLog: RoomEventListener, ParticipantEventListener, PubSubMessageListener, @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    private(set) var errors: [UnderstudyError] = []
    private var messages: [PubSubMessage] = []
    private var history: [([PubSubMessage], Bool)] = []
    var onMessage: (@Sendable (PubSubMessage) -> Void)?
    var onJoined: (@Sendable () -> Void)?

    func add(_ line: String) { lock.withLock { lines.append(line) } }
    var events: [String] { lock.withLock { lines } }
    var errorCodes: [Int] { lock.withLock { errors.map(\.code) } }
    var received: [PubSubMessage] { lock.withLock { messages } }
    var historyBatches: [([PubSubMessage], Bool)] { lock.withLock { history } }
    func count(_ line: String) -> Int { events.filter { $0 == line }.count }
    func has(_ line: String) -> Bool { events.contains(line) }

    func onRoomJoined() {
        add("joined")
        onJoined?()
    }
    func onRoomLeft(reason: Understudy.LeaveReason) { add("left:\(reason.rawValue)") }
    func onParticipantJoined(_ participant: Participant) { add("pjoined:\(participant.id)") }
    func onParticipantLeft(_ participant: Participant, reason: Understudy.LeaveReason) {
        add("pleft:\(participant.id):\(reason.rawValue)")
    }
    func onParticipantModeChanged(participantId: String, mode: Mode) { add("mode:\(participantId):\(mode.rawValue)") }
    func onRoomStateChanged(_ state: RoomState) { add("state:\(state.rawValue)") }
    func onError(_ error: UnderstudyError) {
        lock.withLock { errors.append(error) }
        add("error:\(error.code)")
    }
    func onPinStateChanged(participantId: String, pinState: PinState) { add("pin:\(participantId):\(pinState.cam)") }
    func onPresenterChanged(participantId: String?) { add("presenter:\(participantId ?? "nil")") }
    func onVideoQualityChanged(participantId: String, prevQuality: VideoQuality, currentQuality: VideoQuality) {
        add("quality:\(participantId):\(prevQuality.rawValue)->\(currentQuality.rawValue)")
    }
    func onStreamEnabled(_ stream: MediaStream, participant: Participant) {
        add("streamOn:\(participant.id):\(stream.kind.rawValue)")
    }
    func onStreamDisabled(_ stream: MediaStream, participant: Participant) {
        add("streamOff:\(participant.id):\(stream.kind.rawValue)")
    }
    func onMediaStatusChanged(peerId: String, kind: StreamKind, newStatus: MediaStatus) {
        add("status:\(peerId):\(kind.rawValue):\(newStatus.rawValue)")
    }
    func onMessageReceived(_ message: PubSubMessage) {
        lock.withLock { messages.append(message) }
        onMessage?(message)
    }
    func onOldMessagesReceived(_ messages: [PubSubMessage], isLast: Bool) {
        lock.withLock { history.append((messages, isLast)) }
    }
}

/// Creates, listens to and joins a room; waits for `onRoomJoined`.
func joinedRoom(
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
final class RequestLog: RoomEventListener, @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var acceptRequests = true
    var events: [String] { lock.withLock { lines } }
    func onMicRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void
    ) {
        lock.withLock { lines.append("micRequested:\(participantId)") }
        if acceptRequests { accept() } else { reject() }
    }
    func onWebcamRequested(
        participantId: String, accept: @escaping @Sendable () -> Void, reject: @escaping @Sendable () -> Void
    ) {
        lock.withLock { lines.append("webcamRequested:\(participantId)") }
        if acceptRequests { accept() } else { reject() }
    }
}

func expectCode(_ code: Int, _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async {
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
