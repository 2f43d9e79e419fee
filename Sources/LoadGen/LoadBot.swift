import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol
import Signaling

/// A lightweight virtual participant: a signalling channel, at most one publish and one subscribe
/// ``PeerConnection`` on a shared ``EventLoop``, and counters. No thread, SDK room or decoder of its own.
///
/// Control (signalling) runs in one task per bot; everything that touches packets (the ``MediaPump``,
/// ``PeerConnection/onRTP`` counting) runs on the bot's loop thread.
// Safe: control state is guarded by `lock`; packet state is confined to the bot's loop thread.
final class LoadBot: @unchecked Sendable {
    enum Role: Sendable, Equatable {
        /// Publishes webcam (simulcast unless disabled) and mic.
        case publisher
        /// Publishes mic only.
        case audioPublisher
        /// RECV_ONLY audience, autoConsume off, consumes by layout.
        case subscriber
    }

    let id: String
    let room: String
    let role: Role
    let counters: LoopCounters
    var loop: EventLoop { counters.loop }
    /// Strong: a bot's control task may still run after the run finished (a late notification, a
    /// timed-out request); ``LoadRun`` drops its bots at teardown, which ends the cycle.
    let run: LoadRun

    // Control state (guarded by `lock`).
    private let lock = NSLock()
    private(set) var channel: RoomProtocolClient?
    private var stream: AsyncStream<(RoomNotification, JSONValue)>.Continuation?
    private var controlTask: Task<Void, Never>?
    /// The other nodes' signalling URLs (`clusterNodes`), tried after the bot's own when it rejoins.
    private var clusterURLs: [String] = []
    /// A rejoin (``LoadConfiguration/reconnectWindow``) is under way.
    private var reconnecting = false
    /// Every loss of the signalling connection, and how the bot came back.
    private var reconnections: [Reconnection] = []
    /// `subscriberOffer`s, answered on their own task (``answerTask``) as a client's peer connection
    /// does: behind this bot's pending requests (a `consume` waits for its response), an offer's
    /// answer, and so the track's media, would wait for every one of them.
    private var offers: AsyncStream<(sdp: String, revision: Int)>.Continuation?
    private var answerTask: Task<Void, Never>?
    /// Stage (SEND_AND_RECV) participants other than this bot, in order of arrival.
    private var stage: [String] = []
    /// Every other participant's mode as this bot learnt it from notifications (guarded by `lock`).
    private var modes: [String: ParticipantMode] = [:]
    /// What this bot currently asked to consume: participant -> kinds.
    private var consuming: [String: Set<TrackKind>] = [:]
    /// Tile size wanted for each participant's webcam, and the one last sent.
    private var wantedViewport: [String: (Int, Int)] = [:]
    private var sentViewport: [String: (Int, Int)] = [:]
    /// Participants whose webcam consumer exists (setViewPort needs one).
    private var webcamConsumers: Set<String> = []
    private(set) var mode = ParticipantMode.recvOnly
    private(set) var joined = false
    /// The room's `roomVideoCodecs` (join response, then `roomVideoCodecsChanged`): what `auto` publishes in.
    private var roomVideoCodecs: [MediaCodec] = [.vp8]
    private var leaving = false

    /// One loss of the signalling connection (loop clock; 0: not reached).
    struct Reconnection {
        var lostAt: UInt64
        /// The rejoin's `join` was answered.
        var rejoinedAt: UInt64 = 0
        /// A publisher's publish connection connected again.
        var publishedAt: UInt64 = 0
        /// An audience bot's new subscribe connection connected (ICE and DTLS done).
        var connectedAt: UInt64 = 0
        /// Each rejoin attempt: when it started and why it failed (nil: it succeeded).
        var attempts: [(startedAt: UInt64, failure: String?)] = []
        /// The last attempt's signalling socket connected, and its `join` sent (after the
        /// subscribe connection was made).
        var socketAt: UInt64 = 0
        var joinSentAt: UInt64 = 0
        var failed = false
    }

    // Loop-confined media state.
    private var publishConnection: PeerConnection?
    private var pump: MediaPump?
    private var subscribeConnection: PeerConnection?
    private var tracksByMid: [String: TrackCounter] = [:]
    /// The track of each transceiver that received media since the last track change, unretained
    /// (``allTracks`` keeps every counter): a bot receives a handful of tracks, so a scan of this
    /// short list per packet beats a hash lookup and its retain of the counter.
    private var routes: [(transceiver: ObjectIdentifier, track: Unmanaged<TrackCounter>)] = []
    private(set) var allTracks: [TrackCounter] = []
    private var captureTimeExtensionID: UInt8 = 0
    /// When the subscribe connection first became connected (loop clock; 0: not yet).
    private var subscribeConnectedAt: UInt64 = 0

    /// The network this bot's media connections see (``LoadConfiguration/impairment(forBot:)``).
    let impairment: Impairment?

    init(id: String, room: String, role: Role, counters: LoopCounters, run: LoadRun, impairment: Impairment? = nil) {
        self.impairment = impairment
        self.id = id
        self.room = room
        self.role = role
        self.counters = counters
        self.run = run
        self.mode = role == .subscriber ? .recvOnly : .sendAndRecv
    }

    var inviteTopic: String { "REQUEST_TO_JOIN_AS_HOST_\(id)" }

    // MARK: Joining

    /// Connects, joins and (for publishers) starts publishing. Returns the join latency in seconds
    /// (connect + join response); throws the reason a join failed.
    func start() async throws -> Double {
        let began = EventLoop.now()
        try await connectAndJoin(urls: [run.signalingURL(room: room)], rejoin: false)
        let latency = Double(EventLoop.now() - began) / 1e9
        if role != .subscriber { try await publish(video: role == .publisher) }
        return latency
    }

    /// Connects to the first reachable of `urls` and joins in the bot's mode. A first join that
    /// fails stops the bot; a rejoin's leaves it for the next attempt.
    private func connectAndJoin(urls: [String], rejoin: Bool) async throws {
        let config = run.configuration
        let channel: RoomProtocolClient
        do { channel = try await RoomProtocolClient.connect(urls: urls, timeout: config.requestTimeout) } catch {
            throw LoadError.unreachable("signalling connection", cause: error)
        }
        lock.withLock {
            self.channel = channel
            if rejoin, let i = reconnections.indices.last { reconnections[i].socketAt = EventLoop.now() }
        }
        if role == .subscriber {
            let (s, c) = AsyncStream<(RoomNotification, JSONValue)>.makeStream()
            let (offerStream, offerContinuation) = AsyncStream<(sdp: String, revision: Int)>.makeStream()
            channel.setNotificationHandler { [weak self] method, data in
                guard let self else { return }
                switch method {
                case .subscriberOffer:
                    guard let sdp = data["sdp"]?.stringValue, let revision = data["revision"]?.intValue else { return }
                    offerContinuation.yield((sdp, revision))
                case .consumerCreated, .consumerClosed:
                    // The track is counted from now, in notification order with the offers that
                    // follow (its media cannot arrive before it is known); the rest waits its turn.
                    self.noteTrack(method, data)
                    c.yield((method, data))
                case .clusterNodes:
                    self.noteClusterNodes(data)
                default:
                    c.yield((method, data))
                }
            }
            let control = Task { [weak self] in
                for await (method, data) in s {
                    guard let self else { return }
                    await self.handle(method, data)
                }
            }
            let answers = Task { [weak self] in
                for await (sdp, revision) in offerStream {
                    guard let self else { return }
                    await self.answer(sdp: sdp, revision: revision)
                }
            }
            lock.withLock {
                stream = c
                offers = offerContinuation
                controlTask = control
                answerTask = answers
            }
            try await openSubscribeConnection()
        } else {
            channel.setNotificationHandler { [weak self] method, data in
                if method == .clusterNodes { self?.noteClusterNodes(data) }
            }
        }
        channel.setCloseHandler { [weak self, weak channel] in self?.connectionClosed(channel) }
        var data: [String: JSONValue] = [
            "protocolVersion": 2, "roomId": .string(room), "participantId": .string(id),
            "mode": .string(mode.rawValue), "autoConsume": false,
            "name": .string(id),
            // Bots count what they receive without decoding it: every codec the SFU forwards.
            "videoCodecs": .array(MediaCodec.videoCodecs.map { .string($0.rawValue) }),
        ]
        if role == .subscriber { data["micEnabled"] = false }
        if rejoin {
            lock.withLock { if let i = reconnections.indices.last { reconnections[i].joinSentAt = EventLoop.now() } }
        }
        let response = await channel.request(.join, .object(data), timeout: config.requestTimeout)
        let joinData: JSONValue
        switch response {
        case .success(let d): joinData = d
        case .failure(let e):
            // A bot that did not join must not act on notifications (a late join would still be live).
            if rejoin {
                await dropConnections()
            } else {
                await stop()
            }
            if e.code < 0 { throw LoadError.unreachable("join", cause: e) }
            throw LoadError.refused(e)
        }
        lock.withLock {
            joined = true
            // A server without the list forwards what it forwards: VP8 is what every receiver takes.
            roomVideoCodecs =
                joinData["roomVideoCodecs"]?.arrayValue.map {
                    MediaCodec.videoCodecs(named: $0.compactMap(\.stringValue))
                } ?? [.vp8]
        }
        if role == .subscriber {
            // The roster arrives as participantJoined events before the response (protocol 2 sends
            // it only that way; a protocol-1 response repeats it).
            let s = lock.withLock { stream }
            for p in joinData["participants"]?.arrayValue ?? [] {
                if let pid = p["participantId"]?.stringValue, let m = p["mode"]?.stringValue {
                    s?.yield(
                        (
                            RoomNotification.participantJoined,
                            ["participantId": .string(pid), "mode": .string(m)]
                        ))
                }
            }
            if config.inviteEvery != nil {
                _ = await call(.subscribe, ["topic": .string(inviteTopic)])
            }
        }
    }

    private func noteClusterNodes(_ data: JSONValue) {
        let urls = data["signalingUrls"]?.arrayValue?.compactMap(\.stringValue) ?? []
        lock.withLock { clusterURLs = urls }
    }

    private func openSubscribeConnection() async throws {
        let pc = try PeerConnection(loop: loop, configuration: connectionConfiguration, certificate: run.certificate)
        await loop.submit { [self] in
            subscribeConnection = pc
            counters.subscribeConnections.append(pc)
            // Unowned without a reference count check per packet: `stop()` clears the handler on
            // this loop before the run lets the bot go.
            pc.onRTP = { [unowned(unsafe) self] transceiver, _, packet in self.received(transceiver, packet) }
            pc.onStateChange = { [unowned self, unowned pc] state in
                guard pc === subscribeConnection else { return }
                if state == .connected, subscribeConnectedAt == 0 {
                    subscribeConnectedAt = EventLoop.now()
                    // The phases of a rejoin (report): a connection made after a loss.
                    lock.withLock {
                        if let i = reconnections.indices.last, reconnections[i].connectedAt == 0 {
                            reconnections[i].connectedAt = subscribeConnectedAt
                        }
                    }
                }
                // Its tracks never get media: the report says why, not only that they got none.
                if state == .failed {
                    run.noteError("subscribe-connection", "\(id): \(pc.failureReason ?? "failed")")
                }
            }
        }
    }

    /// The default connection settings, with the run's TURN servers.
    private var connectionConfiguration: PeerConnectionConfiguration {
        var configuration = PeerConnectionConfiguration()
        configuration.iceServers = run.configuration.iceServers
        configuration.impairment = impairment
        configuration.measuresReceiveQuality = configuration.measuresReceiveQuality && run.configuration.qualityMetrics
        return configuration
    }

    /// Sends a request; failures are counted as errors of kind `method` and returned.
    @discardableResult
    func call(_ method: RoomMethod, _ data: JSONValue) async -> Result<JSONValue, RoomError> {
        guard let channel = lock.withLock({ self.channel }) else { return .failure(RoomProtocolClient.closedError) }
        let r = await channel.request(method, data, timeout: run.configuration.requestTimeout)
        if case .failure(let e) = r, !lock.withLock({ leaving || reconnecting }) {
            run.noteError("\(method.rawValue) \(e.code) \(e.name)", "\(id): \(e.message)")
        }
        return r
    }

    // MARK: Publishing

    /// Adds webcam (optional) and mic to the publish connection, offers them with `produce` and
    /// starts the shared pre-encoded media on them.
    /// Publishes the bot's tracks; returns when its `produce` was answered and when the publish
    /// connection connected (``EventLoop/now()``), the steps of a stage invite.
    @discardableResult
    func publish(video: Bool) async throws -> (produced: UInt64, connected: UInt64) {
        let layers = run.configuration.simulcast ? 3 : 1
        let rids = layers == 3 ? ["q", "h", "f"] : []
        // Each turn on stage has a connection of its own: going back to the audience closes it.
        let pc = try PeerConnection(loop: loop, configuration: connectionConfiguration, certificate: run.certificate)
        await loop.submit { [self] in
            publishConnection?.close()
            publishConnection = pc
        }
        await pc.gatherRelayCandidates()
        let codec = run.configuration.videoCodec.resolve(roomVideoCodecs: lock.withLock { roomVideoCodecs })
        let media = try run.media(for: codec)
        let (offer, videoT, audioT) = try await loop.submit { () throws -> (String, RTPTransceiver?, RTPTransceiver) in
            let v = video ? pc.addTransceiver(kind: .video, direction: .sendonly, sendRIDs: rids) : nil
            // The m-line offers the codec the shared loop is encoded in, and nothing else.
            if codec != .vp8 { v?.setCodecPreferences([codec]) }
            let a = pc.addTransceiver(kind: .audio, direction: .sendonly)
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return (o.serialize(), v, a)
        }
        var tracks: [JSONValue] = []
        if video { tracks.append(["kind": .string(TrackKind.webcam.rawValue)]) }
        tracks.append(["kind": .string(TrackKind.mic.rawValue)])
        let response = await call(.produce, ["tracks": .array(tracks), "sdp": .string(offer)])
        let data: JSONValue
        switch response {
        case .success(let d): data = d
        case .failure(let e): throw LoadError.failed("produce failed for \(id)", cause: e)
        }
        guard let sdp = data["sdp"]?.stringValue else {
            throw LoadError.failed("produce answered \(id) without an SDP")
        }
        let produced = EventLoop.now()
        let answer = try SessionDescription.parse(sdp)
        try await loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
        try await pc.waitUntilConnected(timeout: run.configuration.requestTimeout)
        let connected = EventLoop.now()
        await loop.submit { [self] in
            pump?.detach()
            let p = MediaPump(connection: pc, video: videoT, audio: audioT, sources: media.source)
            pump = p
            p.attach()
        }
        return (produced, connected)
    }

    /// Stops sending and closes the publish connection (the mode change closed the producers and,
    /// as asked, the server's side of the connection); the next invite opens a new one.
    func stopPublishing() async {
        await loop.submit { [self] in
            pump?.detach()
            pump = nil
            publishConnection?.close()
            publishConnection = nil
        }
    }

    // MARK: Stage invites

    /// Handles an invite message on this bot's topic: calls its own changeMode and publishes, or
    /// goes back to the audience.
    private func invited(to newMode: ParticipantMode) async {
        guard newMode != mode else { return }
        run.noteModeChangeStarted()
        let began = EventLoop.now()
        var request: [String: JSONValue] = ["mode": .string(newMode.rawValue)]
        if newMode != .sendAndRecv { request["closePublishConnection"] = true }
        let r = await call(.changeMode, .object(request))
        guard case .success = r else {
            run.noteModeChange(promoted: newMode == .sendAndRecv, ok: false, seconds: 0)
            return
        }
        let answered = Double(EventLoop.now() - began) / 1e9
        mode = newMode
        if newMode == .sendAndRecv {
            do {
                let steps = try await publish(video: true)
                run.noteModeChange(
                    promoted: true, ok: true, seconds: Double(EventLoop.now() - began) / 1e9,
                    changeModeSeconds: answered,
                    publishSteps: (Double(steps.produced - began) / 1e9, Double(steps.connected - began) / 1e9))
            } catch {
                run.noteError("publish-after-invite", "\(id): \(error)")
                run.noteModeChange(promoted: true, ok: false, seconds: 0, changeModeSeconds: answered)
            }
        } else {
            await stopPublishing()
            run.noteModeChange(
                promoted: false, ok: true, seconds: Double(EventLoop.now() - began) / 1e9, changeModeSeconds: answered)
        }
    }

    // MARK: Subscriber control

    private func handle(_ notification: RoomNotification, _ data: JSONValue) async {
        switch notification {
        case .roomVideoCodecsChanged:
            guard let list = data["roomVideoCodecs"]?.arrayValue else { return }
            lock.withLock { roomVideoCodecs = MediaCodec.videoCodecs(named: list.compactMap(\.stringValue)) }
        case .participantJoined:
            guard let pid = data["participantId"]?.stringValue, pid != id else { return }
            let m = data["mode"]?.stringValue.flatMap(ParticipantMode.init(wireName:)) ?? .sendAndRecv
            if setMode(pid, m) { await reconcile() }
        case .participantLeft:
            guard let pid = data["participantId"]?.stringValue else { return }
            lock.withLock { modes[pid] = nil }
            let wasOnStage = stage.contains(pid)
            stage.removeAll { $0 == pid }
            consuming[pid] = nil
            webcamConsumers.remove(pid)
            sentViewport[pid] = nil
            if wasOnStage { await reconcile() }
        case .participantModeChanged:
            guard let pid = data["participantId"]?.stringValue, pid != id,
                let m = data["mode"]?.stringValue.flatMap(ParticipantMode.init(wireName:))
            else { return }
            if setMode(pid, m) { await reconcile() }
        case .consumerCreated:
            // The track itself was registered on arrival (noteTrack).
            guard let pid = data["participantId"]?.stringValue, let kind = data["kind"]?.stringValue else { return }
            if TrackKind(wireName: kind) == .webcam {
                webcamConsumers.insert(pid)
                await sendViewports()
            }
        case .consumerClosed:
            guard let pid = data["participantId"]?.stringValue else { return }
            if data["kind"]?.stringValue.flatMap(TrackKind.init(wireName:)) == .webcam {
                webcamConsumers.remove(pid)
                sentViewport[pid] = nil
            }
        case .pubsubMessage:
            guard data["topic"]?.stringValue == inviteTopic, let m = data["message"]?.stringValue else { return }
            if let m = ParticipantMode(wireName: m), m != .signallingOnly { await invited(to: m) }
        default:
            break
        }
    }

    /// Opens or closes the counter of the track a `consumerCreated` / `consumerClosed` announces, on
    /// the loop, in the order the notifications arrived (any thread).
    private func noteTrack(_ notification: RoomNotification, _ data: JSONValue) {
        guard let mid = data["mid"]?.stringValue else { return }
        let now = EventLoop.now()
        if notification == .consumerClosed {
            _ = loop.execute { [self] in
                if let t = tracksByMid[mid], t.closedAt == 0 {
                    t.closedAt = now
                    counters.tracksClosed += 1
                }
            }
            return
        }
        guard let pid = data["participantId"]?.stringValue, let kind = data["kind"]?.stringValue else { return }
        let mediaKind: MediaKind = TrackKind(wireName: kind)?.isAudio == true ? .audio : .video
        let track = TrackCounter(subscriberID: id, publisherID: pid, kind: mediaKind, mid: mid, createdAt: now)
        _ = loop.execute { [self] in
            if let old = tracksByMid[mid], old.closedAt == 0 {
                old.closedAt = now
                counters.tracksClosed += 1
            }
            tracksByMid[mid] = track
            routes.removeAll(keepingCapacity: true)
            allTracks.append(track)
            counters.tracksCreated += 1
        }
    }

    /// Records a participant's mode; returns whether the stage changed.
    private func setMode(_ pid: String, _ m: ParticipantMode) -> Bool {
        lock.withLock { modes[pid] = m }
        let onStage = stage.contains(pid)
        if m == .sendAndRecv {
            if !onStage { stage.append(pid) }
            return !onStage
        }
        if onStage { stage.removeAll { $0 == pid } }
        return onStage
    }

    /// Brings what this bot consumes in line with the layout: webcam + mic for tiled participants,
    /// mic only for the rest of the stage, nothing for the audience.
    private func reconcile() async {
        guard !lock.withLock({ leaving }) else { return }
        let tiles = run.configuration.layout.tiles
        var wanted: [String: Set<TrackKind>] = [:]
        var viewports: [String: (Int, Int)] = [:]
        for (i, pid) in stage.enumerated() {
            if i < tiles.count {
                wanted[pid] = [.webcam, .mic]
                viewports[pid] = tiles[i]
            } else {
                wanted[pid] = [.mic]
            }
        }
        for (pid, kinds) in consuming {
            for kind in kinds.subtracting(wanted[pid] ?? []) {
                consuming[pid]?.remove(kind)
                await call(.stopConsuming, ["participantId": .string(pid), "kind": .string(kind.rawValue)])
            }
        }
        for (pid, kinds) in wanted.sorted(by: { $0.key < $1.key }) {
            for kind in kinds.subtracting(consuming[pid] ?? []).sorted(by: { $0.rawValue < $1.rawValue }) {
                consuming[pid, default: []].insert(kind)
                await call(.consume, ["participantId": .string(pid), "kind": .string(kind.rawValue)])
            }
        }
        wantedViewport = viewports
        await sendViewports()
    }

    /// Sends setViewPort for every tiled webcam whose consumer exists and whose size changed.
    private func sendViewports() async {
        guard run.configuration.simulcast else { return }
        for (pid, size) in wantedViewport where webcamConsumers.contains(pid) {
            if let sent = sentViewport[pid], sent == size { continue }
            sentViewport[pid] = size
            await call(
                .setViewPort,
                ["participantId": .string(pid), "width": .number(Double(size.0)), "height": .number(Double(size.1))])
        }
    }

    private func answer(sdp: String, revision: Int) async {
        let offerArrived = EventLoop.now()
        guard let pc = await loop.submit({ [self] in subscribeConnection }) else { return }
        do {
            let offer = try SessionDescription.parse(sdp)
            await pc.gatherRelayCandidates()
            let answer = try await loop.submit { [self] () throws -> String in
                try pc.setRemoteDescription(offer, type: .offer)
                let a = try pc.createAnswer()
                try pc.setLocalDescription(a)
                captureTimeExtensionID = pc.negotiatedExtensionID(AbsCaptureTime.uri) ?? 0
                return a.serialize()
            }
            let r = await call(.subscriberAnswer, ["sdp": .string(answer), "revision": .number(Double(revision))])
            // The steps to each new track's first key frame: its offer, and the answer's acknowledgement.
            if case .success = r {
                let acknowledged = EventLoop.now()
                await loop.submit { [self] in
                    for t in allTracks where t.answered == 0 && t.createdAt <= offerArrived {
                        t.offered = offerArrived
                        t.answered = acknowledged
                    }
                }
            }
        } catch {
            run.noteError("subscriberOffer", "\(id): \(error)")
        }
    }

    // MARK: Hot path (loop thread)

    /// Counts one received packet. No allocation, no retain: a short scan by object identity, then
    /// integer adds.
    private func received(_ transceiver: RTPTransceiver, _ packet: ReceivedRTPPacket) {
        let key = ObjectIdentifier(transceiver)
        for i in routes.indices where routes[i].transceiver == key {
            routes[i].track._withUnsafeGuaranteedRef { count(packet, on: $0) }
            return
        }
        guard let mid = transceiver.mid, let track = tracksByMid[mid] else {
            counters.unroutedPackets &+= 1
            return
        }
        routes.append((key, Unmanaged.passUnretained(track)))
        count(packet, on: track)
    }

    @inline(__always)
    private func count(_ packet: ReceivedRTPPacket, on track: TrackCounter) {
        let size = UInt64(packet.packet.count)
        let now = packet.arrival
        track.packets &+= 1
        track.bytes &+= size
        track.lastPacket = now
        counters.packets &+= 1
        counters.bytes &+= size
        if packet.isRepair {
            track.repairs &+= 1
            return
        }
        if track.firstPacket == 0 { track.firstPacket = now }
        if track.firstKeyframe == 0, track.kind == .video, vp8PayloadStartsKeyframe(packet.payload) {
            track.firstKeyframe = now
        }
        if captureTimeExtensionID != 0,
            let r = packet.header.extensionElement(id: captureTimeExtensionID, in: packet.packet),
            let ntp = AbsCaptureTime.captureTime(packet.packet, r)
        {
            let captured = AbsCaptureTime.unixNanoseconds(ntp: ntp)
            let wall = wallClockNanoseconds()
            if captured > 0, wall >= captured {
                let latency = wall - captured
                track.latencySum &+= latency
                track.latencyCount &+= 1
                if latency > track.latencyMax { track.latencyMax = latency }
                counters.latency.add(latency)
            }
        }
    }

    /// The room as this bot sees it: participant → mode (subscribers only; they track notifications).
    var roomView: [String: ParticipantMode] { lock.withLock { modes } }

    /// Joined and not disconnected.
    var isPresent: Bool { lock.withLock { joined && !leaving } }

    /// Rejoining after its signalling connection dropped.
    var isReconnecting: Bool { lock.withLock { reconnecting } }

    /// Stamps each received track with when its subscribe connection connected (loop thread).
    func stampConnectionTime() {
        for t in allTracks where t.retiredReceiver == nil { t.connected = subscribeConnectedAt }
    }

    /// Receiver statistics per mid of this bot's subscribe connection (loop thread).
    func receiverStatsByMid() -> [String: ReceiverTotals] {
        subscribeConnection.map(ReceiverTotals.byMid) ?? [:]
    }

    /// Sender statistics of this bot's publish connection (loop thread).
    func senderStats() -> [(kind: MediaKind, stats: RTPSenderStats)] {
        publishConnection?.senderStats().map { ($0.kind, $0.stats) } ?? []
    }

    // MARK: Teardown

    /// The signalling socket `closed` closed. The current one, with the bot joined and
    /// ``LoadConfiguration/reconnectWindow`` set: the bot rejoins. Otherwise it is gone.
    private func connectionClosed(_ closed: RoomProtocolClient?) {
        let lostAt = EventLoop.now()
        enum Next {
            case ignore, rejoin
            case gone(report: Bool)
        }
        let next = lock.withLock { () -> Next in
            // A rejoin attempt's refused join, or a socket already replaced.
            guard let closed, closed === channel, !reconnecting else { return .ignore }
            if leaving { return .ignore }
            if joined, run.configuration.reconnectWindow != nil {
                reconnecting = true
                joined = false
                reconnections.append(Reconnection(lostAt: lostAt))
                return .rejoin
            }
            leaving = true
            // A refused join closes the socket too: it is reported once, as the join's failure.
            return .gone(report: joined)
        }
        switch next {
        case .ignore: return
        case .rejoin: Task { await self.rejoin() }
        case .gone(let report):
            if report { run.noteError("disconnected", "\(id): signalling connection closed by the server") }
            lock.withLock { stream }?.finish()
            lock.withLock { offers }?.finish()
        }
    }

    /// Rejoins with the same participant id through the first reachable node (its own, then the
    /// cluster's), following the SDK's ``ReconnectPolicy``: new media connections, the stage
    /// consumed again by layout, a publisher publishing again; an invited guest comes back in the
    /// audience.
    private func rejoin() async {
        await dropConnections()
        if role == .subscriber { mode = .recvOnly }
        let policy = ReconnectPolicy(window: run.configuration.reconnectWindow ?? 0)
        let rejoined = await policy.retry(stop: { [self] in lock.withLock { leaving } }) { [self] in
            let own = run.signalingURL(room: room)
            let others = lock.withLock { clusterURLs }.map { run.signalingURL(room: room, base: $0) }
            let attempt = lock.withLock { () -> Int in
                reconnections[reconnections.count - 1].attempts.append((EventLoop.now(), nil))
                return reconnections[reconnections.count - 1].attempts.count - 1
            }
            do {
                try await connectAndJoin(urls: ReconnectPolicy.nodeOrder(own: own, cluster: others), rejoin: true)
                let joinedAt = EventLoop.now()
                var published: UInt64 = 0
                if role != .subscriber { published = try await publish(video: role == .publisher).connected }
                lock.withLock {
                    reconnections[reconnections.count - 1].rejoinedAt = joinedAt
                    reconnections[reconnections.count - 1].publishedAt = published
                    reconnecting = false
                }
                return true
            } catch {
                lock.withLock {
                    reconnections[reconnections.count - 1].attempts[attempt].failure = String(describing: error)
                }
                await dropConnections()
                return false
            }
        }
        guard !rejoined else { return }
        let gaveUp = lock.withLock { () -> Bool in
            reconnecting = false
            if !reconnections.isEmpty { reconnections[reconnections.count - 1].failed = true }
            defer { leaving = true }
            return !leaving
        }
        if gaveUp {
            run.noteError("reconnect-failed", "\(id): no node took the rejoin within the reconnect window")
        }
    }

    /// Closes the signalling socket and both media connections and forgets the room as seen through
    /// them, keeping what was counted (before a rejoin attempt).
    private func dropConnections() async {
        let (old, s, o, control, answers) = lock.withLock {
            defer {
                channel = nil
                stream = nil
                offers = nil
                controlTask = nil
                answerTask = nil
                joined = false
            }
            return (channel, stream, offers, controlTask, answerTask)
        }
        old?.setCloseHandler(nil)
        old?.setNotificationHandler(nil)
        old?.close()
        s?.finish()
        o?.finish()
        // Their requests on the closed socket fail at once; then the control state is theirs no more.
        await control?.value
        await answers?.value
        stage = []
        consuming = [:]
        wantedViewport = [:]
        sentViewport = [:]
        webcamConsumers = []
        lock.withLock { modes = [:] }
        let now = EventLoop.now()
        await loop.submit { [self] in
            pump?.detach()
            pump = nil
            publishConnection?.close()
            publishConnection = nil
            if let pc = subscribeConnection {
                let stats = ReceiverTotals.byMid(pc)
                for t in allTracks where t.retiredReceiver == nil {
                    t.retiredReceiver = stats[t.mid] ?? ReceiverTotals()
                    t.connected = subscribeConnectedAt
                    if t.closedAt == 0 {
                        t.closedAt = now
                        counters.tracksClosed += 1
                    }
                }
                pc.onRTP = nil
                pc.close()
                counters.retire(pc)
            }
            subscribeConnection = nil
            subscribeConnectedAt = 0
            tracksByMid = [:]
            routes.removeAll()
            captureTimeExtensionID = 0
        }
    }

    /// This bot's reconnections as the report shows them (loop thread): rejoin and media-again
    /// times from the loss of the signalling connection. Media again: a subscriber's first packet
    /// on a track announced after the loss (before the next one), a publisher's publish connection
    /// connected.
    func reconnectionResults(wallOffsetNanos: Int64) -> [LoadReport.Reconnection] {
        let list = lock.withLock { reconnections }
        return list.enumerated().map { i, r in
            let next = i + 1 < list.count ? list[i + 1].lostAt : UInt64.max
            var media: UInt64 = r.publishedAt
            var announced: UInt64 = 0
            if role == .subscriber {
                let after = allTracks.filter { $0.createdAt >= r.lostAt && $0.createdAt < next }
                media = after.filter { $0.firstPacket != 0 }.map(\.firstPacket).min() ?? 0
                announced = after.map(\.createdAt).min() ?? 0
            }
            func ms(_ at: UInt64) -> Double? { at > r.lostAt ? Double(at - r.lostAt) / 1e6 : nil }
            return LoadReport.Reconnection(
                bot: id, lostAtUnixMs: Double(Int64(r.lostAt) &+ wallOffsetNanos) / 1e6, rejoinMs: ms(r.rejoinedAt),
                mediaMs: ms(media), failed: r.failed,
                attemptsMs: r.attempts.map { ms($0.startedAt) ?? 0 },
                attemptFailures: r.attempts.compactMap(\.failure),
                trackAnnouncedMs: ms(announced), connectedMs: ms(r.connectedAt), socketMs: ms(r.socketAt),
                joinSentMs: ms(r.joinSentAt))
        }
    }

    /// Leaves the room and closes both connections.
    func stop() async {
        let channel = lock.withLock { () -> RoomProtocolClient? in
            leaving = true
            return self.channel
        }
        if let channel {
            _ = await channel.request(.leave, [:], timeout: 2)
            channel.close()
        }
        lock.withLock { stream }?.finish()
        lock.withLock { offers }?.finish()
        let (control, answers) = lock.withLock { (controlTask, answerTask) }
        control?.cancel()
        answers?.cancel()
        await loop.submit { [self] in
            pump?.detach()
            pump = nil
            publishConnection?.close()
            subscribeConnection?.onRTP = nil
            subscribeConnection?.close()
            if let pc = subscribeConnection { counters.subscribeConnections.removeAll { $0 === pc } }
        }
    }
}
