import Foundation
import RTC
import RTCWire

/// Percentile `q` (0…1) by nearest rank of `sorted` (ascending, not empty): the value at rank
/// ⌈q·n⌉, the first for q = 0. Every percentile of the load reports and benchmarks is read this way.
package func nearestRank(_ q: Double, ofSorted sorted: [Double]) -> Double {
    let rank = Int((Double(sorted.count) * q).rounded(.up)) - 1
    return sorted[max(0, min(sorted.count - 1, rank))]
}

/// The result of a load run: what the table and `--json` show.
public struct LoadReport: Sendable, Codable {
    /// p50/p95/p99/max of a sample set, in milliseconds (nil when there were no samples).
    public struct Percentiles: Sendable, Codable, Equatable {
        public var count: Int
        public var p50: Double?
        public var p95: Double?
        public var p99: Double?
        public var max: Double?

        static func of(_ values: [Double]) -> Percentiles {
            guard !values.isEmpty else { return Percentiles(count: 0) }
            let sorted = values.sorted()
            func at(_ q: Double) -> Double { nearestRank(q, ofSorted: sorted) }
            return Percentiles(count: sorted.count, p50: at(0.5), p95: at(0.95), p99: at(0.99), max: sorted.last)
        }

        static func of(_ h: LatencyHistogram) -> Percentiles {
            Percentiles(
                count: Int(h.count), p50: h.percentileMilliseconds(0.5), p95: h.percentileMilliseconds(0.95),
                p99: h.percentileMilliseconds(0.99), max: h.count > 0 ? Double(h.maxNanos) / 1e6 : nil)
        }
    }

    /// One subscribed track (one consumer at one subscriber bot).
    public struct TrackResult: Sendable, Codable {
        public var subscriber: String
        public var publisher: String
        public var kind: String
        public var mid: String
        public var packets: UInt64
        public var bytes: UInt64
        /// Average over the time the track received media.
        public var bitrateKbps: Double
        public var packetsLost: Int64
        public var lossPercent: Double
        public var nacksSent: UInt64
        public var plisSent: UInt64
        public var retransmissionsReceived: UInt64
        /// From the `consumerCreated` notification to the first media packet / first key-frame packet.
        public var timeToFirstPacketMs: Double?
        public var timeToFirstKeyframeMs: Double?
        /// Steps to the first key frame, in ms from `consumerCreated` (nil where unknown): the
        /// `subscriberOffer` carrying the track arrived, its answer was acknowledged, and the
        /// subscribe connection connected (ICE and DTLS; may precede the track).
        public var offeredMs: Double?
        public var answeredMs: Double?
        public var connectedMs: Double?
        /// Capture (abs-capture-time at the publisher) to arrival at this subscriber.
        public var latencyAvgMs: Double?
        public var latencyMaxMs: Double?
        /// Wall-clock time (ms since 1970) of the first media packet, to line up runs of several
        /// processes on one machine (an invite in one, its guest's media in another).
        public var firstPacketAtUnixMs: Double?
        /// Wall-clock time (ms since 1970) of the `consumerCreated` that announced the track.
        public var announcedAtUnixMs: Double?
        public var closed: Bool
        /// Received quality of the track without decoding (nil in reports of older versions).
        public var quality: ReceiveQualitySnapshot?

        init(_ t: TrackCounter, receiver: ReceiverTotals?) {
            subscriber = t.subscriberID
            publisher = t.publisherID
            kind = t.kind == .video ? "video" : "audio"
            mid = t.mid
            packets = t.packets
            bytes = t.bytes
            let active = t.lastPacket > t.firstPacket ? Double(t.lastPacket - t.firstPacket) / 1e9 : 0
            bitrateKbps = active > 0 ? Double(t.bytes) * 8 / active / 1000 : 0
            let received = receiver?.packetsReceived ?? t.packets
            packetsLost = max(0, receiver?.packetsLost ?? 0)
            let expected = Double(received) + Double(packetsLost)
            lossPercent = expected > 0 ? Double(packetsLost) / expected * 100 : 0
            nacksSent = receiver?.nacksSent ?? 0
            plisSent = receiver?.plisSent ?? 0
            retransmissionsReceived = receiver?.retransmissionsReceived ?? t.repairs
            timeToFirstPacketMs = t.firstPacket > t.createdAt ? Double(t.firstPacket - t.createdAt) / 1e6 : nil
            timeToFirstKeyframeMs = t.firstKeyframe > t.createdAt ? Double(t.firstKeyframe - t.createdAt) / 1e6 : nil
            func since(_ at: UInt64) -> Double? { at == 0 ? nil : (Double(at) - Double(t.createdAt)) / 1e6 }
            offeredMs = since(t.offered)
            answeredMs = since(t.answered)
            connectedMs = since(t.connected)
            latencyAvgMs = t.latencyCount > 0 ? Double(t.latencySum) / Double(t.latencyCount) / 1e6 : nil
            latencyMaxMs = t.latencyCount > 0 ? Double(t.latencyMax) / 1e6 : nil
            closed = t.closedAt != 0
            quality = receiver?.quality
        }
    }

    /// Where the time to a video track's first key frame went, step by step (ms, over the video tracks
    /// that got one): `consumerCreated` → `subscriberOffer` → answer acknowledged → subscribe connection
    /// connected (ICE + DTLS; zero when it already was) → first key-frame packet.
    public struct KeyframeSteps: Sendable, Codable {
        public var toOffer: Percentiles
        public var toAnswer: Percentiles
        public var toConnected: Percentiles
        public var toKeyframe: Percentiles

        static func of(_ tracks: [TrackResult]) -> KeyframeSteps {
            var offer: [Double] = []
            var answer: [Double] = []
            var connected: [Double] = []
            var keyframe: [Double] = []
            for t in tracks where t.kind == "video" {
                guard let k = t.timeToFirstKeyframeMs, let o = t.offeredMs, let a = t.answeredMs else { continue }
                let c = max(a, t.connectedMs ?? a)
                offer.append(max(0, o))
                answer.append(a - o)
                connected.append(c - a)
                keyframe.append(k - c)
            }
            return KeyframeSteps(
                toOffer: .of(offer), toAnswer: .of(answer), toConnected: .of(connected), toKeyframe: .of(keyframe))
        }
    }

    /// One publishing bot's send stream (one per simulcast layer).
    public struct PublisherResult: Sendable, Codable {
        public var participant: String
        public var kind: String
        public var packetsSent: UInt64
        public var bytesSent: UInt64
        public var nacksReceived: UInt64
        public var retransmissions: UInt64
        public var plisReceived: UInt64

        /// The row of one sender of `participant`'s publish connection.
        init(participant: String, kind: MediaKind, stats: RTPSenderStats) {
            self.participant = participant
            self.kind = kind == .video ? "video" : "audio"
            packetsSent = stats.packetsSent
            bytesSent = stats.bytesSent
            nacksReceived = stats.nacksReceived
            retransmissions = stats.retransmissions
            plisReceived = stats.plisReceived
        }
    }

    /// Errors by kind (the request method, `join`, `disconnected`…), with one example message.
    public struct ErrorCount: Sendable, Codable {
        public var kind: String
        public var count: Int
        public var example: String
    }

    /// Whether every audience bot learnt every join, leave and mode change: at the end of the run each
    /// one's view of the room (participant → mode, from notifications) is compared with the truth.
    public struct RosterCheck: Sendable, Codable, Equatable {
        /// Audience bots compared.
        public var checked: Int
        /// Bots whose view still differed after waiting for the last notifications.
        public var mismatched: Int
        /// One difference, for the report.
        public var example: String?
    }

    /// One loss of a bot's signalling connection and its rejoin (``LoadConfiguration/reconnectWindow``).
    /// The phases after `failed` are optional: older reports lack them.
    public struct Reconnection: Sendable, Codable, Equatable {
        public var bot: String
        /// Wall-clock time (ms since 1970) the bot saw its signalling connection close.
        public var lostAtUnixMs: Double
        /// From the loss to the rejoin's `join` answered (nil: it never was).
        public var rejoinMs: Double?
        /// From the loss to media again: an audience bot's first packet on a track announced after
        /// the rejoin, a publisher's publish connection connected (nil: no media again, or none to get).
        public var mediaMs: Double?
        /// The reconnect window ran out without a rejoin.
        public var failed: Bool
        /// When each rejoin attempt started, from the loss (the policy's pauses between them).
        public var attemptsMs: [Double]?
        /// Why the failed attempts failed, in order.
        public var attemptFailures: [String]?
        /// From the loss to the first track announced (`consumerCreated`) after the rejoin.
        public var trackAnnouncedMs: Double?
        /// From the loss to the new subscribe connection connected (ICE and DTLS).
        public var connectedMs: Double?
        /// From the loss to the successful attempt's signalling socket open, and to its `join` sent.
        public var socketMs: Double?
        public var joinSentMs: Double?
    }

    /// Every bot's reconnections: counts, the spread of rejoin and media-again times, and each one.
    public struct Reconnects: Sendable, Codable {
        public var count: Int
        public var failed: Int
        public var rejoinMs: Percentiles
        public var mediaMs: Percentiles
        public var each: [Reconnection]

        static func of(_ each: [Reconnection]) -> Reconnects {
            Reconnects(
                count: each.count, failed: each.filter(\.failed).count, rejoinMs: .of(each.compactMap(\.rejoinMs)),
                mediaMs: .of(each.compactMap(\.mediaMs)), each: each.sorted { $0.lostAtUnixMs < $1.lostAtUnixMs })
        }
    }

    /// A stage invite as sent (a `publish` on the guest's invite topic).
    public struct Invite: Sendable, Codable, Equatable {
        public var guest: String
        /// `SEND_AND_RECV` (on stage) or `RECV_ONLY` (back).
        public var mode: String
        /// Wall-clock time (ms since 1970) it was sent.
        public var sentAtUnixMs: Double
    }

    /// Stage invites sent and the resulting mode changes (invite to producing, or back).
    public struct ModeChanges: Sendable, Codable {
        public var invitesSent: Int
        public var promotions: Int
        public var demotions: Int
        public var failures: Int
        /// From the invite arriving at the bot to its changeMode answered and (promotion) media flowing.
        public var latencyMs: Percentiles
        /// From the invite arriving at the bot to its changeMode answered: when the mode change took
        /// effect in the room (everyone is told with it). The rest of ``latencyMs`` is the guest's
        /// publish connection. Nil in reports merged from several machines.
        public var changeModeMs: Percentiles?
        /// Promotions: from the invite arriving at the bot to its `produce` answered (the server's SDP
        /// answer for the new tracks). Nil in merged reports and in reports of older versions.
        public var produceMs: Percentiles?
        /// Promotions: from the invite arriving at the bot to its publish connection connected (ICE +
        /// DTLS); the rest of ``latencyMs`` starts the media pump.
        public var publishConnectedMs: Percentiles?
        /// Each invite sent (nil in merged reports and in reports of older versions).
        public var invites: [Invite]?
    }

    /// One progress sample (cumulative counters), used to find the steady state.
    public struct Tick: Sendable, Codable {
        public var seconds: Double
        public var loopCPUSeconds: Double
        public var packetsReceived: UInt64
        public var packetsLost: Int64
        public var tracks: Int
    }

    /// The end of the run where the number of received tracks no longer changed (after 2 s of settling).
    public struct SteadyState: Sendable, Codable {
        public var fromSeconds: Double
        public var seconds: Double
        public var tracks: Int
        /// Cores of load I/O-thread CPU over the window.
        public var cores: Double
        /// Tracks ÷ cores.
        public var tracksPerCore: Double
        public var packetsReceived: UInt64
        public var lossPercent: Double

        static func find(_ ticks: [Tick]) -> SteadyState? {
            guard let last = ticks.last else { return nil }
            var i = ticks.count - 1
            while i > 0 && ticks[i - 1].tracks == last.tracks { i -= 1 }
            let settled = ticks[i].seconds + 2
            guard let first = ticks[i...].first(where: { $0.seconds >= settled }), last.seconds - first.seconds >= 1
            else { return nil }
            let seconds = last.seconds - first.seconds
            let cores = (last.loopCPUSeconds - first.loopCPUSeconds) / seconds
            let received = last.packetsReceived &- first.packetsReceived
            let lost = Double(max(0, last.packetsLost - first.packetsLost))
            return SteadyState(
                fromSeconds: first.seconds, seconds: seconds, tracks: last.tracks, cores: cores,
                tracksPerCore: cores > 0 ? Double(last.tracks) / cores : 0, packetsReceived: received,
                lossPercent: Double(received) + lost > 0 ? lost / (Double(received) + lost) * 100 : 0)
        }
    }

    /// Resident memory at a point of the run.
    public struct RSSSample: Sendable, Codable {
        public var seconds: Double
        public var bytes: Int
    }

    public var server: String
    public var rooms: [String]
    public var layout: String
    public var simulcast: Bool
    public var loops: Int
    public var plannedParticipants: Int
    public var joinedParticipants: Int
    public var joinFailures: Int
    /// The `--impair` link and the bots it was applied to (nil: none).
    public var impairment: ImpairedBots?
    public var elapsedSeconds: Double
    public var joinLatencyMs: Percentiles
    /// Consumers that received at least one packet, and every consumer announced.
    public var subscribedTracks: Int
    public var announcedTracks: Int
    public var videoTracks: Int
    public var audioTracks: Int
    public var packets: UInt64
    public var bytes: UInt64
    /// Average received media rate over the run.
    public var mbps: Double
    public var packetsLost: Int64
    public var lossPercent: Double
    public var nacksSent: UInt64
    public var plisSent: UInt64
    public var retransmissionsReceived: UInt64
    public var timeToFirstPacketMs: Percentiles
    public var timeToFirstKeyframeMs: Percentiles
    /// ``timeToFirstKeyframeMs`` step by step (nil in reports written before it existed).
    public var firstKeyframeSteps: KeyframeSteps?
    /// End-to-end media latency over every packet carrying abs-capture-time.
    public var latencyMs: Percentiles
    public var modeChanges: ModeChanges
    /// CPU of the whole process (with an in-process server, that is included).
    public var processCPUSeconds: Double
    /// CPU of the load generator's I/O threads only (every packet is handled there).
    public var loopCPUSeconds: Double
    /// Resident memory over the run; the first sample is taken before the first join.
    public var rssSamples: [RSSSample]
    /// Resident-memory growth from before the first join to the end, per subscriber bot (publisher
    /// bots included in the growth; with an in-process server, its per-consumer state too).
    public var rssGrowthPerSubscriberBytes: Int
    /// Capacity figures over the steady end of the run (nil when it never settled).
    public var steadyState: SteadyState?
    /// The progress samples.
    public var ticks: [Tick]
    public var errors: [ErrorCount]
    /// The end-of-run roster comparison (nil when no audience bot joined).
    public var rosterCheck: RosterCheck?
    /// Reconnections of the run's bots (nil unless ``LoadConfiguration/reconnectWindow`` is set).
    public var reconnects: Reconnects?
    public var tracks: [TrackResult]
    /// Received quality across the tracks, the worst named (nil when no track has a reading).
    public var quality: QualitySummary?
    /// False when the run did not measure quality (``LoadConfiguration/qualityMetrics`` off); nil in
    /// reports written before the setting existed.
    public var qualityMetrics: Bool?
    public var publishers: [PublisherResult]
    /// The raw samples behind the percentiles, so that reports of several machines merge into exact
    /// percentiles (`understudy load --workers`) instead of averaged ones.
    public var samples: Samples?
    /// One row per worker of a distributed run (nil for a run in one process).
    public var workers: [WorkerResult]?

    /// See ``samples``.
    public struct Samples: Sendable, Codable {
        public var joinLatencyMs: [Double]
        public var modeChangeLatencyMs: [Double]
        /// The end-to-end latency histogram, as (bucket, count) pairs of its non-empty buckets.
        public var latencyBuckets: [[UInt64]]
        public var latencyMaxNanos: UInt64
    }

    /// A worker's share of a distributed run.
    public struct WorkerResult: Sendable, Codable, Equatable {
        public var worker: String
        /// `ok`, or why it has no report (`died`: its registration expired during the run).
        public var status: String
        public var plannedParticipants: Int
        public var joinedParticipants: Int
        public var joinFailures: Int
        public var subscribedTracks: Int
        public var packets: UInt64
        public var lossPercent: Double
    }

    /// The bots of a run that crossed an impaired link (``LoadConfiguration/impair``).
    public struct ImpairedBots: Sendable, Codable {
        /// The preset name or JSON as given.
        public var impair: String
        /// Their participant ids, as they started.
        public var bots: [String]
        /// The quality of the tracks that crossed an impaired link and of the others, side by side
        /// (nil in reports written before it existed, or without quality readings).
        public var quality: QualitySplit?
    }

    init(
        configuration c: LoadConfiguration, plannedParticipants: Int, joinedParticipants: Int, joinFailures: Int,
        elapsedSeconds: Double, joinLatencyMs: Percentiles, tracks: [TrackResult], publishers: [PublisherResult],
        latency: LatencyHistogram, timeToFirstPacketMs: Percentiles, timeToFirstKeyframeMs: Percentiles,
        modeChanges: ModeChanges, processCPUSeconds: Double, loopCPUSeconds: Double, rssSamples: [RSSSample],
        ticks: [Tick], errors: [ErrorCount], samples: Samples? = nil, impairedBots: [String] = []
    ) {
        self.samples = samples
        impairment = c.impair.flatMap { impairedBots.isEmpty ? nil : ImpairedBots(impair: $0, bots: impairedBots) }
        qualityMetrics = c.qualityMetrics
        server = c.rtcURL
        rooms = c.roomNames
        layout = c.layout.description
        simulcast = c.simulcast
        loops = c.loopCount
        self.plannedParticipants = plannedParticipants
        self.joinedParticipants = joinedParticipants
        self.joinFailures = joinFailures
        self.elapsedSeconds = elapsedSeconds
        self.joinLatencyMs = joinLatencyMs
        self.tracks = tracks
        self.publishers = publishers
        announcedTracks = tracks.count
        subscribedTracks = tracks.filter { $0.packets > 0 }.count
        videoTracks = tracks.filter { $0.packets > 0 && $0.kind == "video" }.count
        audioTracks = tracks.filter { $0.packets > 0 && $0.kind == "audio" }.count
        packets = tracks.reduce(0) { $0 &+ $1.packets }
        bytes = tracks.reduce(0) { $0 &+ $1.bytes }
        mbps = elapsedSeconds > 0 ? Double(bytes) * 8 / elapsedSeconds / 1e6 : 0
        packetsLost = tracks.reduce(0) { $0 &+ $1.packetsLost }
        let expected = Double(tracks.reduce(0) { $0 &+ $1.packets &- $1.retransmissionsReceived }) + Double(packetsLost)
        lossPercent = expected > 0 ? Double(packetsLost) / expected * 100 : 0
        nacksSent = tracks.reduce(0) { $0 &+ $1.nacksSent }
        plisSent = tracks.reduce(0) { $0 &+ $1.plisSent }
        retransmissionsReceived = tracks.reduce(0) { $0 &+ $1.retransmissionsReceived }
        self.timeToFirstPacketMs = timeToFirstPacketMs
        self.timeToFirstKeyframeMs = timeToFirstKeyframeMs
        firstKeyframeSteps = .of(tracks)
        quality = .of(tracks)
        impairment?.quality = .of(tracks, impairedBots: Set(impairedBots))
        latencyMs = .of(latency)
        self.modeChanges = modeChanges
        self.processCPUSeconds = processCPUSeconds
        self.loopCPUSeconds = loopCPUSeconds
        self.rssSamples = rssSamples
        self.ticks = ticks
        steadyState = SteadyState.find(ticks)
        let growth = (rssSamples.last?.bytes ?? 0) - (rssSamples.first?.bytes ?? 0)
        rssGrowthPerSubscriberBytes = c.subscribers > 0 ? max(0, growth) / (c.subscribers * c.rooms) : 0
        self.errors = errors
    }

    /// The report as pretty-printed JSON.
    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    /// The human-readable summary: totals, latencies, per-publisher-track aggregates, errors.
    public func table() -> String {
        func ms(_ v: Double?) -> String { v.map { String(format: "%.1f", $0) } ?? "-" }
        func pct(_ p: Percentiles) -> String {
            "p50 \(ms(p.p50))  p95 \(ms(p.p95))  p99 \(ms(p.p99))  max \(ms(p.max)) ms (n=\(p.count))"
        }
        var out = ""
        out +=
            "understudy load — \(server), rooms \(rooms.joined(separator: ",")), layout \(layout)\(simulcast ? "" : ", no simulcast")\n"
        out += String(
            format: "participants  %d/%d joined, %d failed, in %.1f s on %d I/O threads\n", joinedParticipants,
            plannedParticipants, joinFailures, elapsedSeconds, loops)
        if let impairment {
            let named = impairment.bots.prefix(5).joined(separator: ", ") + (impairment.bots.count > 5 ? ", …" : "")
            out +=
                "impairment    \(impairment.impair.prefix(80)) on \(impairment.bots.count) of \(plannedParticipants) bots (\(named))\n"
        }
        out += "join latency  \(pct(joinLatencyMs))\n"
        out +=
            "tracks        \(subscribedTracks) receiving (\(videoTracks) video, \(audioTracks) audio) of \(announcedTracks) consumed\n"
        out += String(
            format: "media         %llu packets, %.2f Mbps, lost %lld (%.3f%%), NACKs %llu, PLIs %llu, RTX %llu\n",
            packets,
            mbps, packetsLost, lossPercent, nacksSent, plisSent, retransmissionsReceived)
        out += "first packet  \(pct(timeToFirstPacketMs))\n"
        out += "first key     \(pct(timeToFirstKeyframeMs))\n"
        if let s = firstKeyframeSteps, s.toKeyframe.count > 0 {
            out += "  → offer     \(pct(s.toOffer))\n"
            out += "  → answered  \(pct(s.toAnswer))\n"
            out += "  → connected \(pct(s.toConnected)) (ICE + DTLS)\n"
            out += "  → key frame \(pct(s.toKeyframe))\n"
        }
        out += "e2e latency   \(pct(latencyMs))\n"
        if modeChanges.invitesSent > 0 {
            out +=
                "stage invites \(modeChanges.invitesSent) sent, \(modeChanges.promotions) promoted, \(modeChanges.demotions) demoted, \(modeChanges.failures) failed; \(pct(modeChanges.latencyMs))\n"
            if let changeMode = modeChanges.changeModeMs, changeMode.count > 0 {
                out += "  changeMode  \(pct(changeMode)) (answered; the rest is the guest's publish connection)\n"
            }
            if let produce = modeChanges.produceMs, produce.count > 0 {
                out += "  → produce   \(pct(produce)) (answered, since the invite)\n"
            }
            if let connected = modeChanges.publishConnectedMs, connected.count > 0 {
                out += "  → connected \(pct(connected)) (publish connection: ICE + DTLS, since the invite)\n"
            }
        }
        if let r = reconnects, r.count > 0 {
            out += "reconnects    \(r.count) (\(r.failed) failed); rejoined \(pct(r.rejoinMs))\n"
            out += "  media again \(pct(r.mediaMs)) (since the signalling connection dropped)\n"
        }
        let peak = rssSamples.map(\.bytes).max() ?? 0
        out += String(
            format:
                "cost          process CPU %.2f s, I/O threads %.2f s (%.2f cores), peak RSS %.1f MB, +%.0f KB per subscriber\n",
            processCPUSeconds, loopCPUSeconds, elapsedSeconds > 0 ? loopCPUSeconds / elapsedSeconds : 0,
            Double(peak) / 1_048_576, Double(rssGrowthPerSubscriberBytes) / 1024)
        if let st = steadyState {
            out += String(
                format: "steady state  %d tracks over %.0f s from %.0f s: %.3f cores → %.0f tracks/core, loss %.3f%%\n",
                st.tracks, st.seconds, st.fromSeconds, st.cores, st.tracksPerCore, st.lossPercent)
        }
        // Per published track, aggregated over its subscribers.
        struct Row {
            var subs = 0
            var packets: UInt64 = 0
            var kbps = 0.0
            var lost: Int64 = 0
            var expected = 0.0
            var nacks: UInt64 = 0
            var plis: UInt64 = 0
            var ttfp: [Double] = []
            var ttfk: [Double] = []
            var lat = 0.0
            var latN = 0
        }
        var rows: [String: Row] = [:]
        for t in tracks {
            let key = "\(t.publisher) \(t.kind)"
            var r = rows[key] ?? Row()
            r.subs += 1
            r.packets &+= t.packets
            r.kbps += t.bitrateKbps
            r.lost &+= t.packetsLost
            r.expected += Double(t.packets &- t.retransmissionsReceived) + Double(t.packetsLost)
            r.nacks &+= t.nacksSent
            r.plis &+= t.plisSent
            if let v = t.timeToFirstPacketMs { r.ttfp.append(v) }
            if let v = t.timeToFirstKeyframeMs { r.ttfk.append(v) }
            if let v = t.latencyAvgMs {
                r.lat += v
                r.latN += 1
            }
            rows[key] = r
        }
        if !rows.isEmpty {
            out += "\n"
            out +=
                "track                              subs    packets  kbps/sub   loss%  NACKs   PLIs  1st-pkt  1st-key  latency\n"
            for key in rows.keys.sorted() {
                guard let r = rows[key] else { continue }
                let loss = r.expected > 0 ? Double(r.lost) / r.expected * 100 : 0
                out += key.padding(toLength: 33, withPad: " ", startingAt: 0)
                func right(_ text: String, _ width: Int) -> String {
                    String(repeating: " ", count: max(0, width - text.count)) + text
                }
                out += String(
                    format: " %5d %10llu %9.1f %7.3f %6llu %6llu", r.subs, r.packets,
                    r.subs > 0 ? r.kbps / Double(r.subs) : 0, loss, r.nacks, r.plis)
                out += right(ms(Percentiles.of(r.ttfp).p50), 9) + right(ms(Percentiles.of(r.ttfk).p50), 9)
                out += right(ms(r.latN > 0 ? r.lat / Double(r.latN) : nil), 9) + "\n"
            }
            out += "(1st-pkt/1st-key: median ms from consumerCreated; latency: mean capture-to-arrival ms)\n"
        }
        if let q = quality {
            out += "\n" + q.table(impairedBots: Set(impairment?.bots ?? []))
            if let split = impairment?.quality { out += split.table() }
        } else if qualityMetrics == false {
            out += "\nquality       not measured (--quality-metrics off)\n"
        }
        if let r = rosterCheck {
            out +=
                "\nroster        \(r.checked - r.mismatched)/\(r.checked) audience bots learnt every join, leave and mode change"
            if let e = r.example { out += " (e.g. \(e))" }
            out += "\n"
        }
        if !errors.isEmpty {
            out += "\nerrors\n"
            for e in errors { out += "  \(e.kind): \(e.count) (e.g. \(e.example))\n" }
        }
        return out
    }
}
