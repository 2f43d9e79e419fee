import RTCWire

@testable import RTC

/// A synthetic-clock path for the bandwidth estimator's tests: a sender paced at a rate (the
/// estimate, or a fixed one), a bottleneck with a drop-tail queue and a propagation delay, the
/// receiver's real ``TransportFeedbackGenerator``, and a return path for its feedback. Every
/// millisecond is simulated; nothing sleeps, and a seeded generator makes losses repeatable.
final class BandwidthLinkSimulator {
    let estimator: SendSideBandwidthEstimator
    let generator = TransportFeedbackGenerator(interval: 50 * 1_000_000)
    /// Bottleneck capacity, bits/s (changed mid-run for step tests).
    var capacity: Double
    /// One-way propagation delay, ms.
    var propagationMs: UInt64 = 20
    /// The queue holds at most this much (ms at the current capacity); more is dropped.
    var maxQueueMs: Double = 300
    /// Fixed send rate (bits/s); nil: the sender follows the estimate, as an encoder would.
    var fixedRate: Double?
    /// Probability of losing a packet on the path (random loss on top of queue drops), 0…1.
    var randomLoss = 0.0
    /// Every `reorderEvery`-th packet arrives `reorderMs` later than its turn (0: none).
    var reorderEvery = 0
    var reorderMs: UInt64 = 0
    /// Probability of losing a feedback message, and a window in which all feedback is lost.
    var feedbackLoss = 0.0
    var feedbackBlackout: Range<UInt64>?
    var packetSize = 1200

    private(set) var now: UInt64 = 1_000 * 1_000_000
    private var sequence: UInt16 = 65_000
    private var budgetBits = 0.0
    private var linkFreeAt: Double = 0
    private var inFlight: [(arrival: UInt64, sequence: UInt16)] = []
    private var feedback: [(at: UInt64, bytes: [UInt8])] = []
    private var rng = SplitMix64(seed: 42)
    private(set) var packetsSent = 0
    private(set) var packetsDropped = 0
    /// Bits that went through the bottleneck in the last whole second.
    private(set) var states: Set<BandwidthEstimate.State> = []

    init(capacity: Double, configuration: BandwidthEstimatorConfiguration = BandwidthEstimatorConfiguration()) {
        self.capacity = capacity
        estimator = SendSideBandwidthEstimator(configuration: configuration)
    }

    var target: Int { estimator.estimate.targetBitrate }

    private func random() -> Double { Double(rng.next() >> 11) / Double(1 << 53) }

    /// Runs the path for `seconds` of synthetic time.
    func run(seconds: Double) {
        let end = now + UInt64(seconds * 1e9)
        let ms: UInt64 = 1_000_000
        while now < end {
            now += ms
            // Sender.
            let rate = fixedRate ?? Double(target)
            budgetBits = min(budgetBits + rate / 1000, rate * 0.05 + Double(packetSize * 8))
            while budgetBits >= Double(packetSize * 8) {
                budgetBits -= Double(packetSize * 8)
                send()
            }
            // Receiver.
            var k = 0
            while k < inFlight.count {
                if inFlight[k].arrival <= now {
                    generator.record(inFlight[k].sequence, ssrc: 0xCAFE, now: inFlight[k].arrival)
                    inFlight.remove(at: k)
                } else {
                    k += 1
                }
            }
            generator.tick(now: now) { buffer, length in
                let lost = feedbackBlackout?.contains(now) == true || random() < feedbackLoss
                if !lost {
                    feedback.append(
                        (now + propagationMs * ms, Array(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))))
                }
            }
            // Feedback back at the sender.
            while let first = feedback.first, first.at <= now {
                feedback.removeFirst()
                first.bytes.withUnsafeBytes { raw in
                    try? RTCPCompound.forEach(raw) { view throws(RTCPError) in
                        if view.isTransportCC { try estimator.handleTransportFeedback(view, now: now) }
                    }
                }
                states.insert(estimator.estimate.state)
            }
        }
    }

    private func send() {
        let seq = sequence
        sequence &+= 1
        packetsSent += 1
        if estimator.packetSent(seq, size: packetSize, now: now) { states.insert(estimator.estimate.state) }
        let nowMs = Double(now) / 1e6
        let start = max(nowMs, linkFreeAt)
        if start - nowMs > maxQueueMs || random() < randomLoss {
            packetsDropped += 1
            return
        }
        let departure = start + Double(packetSize * 8) / capacity * 1000
        linkFreeAt = departure
        var arrival = UInt64(departure * 1e6) + propagationMs * 1_000_000
        if reorderEvery > 0, packetsSent % reorderEvery == 0 { arrival += reorderMs * 1_000_000 }
        inFlight.append((arrival, seq))
    }
}
