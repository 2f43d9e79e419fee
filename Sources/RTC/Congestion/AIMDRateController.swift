import Foundation

/// GCC's delay-based rate control: additive-increase / multiplicative-decrease driven by the
/// overuse detector.
///
/// - overuse → decrease once to 0.85 × the acknowledged rate (at most once per ``decreaseInterval``),
///   then hold; the acknowledged rate at that moment is a sample of the link capacity;
/// - underuse → hold (queues drain; raising now would refill them);
/// - normal → increase: 60 % per second until the first decrease (start phase), then 8 % per
///   second far from the known capacity, about one packet per response time near it;
/// - never past 1.5 × the acknowledged rate + 10 kbit/s: a sender that sends far less than the
///   estimate (application-limited) has not shown that the path carries more.
struct AIMDRateController {
    enum Phase: Equatable { case hold, increase, decrease }

    static let beta = 0.85
    static let multiplicativePerSecond = 1.08
    /// Growth per second until the first decrease (the path's capacity is unknown): the start
    /// phase that libwebrtc covers with its initial probes at 3× and 6× the start rate. The
    /// application-limited cap still holds, so only a sender that fills the estimate climbs this fast.
    static let startupPerSecond = 1.6
    static let decreaseIntervalMicros: Int64 = 200_000
    static let packetBits = 1200.0 * 8

    private(set) var bitrate: Double
    private(set) var phase = Phase.increase
    /// True when the last increase was cut to what the acknowledged rate allows.
    private(set) var applicationLimited = false
    /// True when the last update decreased the rate.
    private(set) var decreased = false
    let minBitrate: Double
    let maxBitrate: Double
    /// Round-trip time, ms (the response time of an increase is this plus 100 ms).
    var rttMs = 200.0
    private var lastUpdate: Int64?
    private var lastDecrease: Int64?
    /// Exponential average of the acknowledged rate at overuse (bits/s) and its normalized variance.
    private(set) var linkCapacity: Double?
    private var capacityVariance = 0.4

    init(startBitrate: Int, minBitrate: Int, maxBitrate: Int) {
        bitrate = Double(startBitrate)
        self.minBitrate = Double(minBitrate)
        self.maxBitrate = Double(maxBitrate)
    }

    /// Moves the rate for the detector's `usage`, given the acknowledged rate (bits/s, nil:
    /// unknown), at `nowMicros` (loop clock). Returns the new rate.
    @discardableResult
    mutating func update(usage: BandwidthUsage, acknowledged: Int?, nowMicros: Int64) -> Double {
        let dtSeconds = min(Double(nowMicros - (lastUpdate ?? nowMicros)) / 1e6, 1.0)
        lastUpdate = nowMicros
        decreased = false
        switch usage {
        case .overusing: phase = .decrease
        case .underusing: phase = .hold
        case .normal: if phase == .hold { phase = .increase }
        }
        let acked = acknowledged.map(Double.init)
        switch phase {
        case .hold:
            applicationLimited = false
        case .increase:
            if let bound = capacityUpperBound, bitrate > bound {
                // Past what the link carried at the last overuse, by far: that sample is stale.
                linkCapacity = nil
            }
            var next: Double
            if let capacity = linkCapacity, bitrate >= capacity * 0.9 {
                let responseSeconds = (rttMs + 100) / 1000
                next = bitrate + max(1_000, Self.packetBits / responseSeconds) * dtSeconds
            } else {
                let growth = lastDecrease == nil ? Self.startupPerSecond : Self.multiplicativePerSecond
                next = bitrate * pow(growth, dtSeconds) + 1_000 * dtSeconds
            }
            applicationLimited = false
            if let acked {
                let cap = 1.5 * acked + 10_000
                if next > cap {
                    next = max(bitrate, cap)
                    applicationLimited = true
                }
            }
            bitrate = next
        case .decrease:
            if let lastDecrease, nowMicros - lastDecrease < Self.decreaseIntervalMicros { break }
            lastDecrease = nowMicros
            let measured = acked ?? bitrate
            var next = Self.beta * measured
            if next > bitrate {
                // The acknowledged rate lags a fast drop: fall back to the rate itself.
                next = Self.beta * (linkCapacity.map { min($0, bitrate) } ?? bitrate)
            }
            if acked != nil { updateCapacity(measured) }
            bitrate = next
            decreased = true
            applicationLimited = false
            phase = .hold
        }
        bitrate = min(max(bitrate, minBitrate), maxBitrate)
        return bitrate
    }

    /// Sets the rate from outside (a cut after feedback stopped), keeping the controller's state.
    mutating func set(_ value: Double) { bitrate = min(max(value, minBitrate), maxBitrate) }

    /// The path carried `carried` bits/s with no queue growth (a probe's padding, or layers
    /// forwarded above the estimate): the rate is at least that, as libwebrtc takes a probe's
    /// result. A carried rate past the capacity seen at the last overuse makes that sample stale,
    /// so the climb from here is multiplicative again rather than a packet per response time.
    mutating func raise(toCarried carried: Double) {
        guard carried > bitrate else { return }
        if let bound = capacityUpperBound, carried > bound { linkCapacity = nil }
        bitrate = min(carried, maxBitrate)
    }

    /// Three standard deviations above the capacity seen at overuse: a rate past it makes that sample stale.
    private var capacityUpperBound: Double? {
        linkCapacity.map { $0 + 3 * sqrt(capacityVariance * $0 * 1000) }
    }

    private mutating func updateCapacity(_ sample: Double) {
        guard let capacity = linkCapacity else {
            linkCapacity = sample
            return
        }
        let kbps = capacity / 1000
        let sampleKbps = sample / 1000
        let average = 0.95 * kbps + 0.05 * sampleKbps
        let norm = max(average, 1)
        capacityVariance = 0.95 * capacityVariance + 0.05 * (average - sampleKbps) * (average - sampleKbps) / norm
        capacityVariance = min(max(capacityVariance, 0.4), 2.5)
        linkCapacity = average * 1000
    }
}
