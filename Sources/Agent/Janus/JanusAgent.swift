import Foundation
import Janus
import Media
import RTC
import RTCWire
import Signaling

/// The room agent for a Janus VideoRoom (`understudy join --server janus://HOST:PORT/ROOM`).
///
/// Janus's publisher list plays the part of our stage: the agent joins the room as a publisher
/// participant (publishing only when asked), subscribes to the publishers its consume policy
/// picks, one subscriber handle and PeerConnection per feed, records them and sends them as
/// ``RoomAgent`` does, and follows the room's `publishers`/`unpublished`/`leaving` events.
/// ``stop()`` detaches every handle and destroys the session.
// Safe: its mutable state is guarded by `lock`; RTC objects it holds are touched on their loop only.
public final class JanusAgent: @unchecked Sendable {
    /// Everything the agent needs; the subset of ``RoomAgent/Options`` that Janus can honour.
    public struct Options: Sendable {
        public var url: JanusRoomURL
        public var display: String = "understudy"
        /// `.stage` and `.all` are the same here: only publishers carry media.
        public var consume: ConsumePolicy = .all
        public var kinds: Set<MediaKind> = [.audio, .video]
        public var maxVideo: Int?
        public var recordDirectory: String?
        public var recordFormat: RoomAgent.RecordFormat = .webm
        public var rtpOutputURL: String?
        /// Publish `video`/`audio` into the room (`--mode SEND_AND_RECV`).
        public var publish = false
        public var video: String?
        public var audio: String?

        public init(url: JanusRoomURL) { self.url = url }
    }

    /// One subscribed feed: its handle, PeerConnection and recording slots (written on the loop thread).
    // Safe: guarded by `lock`; its PeerConnection and recordings are touched on the feed's loop only.
    final class Feed: @unchecked Sendable {
        let id: UInt64
        let display: String
        let handle: UInt64
        let pc: PeerConnection
        var slots: [MediaKind?: ParticipantRecorder.Slot] = [:]
        var frames = 0
        var videoFrames = 0
        var audioFrames = 0
        /// Whether the feed takes one of the `maxVideo` slots.
        var video = false
        init(id: UInt64, display: String, handle: UInt64, pc: PeerConnection) {
            self.id = id
            self.display = display
            self.handle = handle
            self.pc = pc
        }
    }

    public let options: Options
    private let log: @Sendable (String) -> Void
    private let loop = EventLoop(name: "janus-agent")
    private let lock = NSLock()
    private var session: JanusSession?
    private var publisherHandle: UInt64?
    private var publisherPC: PeerConnection?
    private var pump: MediaPump?
    private var feeds: [UInt64: Feed] = [:]
    /// Feeds being subscribed right now (so that a repeated `publishers` event does not subscribe twice).
    private var pendingFeeds: Set<UInt64> = []
    /// Final frame counts of publishers that left, by display name.
    private var departedCounts: [String: (video: Int, audio: Int)] = [:]
    /// The recordings, and the manifest whose participants are the publishers seen.
    private let recorder: ParticipantRecorder
    private var rtpOutput: RTPOutput?
    private var stopped = false
    private var joinedRoom = false
    private var lostReason: String?
    /// What ends ``run(duration:until:)``.
    private let runEnd = RunEnd()
    /// Subscriptions run one after another (Janus handles them fine in parallel; our logs stay readable).
    private let operations = SerialTasks()

    public init(options: Options, log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.options = options
        self.log = log
        recorder = ParticipantRecorder(
            directory: options.recordDirectory, format: options.recordFormat, writesManifest: true,
            manifest: RecordingManifest(
                backend: "janus", room: String(options.url.room), recordFormat: options.recordFormat.rawValue),
            log: log)
        var hooks = ParticipantRecorder.Hooks()
        // The stage is Janus's publisher list: every publisher seen that has not left.
        hooks.beforeManifestWrite = { m in m.stage = m.participants.filter { $0.leftAt == nil }.map(\.id) }
        recorder.observe(hooks)
    }

    /// Why the agent ended on its own (Janus gone, kicked), nil while it runs or after ``stop()``.
    public var failure: String? { lock.withLock { lostReason } }

    /// Creates the session, joins the room, publishes when asked and subscribes to the current publishers.
    public func start() async throws {
        if let dir = options.recordDirectory {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        }
        if let url = options.rtpOutputURL {
            rtpOutput = try await RTPOutput.start(url: url, loop: loop, sdpDirectory: options.recordDirectory, log: log)
        }
        let session = try await JanusSession(api: options.url.api)
        lock.withLock { self.session = session }
        session.onEvent = { [weak self] event in self?.handle(event) }
        let handle = try await session.attach()
        lock.withLock { publisherHandle = handle }
        let joined = try await session.joinAsPublisher(handle, room: options.url.room, display: options.display)
        lock.withLock { joinedRoom = true }
        log("joined Janus room \(options.url.room) as feed \(joined.feed) (session \(session.sessionId))")
        if options.publish { try await publish(session: session, handle: handle) }
        recorder.update { _ in }
        considerPublishers(joined.reply.data["publishers"])
    }

    /// Runs until `duration` passes, `stopEvent` returns (the CLI passes its SIGTERM/SIGINT wait) or
    /// Janus goes away; then ``stop()``. Each of these wakes the run itself; nothing is polled.
    public func run(duration: Double?, until stopEvent: (@Sendable () async -> Void)? = nil) async {
        await runEnd.wait(duration: duration, until: stopEvent) { [weak self] in self?.endRun(lost: nil) }
        await stop()
    }

    /// Ends a pending ``run(duration:until:)``; `lost` records why Janus went away.
    private func endRun(lost reason: String?) {
        if let reason { lock.withLock { lostReason = reason } }
        runEnd.end()
    }

    /// Unpublishes, closes every PeerConnection and recording, detaches the handles and destroys the session.
    /// Calls after the first do nothing.
    public func stop() async {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        // A subscription under way finishes first (no new one starts once `stopped` is set).
        await operations.drain()
        let (session, feeds, publisherHandle) = lock.withLock {
            (self.session, Array(self.feeds.values), self.publisherHandle)
        }
        let pump = self.pump
        let publisherPC = self.publisherPC
        let rtpOutput = self.rtpOutput
        await loop.submit {
            pump?.close()
            publisherPC?.close()
            for feed in feeds {
                feed.pc.onFrame = nil
                feed.pc.close()
            }
            rtpOutput?.close()
        }
        await recorder.close()
        if let session {
            for feed in feeds { await session.detach(feed.handle) }
            if let publisherHandle { await session.detach(publisherHandle) }
            await session.destroy()
        }
        await recorder.flush()
        loop.shutdown()
        if lock.withLock({ joinedRoom }) { log("left Janus room \(options.url.room) (\(feeds.count) feeds)") }
    }

    // MARK: What the agent sees (for scenarios and tests)

    /// Display names of the publishers in the room now (Janus's stage), ourselves excluded.
    public var publisherNames: [String] {
        recorder.manifest.participants.filter { $0.leftAt == nil }.compactMap(\.display).sorted()
    }

    /// Whether this agent publishes (it is then on Janus's stage too).
    public var isPublishing: Bool { lock.withLock { pump != nil } }

    /// Frames received so far from each consumed publisher, by display name.
    public func frameCounts() async -> [String: (video: Int, audio: Int)] {
        let (feeds, done) = lock.withLock { (Array(self.feeds.values), stopped) }
        // After stop() the loop is gone and the feeds' counters no longer change.
        if done { return counts(feeds) }
        return await loop.submit { self.counts(feeds) }
    }

    private func counts(_ feeds: [Feed]) -> [String: (video: Int, audio: Int)] {
        // Publishers that left keep the count they ended with.
        var counts = lock.withLock { departedCounts }
        for feed in feeds { counts[feed.display] = (feed.videoFrames, feed.audioFrames) }
        return counts
    }

    /// Recording files by publisher display name.
    public var recordingPaths: [String: String] {
        var paths: [String: String] = [:]
        for file in recorder.manifest.files {
            if let display = file.display { paths[display] = file.path }
        }
        return paths
    }

    // MARK: Publishing

    private func publish(session: JanusSession, handle: UInt64) async throws {
        let video = LocalSources.video(options.video)
        let audio = LocalSources.audio(options.audio)
        let videoSource =
            video == .none ? nil : try LocalSources.makeSource(kind: .video, layers: 1, video: video, audio: audio)
        let audioSource =
            audio == .none ? nil : try LocalSources.makeSource(kind: .audio, layers: 1, video: video, audio: audio)
        let pc = try PeerConnection(loop: loop)
        // Handed to the loop thread, which owns the sources from then on.
        nonisolated(unsafe) let sources = (video: videoSource, audio: audioSource)
        let (pump, offer) = try await loop.submit { () throws -> (MediaPump, SessionDescription) in
            let a = sources.audio == nil ? nil : pc.addTransceiver(kind: .audio, direction: .sendonly)
            let v = sources.video == nil ? nil : pc.addTransceiver(kind: .video, direction: .sendonly)
            let pump = MediaPump(
                connection: pc, video: v, videoSource: sources.video, audio: a, audioSource: sources.audio)
            let offer = try pc.createOffer()
            try pc.setLocalDescription(offer)
            return (pump, offer)
        }
        lock.withLock {
            self.publisherPC = pc
            self.pump = pump
        }
        let answer = try SessionDescription.parse(
            try await session.publish(handle, offer: offer.serialize(), display: options.display))
        try await loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
        try await pc.waitUntilConnected(timeout: 15)
        await loop.submit { pump.attach() }
        log("publishing into Janus room \(options.url.room)")
    }

    // MARK: Events

    private func handle(_ event: JanusMessage) {
        switch event.kind {
        case "session_lost":
            endRun(lost: "lost the Janus session: \(event.json["reason"]?.stringValue ?? "")")
            log("lost the Janus session")
        case "hangup":
            // Our own stop() closes the PeerConnections first; Janus then reports their DTLS alert.
            guard let sender = event.sender, !lock.withLock({ stopped }) else { return }
            let feed = lock.withLock { feeds.values.first { $0.handle == sender } }
            if let feed { log("Janus hung up feed \(feed.id): \(event.json["reason"]?.stringValue ?? "")") }
            if sender == lock.withLock({ publisherHandle }) {
                endRun(lost: "Janus hung up our publisher")
            }
        case "event":
            let data = event.data
            if let publishers = data["publishers"] { considerPublishers(publishers) }
            for key in ["unpublished", "leaving"] {
                // `leaving: "ok"` is our own leave; only a number names another feed.
                if let id = data[key]?.intValue { enqueue { await self.unsubscribe(UInt64(id)) } }
            }
            if data["videoroom"]?.stringValue == "destroyed" {
                endRun(lost: "the Janus room was destroyed")
            }
        default:
            break
        }
    }

    /// Subscribes to every publisher in `list` that the consume policy picks.
    private func considerPublishers(_ list: JSONValue?) {
        for publisher in list?.arrayValue ?? [] {
            guard let idNumber = publisher["id"]?.intValue else { continue }
            let id = UInt64(idNumber)
            let display = publisher["display"]?.stringValue ?? ""
            let streams = (publisher["streams"]?.arrayValue ?? []).compactMap { s -> (mid: String, kind: MediaKind)? in
                guard s["disabled"]?.boolValue != true, let mid = s["mid"]?.stringValue else { return nil }
                switch s["type"]?.stringValue {
                case "audio": return (mid, .audio)
                case "video": return (mid, .video)
                default: return nil
                }
            }
            notePublisher(id, display)
            let wanted: Bool = lock.withLock {
                guard !stopped, feeds[id] == nil, !pendingFeeds.contains(id),
                    options.consume.picks(Self.candidate(id, display))
                else { return false }
                pendingFeeds.insert(id)
                return true
            }
            log("publisher \(id) (\(display)) \(wanted ? "consumed" : "seen")")
            if wanted { enqueue { await self.subscribe(id: id, display: display, streams: streams) } }
        }
    }

    /// A publisher in the manifest: new, or back after leaving.
    private func notePublisher(_ id: UInt64, _ display: String) {
        recorder.update { m in
            let entry = RecordingManifest.Participant(
                id: String(id), display: display, joinedAt: RecordingManifest.timestamp())
            if let i = m.participants.firstIndex(where: { $0.id == entry.id }) {
                if m.participants[i].leftAt != nil { m.participants[i] = entry }
            } else {
                m.participants.append(entry)
                // In feed id order (ids are numbers).
                m.participants.sort { (UInt64($0.id) ?? 0) < (UInt64($1.id) ?? 0) }
            }
        }
    }

    /// A publisher as the consume policy sees it: on Janus's stage, named by its feed id or display.
    static func candidate(_ id: UInt64, _ display: String) -> ConsumePolicy.Candidate {
        ConsumePolicy.Candidate(id: String(id), aliases: [display], onStage: true)
    }

    private func enqueue(_ work: @escaping @Sendable () async -> Void) { operations.enqueue(work) }

    // MARK: Subscribing

    private func subscribe(id: UInt64, display: String, streams: [(mid: String, kind: MediaKind)]) async {
        defer { lock.withLock { _ = pendingFeeds.remove(id) } }
        guard let session = lock.withLock({ stopped ? nil : self.session }) else { return }
        // A feed's kinds are chosen once, when it is subscribed: webcam slots held stay held.
        let holders = lock.withLock { feeds.values.filter(\.video).map { Self.candidate($0.id, $0.display) } }
        let kinds =
            options.consume.wanted(
                holders + [Self.candidate(id, display)], kinds: options.kinds, maxVideo: options.maxVideo,
                holdingVideo: Set(holders.map(\.id)))[String(id)] ?? []
        let chosen = streams.filter { kinds.contains($0.kind) }
        guard !chosen.isEmpty else {
            log("publisher \(id): none of its streams is wanted")
            return
        }
        do {
            let handle = try await session.attach()
            let joined = try await session.joinAsSubscriber(
                handle, room: options.url.room,
                streams: chosen.map { ["feed": .number(Double(id)), "mid": .string($0.mid)] })
            let offer = try SessionDescription.parse(joined.offer)
            let pc = try PeerConnection(loop: loop)
            let feed = Feed(id: id, display: display, handle: handle, pc: pc)
            let answer = try await loop.submit { () throws -> SessionDescription in
                for stream in chosen { pc.addTransceiver(kind: stream.kind, direction: .recvonly) }
                pc.onFrame = { [weak self, feed] _, _, frame, timing in
                    self?.received(frame, arrival: timing.arrivalTime, feed: feed)
                }
                try pc.setRemoteDescription(offer, type: .offer)
                let answer = try pc.createAnswer()
                try pc.setLocalDescription(answer)
                return answer
            }
            lock.withLock {
                feeds[id] = feed
                feed.video = chosen.contains { $0.kind == .video }
            }
            try await session.start(handle, answer: answer.serialize())
            try await pc.waitUntilConnected(timeout: 15)
            log(
                "subscribed to \(id) (\(display)): \(chosen.map { $0.kind == .audio ? "audio" : "video" }.joined(separator: "+"))"
            )
        } catch {
            log("cannot subscribe to \(id): \(error)")
        }
    }

    private func unsubscribe(_ id: UInt64) async {
        recorder.update { m in
            if let i = m.participants.firstIndex(where: { $0.id == String(id) }) {
                m.participants[i].leftAt = RecordingManifest.timestamp()
            }
        }
        guard
            let (feed, session) = lock.withLock({ () -> (Feed, JanusSession?)? in
                guard let feed = feeds.removeValue(forKey: id) else { return nil }
                return (feed, session)
            })
        else { return }
        let final = await loop.submit { () -> (video: Int, audio: Int) in
            feed.pc.onFrame = nil
            feed.pc.close()
            return (feed.videoFrames, feed.audioFrames)
        }
        lock.withLock { departedCounts[feed.display] = final }
        await recorder.close(participantId: String(id))
        await session?.detach(feed.handle)
        log("publisher \(id) (\(feed.display)) left; \(feed.frames) frames received")
    }

    // MARK: Frames (loop thread)

    private func received(_ frame: EncodedFrame, arrival: UInt64, feed: Feed) {
        feed.frames += 1
        if frame.codec.kind == .video { feed.videoFrames += 1 } else { feed.audioFrames += 1 }
        if options.recordDirectory != nil { record(frame, arrival: arrival, feed: feed) }
        rtpOutput?.send(frame, arrival: arrival)
    }

    /// Writes `frame` to the feed's slot; the recorder opens the file on its own queue.
    private func record(_ frame: EncodedFrame, arrival: UInt64, feed: Feed) {
        let key = recorder.key(participantId: String(feed.id), kind: frame.codec.kind)
        if let slot = feed.slots[key.kind] {
            slot.write(frame, arrival: arrival)
            return
        }
        // The feed id is a number, so `DISPLAY-ID` splits back at its last `-`: distinct feeds, distinct names.
        let name = feed.display.isEmpty ? "\(feed.id)" : "\(feed.display)-\(feed.id)"
        guard let slot = recorder.slot(key, name: name, display: feed.display) else { return }
        feed.slots[key.kind] = slot
        slot.write(frame, arrival: arrival)
    }
}
