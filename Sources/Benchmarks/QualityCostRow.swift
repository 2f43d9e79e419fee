import Foundation

/// What the received-quality metrics cost the load generator (issue 36's "cheap" goal): the load
/// row's room run with the bots measuring every track's quality (the default) and without
/// (`LoadConfiguration.qualityMetrics` off), alternating, in the same bench run.
enum QualityCostRow {
    typealias Result = OnOffRuns<LoadBenchmarkResult>

    /// `pairs` alternating runs of each side (off first), each `publishers`/`subscribers`/`seconds`
    /// as the load row, each against its own `understudy serve` child process.
    static func run(
        pairs: Int, publishers: Int, subscribers: Int, seconds: Double, progress: (String) -> Void
    ) async throws -> Result {
        try await Result.alternate(
            pairs: pairs, progress: progress, feature: "quality metrics", figure: \.tracksPerCore,
            unit: "tracks per core"
        ) {
            try await LoadRows.measure(
                subscribers: subscribers, publishers: publishers, seconds: seconds, qualityMetrics: false)
        } on: {
            try await LoadRows.measure(subscribers: subscribers, publishers: publishers, seconds: seconds)
        }
    }

    /// The report's section.
    static func section(_ r: Result) -> String {
        let t = r.tracksPerCore
        func runs(_ list: [LoadBenchmarkResult]) -> String {
            list.map { String(format: "%.0f", $0.tracksPerCore) }.joined(separator: ", ")
        }
        func loss(_ list: [LoadBenchmarkResult]) -> String {
            String(format: "%.3f %%", list.map(\.lossPercent).max() ?? 0)
        }
        let tracks = r.on.first?.subscribedTracks ?? 0
        var text = "## What the received-quality metrics cost the load generator\n\n"
        text += "| figure | metrics off | on | on ÷ off (goal ≥ 0.95) |\n|---|---|---|---|\n"
        let n = r.nanosecondsPerPacket
        text += String(
            format:
                "| I/O threads' CPU per received packet (best run; ratio: tracks per core) | %.0f ns | %.0f ns | **%.3f** |\n",
            n.off, n.on, r.ratio)
        text += String(
            format: "| subscribed tracks per core (best run) | %.0f | %.0f | %.3f |\n", t.off, t.on,
            Result.rateRatio(t))
        text += "| tracks per core, every run in order | \(runs(r.off)) | \(runs(r.on)) | |\n"
        text += "| worst loss in the window | \(loss(r.off)) | \(loss(r.on)) | |\n\n"
        text += """
            Method: the load row's set-up (\(r.on.first?.publishers ?? 0) simulcast publishers, \
            \(r.on.first?.subscribers ?? 0) subscribers in a 3x3 grid, \(tracks) tracks, each run against
            its own `understudy serve` child process), run \(r.on.count) times each way, alternating, off
            first. "Off" is `LoadConfiguration.qualityMetrics = false` (`understudy load --quality-metrics
            off`): the bots' receivers skip the per-frame and per-packet quality updates (fps, freezes,
            jitter-buffer estimate, concealment, latency samples). The ratio compares the I/O threads' CPU
            per packet received over the steady window (tracks per core at the same packet rate; tracks
            per core alone rises when a starved run loses packets); the best run of each side is compared.


            """
        return text
    }
}

extension OnOffRuns<LoadBenchmarkResult> {
    /// Subscribed tracks per core, best of each side.
    var tracksPerCore: (on: Double, off: Double) { highest(\.tracksPerCore) }
    /// CPU per received packet, best (lowest) of each side.
    var nanosecondsPerPacket: (on: Double, off: Double) { lowest(\.nanosecondsPerPacket) }
    /// Tracks per core with the metrics ÷ without at the same packet rate (1 = free; the goal is a
    /// drop below 5 %): the inverse ratio of the CPU per received packet, which a run whose packets
    /// were lost (a starved machine) cannot flatter as it does tracks per core.
    var ratio: Double { Self.costRatio(nanosecondsPerPacket) }
}
