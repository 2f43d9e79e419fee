import Testing

@testable import Benchmarks

/// The off/on comparison of the cost rows: runs alternate off first, each figure takes the best run
/// of each side, and the ratios say 1 when the feature is free.
@Suite struct OnOffRunsTests {
    @Test func runsAlternateOffFirstAndReportEachPair() async throws {
        var order: [String] = []
        var lines: [String] = []
        var next = 0.0
        let runs = try await OnOffRuns<Double>.alternate(
            pairs: 2, progress: { lines.append($0) }, feature: "thing", figure: { $0 }, unit: "per core"
        ) {
            order.append("off")
            next += 1
            return next
        } on: {
            order.append("on")
            next += 1
            return next
        }
        #expect(order == ["off", "on", "off", "on"])
        #expect(runs.off == [1, 3] && runs.on == [2, 4])
        #expect(lines == ["bench:   thing off 1, on 2 per core", "bench:   thing off 3, on 4 per core"])
    }

    @Test func ratesTakeTheHighestRunAndCostsTheLowestMeasuredOne() {
        let runs = OnOffRuns<Double>(on: [90, 0, 80], off: [100, 0, 95])
        #expect(runs.highest { $0 } == (on: 90, off: 100))
        // A run that measured nothing (0) is no cost.
        #expect(runs.lowest { $0 } == (on: 80, off: 95))
        #expect(OnOffRuns<Double>.rateRatio((on: 90, off: 100)) == 0.9)
        #expect(OnOffRuns<Double>.costRatio((on: 100, off: 90)) == 0.9)
        // Nothing measured on the dividing side: 0, never a division by zero.
        #expect(OnOffRuns<Double>.rateRatio((on: 90, off: 0)) == 0)
        #expect(OnOffRuns<Double>.costRatio((on: 0, off: 90)) == 0)
        #expect(OnOffRuns<Double>().highest { $0 } == (on: 0, off: 0))
    }
}
