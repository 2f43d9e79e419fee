/// Fits a pre-encoded multi-layer video source (synthetic or file: it cannot re-encode) to the
/// transport's bandwidth estimate by choosing which layers go out (issue 33, item 3):
///
/// - ``Mode/single``: one outgoing stream carries the highest layer that fits; a switch happens on
///   a keyframe of the new layer, so the receiver decodes across it (same RTP timestamps, a new
///   resolution at a keyframe);
/// - ``Mode/simulcast``: each layer has its own stream; the lowest always goes, higher ones as long
///   as the layers up to them fit together; a stopped layer resumes on its own keyframe.
///
/// Layer rates are measured from the frames themselves (so files need no metadata). Down-switches
/// happen at the next evaluation (every ``evaluationInterval``, or on the next frame while the
/// estimate decreases); up-switches wait
/// ``upSwitchHoldoff`` after any switch and never while the estimate decreases. A sender that is
/// application-limited (its estimate cannot grow past 1.5 × what it sends) probes by trying the
/// next layer up once its rate is within 1.5 × the estimate; a step up stays for ``probeTrial``
/// unless the estimate decreases meanwhile, and if it has to come down within that trial, the next
/// try waits twice as long (5 s, 10 s, … 40 s).
///
/// Loop-thread confined, no allocation per frame (the per-layer arrays are made once).
public struct EstimateLayerFitter {
    public enum Mode: Sendable { case single, simulcast }

    static let evaluationInterval: UInt64 = 500_000_000
    static let upSwitchHoldoff: UInt64 = 2_000_000_000
    static let probeTrial: UInt64 = 4_000_000_000
    static let firstProbeInterval: UInt64 = 5_000_000_000
    static let maxProbeInterval: UInt64 = 40_000_000_000
    static let rateWindow: UInt64 = 1_000_000_000
    /// What a layer may use of the estimate left after audio.
    static let headroom = 0.85

    public let mode: Mode
    public let layerCount: Int
    /// Bits per second kept for audio and RTCP.
    public var audioBitrate: Int
    /// Single mode: the layer going out (0: full resolution).
    public private(set) var current: Int
    /// Single mode: the layer to switch to at its next keyframe.
    public private(set) var pending: Int?
    /// Simulcast mode: the layers going out, and those wanted that wait for a keyframe.
    public private(set) var active: [Bool]
    private var wanted: [Bool]
    /// Measured bits per second of each layer (0: not measured yet).
    public private(set) var layerBitrates: [Int]
    private var windowBytes: [Int]
    private var windowStart: UInt64?
    private var lastEvaluation: UInt64 = 0
    private var lastSwitch: UInt64 = 0
    private var lastUp: UInt64?
    private var probeInterval = EstimateLayerFitter.firstProbeInterval
    /// Layer switches made (single mode) or layers started and stopped (simulcast).
    public private(set) var switches = 0

    public init(mode: Mode, layerCount: Int, audioBitrate: Int = 40_000) {
        self.mode = mode
        self.layerCount = max(1, layerCount)
        self.audioBitrate = audioBitrate
        current = 0
        active = Array(repeating: true, count: self.layerCount)
        wanted = active
        layerBitrates = Array(repeating: 0, count: self.layerCount)
        windowBytes = Array(repeating: 0, count: self.layerCount)
    }

    /// Counts one frame of `layer` for the layer rates.
    public mutating func observe(layer: Int, bytes: Int, now: UInt64) {
        guard layer >= 0, layer < layerCount else { return }
        let start = windowStart ?? now
        windowStart = start
        if now - start >= Self.rateWindow {
            let seconds = Double(now - start) / 1e9
            for k in 0..<layerCount {
                let measured = Int(Double(windowBytes[k] * 8) / seconds)
                layerBitrates[k] = layerBitrates[k] == 0 ? measured : (layerBitrates[k] + measured) / 2
                windowBytes[k] = 0
            }
            windowStart = now
        }
        windowBytes[layer] += bytes
    }

    /// Where a frame of `layer` goes: the index of the outgoing stream, or nil to drop it.
    public mutating func route(layer: Int, isKeyframe: Bool) -> Int? {
        switch mode {
        case .single:
            if let pending, layer == pending, isKeyframe {
                current = pending
                self.pending = nil
                switches += 1
            }
            return layer == current ? 0 : nil
        case .simulcast:
            guard layer >= 0, layer < layerCount else { return nil }
            if wanted[layer] != active[layer] {
                if !wanted[layer] {
                    active[layer] = false
                    switches += 1
                } else if isKeyframe {
                    active[layer] = true
                    switches += 1
                }
            }
            return active[layer] ? layer : nil
        }
    }

    /// Re-decides the layers from `estimate` (nil: the peer gives no feedback, so everything goes
    /// out at full quality, as without estimation).
    public mutating func update(estimate: BandwidthEstimate?, now: UInt64) {
        // A falling estimate is judged on the frame it arrives with: every evaluation interval waited
        // there is that much longer that the stopped layers fill the uplink and the receiver freezes.
        let falling = estimate.map { $0.overloaded || $0.state == .decreasing } ?? false
        guard falling || now - lastEvaluation >= Self.evaluationInterval else { return }
        lastEvaluation = now
        guard let estimate, layerBitrates.allSatisfy({ $0 > 0 }) else {
            if estimate == nil { choose(top: 0, now: now) }
            return
        }
        let budget = Double(estimate.targetBitrate - audioBitrate) * Self.headroom
        // The best layer (lowest index) that fits: alone (single) or with all below it (simulcast).
        var fitting = layerCount - 1
        var k = layerCount - 1
        var sum = 0.0
        while k >= 0 {
            let need = mode == .single ? Double(layerBitrates[k]) : sum + Double(layerBitrates[k])
            if need <= budget { fitting = k } else { break }
            sum += Double(layerBitrates[k])
            k -= 1
        }
        let top = mode == .single ? (pending ?? current) : (active.firstIndex(of: true) ?? layerCount - 1)
        if fitting > top {
            // A step up is given its trial for the estimate to follow, unless the estimate falls.
            if let up = lastUp, now - up < Self.probeTrial, estimate.state != .decreasing { return }
            // Down: at once. A probe that comes down this soon failed: wait longer for the next.
            if let up = lastUp, now - up < Self.probeTrial {
                probeInterval = min(probeInterval * 2, Self.maxProbeInterval)
            }
            lastUp = nil
            choose(top: fitting, now: now)
        } else if fitting < top {
            guard estimate.state != .decreasing, now - lastSwitch >= Self.upSwitchHoldoff else { return }
            choose(top: top - 1, now: now)
            lastUp = now
        } else if estimate.state == .applicationLimited, top > 0, now - lastSwitch >= probeInterval,
            estimate.state != .decreasing
        {
            // Application-limited: the estimate cannot show more than we send. Try the next layer.
            let next = mode == .single ? Double(layerBitrates[top - 1]) : sum + Double(layerBitrates[top - 1])
            if next <= Double(estimate.targetBitrate) * 1.5 {
                choose(top: top - 1, now: now)
                lastUp = now
            }
        } else if let up = lastUp, now - up >= Self.probeTrial {
            probeInterval = Self.firstProbeInterval  // the last step up held
            lastUp = nil
        }
    }

    private mutating func choose(top: Int, now: UInt64) {
        switch mode {
        case .single:
            if top == current {
                pending = nil
            } else if top != pending {
                pending = top
                lastSwitch = now
            }
        case .simulcast:
            var changed = false
            for k in 0..<layerCount {
                let want = k >= top
                if wanted[k] != want {
                    wanted[k] = want
                    changed = true
                }
            }
            if changed { lastSwitch = now }
        }
    }
}
