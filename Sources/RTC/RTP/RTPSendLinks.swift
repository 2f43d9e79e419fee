import RTCWire

// The feature links of a send stream, composed into ``RTPSender``'s chain (RTPSendLinkChain.swift),
// each driven by `prepare`/`sent`/`handleRTCP`/`tick`/`writeRTCP` and testable alone.

/// Retransmission buffer: the last packets sent, by sequence number, for NACK answers (RFC 4585).
///
/// Slot `i` holds the packet whose sequence number is `i` modulo the capacity. A packet is handed
/// out again at most once per `minimumInterval` (a repeated NACK while the first resend is in flight
/// is not doubled). Storage is allocated once; loop-thread confined. A capacity of 0 keeps nothing:
/// a sender whose NACKs are answered elsewhere (an SFU's shared buffer) copies nothing per packet.
final class RetransmissionBuffer {
    let capacity: Int
    let slotBytes: Int
    private let storage: UnsafeMutableRawBufferPointer
    private var sequence: [UInt16]
    private var length: [Int]  // 0 = empty
    private var payloadOffset: [Int]
    private var lastResent: [UInt64]

    init(capacity: Int, slotBytes: Int) {
        self.capacity = max(0, capacity)
        self.slotBytes = slotBytes
        storage = .allocate(byteCount: max(1, self.capacity * slotBytes), alignment: 16)
        sequence = Array(repeating: 0, count: self.capacity)
        length = Array(repeating: 0, count: self.capacity)
        payloadOffset = Array(repeating: 0, count: self.capacity)
        lastResent = Array(repeating: 0, count: self.capacity)
    }

    deinit { storage.deallocate() }

    /// Keeps `packet` (a whole plaintext RTP packet whose payload starts at `payloadOffset`) as the
    /// one with sequence number `seq`; a packet larger than a slot is not kept.
    func store(_ seq: UInt16, packet: UnsafeRawBufferPointer, payloadOffset offset: Int) {
        guard capacity > 0 else { return }
        let slot = Int(seq) % capacity
        guard packet.count <= slotBytes, let src = packet.baseAddress, let dst = storage.baseAddress else {
            length[slot] = 0
            return
        }
        (dst + slot * slotBytes).copyMemory(from: src, byteCount: packet.count)
        sequence[slot] = seq
        length[slot] = packet.count
        payloadOffset[slot] = offset
        lastResent[slot] = 0
    }

    /// What a NACK for `seq` finds.
    enum Lookup {
        /// The packet, valid until the next ``store(_:packet:payloadOffset:)``.
        case resend(packet: UnsafeRawBufferPointer, payloadOffset: Int)
        /// Kept, but resent less than `minimumInterval` ago.
        case tooSoon
        /// Never kept or overwritten.
        case missing
    }

    /// The packet to resend for a NACK of `seq` at `now` (and notes the resend).
    func resend(_ seq: UInt16, now: UInt64, minimumInterval: UInt64) -> Lookup {
        guard capacity > 0 else { return .missing }
        let slot = Int(seq) % capacity
        guard length[slot] > 0, sequence[slot] == seq, let base = storage.baseAddress else { return .missing }
        let last = lastResent[slot]
        guard last == 0 || now &- last >= minimumInterval || now < last else { return .tooSoon }
        lastResent[slot] = now == 0 ? 1 : now
        return .resend(
            packet: UnsafeRawBufferPointer(start: base + slot * slotBytes, count: length[slot]),
            payloadOffset: payloadOffset[slot])
    }
}

/// Sender-report clock: when the next SR is due (about every interval, randomized ±50 %, and soon
/// after the first packet), and the round-trip time from the LSR/DLSR of report blocks that answer
/// one of the last SRs sent (RFC 3550 §6.4.1).
struct SenderReportClock {
    private(set) var nextDue: UInt64 = 0
    private var random: SplitMix64
    // Recent SRs: middle 32 bits of their NTP time and when they went out.
    private var log: [(ntp: UInt32, at: UInt64)] = Array(repeating: (0, 0), count: 8)
    private var logNext = 0

    init(random: SplitMix64) { self.random = random }

    /// Whether an SR is due.
    func isDue(now: UInt64) -> Bool { now >= nextDue }

    /// An SR with NTP time `ntp` went out at `now`.
    mutating func sent(ntp: NTPTime, now: UInt64) {
        log[logNext] = (ntp.middle32, now)
        logNext = (logNext + 1) % log.count
    }

    /// Schedules the next SR after one sent at `now`, `interval` ±50 % later.
    mutating func scheduleNext(now: UInt64, interval: UInt64) {
        nextDue = now + interval / 2 + random.next() % max(interval, 1)
    }

    /// The round-trip time a report block's LSR/DLSR gives at `now`, or nil when it answers no SR
    /// we remember (or the numbers are inconsistent).
    func roundTripTime(lastSR: UInt32, delaySinceLastSR: UInt32, now: UInt64) -> UInt64? {
        guard lastSR != 0 else { return nil }
        for entry in log where entry.ntp == lastSR && entry.at != 0 {
            let delay = (UInt64(delaySinceLastSR) * RTPNanos.second) >> 16
            let elapsed = now &- entry.at
            return now >= entry.at && elapsed >= delay ? elapsed - delay : nil
        }
        return nil
    }
}

/// Retransmission responder's memory as a send link: keeps every new packet in a
/// ``RetransmissionBuffer`` (nothing when its capacity is 0); the sender looks NACKed packets up in
/// it and resends them (as RTX when negotiated).
struct RetransmissionResponder: RTPSendLink {
    let buffer: RetransmissionBuffer
    /// False for a sender whose caller answers NACKs itself (an SFU consumer): every packet then skips
    /// the buffer without touching that object (a cache miss per forwarded packet).
    let keepsHistory: Bool

    init(capacity: Int, slotBytes: Int) {
        buffer = RetransmissionBuffer(capacity: capacity, slotBytes: slotBytes)
        keepsHistory = capacity > 0
    }

    func sent(_ packet: RTPSentPacket, now: UInt64) {
        guard keepsHistory else { return }
        buffer.store(packet.sequenceNumber, packet: packet.packet, payloadOffset: packet.payloadOffset)
    }
}

/// Where a forwarding sender's reports take their RTP time from: an SFU consumer gives the
/// publisher's own sender report, translated into the outgoing timeline, so that the publisher's
/// audio/video relation (its reports map both RTP clocks to one wall clock) survives the hop.
/// Asked once per sender report, on the loop thread.
public protocol RTPSenderReportSource: AnyObject {
    /// An outgoing RTP timestamp and the loop time (``EventLoop/now()``'s clock) it belongs to; nil
    /// when none is known, and the sender extrapolates from its last frame sent.
    func senderReportReference() -> (rtpTimestamp: UInt32, localTime: UInt64)?
}

/// Sender reports (RFC 3550 §6.4.1) as a send link: counts the packets and payload octets sent,
/// remembers the last frame's RTP timestamp and send time (to extrapolate the SR's RTP time, unless
/// the stream's source gives its own ``reference``), writes the SR and SDES CNAME about every
/// `interval` (±50 %, and soon after the first packet), and turns the LSR/DLSR of report blocks
/// about the stream into the round-trip time.
struct SenderReports: RTPSendLink {
    let ssrc: UInt32
    let clockRate: UInt32
    let cname: String
    /// Nominal spacing of sender reports.
    var interval: UInt64 = RTPNanos.second
    private var clock: SenderReportClock
    private var due = false
    private(set) var packetsSent: UInt64 = 0
    private(set) var payloadBytesSent: UInt64 = 0
    private(set) var lastFrameRTPTimestamp: UInt32
    private var lastFrameSendTime: UInt64 = 0
    private var hasSentFrame = false
    private(set) var senderReportsSent: UInt64 = 0
    /// From the latest report block that answered one of our SRs (0 until known).
    private(set) var roundTripTime: UInt64 = 0
    private(set) var receiverReports: UInt64 = 0
    private(set) var reportedPacketsLost: Int64 = 0
    private(set) var reportedJitter: Double = 0
    /// The source's RTP time at a loop time (``RTPSenderReportSource``), set before each report;
    /// nil: extrapolate from the last frame sent.
    var reference: (rtpTimestamp: UInt32, localTime: UInt64)?
    /// A reference further than this from the last frame sent is not believed (a bogus or stale
    /// source report): the report falls back to the last frame.
    static let referenceLimit: UInt64 = 10_000_000_000

    init(ssrc: UInt32, clockRate: UInt32, cname: String, initialTimestamp: UInt32, random: SplitMix64) {
        self.ssrc = ssrc
        self.clockRate = clockRate
        self.cname = cname
        lastFrameRTPTimestamp = initialTimestamp
        clock = SenderReportClock(random: random)
    }

    mutating func sent(_ packet: RTPSentPacket, now: UInt64) {
        packetsSent += 1
        payloadBytesSent += UInt64(packet.payloadLength)
        lastFrameRTPTimestamp = packet.timestamp
        lastFrameSendTime = now
        hasSentFrame = true
    }

    mutating func handleRTCP(_ feedback: RTPSendFeedback, now: UInt64) {
        switch feedback {
        case .reportBlock(let block):
            receiverReports &+= 1
            reportedPacketsLost = Int64(block.cumulativeLost)
            reportedJitter = Double(block.jitter) / Double(max(1, clockRate))
            updateRoundTripTime(lastSR: block.lastSR, delaySinceLastSR: block.delaySinceLastSR, now: now)
        case .reportTiming(let lastSR, let delay):
            updateRoundTripTime(lastSR: lastSR, delaySinceLastSR: delay, now: now)
        case .pictureLoss, .fullIntraRequest:
            break
        }
    }

    private mutating func updateRoundTripTime(lastSR: UInt32, delaySinceLastSR: UInt32, now: UInt64) {
        if let rtt = clock.roundTripTime(lastSR: lastSR, delaySinceLastSR: delaySinceLastSR, now: now) {
            roundTripTime = rtt
        }
    }

    mutating func tick(now: UInt64) -> Bool {
        due = packetsSent > 0 && clock.isDue(now: now)
        return due
    }

    /// When ``tick(now:)`` is next true; nil before the first packet (it is due soon after it).
    var nextTimer: UInt64? { packetsSent > 0 ? clock.nextDue : nil }

    mutating func writeRTCP(_ out: inout RTCPOutput, _ clock: RTPSendClock) throws(RTCPError) {
        guard due else { return }
        due = false
        out.end = write(now: clock.now, wallClock: clock.wallClock, into: out.buffer, at: out.end)
        self.clock.scheduleNext(now: clock.now, interval: interval)
    }

    /// The RTP time of loop time `now`: from the source's ``reference`` when there is a plausible
    /// one, else extrapolated from the last frame sent.
    func rtpTime(now: UInt64) -> UInt32 {
        let elapsed = hasSentFrame && now > lastFrameSendTime ? now - lastFrameSendTime : 0
        let byLastFrame =
            lastFrameRTPTimestamp &+ UInt32(truncatingIfNeeded: rtpTicks(nanoseconds: elapsed, clockRate: clockRate))
        guard let reference, clockRate > 0 else { return byLastFrame }
        let since = Int64(bitPattern: now &- reference.localTime)
        let ticks = since * Int64(clockRate) / 1_000_000_000
        let byReference = reference.rtpTimestamp &+ UInt32(truncatingIfNeeded: ticks)
        let apart = UInt64(Int32(bitPattern: byReference &- byLastFrame).magnitude)
        return apart * 1_000_000_000 / UInt64(clockRate) <= Self.referenceLimit ? byReference : byLastFrame
    }

    /// Writes an SR (RTP time of `now`, ``rtpTime(now:)``) and an SDES CNAME at `offset`; returns
    /// the offset past them, or `offset` when the buffer is too small.
    mutating func write(now: UInt64, wallClock: NTPTime, into buffer: UnsafeMutableRawBufferPointer, at offset: Int)
        -> Int
    {
        let rtpTime = rtpTime(now: now)
        let end: Int
        do throws(RTCPError) {
            let sr = try RTCPWriter.writeSenderReport(
                into: buffer, at: offset, ssrc: ssrc, ntpTimestamp: wallClock.value, rtpTimestamp: rtpTime,
                packetCount: UInt32(truncatingIfNeeded: packetsSent),
                octetCount: UInt32(truncatingIfNeeded: payloadBytesSent))
            end = try RTCPWriter.writeSDESCNAME(into: buffer, at: sr, ssrc: ssrc, cname: cname)
        } catch {
            return offset
        }
        clock.sent(ntp: wallClock, now: now)
        senderReportsSent += 1
        return end
    }
}

/// abs-capture-time stamping as a send link: an own frame's packets all carry the wall-clock time
/// at which the frame was handed to the sender; a forwarded packet carries the publisher's value
/// (set by the forwarder per packet); retransmissions carry none. Nothing when not negotiated.
struct AbsCaptureTimeStamper: RTPSendLink {
    /// Whether abs-capture-time is negotiated for the sender's m-section.
    var enabled: Bool {
        didSet { if !enabled { (frameCaptureTime, forwarded) = (nil, nil) } }
    }
    /// The capture time of the own frame being packetized.
    private(set) var frameCaptureTime: UInt64?
    /// The publisher's capture time for the next forwarded packet.
    var forwarded: UInt64?

    init(enabled: Bool) { self.enabled = enabled }

    /// An own frame starts: all its packets get `captureTime` (NTP 32.32).
    mutating func beginFrame(captureTime: UInt64) { frameCaptureTime = enabled ? captureTime : nil }

    /// The own frame is packetized.
    mutating func endFrame() { frameCaptureTime = nil }

    func prepare(_ extensions: inout RTPOutgoingExtensions, now: UInt64) {
        guard enabled else { return }
        switch extensions.kind {
        case .ownFrame: extensions.captureTime = frameCaptureTime
        case .forwarded: extensions.captureTime = forwarded
        case .retransmission: extensions.captureTime = nil
        }
    }
}

/// Key-frame requests from the far end as a send link: every PLI, and a FIR only when its sequence
/// number is new (RFC 5104 §4.3.1.1: a repeated FIR is the same request), become one pending request
/// the sender takes with ``takeRequest()``.
struct KeyframeRequestFilter: RTPSendLink {
    private var lastFIRSequence: UInt8?
    private var pending = false
    private(set) var plisReceived: UInt64 = 0
    private(set) var firsReceived: UInt64 = 0

    mutating func handleRTCP(_ feedback: RTPSendFeedback, now: UInt64) {
        switch feedback {
        case .pictureLoss:
            plisReceived += 1
            pending = true
        case .fullIntraRequest(let sequenceNumber):
            guard lastFIRSequence != sequenceNumber else { return }
            lastFIRSequence = sequenceNumber
            firsReceived += 1
            pending = true
        case .reportBlock, .reportTiming:
            break
        }
    }

    /// Whether a key frame was requested since the last call (and clears it).
    mutating func takeRequest() -> Bool {
        defer { pending = false }
        return pending
    }
}
