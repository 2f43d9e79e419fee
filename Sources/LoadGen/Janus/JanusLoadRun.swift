import Foundation
import Janus
import Media
import RTC
import RTCWire
import RoomProtocol
import Signaling

/// `understudy load --server janus://HOST:PORT/ROOM`: publisher and subscriber bots in a Janus VideoRoom.
///
/// Each bot is a Janus session of its own, as a browser would be. Publishers send the synthetic test
/// pattern (one layer: Janus simulcast is not driven) and tone; audio publishers only the tone. Once
/// every publisher is up, each subscriber joins with one subscriber handle for every stream of every
/// publisher (Janus multistream: one PeerConnection). The run lasts `duration` from the first join
/// and, on a busy machine, goes on until every subscribed track has received a frame (at most
/// `maxDuration`), then `settleSeconds` more. The report is the usual ``LoadReport``: receiver
/// statistics per track (packets, loss, NACKs, PLIs) and the time from `start` to the first frame.
// Safe: shared state is guarded by `lock`; RTC objects are touched on their loop only.
public final class JanusLoadRun: @unchecked Sendable {
    public let configuration: LoadConfiguration
    public let room: JanusRoomURL
    /// Called about once a second with the progress.
    public var onProgress: (@Sendable (LoadProgress) -> Void)?

    /// One load bot: its session, handle, PeerConnection and (subscribers) tracks by mid.
    // Safe: guarded by `lock`; its PeerConnection and tracks are touched on the bot's loop only.
    final class JanusLoadBot: @unchecked Sendable {
        let id: String
        let loop: EventLoop
        var session: JanusSession?
        var handle: UInt64?
        var pc: PeerConnection?
        var pump: MediaPump?
        var feed: UInt64?
        /// Subscriber tracks by mid; read and written on `loop` once the PeerConnection exists.
        var tracks: [String: TrackCounter] = [:]
        init(id: String, loop: EventLoop) {
            self.id = id
            self.loop = loop
        }
    }

    private let loops: [EventLoop]
    private let media: SyntheticMedia
    private let lock = NSLock()
    private var bots: [JanusLoadBot] = []
    private var joinLatencies: [Double] = []
    private var joinFailures = 0
    private var errorCounts: [String: (count: Int, example: String)] = [:]
    /// The previous progress sample: when, and the bytes received by then (for the rate).
    private var lastProgress: (at: Date, bytes: UInt64)?

    public init(configuration: LoadConfiguration, room: JanusRoomURL) {
        self.configuration = configuration
        self.room = room
        // Janus announces no codecs its receivers take: `auto` is VP8 there.
        media = SyntheticMedia.shared(layers: 1, codec: configuration.videoCodec.resolve(roomVideoCodecs: [.vp8]))
        loops = (0..<configuration.loopCount).map { EventLoop(name: "janus-load-\($0)") }
    }

    /// Runs the test and returns its report; `shouldStop` ends it early (the CLI passes its
    /// SIGINT/SIGTERM flag).
    public func run(until shouldStop: @Sendable () -> Bool = { false }) async throws(LoadError) -> LoadReport {
        let c = configuration
        let planned = c.publishers + c.audioPublishers + c.subscribers
        let started = Date()
        let cpuStart = currentProcessCPUSeconds()
        let loopCPUStart = await loopCPU()
        let baseline = residentBytes()
        var rss = [LoadReport.RSSSample(seconds: 0, bytes: baseline)]
        let interval = 1 / c.joinRate
        let progressTask = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 1_000_000_000)
                guard let self, !Task.isCancelled else { return }
                await self.reportProgress(planned: planned, since: started)
            }
        }
        // Stopped before the loops shut down (it submits work to them).
        func stopProgress() async {
            progressTask.cancel()
            await progressTask.value
        }

        // Publishers first, so that every subscriber finds them all.
        await startBots(c.publishers + c.audioPublishers, role: "pub", interval: interval, after: 0) { bot, i in
            await self.publish(bot, video: i < c.publishers)
        }
        let feeds = lock.withLock { bots.compactMap { bot in bot.feed.map { (feed: $0, display: bot.id) } } }
        if feeds.isEmpty && c.publishers + c.audioPublishers > 0 {
            let first = lock.withLock { errorCounts.first?.value.example ?? "no publisher could join" }
            await stopProgress()
            await teardown()
            // A transport failure means nobody answered at the API address.
            if first.hasPrefix("Janus HTTP API") { throw .unreachable(first) }
            throw .refused(RoomError(code: 0, name: "janus", message: first))
        }
        let publishers = c.publishers + c.audioPublishers
        await startBots(c.subscribers, role: "sub", interval: interval, after: publishers) { bot, _ in
            await self.subscribe(bot, to: feeds)
        }

        // Duration from the first join; then until every track has media (bounded), then settle.
        var trackDeadline: Date?
        while !shouldStop() {
            let elapsed = Date().timeIntervalSince(started)
            if elapsed >= c.maxDuration { break }
            if elapsed >= c.duration {
                let (tracks, receiving) = await trackCounts()
                if receiving == tracks {
                    if trackDeadline == nil { trackDeadline = Date().addingTimeInterval(c.settleSeconds) }
                    if let d = trackDeadline, Date() >= d { break }
                }
            }
            try? await Task.sleep(nanoseconds: 200_000_000)
        }
        await stopProgress()
        rss.append(LoadReport.RSSSample(seconds: Date().timeIntervalSince(started), bytes: residentBytes()))
        let elapsed = Date().timeIntervalSince(started)
        let loopCPUEnd = await loopCPU()
        let report = await buildReport(
            planned: planned, elapsed: elapsed, cpu: currentProcessCPUSeconds() - cpuStart,
            loopCPU: loopCPUEnd - loopCPUStart, rss: rss)
        await teardown()
        return report
    }

    // MARK: Bots

    /// Opens the bot's Janus session and attaches its VideoRoom handle.
    private func attach(_ bot: JanusLoadBot) async throws -> (JanusSession, UInt64) {
        let session = try await JanusSession(api: room.api)
        bot.session = session
        let handle = try await session.attach()
        bot.handle = handle
        return (session, handle)
    }

    private func publish(_ bot: JanusLoadBot, video: Bool) async {
        let start = Date()
        do {
            let (session, handle) = try await attach(bot)
            let (feed, _) = try await session.joinAsPublisher(handle, room: room.room, display: bot.id)
            let pc = try PeerConnection(loop: bot.loop)
            bot.pc = pc
            let media = self.media
            let (pump, offer) = try await bot.loop.submit { () throws -> (MediaPump, SessionDescription) in
                let a = pc.addTransceiver(kind: .audio, direction: .sendonly)
                let v = video ? pc.addTransceiver(kind: .video, direction: .sendonly) : nil
                // The room's `videocodec` must list it (h264): Janus answers what it takes.
                if media.videoCodec != .vp8 { v?.setCodecPreferences([media.videoCodec]) }
                let pump = MediaPump(connection: pc, video: v, audio: a, sources: media.source)
                let offer = try pc.createOffer()
                try pc.setLocalDescription(offer)
                return (pump, offer)
            }
            bot.pump = pump
            let answer = try SessionDescription.parse(try await session.publish(handle, offer: offer.serialize()))
            try await bot.loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
            try await pc.waitUntilConnected(timeout: configuration.requestTimeout)
            await bot.loop.submit { pump.attach() }
            bot.feed = feed
            noteJoined(start)
        } catch {
            failed("publish", error)
        }
    }

    /// Starts `count` bots `<idPrefix>-<role>-<i>`, one every `interval` seconds, the loops taken in
    /// turn after the `after` bots started before them, and waits until each one's `join` returned.
    private func startBots(
        _ count: Int, role: String, interval: Double, after: Int,
        join: @escaping @Sendable (JanusLoadBot, Int) async -> Void
    ) async {
        var joins: [Task<Void, Never>] = []
        for i in 0..<count {
            let bot = JanusLoadBot(
                id: "\(configuration.idPrefix)-\(role)-\(i)", loop: loops[(after + i) % loops.count])
            lock.withLock { bots.append(bot) }
            joins.append(Task { await join(bot, i) })
            try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
        }
        for task in joins { await task.value }
    }

    private func subscribe(_ bot: JanusLoadBot, to feeds: [(feed: UInt64, display: String)]) async {
        let start = Date()
        do {
            let (session, handle) = try await attach(bot)
            let (offerSDP, reply) = try await session.joinAsSubscriber(
                handle, room: room.room, streams: feeds.map { ["feed": .number(Double($0.feed))] })
            // Janus lists the streams of its offer in m-line order: mid, type and the feed they carry.
            let names = Dictionary(uniqueKeysWithValues: feeds.map { ($0.feed, $0.display) })
            let streams = (reply.data["streams"]?.arrayValue ?? []).compactMap {
                s -> (mid: String, kind: MediaKind, publisher: String)? in
                guard let mid = s["mid"]?.stringValue, s["active"]?.boolValue != false else { return nil }
                let kind: MediaKind
                switch s["type"]?.stringValue {
                case "audio": kind = .audio
                case "video": kind = .video
                default: return nil
                }
                let feed = s["feed_id"]?.intValue.map { UInt64($0) } ?? 0
                return (mid, kind, names[feed] ?? String(feed))
            }
            let offer = try SessionDescription.parse(offerSDP)
            let pc = try PeerConnection(loop: bot.loop)
            bot.pc = pc
            let subscriber = bot.id
            let answer = try await bot.loop.submit { () throws -> SessionDescription in
                let now = EventLoop.now()
                for s in streams {
                    pc.addTransceiver(kind: s.kind, direction: .recvonly)
                    bot.tracks[s.mid] = TrackCounter(
                        subscriberID: subscriber, publisherID: s.publisher, kind: s.kind, mid: s.mid, createdAt: now)
                }
                pc.onFrame = { transceiver, _, frame, timing in
                    guard let mid = transceiver.mid, let track = bot.tracks[mid] else { return }
                    if track.firstPacket == 0 { track.firstPacket = timing.arrivalTime }
                    if frame.isKeyframe && track.firstKeyframe == 0 { track.firstKeyframe = timing.arrivalTime }
                    track.lastPacket = timing.arrivalTime
                }
                try pc.setRemoteDescription(offer, type: .offer)
                let answer = try pc.createAnswer()
                try pc.setLocalDescription(answer)
                return answer
            }
            try await session.start(handle, answer: answer.serialize())
            try await pc.waitUntilConnected(timeout: configuration.requestTimeout)
            noteJoined(start)
        } catch {
            failed("subscribe", error)
        }
    }

    private func noteJoined(_ start: Date) {
        let seconds = Date().timeIntervalSince(start)
        lock.withLock { joinLatencies.append(seconds) }
    }

    private func failed(_ kind: String, _ error: Error) {
        lock.withLock {
            joinFailures += 1
            let previous = errorCounts[kind]
            errorCounts[kind] = ((previous?.count ?? 0) + 1, previous?.example ?? "\(error)")
        }
    }

    // MARK: Measuring

    /// Subscribed tracks, and those that have received a frame.
    private func trackCounts() async -> (tracks: Int, receiving: Int) {
        var tracks = 0
        var receiving = 0
        for bot in lock.withLock({ bots }) where bot.pc != nil {
            let (t, r) = await bot.loop.submit {
                (bot.tracks.count, bot.tracks.values.filter { $0.firstPacket != 0 }.count)
            }
            tracks += t
            receiving += r
        }
        return (tracks, receiving)
    }

    private func loopCPU() async -> Double {
        var total = 0.0
        for loop in loops { total += await loop.submit { Double(threadCPUNanoseconds()) / 1e9 } }
        return total
    }

    private func reportProgress(planned: Int, since started: Date) async {
        var received: UInt64 = 0
        var lost: Int64 = 0
        var bytes: UInt64 = 0
        var tracks = 0
        for bot in lock.withLock({ bots }) {
            guard let pc = bot.pc else { continue }
            let (r, l, b, t) = await bot.loop.submit { () -> (UInt64, Int64, UInt64, Int) in
                let stats = pc.receiverStats()
                return (
                    stats.reduce(0) { $0 &+ $1.stats.packetsReceived },
                    stats.reduce(0) { $0 &+ max(0, $1.stats.packetsLost) },
                    stats.reduce(0) { $0 &+ $1.stats.bytesReceived },
                    bot.tracks.values.filter { $0.firstPacket != 0 }.count
                )
            }
            received &+= r
            lost &+= l
            bytes &+= b
            tracks += t
        }
        let now = Date()
        let (joined, failures, previous) = lock.withLock {
            defer { lastProgress = (now, bytes) }
            return (joinLatencies.count, joinFailures, lastProgress)
        }
        let seconds = previous.map { now.timeIntervalSince($0.at) } ?? 0
        let mbps = seconds > 0 ? Double(bytes &- (previous?.bytes ?? 0)) * 8 / seconds / 1e6 : 0
        let expected = Double(received) + Double(lost)
        onProgress?(
            LoadProgress(
                elapsed: now.timeIntervalSince(started), joined: joined, planned: planned, failed: failures,
                tracks: tracks, mbps: mbps, lossPercent: expected > 0 ? Double(lost) / expected * 100 : 0,
                rssBytes: residentBytes(), packetsReceived: received, packetsLost: lost, loopCPUSeconds: 0))
    }

    private func buildReport(
        planned: Int, elapsed: Double, cpu: Double, loopCPU: Double, rss: [LoadReport.RSSSample]
    ) async -> LoadReport {
        var tracks: [LoadReport.TrackResult] = []
        var publishers: [LoadReport.PublisherResult] = []
        for bot in lock.withLock({ bots }) {
            guard let pc = bot.pc else { continue }
            let (t, p) = await bot.loop.submit { () -> ([LoadReport.TrackResult], [LoadReport.PublisherResult]) in
                let totals = ReceiverTotals.byMid(pc)
                var t: [LoadReport.TrackResult] = []
                for track in bot.tracks.values.sorted(by: { $0.mid < $1.mid }) {
                    track.packets = totals[track.mid]?.packetsReceived ?? 0
                    track.bytes = totals[track.mid]?.bytesReceived ?? 0
                    t.append(LoadReport.TrackResult(track, receiver: totals[track.mid]))
                }
                let p = pc.senderStats().map {
                    LoadReport.PublisherResult(participant: bot.id, kind: $0.kind, stats: $0.stats)
                }
                return (t, p)
            }
            tracks += t
            publishers += p
        }
        let (joins, failures, errors) = lock.withLock {
            (
                joinLatencies, joinFailures,
                errorCounts.map {
                    LoadReport.ErrorCount(kind: $0.key, count: $0.value.count, example: $0.value.example)
                }
                .sorted { $0.count > $1.count }
            )
        }
        var report = LoadReport(
            configuration: configuration, plannedParticipants: planned, joinedParticipants: joins.count,
            joinFailures: failures, elapsedSeconds: elapsed, joinLatencyMs: .of(joins.map { $0 * 1000 }),
            tracks: tracks, publishers: publishers, latency: LatencyHistogram(),
            timeToFirstPacketMs: .of(tracks.compactMap(\.timeToFirstPacketMs)),
            timeToFirstKeyframeMs: .of(tracks.compactMap(\.timeToFirstKeyframeMs)),
            modeChanges: LoadReport.ModeChanges(
                invitesSent: 0, promotions: 0, demotions: 0, failures: 0, latencyMs: .of([])),
            processCPUSeconds: cpu, loopCPUSeconds: loopCPU, rssSamples: rss, ticks: [], errors: errors)
        report.server = "janus://\(room.api.host):\(room.api.port)/\(room.room)"
        report.layout = "all"
        report.simulcast = false
        return report
    }

    private func teardown() async {
        let all = lock.withLock { bots }
        for bot in all {
            let (pc, pump) = (bot.pc, bot.pump)
            await bot.loop.submit {
                pump?.close()
                pc?.onFrame = nil
                pc?.close()
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for bot in all {
                guard let session = bot.session else { continue }
                group.addTask {
                    if let handle = bot.handle { await session.detach(handle) }
                    await session.destroy()
                }
            }
        }
        for loop in loops { loop.shutdown() }
    }
}
