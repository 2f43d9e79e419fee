import Testing

@testable import RTC

/// Which layers of a pre-encoded source go out for an estimate; synthetic clock.
@Suite struct EstimateLayerFitterTests {
    private let ms: UInt64 = 1_000_000

    /// Feeds 30 fps of three layers (600, 240, 100 kbit/s) for `seconds`, keyframes every 2 s,
    /// with `estimate`; returns the layers routed in the last frame.
    @discardableResult
    private func run(
        _ f: inout EstimateLayerFitter, from start: UInt64, seconds: Double, estimate: BandwidthEstimate?
    ) -> [Int?] {
        let rates = [600_000, 240_000, 100_000]
        var routed: [Int?] = []
        var t = start
        while t < start + UInt64(seconds * 1e9) {
            f.update(estimate: estimate, now: t)
            let frame = Int(t / (33 * ms))
            routed = (0..<3).map { layer in
                f.observe(layer: layer, bytes: rates[layer] / 8 / 30, now: t)
                return f.route(layer: layer, isKeyframe: frame % 60 == 0)
            }
            t += 33 * ms
        }
        return routed
    }

    @Test func aSingleStreamSendsTheLayerThatFitsAndSwitchesOnKeyframes() {
        var f = EstimateLayerFitter(mode: .single, layerCount: 3)
        // No feedback: full quality.
        #expect(run(&f, from: 0, seconds: 2, estimate: nil) == [0, nil, nil])
        // 400 kbit/s: the middle layer (240 kbit/s) fits after audio and headroom, from its next keyframe.
        var low = BandwidthEstimate(targetBitrate: 400_000, state: .holding, source: .transportCC)
        #expect(run(&f, from: 2_000 * ms, seconds: 3, estimate: low) == [nil, 0, nil])
        #expect(f.current == 1 && f.switches == 1)
        // 1.5 Mbit/s: back up, one layer per hold-off.
        low.targetBitrate = 1_500_000
        low.state = .increasing
        #expect(run(&f, from: 5_000 * ms, seconds: 5, estimate: low) == [0, nil, nil])
        // A collapse: the lowest layer.
        low.targetBitrate = 100_000
        low.state = .decreasing
        #expect(run(&f, from: 10_000 * ms, seconds: 3, estimate: low) == [nil, nil, 0])
    }

    @Test func simulcastStopsTheTopLayersThatDoNotFitTogether() {
        var f = EstimateLayerFitter(mode: .simulcast, layerCount: 3)
        #expect(run(&f, from: 0, seconds: 2, estimate: nil) == [0, 1, 2])
        let e = BandwidthEstimate(targetBitrate: 500_000, state: .holding, source: .transportCC)
        // 340 kbit/s for the two low layers fits (500 k - 40 k) × 0.85; 940 kbit/s does not.
        #expect(run(&f, from: 2_000 * ms, seconds: 2, estimate: e) == [nil, 1, 2])
        let up = BandwidthEstimate(targetBitrate: 2_000_000, state: .increasing, source: .transportCC)
        #expect(run(&f, from: 4_000 * ms, seconds: 4, estimate: up) == [0, 1, 2])
    }

    /// A decrease stops the layers that no longer fit on the next frame, not at the next evaluation.
    @Test func aDecreaseStopsLayersOnTheNextFrame() {
        var f = EstimateLayerFitter(mode: .simulcast, layerCount: 3)
        let fine = BandwidthEstimate(targetBitrate: 2_000_000, state: .holding, source: .transportCC)
        #expect(run(&f, from: 0, seconds: 2, estimate: fine) == [0, 1, 2])
        // 416 ms after the last evaluation (at 1.584 s): no wait for the next one at 2.1 s.
        let cut = BandwidthEstimate(targetBitrate: 200_000, state: .decreasing, source: .transportCC)
        f.update(estimate: cut, now: 2_000 * ms)
        #expect(f.route(layer: 0, isKeyframe: false) == nil && f.route(layer: 1, isKeyframe: false) == nil)
        #expect(f.route(layer: 2, isKeyframe: false) == 2)
    }

    @Test func anApplicationLimitedSenderProbesTheNextLayerAndBacksOffWhenItFails() {
        var f = EstimateLayerFitter(mode: .single, layerCount: 3)
        var e = BandwidthEstimate(targetBitrate: 420_000, state: .applicationLimited, source: .transportCC)
        run(&f, from: 0, seconds: 4, estimate: e)
        #expect(f.current == 1)
        // Held at the cap (1.5 × what it sends): after the probe interval it tries the top layer.
        run(&f, from: 4_000 * ms, seconds: 6, estimate: e)
        #expect(f.current == 0 || f.pending == 0)
        // The path cannot carry it: the estimate falls, it comes back down.
        e.targetBitrate = 380_000
        e.state = .decreasing
        run(&f, from: 10_000 * ms, seconds: 3, estimate: e)
        #expect(f.current == 1)
    }
}
