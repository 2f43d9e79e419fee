import RTCWire

/// The receive-side estimate for a peer that negotiated only `goog-remb` (no transport-cc): once a
/// second it sends REMB (draft-alvestrand-rmcat-remb, RTCP PSFB 15) naming the SSRCs it received,
/// so that the sender's estimator has a bound to climb toward instead of holding its start rate.
///
/// The rule, judged over each interval (at least a second and 20 packets, as the loss controller
/// judges): loss under 2 %: 1.5 × the rate that arrived (room to grow by half a second's worth);
/// 2–10 %: the rate that arrived; over 10 %: that rate × (1 − loss / 2), as GCC's loss-based
/// control cuts. Never under ``minimumBitrate``. Loss counts per SSRC from the highest sequence
/// number seen, so reordering within the interval does not count as loss.
///
/// Loop-thread confined. Recording a packet updates a few fixed slots: no allocation.
final class REMBGenerator {
    /// How often a REMB is sent while packets arrive (libwebrtc's receive-side estimator sends
    /// about once a second, sooner on a drop).
    static let interval: UInt64 = 1_000 * RTPNanos.millisecond
    /// Packets an interval needs before its loss is judged (fewer: the rate is still reported).
    static let minimumPackets = 20
    /// The lowest estimate sent, bits/s: enough for audio and a small video layer.
    static let minimumBitrate: UInt64 = 50_000
    /// SSRCs tracked at once (a bundle of audio, video layers and their RTX); more are counted in
    /// the rate but not named.
    static let maxSSRCs = 16

    /// The sender SSRC written into the REMB (the transport's own RTCP SSRC).
    var senderSSRC: UInt32 = 1
    /// Lowered when the first packet of an interval arrives, so the owner's timers run in time.
    var tickDeadline: TickDeadline?
    /// When ``tick(now:emit:)`` next has a REMB to send (`.max`: nothing received yet).
    private(set) var nextTimer: UInt64 = .max
    /// REMB messages sent.
    private(set) var messagesSent: UInt64 = 0
    /// The last estimate sent, bits/s (0: none yet).
    private(set) var lastEstimate: UInt64 = 0

    private var intervalStart: UInt64 = 0
    private var bytes: UInt64 = 0
    private var ssrcs: [UInt32]
    /// Per slot: highest extended sequence number, and that number at the interval's start - 1.
    private var highest: [Int64]
    private var base: [Int64]
    private var received: [Int]
    private var count = 0
    private var ssrcList: [UInt32] = []
    private let buffer: UnsafeMutableRawBufferPointer

    init() {
        ssrcs = Array(repeating: 0, count: Self.maxSSRCs)
        highest = Array(repeating: 0, count: Self.maxSSRCs)
        base = Array(repeating: 0, count: Self.maxSSRCs)
        received = Array(repeating: 0, count: Self.maxSSRCs)
        ssrcList.reserveCapacity(Self.maxSSRCs)
        buffer = .allocate(byteCount: 20 + 4 * Self.maxSSRCs, alignment: 16)
    }

    deinit { buffer.deallocate() }

    /// Records an RTP packet of `length` bytes (header included) on `ssrc` with `sequence`,
    /// arrived at `now` (loop clock, ns).
    func record(ssrc: UInt32, sequence: UInt16, length: Int, now: UInt64) {
        if nextTimer == .max {
            intervalStart = now
            nextTimer = now &+ Self.interval
            tickDeadline?.lower(to: nextTimer)
        }
        bytes &+= UInt64(length)
        var slot = 0
        while slot < count, ssrcs[slot] != ssrc { slot += 1 }
        if slot == count {
            guard count < Self.maxSSRCs else { return }
            count += 1
            ssrcs[slot] = ssrc
            highest[slot] = Int64(sequence)
            base[slot] = Int64(sequence) - 1
            received[slot] = 1
            return
        }
        let h = highest[slot]
        let unwrapped = h + Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: h)))
        if unwrapped > h { highest[slot] = unwrapped }
        // A late packet from before the interval was counted as lost there; not again here.
        if unwrapped > base[slot] { received[slot] += 1 }
    }

    /// The estimate for an interval: `bytes` over `elapsed` ns with `lost` of `expected` packets lost.
    static func estimate(bytes: UInt64, elapsed: UInt64, lost: Int, expected: Int) -> UInt64 {
        let rate = Double(bytes) * 8 * 1e9 / Double(max(elapsed, 1))
        let loss = expected >= minimumPackets ? Double(max(lost, 0)) / Double(expected) : 0
        let bound: Double
        if loss < 0.02 {
            bound = rate * 1.5
        } else if loss <= 0.10 {
            bound = rate
        } else {
            bound = rate * (1 - loss / 2)
        }
        return max(minimumBitrate, UInt64(bound))
    }

    /// Sends the REMB that is due. `emit` gets the buffer and the length of one RTCP packet. An
    /// interval in which nothing arrived sends nothing and stops the timer until the next packet.
    func tick(now: UInt64, emit: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        guard now >= nextTimer else { return }
        var expected = 0
        var got = 0
        var kept = 0
        ssrcList.removeAll(keepingCapacity: true)
        for slot in 0..<count where received[slot] > 0 {
            // An SSRC silent for a whole interval is forgotten (not named, its losses not counted).
            expected += Int(highest[slot] - base[slot])
            got += received[slot]
            ssrcList.append(ssrcs[slot])
            ssrcs[kept] = ssrcs[slot]
            highest[kept] = highest[slot]
            base[kept] = highest[slot]
            received[kept] = 0
            kept += 1
        }
        count = kept
        guard got > 0 else {
            nextTimer = .max
            return
        }
        let estimate = Self.estimate(
            bytes: bytes, elapsed: now - intervalStart, lost: expected - got, expected: expected)
        if let length = try? RTCPWriter.writeREMB(
            into: buffer, at: 0, senderSSRC: senderSSRC, bitrate: estimate, ssrcs: ssrcList)
        {
            emit(buffer, length)
            messagesSent &+= 1
            lastEstimate = estimate
        }
        bytes = 0
        intervalStart = now
        nextTimer = now &+ Self.interval
    }
}
