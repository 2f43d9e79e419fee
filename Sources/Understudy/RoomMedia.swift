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
final class RoomMedia: @unchecked Sendable {
    weak var room: Room?
    private let lock = NSLock()
    private var publish: PeerConnection?
    private var publishConnected = false
    /// The media clock of every local track on the publish connection (mic, webcam, screen share),
    /// as a camera and a microphone share a capture clock: their content lines up however far
    /// apart their pumps start.
    private var publishClock = MediaClock()
    /// One pump per local track (mic, webcam, screen share). A pump's clock starts when it does, so a
    /// running track keeps its pump when another track starts or stops (a new pump would stall it).
    private var pumps: [StreamKind: MediaPump] = [:]
    /// The local tracks' sources by kind; used only on the publish loop thread once created.
    private var sources: [StreamKind: UncheckedSendable<MediaSource>] = [:]
    private var activeTransceivers: [StreamKind: RTPTransceiver] = [:]
    /// Local producers by kind (producer id).
    private var producers: [StreamKind: String] = [:]
    private var subscribe: PeerConnection?
    /// TURN servers for new connections: the app's (``Room/iceServers``) or the join response's.
    var iceServers: [ICEServer] {
        get { lock.withLock { _iceServers } }
        set { lock.withLock { _iceServers = newValue } }
    }
    private var _iceServers: [ICEServer] = []
    /// The settings of new connections (tests bind them to an address this host lacks).
    var connectionConfiguration: PeerConnectionConfiguration {
        get { lock.withLock { _connectionConfiguration } }
        set { lock.withLock { _connectionConfiguration = newValue } }
    }
    private var _connectionConfiguration = RoomMedia.clientConfiguration
    private struct ConsumerInfo {
        var participantId: String
        var kind: StreamKind
        var producerId: String
        var mid: String?
    }
    private var consumers: [String: ConsumerInfo] = [:]
    /// Consumer ids whose media has arrived (their `onStreamEnabled` fired).
    private var flowing: Set<String> = []
    /// The consumed streams by the mid of their transceiver. Confined to the subscribe loop thread:
    /// a frame finds its track with one dictionary lookup and no lock.
    private var tracksByMid: [String: RemoteTrack] = [:]
    /// ``Room/onFrame`` as the subscribe loop sees it (set there by `setFrameHandler`). Loop-confined.
    private var loopFrameHandler: RoomFrameHandler?
    /// The stats sampling clock and its last two readings per stream key (`pub|mid|layer`,
    /// `sub|mid|rid`).
    private var sampler: DispatchSourceTimer?
    private var readings: [String: (previous: StatsReading?, latest: StatsReading)] = [:]
    /// The publish connection's send-side bandwidth estimate at the last sampling tick (nil: no
    /// feedback from the server yet).
    private var publishEstimateReading: BandwidthEstimate?
    /// Whether simulcast video from pre-encoded sources stops the layers that do not fit the
    /// publish connection's bandwidth estimate (``EstimateLayerFitter``): `UNDERSTUDY_FIT_ESTIMATE=1`.
    /// Off by default for now: on a loaded machine, scheduling stalls read as queueing delay, and a
    /// stopped top layer comes back only after a hold-off and a keyframe.
    static let fitsPublishingToEstimate: Bool = {
        guard let value = ProcessInfo.processInfo.environment["UNDERSTUDY_FIT_ESTIMATE"] else { return false }
        return value == "1"
    }()
    /// The publish connection's bandwidth estimate, as of the last stats sampling tick.
    var publishEstimate: BandwidthEstimate? { lock.withLock { publishEstimateReading } }
    private var closed = false

    var producingKinds: Set<StreamKind> { lock.withLock { Set(producers.keys) } }
    private var _joinPublishing: [StreamKind] = []
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

    // MARK: Publishing

    private func publishConnection() throws -> PeerConnection {
        try lock.withLock {
            if let publish { return publish }
            var configuration = _connectionConfiguration
            configuration.iceServers = _iceServers
            let pc = try PeerConnection(loop: EventLoop(name: "understudy-pub"), configuration: configuration)
            publish = pc
            watch(pc)
            return pc
        }
    }

    /// Publishes `kinds` with one `produce` offer; `reportStatus` also announces them on.
    ///
    /// Throws only ``UnderstudyError``s (docs/spec/participant-methods.md: every method throws a
    /// `VideoSDKError`): a local WebRTC failure keeps its cause in `underlyingError` (``mediaFailure(_:kinds:)``).
    func produce(_ kinds: [StreamKind], reportStatus: Bool) async throws {
        do { try await produceTracks(kinds, reportStatus: reportStatus) } catch let e as UnderstudyError {
            throw e
        } catch {
            throw Self.mediaFailure(error, kinds: kinds)
        }
    }

    /// The documented code of a local WebRTC failure while publishing `kinds`: a socket that cannot
    /// open is the media connection failing (3044); anything else (an offer or answer the connection
    /// refused, its loop gone) failed the produce of that kind (3061 share, 3049 webcam, 3058 mic).
    static func mediaFailure(_ error: any Error, kinds: [StreamKind]) -> UnderstudyError {
        if case .socket? = error as? PeerConnectionError {
            return UnderstudyError(
                code: 3044, message: "the publish connection cannot open: \(error)", underlyingError: error)
        }
        let code = kinds.contains(.share) ? 3061 : kinds.contains(.video) ? 3049 : 3058
        let names = kinds.map(\.wireKind).joined(separator: ", ")
        return UnderstudyError(code: code, message: "publishing \(names) failed: \(error)", underlyingError: error)
    }

    private func produceTracks(_ kinds: [StreamKind], reportStatus: Bool) async throws {
        guard let room, !kinds.isEmpty else { return }
        let pc = try publishConnection()
        startSampling()
        let rids = room.multiStream ? ["q", "h", "f"] : []
        try makeSources(for: kinds, layers: max(1, rids.count))
        await pc.gatherRelayCandidates()
        let (offer, added) = try await pc.loop.submit { () throws -> (String, [RTPTransceiver]) in
            let added = kinds.map { kind in
                switch kind {
                case .video: return pc.addTransceiver(kind: .video, direction: .sendonly, sendRIDs: rids)
                case .share: return pc.addTransceiver(kind: .video, direction: .sendonly)  // one layer
                default: return pc.addTransceiver(kind: .audio, direction: .sendonly)
                }
            }
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return (o.serialize(), added)
        }
        let tracks = JSONValue.array(kinds.map { ["kind": .string($0.wireKind)] })
        let response: JSONValue
        do {
            response = try await room.call(.produce, ["tracks": tracks, "sdp": .string(offer)])
        } catch let e as UnderstudyError {
            // The refused m-lines stay in the connection: offer them inactive so a later produce is not
            // taken for them.
            let refused = UncheckedSendable(added)
            _ = await pc.loop.submitIfRunning { for t in refused.value { t.direction = .inactive } }
            let code = kinds.contains(.share) ? 3061 : kinds.contains(.video) ? 3049 : 3058
            throw [3066, 3056, 3065, 3079, 4051].contains(e.code)
                ? e : UnderstudyError(code: code, message: "produce failed: \(e.message)", underlyingError: e)
        }
        guard let sdp = response["sdp"]?.stringValue, let answer = try? SessionDescription.parse(sdp) else {
            throw UnderstudyError(
                code: kinds.contains(.share) ? 3061 : kinds.contains(.video) ? 3049 : 3058,
                message: "produce: no usable SDP answer")
        }
        try await pc.loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
        if !lock.withLock({ publishConnected }) {
            do { try await pc.waitUntilConnected(timeout: 10) } catch {
                throw UnderstudyError(
                    code: 3044, message: "publish connection failed: \(error)", underlyingError: error)
            }
            lock.withLock { publishConnected = true }
        }
        var made: [MediaStream] = []
        let localId = room.localParticipant.id
        for entry in response["producers"]?.arrayValue ?? [] {
            guard let id = entry["producerId"]?.stringValue,
                let kind = entry["kind"]?.stringValue.flatMap(StreamKind.init(wire:))
            else { continue }
            made.append(MediaStream(id: id, kind: kind, participantId: localId))
        }
        lock.withLock {
            for (kind, t) in zip(kinds, added) { activeTransceivers[kind] = t }
            for s in made { producers[s.kind] = s.id }
        }
        await rebuildPump()
        if reportStatus {
            for kind in kinds where kind == .audio || kind == .video {
                _ = try? await room.call(.setMediaStatus, ["kind": .string(kind.wireKind), "enabled": true])
            }
        }
        let local = room.localParticipant
        let madeStreams = made
        // Awaited: when the call returns, `streams` and the listeners have the new streams.
        await room.onQueue {
            for s in madeStreams {
                if s.kind == .audio { local.update(mic: true) } else if s.kind == .video { local.update(webcam: true) }
                local.addStream(s)
                for l in local.liveListeners { l.onStreamEnabled(s, participant: local) }
            }
        }
    }

    /// Opens a source for each kind that has none; a source that cannot open fails the produce.
    private func makeSources(for kinds: [StreamKind], layers: Int) throws {
        guard let room else { return }
        // Without a factory: the synthetic test pattern and tone, as `--video testsrc --audio tone`.
        let factory: MediaSourceFactory =
            room.mediaSourceFactory ?? { kind, layers in
                try LocalSources.makeSource(kind: kind, layers: layers, video: .testPattern, audio: .tone)
            }
        for kind in kinds where lock.withLock({ sources[kind] == nil }) {
            let mediaKind: MediaKind = kind == .audio ? .audio : .video
            var source: MediaSource
            do { source = try factory(mediaKind, kind == .video ? layers : 1) } catch {
                // A missing or unusable capture device (or a kind configured as `none`) is "no device
                // found" (3059 mic, 3051 webcam); anything else failed the produce (3058, 3049, 3061).
                var noDevice = false
                switch error as? MediaSourceError {
                case .capture?, .notPublished?: noDevice = true
                default: break
                }
                let code =
                    kind == .share ? 3061 : kind == .video ? (noDevice ? 3051 : 3049) : (noDevice ? 3059 : 3058)
                throw UnderstudyError(
                    code: code, message: "cannot open the \(kind.wireKind) source: \(error)", underlyingError: error)
            }
            if kind == .video || kind == .share {
                source = CaptureTapSource(source, buffer: kind == .video ? room.localParticipant.captureFrames : nil)
            }
            lock.withLock { sources[kind] = UncheckedSendable(source) }
        }
    }

    /// Closes the sources of `kinds` (all when nil) on the publish loop thread.
    private func closeSources(_ kinds: Set<StreamKind>?, on pc: PeerConnection?) {
        let closing: [UncheckedSendable<MediaSource>] = lock.withLock {
            let chosen = sources.filter { kinds?.contains($0.key) ?? true }
            for k in chosen.keys { sources[k] = nil }
            return Array(chosen.values)
        }
        guard !closing.isEmpty else { return }
        if let pc {
            pc.loop.execute { for s in closing { s.value.close() } }
        } else {
            for s in closing { s.value.close() }
        }
    }

    /// Starts or stops the pump of each kind whose source changed; a running track keeps its pump.
    ///
    /// Pumps that start together are made in one loop turn, so their first tick (their time zero) is
    /// the same: the synthetic flash and beep then leave at the same wall time and the far end
    /// measures the true A/V offset, not the gap between two loop hops.
    private func rebuildPump() async {
        guard let pc = lock.withLock({ publish }) else { return }
        typealias Change = (kind: StreamKind, transceiver: RTPTransceiver?, source: MediaSource?, old: MediaPump?)
        let changes: [Change] = lock.withLock {
            [StreamKind.audio, .video, .share].compactMap { kind -> Change? in
                let (transceiver, source, old) = (activeTransceivers[kind], sources[kind], pumps[kind])
                if let old, let source, transceiver != nil,
                    (kind == .audio ? old.audioSource : old.videoSource) === source.value
                {
                    return nil
                }
                guard old != nil || (transceiver != nil && source != nil) else { return nil }
                return (kind, transceiver, source?.value, old)
            }
        }
        guard !changes.isEmpty else { return }
        let box = UncheckedSendable(changes)
        let clock = lock.withLock { publishClock }
        // A connection closed meanwhile (left or reset) gets no pumps.
        let made: [StreamKind: UncheckedSendable<MediaPump>]? = await pc.loop.submitIfRunning {
            var made: [StreamKind: UncheckedSendable<MediaPump>] = [:]
            for change in box.value {
                change.old?.detach()
                guard let transceiver = change.transceiver, let source = change.source else { continue }
                let p =
                    change.kind == .audio
                    ? MediaPump(
                        connection: pc, video: nil, videoSource: nil, audio: transceiver, audioSource: source,
                        clock: clock)
                    : MediaPump(
                        connection: pc, video: transceiver, videoSource: source, audio: nil, audioSource: nil,
                        clock: clock)
                if change.kind != .audio, Self.fitsPublishingToEstimate, source.layerCount > 1,
                    transceiver.sendRIDs.count == source.layerCount
                {
                    // Simulcast from a pre-encoded source: the layers that do not fit the publish
                    // connection's estimate (from the server's transport-cc feedback) stop.
                    p.layerFitter = EstimateLayerFitter(mode: .simulcast, layerCount: source.layerCount)
                }
                p.attach()
                made[change.kind] = UncheckedSendable(p)
            }
            return made
        }
        lock.withLock {
            for change in changes { pumps[change.kind] = made?[change.kind]?.value }
        }
    }

    private func detachPumps(on pc: PeerConnection?) {
        let old: [MediaPump] = lock.withLock {
            let p = Array(pumps.values)
            pumps.removeAll()
            return p
        }
        guard let pc, !old.isEmpty else { return }
        let box = UncheckedSendable(old)
        pc.loop.execute { for p in box.value { p.detach() } }
    }

    /// Stops a local stream; `onServer` also closes the producer and announces the status off.
    func stopLocal(_ kind: StreamKind, onServer: Bool) async {
        guard let room, let producerId = lock.withLock({ producers.removeValue(forKey: kind) }) else { return }
        let retired = lock.withLock { activeTransceivers.removeValue(forKey: kind) }
        // A retired m-line is offered inactive from now on, so the SFU never takes it for a new track.
        if let retired, let pc = lock.withLock({ publish }) {
            _ = await pc.loop.submitIfRunning { retired.direction = .inactive }
        }
        await rebuildPump()
        closeSources([kind], on: lock.withLock { publish })
        if onServer {
            _ = try? await room.call(.closeProducer, ["producerId": .string(producerId)])
            if kind != .share {
                _ = try? await room.call(.setMediaStatus, ["kind": .string(kind.wireKind), "enabled": false])
            }
        }
        await announceStopped(kind, producerId: producerId)
    }

    /// Awaited: when the stop returns, `streams` and the listeners have seen it.
    private func announceStopped(_ kind: StreamKind, producerId: String) async {
        guard let room else { return }
        let local = room.localParticipant
        await room.onQueue {
            if kind == .audio { local.update(mic: false) } else if kind == .video { local.update(webcam: false) }
            if let s = local.removeStream(id: producerId) {
                for l in local.liveListeners { l.onStreamDisabled(s, participant: local) }
            }
        }
    }

    /// A moderator turned a local stream off: the server closed the producer already.
    func stopLocalNow(_ kind: StreamKind) {
        Task { await stopLocal(kind, onServer: false) }
    }

    /// On the event queue, when the room is left: every local stream ends with `onStreamDisabled`.
    func stopAllLocal(announce: Bool) {
        guard let room else { return }
        let (stopped, pc) = lock.withLock { () -> ([StreamKind: String], PeerConnection?) in
            let s = producers
            producers.removeAll()
            activeTransceivers.removeAll()
            return (s, publish)
        }
        detachPumps(on: pc)
        closeSources(nil, on: pc)
        let local = room.localParticipant
        for (kind, id) in stopped {
            if kind == .audio { local.update(mic: false) } else if kind == .video { local.update(webcam: false) }
            if let s = local.removeStream(id: id), announce {
                for l in local.liveListeners { l.onStreamDisabled(s, participant: local) }
            }
        }
    }

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

    // MARK: Subscribing

    private func subscribeConnection() throws -> PeerConnection {
        try lock.withLock {
            if let subscribe { return subscribe }
            var configuration = _connectionConfiguration
            configuration.iceServers = _iceServers
            let pc = try PeerConnection(loop: EventLoop(name: "understudy-sub"), configuration: configuration)
            subscribe = pc
            watch(pc)
            let handler = room?.onFrame
            pc.loop.execute { [weak self] in
                self?.loopFrameHandler = handler
                pc.onFrame = { transceiver, _, frame, timing in
                    self?.frameArrived(transceiver.mid, frame, timing.arrivalTime)
                }
            }
            return pc
        }
    }

    /// Installs ``Room/onFrame`` on the subscribe loop; returns once the loop uses it (so that no
    /// frame reaches a handler after it was replaced), or at once when there is no connection.
    func setFrameHandler(_ handler: RoomFrameHandler?) {
        guard let pc = lock.withLock({ subscribe }) else { return }
        _ = onLoopSync(pc) { [self] in loopFrameHandler = handler }
    }

    /// Loop thread: every track ends (the connection is going away).
    private func endAllTracks() {
        let ending = tracksByMid.values
        tracksByMid.removeAll()
        for track in ending { track.end() }
    }

    /// Loop thread: the track of a confirmed consumer, reported to ``Room/onTrack``, with the SDK's
    /// own sinks (``Room/onFrame``, the first-frame event, the picture kept for `captureImage`).
    private func addTrack(_ track: RemoteTrack) {
        guard let room else { return }
        tracksByMid[track.mid]?.end()
        tracksByMid[track.mid] = track
        track.addSink(StreamEnabledSink(media: self))
        if track.kind == .video || track.kind == .share, let participant = room.participant(track.participantId) {
            track.addSink(CaptureSink(participant: participant))
        }
        track.addSink(RoomFrameSink(media: self))
        room.onTrack?(track)
    }

    /// Loop thread: the stream's first frame arrived; announce it (`onStreamEnabled`) on the event queue.
    fileprivate func firstFrame(of track: RemoteTrack) {
        guard let room else { return }
        let first = lock.withLock { consumers[track.consumerId] != nil && flowing.insert(track.consumerId).inserted }
        guard first else { return }
        room.eventQueue.async {
            guard let p = room.participants[track.participantId] else { return }
            let s = MediaStream(id: track.producerId, kind: track.kind, participantId: track.participantId)
            p.addStream(s)
            for l in p.liveListeners { l.onStreamEnabled(s, participant: p) }
        }
    }

    fileprivate func frameToRoom(_ track: RemoteTrack, _ frame: EncodedFrame, _ arrival: UInt64) {
        loopFrameHandler?(track.participantId, frame.codec.kind, frame, arrival)
    }

    /// Ends the track of consumer `consumerId` on media line `mid` (any thread); a newer consumer
    /// that already took over the mid keeps its track.
    private func endTrack(consumerId: String, mid: String?) {
        guard let mid, let pc = lock.withLock({ subscribe }) else { return }
        pc.loop.execute { [self] in
            guard let track = tracksByMid[mid], track.consumerId == consumerId else { return }
            tracksByMid[mid] = nil
            track.end()
        }
    }

    /// Loop thread: one assembled frame of the subscribe connection, to its track's sinks.
    private func frameArrived(_ mid: String?, _ frame: EncodedFrame, _ arrival: UInt64) {
        guard let mid, let track = tracksByMid[mid] else { return }
        track.deliver(frame, arrival: arrival)
    }

    /// Asks the SFU for a keyframe of `participantId`'s webcam (PLI), so a capture can decode soon.
    func requestWebcamKeyframe(of participantId: String) {
        guard let pc = lock.withLock({ subscribe }) else { return }
        let mids = lock.withLock {
            Set(consumers.values.filter { $0.participantId == participantId && $0.kind == .video }.compactMap(\.mid))
        }
        pc.loop.execute {
            for t in pc.transceivers where t.mid.map(mids.contains) ?? false { pc.requestKeyframe(on: t) }
        }
    }

    /// PLIs and NACKs sent by the subscribe connection's receivers (zeros without one).
    func receiverFeedbackSent() -> (plis: UInt64, nacks: UInt64) {
        guard let pc = lock.withLock({ subscribe }) else { return (0, 0) }
        let rows = onLoopSync(pc) { pc.receiverStats() } ?? []
        return rows.reduce((UInt64(0), UInt64(0))) { ($0.0 &+ $1.stats.plisSent, $0.1 &+ $1.stats.nacksSent) }
    }

    /// Each consumed track's quality reading (zero rows without a subscribe connection).
    func receiveQuality() -> [ReceivedTrackQuality] {
        guard let pc = lock.withLock({ subscribe }) else { return [] }
        let tracks = lock.withLock { consumers.values.compactMap { c in c.mid.map { ($0, c.participantId, c.kind) } } }
        let rows = onLoopSync(pc) { pc.receiverStats() } ?? []
        var best: [String: ReceiveQualitySnapshot] = [:]
        for r in rows {
            guard let mid = r.mid else { continue }
            if best[mid].map({ $0.frames < r.stats.quality.frames }) ?? true { best[mid] = r.stats.quality }
        }
        return tracks.compactMap { mid, participant, kind in
            best[mid].map { ReceivedTrackQuality(participantId: participant, kind: kind, mid: mid, quality: $0) }
        }
        .sorted { ($0.participantId, $0.mid) < ($1.participantId, $1.mid) }
    }

    func consumerCreated(_ data: JSONValue) {
        guard let id = data["consumerId"]?.stringValue, let pid = data["participantId"]?.stringValue,
            let kind = data["kind"]?.stringValue.flatMap(StreamKind.init(wire:))
        else { return }
        let info = ConsumerInfo(
            participantId: pid, kind: kind, producerId: data["producerId"]?.stringValue ?? id,
            mid: data["mid"]?.stringValue)
        lock.withLock { consumers[id] = info }
        if let mid = info.mid, let pc = try? subscribeConnection() {
            let loop = pc.loop
            let track = RemoteTrack(
                participantId: pid, kind: kind, producerId: info.producerId, consumerId: id, mid: mid, loop: loop,
                requestKeyframe: {
                    loop.execute {
                        for t in pc.transceivers where t.mid == mid { pc.requestKeyframe(on: t) }
                    }
                })
            loop.execute { [self] in
                // A consumer closed again before this ran must not come back.
                guard lock.withLock({ consumers[id] != nil }) else { return }
                addTrack(track)
            }
        }
        if kind == .video || kind == .share, let p = room?.participants[pid] {
            Task { await p.reapplyChoices(to: kind) }
        }
    }

    /// On the event queue.
    func consumerClosed(_ data: JSONValue) {
        guard let room, let id = data["consumerId"]?.stringValue else { return }
        let (info, wasFlowing) = lock.withLock { (consumers.removeValue(forKey: id), flowing.remove(id) != nil) }
        endTrack(consumerId: id, mid: info?.mid)
        guard let info, wasFlowing, let p = room.participants[info.participantId],
            let s = p.removeStream(id: info.producerId)
        else { return }
        for l in p.liveListeners { l.onStreamDisabled(s, participant: p) }
    }

    func forgetRemote(_ participantId: String) {
        lock.withLock {
            for (id, c) in consumers where c.participantId == participantId {
                consumers[id] = nil
                flowing.remove(id)
            }
        }
        guard let pc = lock.withLock({ subscribe }) else { return }
        pc.loop.execute { [self] in
            for (mid, track) in tracksByMid where track.participantId == participantId {
                tracksByMid[mid] = nil
                track.end()
            }
        }
    }

    /// Answers a `subscriberOffer` (called on the event queue; the answer goes out asynchronously).
    func answer(_ data: JSONValue) {
        guard let room, let sdp = data["sdp"]?.stringValue, let revision = data["revision"]?.intValue,
            let offer = try? SessionDescription.parse(sdp), let pc = try? subscribeConnection()
        else { return }
        startSampling()
        Task {
            do {
                await pc.gatherRelayCandidates()
                let answer = try await pc.loop.submit { () throws -> String in
                    try pc.setRemoteDescription(offer, type: .offer)
                    let a = try pc.createAnswer()
                    try pc.setLocalDescription(a)
                    return a.serialize()
                }
                _ = try await room.call(
                    .subscriberAnswer, ["sdp": .string(answer), "revision": .number(Double(revision))])
            } catch {
                let e = UnderstudyError(
                    code: 3044, message: "subscribe negotiation failed: \(error)", underlyingError: error)
                room.eventQueue.async { room.emit { $0.onError(e) } }
            }
        }
    }

    // MARK: Stats

    /// Runs `work` on `pc`'s loop and waits for it (directly when already on that loop).
    private func onLoopSync<T>(_ pc: PeerConnection, _ work: @escaping () -> T) -> T? {
        if pc.loop.isInLoop { return work() }
        let semaphore = DispatchSemaphore(value: 0)
        let box = ResultBox<T>()
        let workBox = UncheckedSendable(work)
        let accepted = pc.loop.execute {
            box.value = workBox.value()
            semaphore.signal()
        }
        guard accepted, semaphore.wait(timeout: .now() + 2) == .success else { return nil }
        return box.value
    }

    /// One stream's stats rows: the change between the sampling clock's last two readings, so that
    /// every caller sees the same values whenever and however often it asks. Empty until a stream
    /// has two readings (about a second after it starts).
    func stats(for participant: Participant, kind: StreamKind) -> [[String: Any]] {
        let mediaKind: MediaKind = kind == .audio || kind == .shareAudio ? .audio : .video
        let prefix: Set<String>
        if participant.isLocal {
            guard kind == .audio || kind == .video || kind == .share,
                let mid = lock.withLock({ activeTransceivers[kind]?.mid })
            else { return [] }
            prefix = ["pub|\(mid)|"]
        } else {
            prefix = lock.withLock {
                Set(
                    consumers.values.filter { $0.participantId == participant.id && $0.kind == kind }.compactMap(\.mid)
                        .map { "sub|\($0)|" })
            }
        }
        guard !prefix.isEmpty else { return [] }
        let chosen: [(key: String, layer: String?, previous: StatsReading, latest: StatsReading)] = lock.withLock {
            readings.compactMap { key, pair in
                guard pair.latest.kind == mediaKind, let previous = pair.previous,
                    let split = key.lastIndex(of: "|"), prefix.contains(String(key[...split]))
                else { return nil }
                let layer = String(key[key.index(after: split)...])
                return (key, layer.isEmpty ? nil : layer, previous, pair.latest)
            }.sorted { $0.key < $1.key }
        }
        return chosen.map { c in
            let (p, l) = (c.previous, c.latest)
            let seconds = Double(l.at &- p.at) / 1e9
            var row: [String: Any] = [
                "totalPackets": Int(clamping: l.packets - p.packets),
                "packetsLost": Int(clamping: max(0, l.lost &- p.lost)),
                "bitrate": seconds > 0 ? Double(l.bytes - p.bytes) * 8 / 1000 / seconds : 0.0,
                "jitter": l.jitterMs, "rtt": l.rttMs, "codec": mediaKind == .audio ? "opus" : "vp8",
            ]
            if let layer = c.layer { row["rid"] = layer }
            if mediaKind == .video {
                var size = pictureSize(participant, kind, layer: c.layer)
                if seconds > 0, !size.isEmpty {
                    size["framerate"] = (Double(l.frames - p.frames) / seconds * 10).rounded() / 10
                }
                row["size"] = size
            }
            return row
        }
    }

    // MARK: Sampling clock

    /// How often the stats sampling clock reads the counters, in seconds.
    static let statsInterval = 1.0

    /// Starts the sampling clock (once; it stops when the room's media closes).
    func startSampling() {
        let timer: DispatchSourceTimer? = lock.withLock {
            guard sampler == nil, !closed else { return nil }
            let t = DispatchSource.makeTimerSource(queue: DispatchQueue.global())
            sampler = t
            return t
        }
        guard let timer else { return }
        timer.schedule(deadline: .now() + Self.statsInterval, repeating: Self.statsInterval)
        timer.setEventHandler { [weak self] in self?.sample() }
        timer.resume()
    }

    /// One tick: each connection reads its counters on its own loop thread.
    private func sample() {
        let (pub, sub) = lock.withLock { (publish, subscribe) }
        if let pub {
            pub.loop.execute { [weak self] in
                let rtt = pub.iceRoundTripTime
                let now = EventLoop.now()
                let rows = pub.senderStats().compactMap { r -> (String, StatsReading)? in
                    guard let mid = r.mid else { return nil }
                    // RTT from the receiver reports (RR), else from the ICE checks of this connection.
                    let roundTrip = r.stats.roundTripTime > 0 ? r.stats.roundTripTime : rtt
                    return (
                        "pub|\(mid)|\(r.layer)",
                        StatsReading(
                            kind: r.kind, packets: r.stats.packetsSent, bytes: r.stats.bytesSent,
                            lost: r.stats.reportedPacketsLost, frames: r.stats.framesSent,
                            jitterMs: r.stats.reportedJitter * 1000, rttMs: Double(roundTrip) / 1e6, at: now)
                    )
                }
                let estimate = pub.bandwidthEstimate
                self?.lock.withLock { self?.publishEstimateReading = estimate }
                self?.record(rows, prefix: "pub|")
            }
        }
        if let sub {
            sub.loop.execute { [weak self] in
                // A receive-only connection sends no SR, so the far end's RR cannot time it: the ICE
                // consent checks give the round trip between this device and the server.
                let rtt = Double(sub.iceRoundTripTime) / 1e6
                let now = EventLoop.now()
                let rows = sub.receiverStats().compactMap { r -> (String, StatsReading)? in
                    guard let mid = r.mid else { return nil }
                    return (
                        "sub|\(mid)|\(r.rid ?? "")",
                        StatsReading(
                            kind: r.kind, packets: r.stats.packetsReceived, bytes: r.stats.bytesReceived,
                            lost: r.stats.packetsLost, frames: r.stats.framesAssembled, jitterMs: r.stats.jitter,
                            rttMs: rtt, at: now)
                    )
                }
                self?.record(rows, prefix: "sub|")
            }
        }
    }

    /// Stores one tick's readings of one connection; streams that are gone are forgotten.
    private func record(_ rows: [(String, StatsReading)], prefix: String) {
        lock.withLock {
            let seen = Set(rows.map(\.0))
            for key in readings.keys where key.hasPrefix(prefix) && !seen.contains(key) { readings[key] = nil }
            for (key, reading) in rows {
                // Counters that went backwards belong to a new stream under the same key: start over.
                let last = readings[key]?.latest
                let continues = last.map { $0.packets <= reading.packets && $0.bytes <= reading.bytes } ?? false
                readings[key] = (continues ? last : nil, reading)
            }
        }
    }
}

/// One reading of a stream's counters by the sampling clock.
struct StatsReading {
    var kind: MediaKind
    var packets: UInt64
    var bytes: UInt64
    var lost: Int64
    var frames: UInt64
    var jitterMs: Double
    var rttMs: Double
    var at: UInt64
}

extension RoomMedia {
    /// A video stats row's `size`: the newest keyframe's width and height (empty before the first).
    fileprivate func pictureSize(_ participant: Participant, _ kind: StreamKind, layer: String?) -> [String: Any] {
        let size: (width: Int, height: Int)?
        if participant.isLocal {
            size = layer.flatMap { Int($0) }.flatMap { localTap(kind)?.size(ofLayer: $0) }
        } else {
            size = kind == .share ? participant.sharePictureSize.pictureSize : participant.captureFrames.pictureSize
        }
        guard let size else { return [:] }
        return ["width": size.width, "height": size.height]
    }
}

final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}

/// The SDK's sink that announces a stream when its first frame arrives (`onStreamEnabled`).
private final class StreamEnabledSink: RemoteTrackSink {
    private weak var media: RoomMedia?
    private var seen = false
    init(media: RoomMedia) { self.media = media }
    func receive(_ frame: EncodedFrame, arrival: UInt64, track: RemoteTrack) {
        guard !seen else { return }
        seen = true
        media?.firstFrame(of: track)
    }
}

/// The SDK's sink behind ``Room/onFrame``.
private final class RoomFrameSink: RemoteTrackSink {
    private weak var media: RoomMedia?
    init(media: RoomMedia) { self.media = media }
    func receive(_ frame: EncodedFrame, arrival: UInt64, track: RemoteTrack) {
        media?.frameToRoom(track, frame, arrival)
    }
}

/// The SDK's sink that keeps a webcam's frames since its last keyframe for `captureImage` (and a
/// screen share's picture size for its stats).
private final class CaptureSink: RemoteTrackSink {
    private weak var participant: Participant?
    init(participant: Participant) { self.participant = participant }
    func receive(_ frame: EncodedFrame, arrival: UInt64, track: RemoteTrack) {
        participant?.receivedVideoFrame(frame, kind: track.kind)
    }
}
