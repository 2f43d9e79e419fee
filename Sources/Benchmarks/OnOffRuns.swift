import Foundation

/// Runs of one benchmark with a feature off and on, alternated in the same bench run (off first) so
/// that both sides see the same machine: what a cost row (bandwidth feedback, quality metrics)
/// compares. Each figure takes the best run of each side: on a shared machine the slowest run says
/// more about the neighbours than about the feature.
struct OnOffRuns<Run> {
    var on: [Run] = []
    var off: [Run] = []

    /// `pairs` alternating runs, off first; after each pair, `progress` gets a line with `figure` of
    /// both (`"bench:   <feature> off N, on N <unit>"`).
    static func alternate(
        pairs: Int, progress: (String) -> Void, feature: String, figure: (Run) -> Double, unit: String,
        off runOff: () async throws -> Run, on runOn: () async throws -> Run
    ) async throws -> Self {
        var runs = Self()
        for _ in 0..<pairs {
            let off = try await runOff()
            runs.off.append(off)
            let on = try await runOn()
            runs.on.append(on)
            progress(String(format: "bench:   \(feature) off %.0f, on %.0f \(unit)", figure(off), figure(on)))
        }
        return runs
    }

    /// The highest `figure` of each side: for a rate, where more is better (0 with no runs).
    func highest(_ figure: (Run) -> Double) -> (on: Double, off: Double) {
        (on.map(figure).max() ?? 0, off.map(figure).max() ?? 0)
    }

    /// The lowest `figure` above 0 of each side: for a cost, where less is better and 0 means the run
    /// measured nothing (0 when no run did).
    func lowest(_ figure: (Run) -> Double) -> (on: Double, off: Double) {
        func best(_ runs: [Run]) -> Double { runs.map(figure).filter { $0 > 0 }.min() ?? 0 }
        return (best(on), best(off))
    }

    /// A rate on ÷ off (1 = the feature is free); 0 when the off side measured nothing.
    static func rateRatio(_ rate: (on: Double, off: Double)) -> Double {
        rate.off > 0 ? rate.on / rate.off : 0
    }

    /// A cost's off ÷ on: the rate it allows, on ÷ off (1 = free); 0 when the on side measured nothing.
    static func costRatio(_ cost: (on: Double, off: Double)) -> Double {
        cost.on > 0 ? cost.off / cost.on : 0
    }
}
