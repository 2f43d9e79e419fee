import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol
import Signaling

/// One line of live progress.
public struct LoadProgress: Sendable {
    /// Seconds since the first join.
    public var elapsed: Double
    /// Bots joined, and bots planned.
    public var joined: Int
    public var planned: Int
    /// Bots whose join failed.
    public var failed: Int
    /// Tracks currently received by subscribers.
    public var tracks: Int
    /// Received media rate over the last interval.
    public var mbps: Double
    /// Loss so far (lost ÷ expected) over every receiver.
    public var lossPercent: Double
    /// Resident memory of the process.
    public var rssBytes: Int
    /// Cumulative counters since the start: packets received and lost by every receiver, and CPU
    /// seconds of the load generator's I/O threads (for steady-state windows).
    public var packetsReceived: UInt64
    public var packetsLost: Int64
    public var loopCPUSeconds: Double

    /// The progress line printed on stderr.
    public var line: String {
        String(
            format: "load: %5.1fs joined %d/%d%@ tracks %d  %.1f Mbps  loss %.2f%%  rss %d MB", elapsed, joined,
            planned, failed > 0 ? " (\(failed) failed)" as NSString : "" as NSString, tracks, mbps, lossPercent,
            rssBytes / 1_048_576)
    }
}

/// Runs one load test: plans the bots, joins them at the configured rate over a few shared event
/// loops, drives stage invites, samples progress and builds the ``LoadReport``.
// Safe: shared run state is guarded by `lock`.
public final class LoadRun: @unchecked Sendable {
    public let configuration: LoadConfiguration
    let certificate: DTLSCertificate
    let media: SyntheticMedia
    let loopCounters: [LoopCounters]
    /// Called about once a second with the progress (on a background task).
    public var onProgress: (@Sendable (LoadProgress) -> Void)?

    private let lock = NSLock()
    private var bots: [LoadBot] = []
    private var joinLatencies: [Double] = []
    private var joinFailures = 0
    private var errorCounts: [String: (count: Int, example: String)] = [:]
    private var invitesSent = 0
    private var invites: [LoadReport.Invite] = []
    private var promotions = 0
    private var demotions = 0
    private var modeFailures = 0
    private var modeLatencies: [Double] = []
    /// Invited bots still changing mode (their outcome is not reported yet).
    private var modeChangesInFlight = 0
    private var changeModeLatencies: [Double] = []
    private var produceLatencies: [Double] = []
    private var publishConnectedLatencies: [Double] = []
    private var rssSamples: [LoadReport.RSSSample] = []
    private var ticks: [LoadReport.Tick] = []
    private var stopSpawning = false

    /// Prepares a run: validates, encodes the shared media once and starts the event loops.
    public init(configuration: LoadConfiguration) throws(LoadError) {
        try configuration.validate()
        self.configuration = configuration
        do { certificate = try DTLSCertificate.generate(commonName: "understudy-load") } catch {
            throw .failed("cannot make a DTLS certificate", cause: error)
        }
        // `auto`: the loop a room of this build's bots and pages takes (H.264), VP8 too; any other
        // codec is encoded when a bot first needs it (``media(for:)``).
        let first = configuration.videoCodec.resolve(roomVideoCodecs: MediaCodec.videoCodecs)
        do {
            media = try SyntheticMedia.sharedLoop(layers: configuration.simulcast ? 3 : 1, codec: first)
            if configuration.videoCodec == .auto {
                _ = try SyntheticMedia.sharedLoop(layers: configuration.simulcast ? 3 : 1, codec: .vp8)
            }
        } catch { throw .failed("cannot encode the \(first.rtpName) loop", cause: error) }
        loopCounters = (0..<configuration.loopCount).map { LoopCounters(loop: EventLoop(name: "load-\($0)")) }
    }

    /// The shared loop in `codec` (encoded once per process, the first time it is asked for).
    func media(for codec: MediaCodec) throws -> SyntheticMedia {
        codec == media.videoCodec
            ? media : try SyntheticMedia.sharedLoop(layers: configuration.simulcast ? 3 : 1, codec: codec)
    }

    /// The signalling URL of `room` with its token: through the configured server, or through
    /// `base` (a `ws://…/v1/rtc` URL of another node of the cluster).
    func signalingURL(room: String, base: String? = nil) -> String {
        let token: String
        if let t = configuration.token {
            token = t
        } else {
            token = RoomToken.sign(
                RoomToken(
                    apikey: "understudy-load", permissions: ["allow_join"], roomId: room, participantId: nil,
                    lifetime: max(3600, configuration.duration * 2)),
                secret: configuration.secret ?? "")
        }
        return (base ?? configuration.rtcURL) + "?token=" + token
    }

    // MARK: Bookkeeping (any thread)

    func noteError(_ kind: String, _ message: String) {
        lock.withLock {
            let e = errorCounts[kind] ?? (0, message)
            errorCounts[kind] = (e.count + 1, e.example)
        }
    }

    /// A stage invite handled: `seconds` until it took full effect, `changeModeSeconds` until the
    /// bot's changeMode was answered (nil when it was not), `publishSteps` (a promotion) until its
    /// `produce` was answered and until its publish connection connected.
    func noteModeChange(
        promoted: Bool, ok: Bool, seconds: Double, changeModeSeconds: Double? = nil,
        publishSteps: (produced: Double, connected: Double)? = nil
    ) {
        lock.withLock {
            modeChangesInFlight = max(0, modeChangesInFlight - 1)
            if let changeModeSeconds { changeModeLatencies.append(changeModeSeconds) }
            if let publishSteps {
                produceLatencies.append(publishSteps.produced)
                publishConnectedLatencies.append(publishSteps.connected)
            }
            if !ok {
                modeFailures += 1
            } else {
                if promoted { promotions += 1 } else { demotions += 1 }
                modeLatencies.append(seconds)
            }
        }
    }

    /// A bot started acting on an invite; ``noteModeChange(promoted:ok:seconds:changeModeSeconds:)``
    /// reports its outcome.
    func noteModeChangeStarted() { lock.withLock { modeChangesInFlight += 1 } }

    // MARK: Running

    private struct Planned {
        let id: String
        let room: String
        let role: LoadBot.Role
    }

    private func plan() -> [Planned] {
        let c = configuration
        var out: [Planned] = []
        let prefix = c.idPrefix
        for (r, room) in c.roomNames.enumerated() {
            let tag = c.rooms > 1 ? "\(prefix)-r\(r + 1)" : prefix
            for i in 0..<c.publishers { out.append(Planned(id: "\(tag)-pub-\(i + 1)", room: room, role: .publisher)) }
            for i in 0..<c.audioPublishers {
                out.append(Planned(id: "\(tag)-mic-\(i + 1)", room: room, role: .audioPublisher))
            }
        }
        for (r, room) in c.roomNames.enumerated() {
            let tag = c.rooms > 1 ? "\(prefix)-r\(r + 1)" : prefix
            for i in 0..<c.subscribers { out.append(Planned(id: "\(tag)-sub-\(i + 1)", room: room, role: .subscriber)) }
        }
        return out
    }

    private func startBot(_ p: Planned, index: Int) async throws -> LoadBot {
        let counters = loopCounters[index % loopCounters.count]
        let bot = LoadBot(
            id: p.id, room: p.room, role: p.role, counters: counters, run: self,
            impairment: configuration.impairment(forBot: index))
        lock.withLock { bots.append(bot) }
        do {
            let latency = try await bot.start()
            lock.withLock { joinLatencies.append(latency) }
            return bot
        } catch {
            lock.withLock { joinFailures += 1 }
            let reason: String
            switch error as? LoadError {
            case .refused(let refusal): reason = "join \(refusal.code) \(refusal.name)"
            case .unreachable: reason = "join unreachable"
            default: reason = "join failed"
            }
            noteError(reason, "\(p.id): \(error)")
            throw error
        }
    }

    /// Runs the test for the configured duration and returns the report. Throws when the first bot
    /// cannot reach the server or is refused, so a wrong URL or token fails fast with one reason.
    public func run() async throws(LoadError) -> LoadReport {
        let planned = plan()
        let startCPU = currentProcessCPUSeconds()
        let startLoopCPU = await loopCPU()
        let baselineRSS = residentBytes()
        lock.withLock { rssSamples.append(LoadReport.RSSSample(seconds: 0, bytes: baselineRSS)) }
        // The first join is the probe: its failure is the run's failure.
        do { _ = try await startBot(planned[0], index: 0) } catch let e as LoadError {
            await teardown()
            throw e
        } catch {
            await teardown()
            throw .failed("the first join failed", cause: error)
        }
        // The duration counts from the probe's join: on a starved machine that join alone took longer
        // than a short run, which then ended before its first progress sample.
        let start = EventLoop.now()
        var deadline = start + UInt64(configuration.duration * 1e9)
        // Waiting for tracks: spawn and run until the hard limit; the deadline moves below.
        let waitLimit = configuration.waitForTracks != nil ? configuration.maxDuration : configuration.waitForMediaUntil
        let hardDeadline = waitLimit.map { start + UInt64(max(configuration.duration, $0) * 1e9) } ?? deadline
        var tracksReachedAt: UInt64?
        let rate = configuration.joinRate
        let spawner = Task {
            await withTaskGroup(of: Void.self) { group in
                for (i, p) in planned.enumerated().dropFirst() {
                    let due = start + UInt64(Double(i) / rate * 1e9)
                    while EventLoop.now() < due {
                        if lock.withLock({ stopSpawning }) { break }
                        try? await Task.sleep(nanoseconds: min(due - EventLoop.now(), 50_000_000))
                    }
                    if lock.withLock({ stopSpawning }) || EventLoop.now() >= hardDeadline { break }
                    group.addTask { _ = try? await self.startBot(p, index: i) }
                }
            }
        }
        let inviter: Task<Void, Never>? = configuration.inviteEvery.map { every in
            // Waiting for media, no new guest (and its new tracks) comes on stage past the duration.
            let until = configuration.waitForMediaUntil == nil ? hardDeadline : deadline
            return Task { await self.runInvites(every: every, until: until) }
        }
        let minimum = deadline
        if waitLimit != nil { deadline = hardDeadline }
        // Progress, about once a second, until the deadline.
        var lastBytes: UInt64 = 0
        var lastTime = start
        while EventLoop.now() < deadline {
            let remaining = deadline &- min(deadline, EventLoop.now())
            try? await Task.sleep(nanoseconds: min(remaining, 1_000_000_000))
            let sample = await snapshot()
            let now = EventLoop.now()
            // A bot still rejoining has no open track yet, and media to wait for.
            if configuration.waitForMediaUntil != nil, now >= minimum, sample.silentTracks == 0,
                sample.reconnecting == 0
            {
                deadline = now
            }
            if let wanted = configuration.waitForTracks, tracksReachedAt == nil, sample.tracks >= wanted {
                tracksReachedAt = now
                deadline = min(hardDeadline, max(minimum, now + UInt64(configuration.settleSeconds * 1e9)))
            }
            let seconds = Double(now - lastTime) / 1e9
            let mbps = seconds > 0 ? Double(sample.bytes &- lastBytes) * 8 / seconds / 1e6 : 0
            lastBytes = sample.bytes
            lastTime = now
            let expected = Double(sample.received) + Double(sample.lost)
            let rss = residentBytes()
            let elapsed = Double(now - start) / 1e9
            let (joined, failed) = lock.withLock { () -> (Int, Int) in
                rssSamples.append(LoadReport.RSSSample(seconds: elapsed, bytes: rss))
                return (joinLatencies.count, joinFailures)
            }
            lock.withLock {
                ticks.append(
                    LoadReport.Tick(
                        seconds: elapsed, loopCPUSeconds: Double(sample.cpuNanos) / 1e9,
                        packetsReceived: sample.received, packetsLost: sample.lost, tracks: sample.tracks))
            }
            onProgress?(
                LoadProgress(
                    elapsed: elapsed, joined: joined, planned: planned.count, failed: failed,
                    tracks: sample.tracks, mbps: mbps,
                    lossPercent: expected > 0 ? Double(sample.lost) / expected * 100 : 0,
                    rssBytes: rss, packetsReceived: sample.received, packetsLost: sample.lost,
                    loopCPUSeconds: Double(sample.cpuNanos) / 1e9))
        }
        lock.withLock { stopSpawning = true }
        inviter?.cancel()
        await spawner.value
        _ = await inviter?.value
        // An invite still under way is reported once it ends (or its requests time out), not dropped.
        let inviteLimit = EventLoop.now() + UInt64((2 * configuration.requestTimeout + 5) * 1e9)
        while lock.withLock({ modeChangesInFlight }) > 0, EventLoop.now() < inviteLimit {
            try? await Task.sleep(nanoseconds: 100_000_000)
        }
        let elapsed = Double(EventLoop.now() - start) / 1e9
        let endLoopCPU = await loopCPU()
        var report = await buildReport(
            planned: planned.count, elapsed: elapsed, cpu: currentProcessCPUSeconds() - startCPU,
            loopCPU: endLoopCPU - startLoopCPU)
        report.rosterCheck = await checkRosters()
        // Processes sharing a room check their rosters while every bot is still there.
        if configuration.staySeconds > 0 { try? await Task.sleep(nanoseconds: UInt64(configuration.staySeconds * 1e9)) }
        await teardown()
        return report
    }

    /// Compares every present audience bot's view of its room with the truth (the present bots and
    /// their modes), waiting up to 60 s for notifications still on their way: a bot handles its
    /// notifications one after the other, and one that was just invited may be busy for a while
    /// with its own requests (on a loaded machine, several request timeouts) before it reads the
    /// rest. Assumes the room holds only this run's bots.
    func checkRosters() async -> LoadReport.RosterCheck? {
        let all = lock.withLock { bots }
        var mismatched: [(LoadBot, String)] = []
        var checked = 0
        let deadline = EventLoop.now() + 60_000_000_000
        repeat {
            let present = all.filter(\.isPresent)
            var truth: [String: [String: ParticipantMode]] = [:]
            for b in present { truth[b.room, default: [:]][b.id] = b.mode }
            let audience = present.filter { $0.role == .subscriber }
            checked = audience.count
            mismatched = []
            let total = configuration.expectParticipants
            for bot in audience {
                var expected = truth[bot.room] ?? [:]
                expected[bot.id] = nil
                let seen = bot.roomView
                let missing = expected.filter { seen[$0.key] != $0.value }.map { "\($0.key)=\($0.value.rawValue)" }
                    .sorted()
                if let total {
                    // Others' bots are known by number only.
                    if missing.isEmpty && seen.count == total - 1 { continue }
                    mismatched.append(
                        (bot, "\(bot.id) sees \(seen.count) of \(total - 1) others, misses \(missing.prefix(3))"))
                    continue
                }
                guard seen != expected else { continue }
                let extra = seen.filter { expected[$0.key] == nil }.keys.sorted()
                mismatched.append((bot, "\(bot.id) misses \(missing.prefix(3)) and still sees \(extra.prefix(3))"))
            }
            if mismatched.isEmpty || EventLoop.now() >= deadline { break }
            try? await Task.sleep(nanoseconds: 250_000_000)
        } while true
        guard checked > 0 else { return nil }
        return LoadReport.RosterCheck(checked: checked, mismatched: mismatched.count, example: mismatched.first?.1)
    }

    /// Sum of the loop threads' CPU time, in seconds.
    func loopCPU() async -> Double {
        var total: UInt64 = 0
        for c in loopCounters { total &+= await c.loop.submit { threadCPUNanoseconds() } }
        return Double(total) / 1e9
    }

    struct Snapshot {
        var bytes: UInt64 = 0
        var packets: UInt64 = 0
        var received: UInt64 = 0
        var lost: Int64 = 0
        var tracks = 0
        var cpuNanos: UInt64 = 0
        /// Open tracks that have received no packet yet.
        var silentTracks = 0
        /// Bots rejoining after their signalling connection dropped.
        var reconnecting = 0
    }

    func snapshot() async -> Snapshot {
        var s = Snapshot()
        let all = lock.withLock { bots }
        s.reconnecting = all.filter(\.isReconnecting).count
        for c in loopCounters {
            let mine = all.filter { $0.counters === c }
            let (bytes, packets, totals, tracks, cpu) = await c.loop.submit {
                (c.bytes, c.packets, c.receiverTotals(), c.tracksCreated - c.tracksClosed, threadCPUNanoseconds())
            }
            s.silentTracks += await c.loop.submit {
                mine.reduce(0) { n, bot in n + bot.allTracks.filter { $0.closedAt == 0 && $0.packets == 0 }.count }
            }
            s.cpuNanos &+= cpu
            s.bytes &+= bytes
            s.packets &+= packets
            s.received &+= totals.received
            s.lost &+= totals.lost
            s.tracks += tracks
        }
        return s
    }

    /// Every `every` seconds, per room: the previous guest goes back to the audience and the next
    /// audience bot is invited on stage, by a publisher sending the PubSub invite.
    private func runInvites(every: Double, until deadline: UInt64) async {
        var next: [String: Int] = [:]
        var onStage: [String: LoadBot] = [:]
        while !Task.isCancelled {
            try? await Task.sleep(nanoseconds: UInt64(every * 1e9))
            if Task.isCancelled || EventLoop.now() >= deadline { return }
            let current = lock.withLock { bots.filter { $0.joined } }
            for room in configuration.roomNames {
                let audience = current.filter { $0.room == room && $0.role == .subscriber }
                // A run of audience only (its stage in another process) sends its invites from an
                // audience bot other than the guest: any participant may publish on a topic.
                let i = next[room, default: 0] % max(1, audience.count)
                guard
                    let host = current.first(where: { $0.room == room && $0.role != .subscriber })
                        ?? audience.first(where: { $0 !== onStage[room] && $0 !== audience[safe: i] })
                else { continue }
                if let guest = onStage[room] {
                    onStage[room] = nil
                    await invite(guest, to: .recvOnly, by: host)
                }
                guard !audience.isEmpty else { continue }
                next[room] = i + 1
                onStage[room] = audience[i]
                await invite(audience[i], to: .sendAndRecv, by: host)
            }
        }
    }

    private func invite(_ bot: LoadBot, to mode: ParticipantMode, by host: LoadBot) async {
        let sent = LoadReport.Invite(
            guest: bot.id, mode: mode.rawValue, sentAtUnixMs: Double(wallClockNanoseconds()) / 1e6)
        lock.withLock {
            invitesSent += 1
            invites.append(sent)
        }
        await host.call(
            .publish,
            ["topic": .string(bot.inviteTopic), "message": .string(mode.rawValue), "sendOnly": [.string(bot.id)]])
    }

    private func teardown() async {
        let all = lock.withLock { bots }
        await withTaskGroup(of: Void.self) { group in
            for b in all { group.addTask { await b.stop() } }
        }
        for c in loopCounters { c.loop.shutdown() }
        lock.withLock { bots.removeAll() }
    }

    // MARK: Report

    private func buildReport(planned: Int, elapsed: Double, cpu: Double, loopCPU: Double) async -> LoadReport {
        let all = lock.withLock { bots }
        var tracks: [LoadReport.TrackResult] = []
        var publishers: [LoadReport.PublisherResult] = []
        var latency = LatencyHistogram()
        var reconnections: [LoadReport.Reconnection] = []
        // Loop clock to wall clock, for the times other processes compare with.
        let wallOffset = Int64(bitPattern: wallClockNanoseconds()) &- Int64(bitPattern: EventLoop.now())
        var ttfp: [Double] = []
        var ttfk: [Double] = []
        for c in loopCounters {
            let mine = all.filter { $0.counters === c }
            let (t, p, h, r) = await c.loop.submit {
                () -> (
                    [LoadReport.TrackResult], [LoadReport.PublisherResult], LatencyHistogram, [LoadReport.Reconnection]
                )
                in
                var t: [LoadReport.TrackResult] = []
                var p: [LoadReport.PublisherResult] = []
                var r: [LoadReport.Reconnection] = []
                for bot in mine {
                    bot.stampConnectionTime()
                    let stats = bot.receiverStatsByMid()
                    for track in bot.allTracks {
                        var row = LoadReport.TrackResult(track, receiver: track.retiredReceiver ?? stats[track.mid])
                        row.announcedAtUnixMs = Double(Int64(bitPattern: track.createdAt) &+ wallOffset) / 1e6
                        if track.firstPacket != 0 {
                            row.firstPacketAtUnixMs = Double(Int64(bitPattern: track.firstPacket) &+ wallOffset) / 1e6
                        }
                        t.append(row)
                    }
                    r += bot.reconnectionResults(wallOffsetNanos: wallOffset)
                    for s in bot.senderStats() {
                        p.append(LoadReport.PublisherResult(participant: bot.id, kind: s.kind, stats: s.stats))
                    }
                }
                return (t, p, c.latency, r)
            }
            reconnections += r
            tracks += t
            publishers += p
            latency.merge(h)
        }
        // Several tracks can share a mid over time (m-lines reused): receiver stats then belong to
        // the newest, which is how the receiver sees them too.
        for t in tracks {
            if let v = t.timeToFirstPacketMs { ttfp.append(v) }
            if let v = t.timeToFirstKeyframeMs { ttfk.append(v) }
        }
        let (joins, failures, errors, modes, rss, tickLog) = lock.withLock {
            (
                joinLatencies, joinFailures,
                errorCounts.map {
                    LoadReport.ErrorCount(kind: $0.key, count: $0.value.count, example: $0.value.example)
                }
                .sorted { $0.count > $1.count },
                LoadReport.ModeChanges(
                    invitesSent: invitesSent, promotions: promotions, demotions: demotions, failures: modeFailures,
                    latencyMs: .of(modeLatencies.map { $0 * 1000 }),
                    changeModeMs: .of(changeModeLatencies.map { $0 * 1000 }),
                    produceMs: .of(produceLatencies.map { $0 * 1000 }),
                    publishConnectedMs: .of(publishConnectedLatencies.map { $0 * 1000 }), invites: invites),
                rssSamples, ticks
            )
        }
        let impairedBots = lock.withLock { bots.filter { $0.impairment != nil }.map(\.id) }
        var report = LoadReport(
            configuration: configuration, plannedParticipants: planned, joinedParticipants: joins.count,
            joinFailures: failures, elapsedSeconds: elapsed, joinLatencyMs: .of(joins.map { $0 * 1000 }),
            tracks: tracks, publishers: publishers, latency: latency, timeToFirstPacketMs: .of(ttfp),
            timeToFirstKeyframeMs: .of(ttfk), modeChanges: modes, processCPUSeconds: cpu, loopCPUSeconds: loopCPU,
            rssSamples: rss, ticks: tickLog, errors: errors,

            samples: LoadReport.Samples(
                joinLatencyMs: joins.map { $0 * 1000 },
                modeChangeLatencyMs: lock.withLock { modeLatencies.map { $0 * 1000 } },
                latencyBuckets: latency.nonEmptyBuckets, latencyMaxNanos: latency.maxNanos),
            impairedBots: impairedBots)
        if configuration.reconnectWindow != nil { report.reconnects = .of(reconnections) }
        return report
    }
}

/// Entry points of the load generator.
public enum LoadGen {
    /// Runs one load test with `configuration`; `progress` receives the live progress about once a second.
    public static func run(
        _ configuration: LoadConfiguration, progress: (@Sendable (LoadProgress) -> Void)? = nil
    ) async throws(LoadError) -> LoadReport {
        let run = try LoadRun(configuration: configuration)
        run.onProgress = progress
        return try await run.run()
    }
}

extension Array {
    /// The element at `index`, or nil past either end.
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
