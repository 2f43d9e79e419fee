import Foundation

extension LoadReport {
    /// One report for a load test that ran on several workers (`understudy load --workers`): counts
    /// and tracks are summed, and every percentile is computed again from the merged samples and
    /// histograms, never averaged. `lost` names the workers that have no report (they died, or their
    /// run failed: `status` says which), with the participants they were to run; those count as
    /// planned and failed.
    public static func merged(
        _ parts: [(worker: String, report: LoadReport)], lost: [(worker: String, bots: Int, status: String)]
    ) -> LoadReport? {
        guard var out = parts.first?.report else { return nil }
        let reports = parts.map(\.report)
        let lostBots = lost.reduce(0) { $0 + $1.bots }
        out.rooms = Array(Set(reports.flatMap(\.rooms))).sorted()
        out.loops = reports.reduce(0) { $0 + $1.loops }
        out.plannedParticipants = reports.reduce(0) { $0 + $1.plannedParticipants } + lostBots
        out.joinedParticipants = reports.reduce(0) { $0 + $1.joinedParticipants }
        out.joinFailures = reports.reduce(0) { $0 + $1.joinFailures } + lostBots
        out.elapsedSeconds = reports.map(\.elapsedSeconds).max() ?? 0
        out.tracks = reports.flatMap(\.tracks)
        let impaired = reports.flatMap { $0.impairment?.bots ?? [] }
        out.impairment = reports.lazy.compactMap(\.impairment).first.map { .init(impair: $0.impair, bots: impaired) }
        out.publishers = reports.flatMap(\.publishers)
        out.announcedTracks = out.tracks.count
        out.subscribedTracks = out.tracks.filter { $0.packets > 0 }.count
        out.videoTracks = out.tracks.filter { $0.packets > 0 && $0.kind == "video" }.count
        out.audioTracks = out.tracks.filter { $0.packets > 0 && $0.kind == "audio" }.count
        out.packets = out.tracks.reduce(0) { $0 &+ $1.packets }
        out.bytes = out.tracks.reduce(0) { $0 &+ $1.bytes }
        out.mbps = out.elapsedSeconds > 0 ? Double(out.bytes) * 8 / out.elapsedSeconds / 1e6 : 0
        out.packetsLost = out.tracks.reduce(0) { $0 &+ $1.packetsLost }
        let expected =
            Double(out.tracks.reduce(0) { $0 &+ $1.packets &- $1.retransmissionsReceived }) + Double(out.packetsLost)
        out.lossPercent = expected > 0 ? Double(out.packetsLost) / expected * 100 : 0
        out.nacksSent = out.tracks.reduce(0) { $0 &+ $1.nacksSent }
        out.plisSent = out.tracks.reduce(0) { $0 &+ $1.plisSent }
        out.retransmissionsReceived = out.tracks.reduce(0) { $0 &+ $1.retransmissionsReceived }
        out.timeToFirstPacketMs = .of(out.tracks.compactMap(\.timeToFirstPacketMs))
        out.timeToFirstKeyframeMs = .of(out.tracks.compactMap(\.timeToFirstKeyframeMs))
        out.firstKeyframeSteps = .of(out.tracks)
        out.quality = .of(out.tracks)
        out.impairment?.quality = .of(out.tracks, impairedBots: Set(impaired))
        let samples = reports.compactMap(\.samples)
        var histogram = LatencyHistogram()
        for s in samples {
            histogram.merge(LatencyHistogram(buckets: s.latencyBuckets, maxNanos: s.latencyMaxNanos))
        }
        out.latencyMs = .of(histogram)
        out.joinLatencyMs = .of(samples.flatMap(\.joinLatencyMs))
        let modeSamples = samples.flatMap(\.modeChangeLatencyMs)
        out.modeChanges = ModeChanges(
            invitesSent: reports.reduce(0) { $0 + $1.modeChanges.invitesSent },
            promotions: reports.reduce(0) { $0 + $1.modeChanges.promotions },
            demotions: reports.reduce(0) { $0 + $1.modeChanges.demotions },
            failures: reports.reduce(0) { $0 + $1.modeChanges.failures }, latencyMs: .of(modeSamples))
        out.samples = Samples(
            joinLatencyMs: samples.flatMap(\.joinLatencyMs), modeChangeLatencyMs: modeSamples,
            latencyBuckets: histogram.nonEmptyBuckets, latencyMaxNanos: histogram.maxNanos)
        out.processCPUSeconds = reports.reduce(0) { $0 + $1.processCPUSeconds }
        out.loopCPUSeconds = reports.reduce(0) { $0 + $1.loopCPUSeconds }
        // Memory and progress samples are per machine; the per-worker rows keep what matters.
        out.rssSamples = []
        out.ticks = []
        let subscribers = reports.reduce(0) { $0 + $1.tracks.map(\.subscriber).uniqueCount }
        out.rssGrowthPerSubscriberBytes =
            subscribers > 0
            ? reports.reduce(0) { $0 + $1.rssGrowthPerSubscriberBytes * $1.tracks.map(\.subscriber).uniqueCount }
                / subscribers
            : 0
        let steady = reports.compactMap(\.steadyState)
        if steady.count == reports.count, let first = steady.first {
            let tracks = steady.reduce(0) { $0 + $1.tracks }
            let cores = steady.reduce(0) { $0 + $1.cores }
            let received = steady.reduce(UInt64(0)) { $0 &+ $1.packetsReceived }
            let lost = steady.reduce(0.0) {
                $0 + Double($1.packetsReceived) * $1.lossPercent / max(1e-9, 100 - $1.lossPercent)
            }
            out.steadyState = SteadyState(
                fromSeconds: steady.map(\.fromSeconds).max() ?? first.fromSeconds,
                seconds: steady.map(\.seconds).min() ?? first.seconds, tracks: tracks, cores: cores,
                tracksPerCore: cores > 0 ? Double(tracks) / cores : 0, packetsReceived: received,
                lossPercent: Double(received) + lost > 0 ? lost / (Double(received) + lost) * 100 : 0)
        } else {
            out.steadyState = nil
        }
        var errors: [String: ErrorCount] = [:]
        for e in reports.flatMap(\.errors) {
            errors[e.kind, default: ErrorCount(kind: e.kind, count: 0, example: e.example)].count += e.count
        }
        for l in lost where l.bots > 0 {
            errors[
                "worker lost",
                default: ErrorCount(
                    kind: "worker lost", count: 0, example: "\(l.worker) \(l.status), with \(l.bots) bots")
            ]
            .count += l.bots
        }
        out.errors = errors.values.sorted { $0.count > $1.count }
        out.workers =
            parts.map { part in
                WorkerResult(
                    worker: part.worker, status: "ok", plannedParticipants: part.report.plannedParticipants,
                    joinedParticipants: part.report.joinedParticipants, joinFailures: part.report.joinFailures,
                    subscribedTracks: part.report.subscribedTracks, packets: part.report.packets,
                    lossPercent: part.report.lossPercent)
            }
            + lost.map {
                WorkerResult(
                    worker: $0.worker, status: $0.status, plannedParticipants: $0.bots, joinedParticipants: 0,
                    joinFailures: $0.bots, subscribedTracks: 0, packets: 0, lossPercent: 0)
            }
        return out
    }

    /// The per-worker rows of a distributed run, as text (empty for a run in one process).
    public func workerTable() -> String {
        guard let workers, !workers.isEmpty else { return "" }
        var out = "\nworker               status  joined/planned  failed  tracks     packets   loss%\n"
        for w in workers {
            out += w.worker.padding(toLength: 20, withPad: " ", startingAt: 0)
            out += String(
                format: " %-7@ %7d/%-7d %6d %7d %11llu %7.3f\n", w.status as NSString, w.joinedParticipants,
                w.plannedParticipants, w.joinFailures, w.subscribedTracks, w.packets, w.lossPercent)
        }
        return out
    }
}

extension Array where Element: Hashable {
    fileprivate var uniqueCount: Int { Set(self).count }
}
