/// Quality of one received track, measured without decoding: frame rate, freezes and pauses (the
/// W3C `RTCInboundRtpStreamStats` definitions), an estimated jitter-buffer delay, audio concealment,
/// layer switches and end-to-end latency. Its owner (``RTPReceiver`` in `RTC`) feeds it on the loop
/// thread when a video frame completes or an audio packet is played, and reads a
/// ``ReceiveQualitySnapshot`` when someone asks.
///
/// Fixed-size state (two 32-entry inline rings, about 500 bytes), no allocation, no Foundation: every
/// update is a handful of integer operations, so it can run for every track of a load generator.
/// Times are the loop's monotonic nanoseconds, passed in, so tests drive it with a synthetic clock.
///
/// Definitions (also in `docs/load-testing.md`):
/// - **freeze**: an inter-frame gap `d` (between two completed, decodable frames) with
///   `d ≥ max(3·m, m + 150 ms)`, where `m` is the mean of the last 30 gaps, this one included, once at
///   least 5 gaps are known (libwebrtc's `VideoQualityObserver`, which Chromium's `freezeCount`
///   reports). A gap of 5 s or more is a **pause** instead (W3C `pauseCount`), not a freeze.
/// - **jitter-buffer delay**: for each frame, the transit time `t = arrival − RTP time` (relative to
///   the first frame); a playout buffer sized to the slowest of the last 32 frames holds each frame
///   for `max(t of the last 32) − t`. The reported delay is the mean of that hold over all frames.
/// - **concealment** (audio): every sequence number the in-order playout skipped is one concealed
///   frame, of the stream's frame duration (the timestamp step between consecutive packets, 20 ms
///   until one is seen). A timestamp jump without a sequence gap (DTX, mute) is not concealment.
/// - **layer switch** (video): a key frame whose coded size differs from the previous key frame's.
public struct ReceiveQuality: Sendable {
    /// Gaps the freeze threshold averages over.
    public static let freezeWindow = 30
    /// Gaps needed before a freeze can be detected.
    public static let freezeMinimumGaps = 5
    /// The `+ 150 ms` of the freeze threshold, in nanoseconds.
    public static let freezeMinimumIncrease: UInt64 = 150_000_000
    /// A gap of at least this long (ns) is a pause, not a freeze.
    public static let pauseThreshold: UInt64 = 5_000_000_000
    /// Frames the jitter-buffer estimate looks back over.
    public static let jitterBufferWindow = 32

    /// Whether the track is audio or video.
    public let kind: MediaKind
    /// The RTP clock rate of its timestamps.
    public let clockRate: UInt32

    // Frames (video: completed decodable frames; audio: packets played in order).
    private(set) var frames: UInt64 = 0
    private var firstFrameTime: UInt64 = 0
    private var lastFrameTime: UInt64 = 0
    /// The last gaps in microseconds (a ring of `freezeWindow`), and their sum.
    private var gaps = InlineArray<32, UInt32>(repeating: 0)
    private var gapCount = 0
    private var gapNext = 0
    private var gapSum: UInt64 = 0
    private var freezes: UInt64 = 0
    private var freezeNanos: UInt64 = 0
    private var pauses: UInt64 = 0
    private var pauseNanos: UInt64 = 0
    private var maxGap: UInt64 = 0

    // RTP time, unwrapped from the first frame's timestamp, and transit times in microseconds.
    private var lastTimestamp: UInt32 = 0
    private var rtpTime: Int64 = 0
    /// Transit of frame `k` at `k % 32`, for the last 32 frames; the slowest of them and its frame.
    private var transits = InlineArray<32, Int64>(repeating: 0)
    private var slowest: Int64 = 0
    private var slowestFrame: UInt64 = 0
    private var holdMicros: UInt64 = 0
    /// Microseconds per RTP tick.
    private let microsPerTick: Double

    // Audio playout.
    private var lastSequence: Int64 = 0
    private var frameTicks: UInt32
    private var concealedFrames: UInt64 = 0
    private var concealedTicks: UInt64 = 0

    // Video layers.
    private var width: UInt16 = 0
    private var height: UInt16 = 0
    private var layerSwitches: UInt64 = 0

    // End-to-end latency (abs-capture-time).
    private var latencySum: UInt64 = 0
    private var latencyCount: UInt64 = 0
    private var latencyMax: UInt64 = 0

    /// Creates the state of one track.
    public init(kind: MediaKind, clockRate: UInt32) {
        self.kind = kind
        self.clockRate = max(1, clockRate)
        frameTicks = max(1, clockRate / 50)
        microsPerTick = 1e6 / Double(max(1, clockRate))
    }

    /// A video frame completed (all its packets arrived, decodable) at `arrival`.
    public mutating func videoFrame(timestamp: UInt32, arrival: UInt64) {
        frame(timestamp: timestamp, arrival: arrival)
    }

    /// An audio packet was played in order at `arrival`: `sequence` is its extended sequence number;
    /// every number skipped since the last one played is a concealed frame.
    public mutating func audioPacket(sequence: Int64, timestamp: UInt32, arrival: UInt64) {
        if frames > 0 && sequence > lastSequence {
            let missing = UInt64(sequence - lastSequence - 1)
            let step = Int64(Int32(bitPattern: timestamp &- lastTimestamp))
            if missing == 0 {
                // Opus frames are 2.5 to 120 ms; a longer step is DTX or a pause, not a frame.
                if step > 0 && step <= Int64(clockRate) * 120 / 1000 { frameTicks = UInt32(step) }
            } else {
                concealedFrames &+= missing
                // The timestamps say how long the missing frames were when they are consistent.
                let perFrame = step > 0 ? step / Int64(missing + 1) : 0
                let ticks =
                    perFrame > 0 && perFrame <= Int64(clockRate) * 120 / 1000 ? UInt64(perFrame) : UInt64(frameTicks)
                concealedTicks &+= missing &* ticks
            }
        }
        lastSequence = sequence
        frame(timestamp: timestamp, arrival: arrival)
    }

    /// A key frame of `width`×`height` started (0×0: size unknown, ignored).
    public mutating func keyframe(width w: UInt16, height h: UInt16) {
        guard w > 0 && h > 0 else { return }
        if width > 0 && (w != width || h != height) { layerSwitches &+= 1 }
        width = w
        height = h
    }

    /// One end-to-end latency sample: the sender's capture time (abs-capture-time) to arrival, ns.
    public mutating func latency(_ nanos: UInt64) {
        latencySum &+= nanos
        latencyCount &+= 1
        if nanos > latencyMax { latencyMax = nanos }
    }

    private mutating func frame(timestamp: UInt32, arrival: UInt64) {
        if frames == 0 {
            firstFrameTime = arrival
        } else {
            rtpTime &+= Int64(Int32(bitPattern: timestamp &- lastTimestamp))
            let gap = arrival &- lastFrameTime
            if arrival >= lastFrameTime { note(gap: gap) }
        }
        lastTimestamp = timestamp
        lastFrameTime = max(lastFrameTime, arrival)
        let k = frames
        frames &+= 1
        // Transit in µs: arrival minus media time, both from this track's first frame.
        let transit = Int64((arrival &- firstFrameTime) / 1000) &- Int64((Double(rtpTime) * microsPerTick).rounded())
        transits[Int(k & 31)] = transit
        // The slowest of the last 32: kept as frames come, searched again only when it leaves the window
        // (at most once per 32 frames), so a frame costs O(1).
        if k == 0 || transit >= slowest {
            slowest = transit
            slowestFrame = k
        } else if k &- slowestFrame >= UInt64(Self.jitterBufferWindow) {
            slowest = transit
            slowestFrame = k
            var j = k &- UInt64(Self.jitterBufferWindow - 1)
            while j < k {
                let t = transits[Int(j & 31)]
                if t >= slowest {
                    slowest = t
                    slowestFrame = j
                }
                j &+= 1
            }
            // A tie with this frame keeps the later one.
            if transit >= slowest {
                slowest = transit
                slowestFrame = k
            }
        }
        holdMicros &+= UInt64(slowest - transit)
    }

    private mutating func note(gap: UInt64) {
        if gap > maxGap { maxGap = gap }
        if gap >= Self.pauseThreshold {
            // A pause: not a freeze, and not part of the mean frame duration.
            pauses &+= 1
            pauseNanos &+= gap
            return
        }
        let micros = UInt32(min(gap / 1000, UInt64(UInt32.max)))
        if gapCount == Self.freezeWindow {
            gapSum &-= UInt64(gaps[gapNext])
        } else {
            gapCount += 1
        }
        gaps[gapNext] = micros
        gapSum &+= UInt64(micros)
        gapNext = (gapNext + 1) % Self.freezeWindow
        guard kind == .video, gapCount >= Self.freezeMinimumGaps else { return }
        let mean = gapSum / UInt64(gapCount) * 1000
        if gap >= max(3 * mean, mean + Self.freezeMinimumIncrease) {
            freezes &+= 1
            freezeNanos &+= gap
        }
    }

    /// What the state says now, with the receiver's counters beside it.
    public func snapshot(
        packetsReceived: UInt64 = 0, packetsLost: Int64 = 0, nacksSent: UInt64 = 0, plisSent: UInt64 = 0,
        firsSent: UInt64 = 0, jitterMilliseconds: Double = 0
    ) -> ReceiveQualitySnapshot {
        var s = ReceiveQualitySnapshot(kind: kind == .video ? "video" : "audio")
        s.frames = frames
        let span = frames > 1 ? lastFrameTime &- firstFrameTime : 0
        s.durationSeconds = Double(span) / 1e9
        s.framesPerSecond = span > 0 ? Double(frames - 1) / (Double(span) / 1e9) : 0
        s.freezeCount = freezes
        s.totalFreezesDurationMs = Double(freezeNanos) / 1e6
        s.pauseCount = pauses
        s.totalPausesDurationMs = Double(pauseNanos) / 1e6
        s.maxFrameGapMs = Double(maxGap) / 1e6
        s.jitterMs = jitterMilliseconds
        s.jitterBufferDelayMs = frames > 0 ? Double(holdMicros) / Double(frames) / 1000 : 0
        s.packetsReceived = packetsReceived
        s.packetsLost = max(0, packetsLost)
        let expected = Double(packetsReceived) + Double(s.packetsLost)
        s.lossPercent = expected > 0 ? Double(s.packetsLost) / expected * 100 : 0
        s.nacksSent = nacksSent
        s.plisSent = plisSent
        s.firsSent = firsSent
        if latencyCount > 0 {
            s.latencyMs = Double(latencySum) / Double(latencyCount) / 1e6
            s.latencyMaxMs = Double(latencyMax) / 1e6
        }
        if kind == .video {
            s.layerSwitches = layerSwitches
            if width > 0 {
                s.width = Int(width)
                s.height = Int(height)
            }
        } else {
            s.concealedFrames = concealedFrames
            s.concealedMs = Double(concealedTicks) * 1000 / Double(clockRate)
            let played = Double(frames) + Double(concealedFrames)
            let concealment = played > 0 ? Double(concealedFrames) / played * 100 : 0
            s.concealmentPercent = concealment
            // Mouth to ear: the measured network and sender path (when stamped) plus the playout buffer.
            let delay = (s.latencyMs ?? 0) + s.jitterBufferDelayMs
            if frames > 0 {
                let r = EModel.rFactor(oneWayDelayMs: delay, lossPercent: concealment)
                s.rFactor = r
                s.mos = EModel.mos(rFactor: r)
            }
        }
        return s
    }
}

/// A ``ReceiveQuality`` reading: what reports, `/metrics`, manifests and scenario expectations show.
/// Fields that do not apply to the track's kind (or have no data) are nil and left out of JSON.
public struct ReceiveQualitySnapshot: Sendable, Codable, Equatable {
    /// `audio` or `video`.
    public var kind: String
    /// Video: completed decodable frames; audio: packets played in order.
    public var frames: UInt64 = 0
    /// From the first frame to the last.
    public var durationSeconds: Double = 0
    /// Frames per second over ``durationSeconds``.
    public var framesPerSecond: Double = 0
    /// Freezes (W3C `freezeCount`; see ``ReceiveQuality``) and their summed gaps.
    public var freezeCount: UInt64 = 0
    public var totalFreezesDurationMs: Double = 0
    /// Gaps of 5 s or more (W3C `pauseCount`) and their sum.
    public var pauseCount: UInt64 = 0
    public var totalPausesDurationMs: Double = 0
    /// The longest gap between two frames.
    public var maxFrameGapMs: Double = 0
    /// RFC 3550 interarrival jitter of the packets.
    public var jitterMs: Double = 0
    /// Estimated mean time a frame waits in a playout buffer (see ``ReceiveQuality``).
    public var jitterBufferDelayMs: Double = 0
    public var packetsReceived: UInt64 = 0
    public var packetsLost: Int64 = 0
    public var lossPercent: Double = 0
    public var nacksSent: UInt64 = 0
    public var plisSent: UInt64 = 0
    public var firsSent: UInt64 = 0
    /// Capture (abs-capture-time) to arrival, mean and maximum; nil when the sender does not stamp it.
    public var latencyMs: Double?
    public var latencyMaxMs: Double?
    /// Video: key frames whose size changed (simulcast layer switches), and the current key-frame size.
    public var layerSwitches: UInt64?
    public var width: Int?
    public var height: Int?
    /// Audio: frames concealed (skipped sequence numbers), their duration, their share of all frames.
    public var concealedFrames: UInt64?
    public var concealedMs: Double?
    public var concealmentPercent: Double?
    /// Audio: E-model rating (``EModel``) and the MOS it maps to.
    public var rFactor: Double?
    public var mos: Double?

    /// An empty reading of `kind`.
    public init(kind: String) { self.kind = kind }
}

/// The E-model (ITU-T G.107), simplified as VoIP monitors use it: `R = 93.2 − Id − Ie,eff`, with the
/// delay impairment of Cole and Rosenbluth (2001), `Id = 0.024·d + 0.11·(d − 177.3)·H(d − 177.3)` for a
/// one-way delay `d` in ms, and `Ie,eff = Ie + (95 − Ie)·Ppl / (Ppl / BurstR + Bpl)` for a loss of
/// `Ppl` percent (G.107 §7.5). MOS from R by G.107 Annex B.
///
/// ITU-T publishes no Ie/Bpl for Opus (G.113 Appendix I lists narrowband codecs). The constants used
/// here: `Ie = 0` (Opus at VoIP bitrates is at least as clean as G.711 on the narrowband scale),
/// `Bpl = 25.1` (G.711 with packet-loss concealment, G.113 Appendix I; Opus conceals at least as
/// well), `BurstR = 1` (random loss). So a clean call rates R 93.2, MOS 4.41.
public enum EModel {
    /// Equipment impairment of the codec without loss.
    public static let ie = 0.0
    /// Packet-loss robustness factor.
    public static let bpl = 25.1
    /// Burst ratio (1: random loss).
    public static let burstRatio = 1.0

    /// The rating for a one-way (mouth-to-ear) delay in ms and a loss in percent.
    public static func rFactor(oneWayDelayMs d: Double, lossPercent ppl: Double) -> Double {
        let delay = max(0, d)
        let id = 0.024 * delay + (delay > 177.3 ? 0.11 * (delay - 177.3) : 0)
        let loss = min(max(0, ppl), 100)
        let ieEff = ie + (95 - ie) * loss / (loss / burstRatio + bpl)
        return 93.2 - id - ieEff
    }

    /// MOS (1 to 4.5) for a rating.
    public static func mos(rFactor r: Double) -> Double {
        if r <= 0 { return 1 }
        if r >= 100 { return 4.5 }
        return 1 + 0.035 * r + r * (r - 60) * (100 - r) * 7e-6
    }
}
