import RTCWire

// A receive stream's features as a chain of links (pion's interceptor decomposition on our single
// loop thread): the stream state of ``RTPReceiver`` (sequence extension, dedupe, frame assembly)
// hands each accepted packet to the chain, sender reports go down the same chain, and the timer asks
// every link whether it has RTCP to send, then lets each write its part of one compound in chain
// order. The chain is a generic pair type, so the compiler specializes every call: no existential
// box, no allocation and no dynamic dispatch per packet.

/// One accepted packet as every receive link sees it (plain values, on the stack).
struct RTPReceiveEvent {
    /// Extended sequence number (biased by 2^16, see ``RTPReceiver``).
    let ext: Int64
    /// The highest extended sequence number before this packet (equal to `ext` for the first one).
    let previousHighest: Int64
    /// RTP timestamp.
    let timestamp: UInt32
    /// It arrived as an RTX retransmission.
    let isRepair: Bool
    /// Nanoseconds since the stream's first packet arrived.
    let sinceStart: UInt64
    /// The packet jumped past the whole reorder window: state about earlier packets is void.
    let resynced: Bool
}

/// What links need to know at a timer tick.
struct RTPLinkClock {
    let now: UInt64
    /// The connection's round-trip estimate (ns).
    let roundTripTime: UInt64
    /// Sequence position of the stream: the first and highest extended sequence numbers seen.
    let baseExt: Int64
    let highestExt: Int64
}

/// The compound RTCP packet being written at a tick.
struct RTCPOutput {
    let buffer: UnsafeMutableRawBufferPointer
    var end: Int
    /// Our SSRC as the sender of the feedback, and the SSRC it is about.
    let localSSRC: UInt32
    let mediaSSRC: UInt32
}

/// One feature of a receive stream. Every requirement has a default that does nothing.
protocol RTPReceiveLink {
    /// A packet of the stream was accepted (not a duplicate, not too late).
    mutating func received(_ event: RTPReceiveEvent, now: UInt64)
    /// The stream's sender sent a sender report.
    mutating func handleSenderReport(ntp: NTPTime, rtpTimestamp: UInt32, now: UInt64)
    /// Runs timers; returns whether the link has RTCP to send now.
    mutating func tick(_ clock: RTPLinkClock) -> Bool
    /// Writes what ``tick(_:)`` prepared (called on every link once any link had something to send).
    mutating func writeRTCP(_ out: inout RTCPOutput, _ clock: RTPLinkClock) throws(RTCPError)
}

extension RTPReceiveLink {
    mutating func received(_ event: RTPReceiveEvent, now: UInt64) {}
    mutating func handleSenderReport(ntp: NTPTime, rtpTimestamp: UInt32, now: UInt64) {}
    mutating func tick(_ clock: RTPLinkClock) -> Bool { false }
    mutating func writeRTCP(_ out: inout RTCPOutput, _ clock: RTPLinkClock) throws(RTCPError) {}
}

/// Two links run in order: `head` first, then `tail` (itself a pair for longer chains).
struct RTPLinkPair<Head: RTPReceiveLink, Tail: RTPReceiveLink>: RTPReceiveLink {
    var head: Head
    var tail: Tail

    mutating func received(_ event: RTPReceiveEvent, now: UInt64) {
        head.received(event, now: now)
        tail.received(event, now: now)
    }

    mutating func handleSenderReport(ntp: NTPTime, rtpTimestamp: UInt32, now: UInt64) {
        head.handleSenderReport(ntp: ntp, rtpTimestamp: rtpTimestamp, now: now)
        tail.handleSenderReport(ntp: ntp, rtpTimestamp: rtpTimestamp, now: now)
    }

    mutating func tick(_ clock: RTPLinkClock) -> Bool {
        // Both run: each link prepares its own output whatever the other decided.
        let a = head.tick(clock)
        let b = tail.tick(clock)
        return a || b
    }

    mutating func writeRTCP(_ out: inout RTCPOutput, _ clock: RTPLinkClock) throws(RTCPError) {
        try head.writeRTCP(&out, clock)
        try tail.writeRTCP(&out, clock)
    }
}

/// The links of every ``RTPReceiver``, in RTCP order: the receiver report comes first in each compound
/// (RFC 3550 §6.1), then NACK, then PLI (RFC 4585 §3.1).
typealias RTPReceiverLinks = RTPLinkPair<ReceiveStatistics, RTPLinkPair<NACKGenerator, KeyframeRequester>>

extension RTPLinkPair where Head == ReceiveStatistics, Tail == RTPLinkPair<NACKGenerator, KeyframeRequester> {
    init(statistics: ReceiveStatistics, nack: NACKGenerator, keyframes: KeyframeRequester) {
        self.init(head: statistics, tail: RTPLinkPair<NACKGenerator, KeyframeRequester>(head: nack, tail: keyframes))
    }

    // `_read`/`_modify` borrow the link in place: no copy (and no retain of its arrays) per access.
    var statistics: ReceiveStatistics {
        _read { yield head }
        _modify { yield &head }
    }
    var nack: NACKGenerator {
        _read { yield tail.head }
        _modify { yield &tail.head }
    }
    var keyframes: KeyframeRequester {
        _read { yield tail.tail }
        _modify { yield &tail.tail }
    }
}

/// Receive statistics and reports (RFC 3550 §6.4): packets received, interarrival jitter, the sender
/// report mapping (RTP time to the sender's wall clock; LSR/DLSR), and the receiver report with SDES
/// CNAME about every `reportInterval` (randomized ±50 %). It writes the report block that opens every
/// compound this stream sends.
struct ReceiveStatistics: RTPReceiveLink {
    let ssrc: UInt32
    let cname: String
    let reportInterval: UInt64
    private(set) var jitter: JitterEstimator
    /// Unique media packets accepted.
    private(set) var packetsReceived: UInt64 = 0
    private(set) var receiverReportsSent: UInt64 = 0
    private(set) var lastSRNTP: NTPTime?
    private(set) var lastSRRTP: UInt32 = 0
    private var lastSRArrival: UInt64 = 0
    /// The sender's wall clock on our loop clock, from its reports' arrivals.
    private(set) var senderClock = SenderClockMapping()
    private var expectedPrior: Int64 = 0
    private var receivedPrior: UInt64 = 0
    /// When the next receiver report is due (0: with the first tick).
    private(set) var nextReportTime: UInt64 = 0
    private var reportDue = false
    private var random: SplitMix64

    init(ssrc: UInt32, clockRate: UInt32, cname: String, reportInterval: UInt64, seed: UInt64) {
        self.ssrc = ssrc
        self.cname = cname
        self.reportInterval = reportInterval
        jitter = JitterEstimator(clockRate: clockRate)
        random = SplitMix64(seed: seed)
    }

    mutating func received(_ event: RTPReceiveEvent, now: UInt64) {
        packetsReceived += 1
        // Jitter from packets that arrive in order for the first time (a repair says nothing of transit).
        if event.ext > event.previousHighest, !event.isRepair {
            jitter.received(timestamp: event.timestamp, sinceStart: event.sinceStart)
        }
    }

    mutating func handleSenderReport(ntp: NTPTime, rtpTimestamp: UInt32, now: UInt64) {
        lastSRNTP = ntp
        lastSRRTP = rtpTimestamp
        lastSRArrival = now
        senderClock.add(ntp: ntp, arrival: now)
    }

    mutating func tick(_ clock: RTPLinkClock) -> Bool {
        reportDue = clock.now >= nextReportTime
        return reportDue
    }

    mutating func writeRTCP(_ out: inout RTCPOutput, _ clock: RTPLinkClock) throws(RTCPError) {
        out.end = try RTCPWriter.writeReceiverReport(
            into: out.buffer, at: out.end, ssrc: out.localSSRC, reports: [reportBlock(clock)])
        guard reportDue else { return }
        reportDue = false
        if !cname.isEmpty {
            out.end = try RTCPWriter.writeSDESCNAME(into: out.buffer, at: out.end, ssrc: out.localSSRC, cname: cname)
        }
        nextReportTime = clock.now + reportInterval / 2 + random.next() % max(reportInterval, 1)
        receiverReportsSent += 1
    }

    /// Packets lost so far: expected − received (RFC 3550 §6.4.1).
    func packetsLost(baseExt: Int64, highestExt: Int64) -> Int64 {
        highestExt - baseExt + 1 - Int64(packetsReceived)
    }

    /// The sender's wall-clock time of RTP `timestamp`, through the latest sender report.
    func ntpTime(of timestamp: UInt32, clockRate: UInt32) -> NTPTime? {
        guard let sr = lastSRNTP else { return nil }
        let ticks = Int64(Int32(bitPattern: timestamp &- lastSRRTP))
        return sr.adding(nanoseconds: ticks * 1_000_000_000 / Int64(clockRate))
    }

    /// The report block describing this stream now; it starts a new fraction-lost interval.
    mutating func reportBlock(_ clock: RTPLinkClock) -> RTCPReportBlock {
        let expected = clock.highestExt - clock.baseExt + 1
        let lost = expected - Int64(packetsReceived)
        let expectedInterval = expected - expectedPrior
        let receivedInterval = Int64(packetsReceived) - Int64(receivedPrior)
        expectedPrior = expected
        receivedPrior = packetsReceived
        let lostInterval = expectedInterval - receivedInterval
        let fraction: UInt8 =
            expectedInterval <= 0 || lostInterval <= 0 ? 0 : UInt8(min(255, (lostInterval << 8) / expectedInterval))
        var lsr: UInt32 = 0
        var dlsr: UInt32 = 0
        if let sr = lastSRNTP {
            lsr = sr.middle32
            let delay = clock.now &- lastSRArrival
            dlsr = UInt32(truncatingIfNeeded: min((delay << 16) / RTPNanos.second, UInt64(UInt32.max)))
        }
        return RTCPReportBlock(
            ssrc: ssrc, fractionLost: fraction,
            // The field is 24-bit signed.
            cumulativeLost: Int32(clamping: min(max(lost, -0x80_0000), 0x7F_FFFF)),
            highestSequence: UInt32(truncatingIfNeeded: clock.highestExt - 0x1_0000),
            jitter: jitter.jitter, lastSR: lsr, delaySinceLastSR: dlsr)
    }
}
