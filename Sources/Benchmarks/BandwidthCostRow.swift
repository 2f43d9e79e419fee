import Foundation

/// What bandwidth feedback costs (issue 33's cost goal): the SFU process row run with transport-cc
/// negotiated (the subscribers' feedback, the server's estimator and stream allocator, the bots'
/// feedback generators) and with it off (`UNDERSTUDY_TRANSPORT_CC=0` in the server, which then
/// offers no transport-cc, so neither side runs any of it), alternating, in the same bench run.
enum BandwidthCostRow {
    typealias Result = OnOffRuns<SFUProcessRow.Result>

    /// `pairs` alternating runs of each side (off first), each `publishers`/`subscribers`/`seconds` as
    /// the SFU process row.
    static func run(
        pairs: Int, publishers: Int, subscribers: Int, seconds: Double, progress: (String) -> Void
    ) async throws -> Result {
        try await Result.alternate(
            pairs: pairs, progress: progress, feature: "feedback", figure: \.packetsPerSecondPerCore,
            unit: "packets/s per core"
        ) {
            try await SFUProcessRow.run(
                publishers: publishers, subscribers: subscribers, seconds: seconds,
                serverEnvironment: ["UNDERSTUDY_TRANSPORT_CC": "0"])
        } on: {
            try await SFUProcessRow.run(publishers: publishers, subscribers: subscribers, seconds: seconds)
        }
    }

    /// The report's section.
    static func section(_ r: Result) -> String {
        let s = r.serverPacketsPerCore
        let g = r.generatorNanosPerPacket
        var text = "## What bandwidth feedback costs (transport-cc, estimator, allocator)\n\n"
        text += "| side | transport-cc off | on | on ÷ off (goal ≥ 0.95) |\n|---|---|---|---|\n"
        text += String(
            format: "| SFU server: forwarded packets per CPU-second | %.0f | %.0f | %.3f |\n", s.off, s.on,
            r.serverRatio)
        text += String(
            format:
                "| load generator: CPU per received packet (ratio: tracks per core) | %.0f ns | %.0f ns | %.3f |\n\n",
            g.off, g.on, r.generatorRatio)
        text += """
            Method: the SFU process row's room, run \(r.on.count) times each way, alternating, off first;
            "off" sets `UNDERSTUDY_TRANSPORT_CC=0` in the server, which then offers no transport-cc, so the
            bots generate no feedback and the server runs no estimator or allocator decisions from it;
            the best run of each side is compared (a shared machine's slow runs measure the neighbours).
            The generator's figure is this process's CPU over the same window ÷ the packets forwarded
            to it.


            """
        return text
    }
}

extension OnOffRuns<SFUProcessRow.Result> {
    /// Server packets forwarded per CPU-second, best of each side.
    var serverPacketsPerCore: (on: Double, off: Double) { highest(\.packetsPerSecondPerCore) }
    /// The load generator's CPU nanoseconds per packet it received, best of each side.
    var generatorNanosPerPacket: (on: Double, off: Double) {
        lowest { $0.nanosecondsPerPacket($0.generatorCPUSeconds) }
    }
    /// Server packets per core with feedback ÷ without (1 = free).
    var serverRatio: Double { Self.rateRatio(serverPacketsPerCore) }
    /// Generator tracks per core with feedback ÷ without: the inverse of its CPU per packet.
    var generatorRatio: Double { Self.costRatio(generatorNanosPerPacket) }
}
