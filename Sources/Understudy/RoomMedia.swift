import Dispatch
import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol
import Signaling

/// The room's two WebRTC connections to the SFU: publish (synthetic tone + test pattern through a
/// ``MediaPump``) and subscribe (answering `subscriberOffer`s; each consumer's frames go to the sinks of
/// its ``RemoteTrack``, ``Room/onFrame`` among them).
// Safe: shared state is guarded by `lock`; connection and track state is confined to their loops.
final class RoomMedia: @unchecked Sendable {
    weak var room: Room?
    let lock = NSLock()
    var publish: PeerConnection?
    var publishConnected = false
    /// The media clock of every local track on the publish connection (mic, webcam, screen share),
    /// as a camera and a microphone share a capture clock: their content lines up however far
    /// apart their pumps start.
    var publishClock = MediaClock()
    /// One pump per local track (mic, webcam, screen share). A pump's clock starts when it does, so a
    /// running track keeps its pump when another track starts or stops (a new pump would stall it).
    var pumps: [StreamKind: MediaPump] = [:]
    /// The local tracks' sources by kind; used only on the publish loop thread once created.
    var sources: [StreamKind: UncheckedSendable<MediaSource>] = [:]
    var activeTransceivers: [StreamKind: RTPTransceiver] = [:]
    /// Local producers by kind (producer id).
    var producers: [StreamKind: String] = [:]
    var subscribe: PeerConnection?
    /// TURN servers for new connections: the app's (``Room/iceServers``) or the join response's.
    var iceServers: [ICEServer] {
        get { lock.withLock { _iceServers } }
        set { lock.withLock { _iceServers = newValue } }
    }
    var _iceServers: [ICEServer] = []
    /// The settings of new connections (tests bind them to an address this host lacks).
    var connectionConfiguration: PeerConnectionConfiguration {
        get { lock.withLock { _connectionConfiguration } }
        set { lock.withLock { _connectionConfiguration = newValue } }
    }
    var _connectionConfiguration = RoomMedia.clientConfiguration
    struct ConsumerInfo {
        var participantId: String
        var kind: StreamKind
        var producerId: String
        var mid: String?
    }
    var consumers: [String: ConsumerInfo] = [:]
    /// Consumer ids whose media has arrived (their `onStreamEnabled` fired).
    var flowing: Set<String> = []
    /// The consumed streams by the mid of their transceiver. Confined to the subscribe loop thread:
    /// a frame finds its track with one dictionary lookup and no lock.
    var tracksByMid: [String: RemoteTrack] = [:]
    /// ``Room/onFrame`` as the subscribe loop sees it (set there by `setFrameHandler`). Loop-confined.
    var loopFrameHandler: RoomFrameHandler?
    /// The stats sampling clock and its last two readings per stream key (`pub|mid|layer`,
    /// `sub|mid|rid`).
    var sampler: DispatchSourceTimer?
    var readings: [String: (previous: StatsReading?, latest: StatsReading)] = [:]
    /// The publish connection's send-side bandwidth estimate at the last sampling tick (nil: no
    /// feedback from the server yet).
    var publishEstimateReading: BandwidthEstimate?
    /// Whether simulcast video from pre-encoded sources stops the layers that do not fit the
    /// publish connection's bandwidth estimate (``EstimateLayerFitter``). On by default: over an
    /// uplink that carries less than the layers, every layer loses packets and the viewers freeze
    /// (issue 33); `UNDERSTUDY_FIT_ESTIMATE=0` sends every layer whatever the estimate (e.g. a load
    /// test whose busy machine reads scheduling stalls as queueing delay).
    static let fitsPublishingToEstimate: Bool = {
        ProcessInfo.processInfo.environment["UNDERSTUDY_FIT_ESTIMATE"] != "0"
    }()
    /// The publish connection's bandwidth estimate, as of the last stats sampling tick.
    var publishEstimate: BandwidthEstimate? { lock.withLock { publishEstimateReading } }
    var closed = false

    var producingKinds: Set<StreamKind> { lock.withLock { Set(producers.keys) } }
    var _joinPublishing: [StreamKind] = []
    /// The kinds the join is still publishing (`micEnabled`/`camEnabled`); they count as on.
    var joinPublishing: [StreamKind] {
        get { lock.withLock { _joinPublishing } }
        set { lock.withLock { _joinPublishing = newValue } }
    }
    /// The local source of `kind` as wrapped for captures and stats sizes.
    func localTap(_ kind: StreamKind) -> CaptureTapSource? {
        lock.withLock { sources[kind]?.value as? CaptureTapSource }
    }
    /// The open connections with their role in the room protocol (`publish`, `subscribe`).
    var connections: [(role: String, pc: PeerConnection)] {
        lock.withLock {
            [("publish", publish), ("subscribe", subscribe)].compactMap { r in r.1.map { (r.0, $0) } }
        }
    }

    /// The connection held at `slot` (``publish`` or ``subscribe``), made on first use by
    /// ``newConnection(loopName:)`` and set up by `made`, under `lock`.
    func connection(
        _ slot: ReferenceWritableKeyPath<RoomMedia, PeerConnection?>, loopName: String,
        made: (PeerConnection) -> Void = { _ in }
    ) throws -> PeerConnection {
        try lock.withLock {
            if let pc = self[keyPath: slot] { return pc }
            let pc = try newConnection(loopName: loopName)
            self[keyPath: slot] = pc
            made(pc)
            return pc
        }
    }

    /// A new media connection on a loop of its own, with the current configuration and TURN servers,
    /// its state changes watched (``watch(_:)``). Under `lock`.
    func newConnection(loopName: String) throws -> PeerConnection {
        var configuration = _connectionConfiguration
        configuration.iceServers = _iceServers
        let pc = try PeerConnection(loop: EventLoop(name: loopName), configuration: configuration)
        watch(pc)
        return pc
    }

    // MARK: Lifecycle

    /// After a dropped signalling socket: both connections go, remote streams end (`onStreamDisabled`).
    /// Called on the event queue.
    func resetConnections() {
        guard let room else { return }
        // Local streams end now; the rejoin publishes new ones (`onStreamEnabled` again).
        stopAllLocal(announce: true)
        let ended: [(String, String)] = lock.withLock {
            let e = consumers.filter { flowing.contains($0.key) }.map { ($0.value.participantId, $0.value.producerId) }
            consumers.removeAll()
            flowing.removeAll()
            return e
        }
        for (pid, producerId) in ended {
            guard let p = room.participants[pid], let s = p.removeStream(id: producerId) else { continue }
            for l in p.liveListeners { l.onStreamDisabled(s, participant: p) }
        }
        resetPublish()
        let sub: PeerConnection? = lock.withLock {
            let s = subscribe
            subscribe = nil
            return s
        }
        if let sub {
            sub.loop.shutdown { [self] in
                sub.onFrame = nil
                endAllTracks()
                sub.close()
            }
        }
    }

    /// Drops the publish connection so that the next `produce` negotiates a new one.
    func resetPublish() {
        let pc: PeerConnection? = lock.withLock {
            let old = publish
            publish = nil
            publishConnected = false
            publishClock = MediaClock()
            activeTransceivers.removeAll()
            return old
        }
        detachPumps(on: pc)
        closeSources(nil, on: pc)
        guard let pc else { return }
        pc.loop.shutdown { pc.close() }
    }

    func close() {
        let (pub, sub): (PeerConnection?, PeerConnection?) = lock.withLock {
            closed = true
            sampler?.cancel()
            sampler = nil
            readings.removeAll()
            defer {
                publish = nil
                subscribe = nil
            }
            return (publish, subscribe)
        }
        for (pc, isSubscribe) in [(pub, false), (sub, true)] {
            guard let pc else { continue }
            // Close on the loop (close_notify goes out with its last sends), then the loop ends.
            pc.loop.shutdown { [self] in
                pc.onFrame = nil
                if isSubscribe { endAllTracks() }
                pc.close()
            }
        }
    }
}
