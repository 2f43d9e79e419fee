import RTCWire

// The feature links of a receive stream (after pion's interceptors, on the single loop thread): each
// is a value type composed into ``RTPReceiver``'s chain (RTPLinkChain.swift), driven by
// `received`/`handleSenderReport`/`tick`/`writeRTCP`, and testable alone.

/// NACK generator (RFC 4585 generic NACK): remembers missing packets by extended sequence number and
/// decides which to ask for at each tick, and which to give up (out of retries, too old, or without
/// NACK after the reordering wait).
///
/// The list is sorted and bounded (`capacity`); its storage and the scratch of sequence numbers for
/// one NACK message are allocated once.
struct NACKGenerator {
    struct Missing {
        var ext: Int64
        var firstSeen: UInt64
        var lastSent: UInt64
        var retries: Int
    }

    let enabled: Bool
    /// Whether the stream tracks holes at all (video; audio plays through losses).
    let tracksHoles: Bool
    let capacity: Int
    let maxRetries: Int
    let maxAge: UInt64
    let reorderWait: UInt64
    let interval: UInt64
    private(set) var missing: [Missing]
    /// The sequence numbers of the last ``due(now:roundTripTime:)`` call.
    private(set) var items: [UInt16]
    private var lastSent: UInt64 = 0
    /// Holes given up, by extended sequence number, over the last `givenUpRing` numbers (for the
    /// frame assembler's skip decision): a bit each, in the SRTP replay window's structure.
    private let givenUp: SRTPReplayWindow
    /// NACK count prepared by ``tick(_:)`` for ``writeRTCP(_:_:)``.
    private var pending = 0
    /// Missing packets given up (no retransmission in time).
    private(set) var packetsGivenUp: UInt64 = 0
    /// Holes filled by a packet that was not an RTX retransmission (a plain resend or late arrival).
    private(set) var holesFilled: UInt64 = 0
    /// NACK messages sent, and the sequence numbers they asked for.
    private(set) var nacksSent: UInt64 = 0
    private(set) var nackedSequenceNumbers: UInt64 = 0

    init(options: RTPReceiverOptions, capacity: Int, tracksHoles: Bool = true, givenUpRing: Int = 1024) {
        enabled = options.nack
        self.tracksHoles = tracksHoles
        // Audio plays through holes and gives none up: the smallest window then.
        givenUp = SRTPReplayWindow(covering: tracksHoles ? givenUpRing : 64)
        self.capacity = max(1, capacity)
        maxRetries = options.maxNACKRetries
        maxAge = options.maxNACKAge
        reorderWait = options.reorderWait
        interval = options.nackInterval
        missing = []
        missing.reserveCapacity(self.capacity + 1)
        items = Array(repeating: 0, count: self.capacity)
    }

    var isEmpty: Bool { missing.isEmpty }

    /// Packets `first..<end` were skipped by a newer arrival. When more are missing than the list
    /// holds, the oldest are given up at once.
    mutating func gap(from first: Int64, to end: Int64, now: UInt64, giveUp: (Int64) -> Void = { _ in }) {
        var e = first
        if end - first > Int64(capacity) {
            let cut = end - Int64(capacity)
            while e < cut {
                markGivenUp(e)
                giveUp(e)
                e += 1
            }
        }
        while e < end {
            if missing.count >= capacity {
                markGivenUp(missing[0].ext)
                giveUp(missing[0].ext)
                missing.remove(at: 0)
            }
            missing.append(Missing(ext: e, firstSeen: now, lastSent: 0, retries: 0))
            e += 1
        }
    }

    /// A packet arrived; returns whether it filled a hole on the list.
    mutating func received(_ ext: Int64) -> Bool {
        var lo = 0
        var hi = missing.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if missing[mid].ext < ext { lo = mid + 1 } else { hi = mid }
        }
        guard lo < missing.count, missing[lo].ext == ext else { return false }
        missing.remove(at: lo)
        return true
    }

    /// Forgets every hole before `target` (the assembler moved past them).
    mutating func forget(before target: Int64) {
        var k = 0
        while k < missing.count {
            if missing[k].ext < target { missing.remove(at: k) } else { k += 1 }
        }
    }

    /// Forgets every hole (the stream jumped).
    mutating func reset() { missing.removeAll(keepingCapacity: true) }

    /// Gives up holes out of retries or too old; returns whether any was.
    mutating func expire(now: UInt64, roundTripTime: UInt64, giveUp: (Int64) -> Void = { _ in }) -> Bool {
        var changed = false
        var k = 0
        let retryInterval = max(roundTripTime, 10 * RTPNanos.millisecond)
        while k < missing.count {
            let m = missing[k]
            let age = now &- m.firstSeen
            let expired =
                enabled
                ? age > maxAge || (m.retries >= maxRetries && now &- m.lastSent >= retryInterval)
                : age >= reorderWait
            if expired {
                markGivenUp(m.ext)
                giveUp(m.ext)
                missing.remove(at: k)
                changed = true
            } else {
                k += 1
            }
        }
        return changed
    }

    /// The holes to NACK now (every `interval` while any is missing, each at most once per RTT and
    /// `maxRetries` times), written to ``items``; returns how many.
    mutating func due(now: UInt64, roundTripTime: UInt64) -> Int {
        guard enabled, !missing.isEmpty, now &- lastSent >= interval || lastSent == 0 else { return 0 }
        let retryInterval = max(roundTripTime, 10 * RTPNanos.millisecond)
        var count = 0
        for k in missing.indices where count < items.count {
            let m = missing[k]
            guard m.retries < maxRetries, m.lastSent == 0 || now &- m.lastSent >= retryInterval else { continue }
            missing[k].lastSent = now
            missing[k].retries += 1
            items[count] = UInt16(truncatingIfNeeded: m.ext)
            count += 1
        }
        return count
    }

    /// The NACK message with ``items`` went out.
    mutating func sent(now: UInt64) { lastSent = now }

    /// Whether `ext` was given up (the assembler skips it instead of waiting).
    func isGivenUp(_ ext: Int64) -> Bool { givenUp.check(UInt64(bitPattern: ext)) == .replayed }

    /// Gives up `ext` (also called by the assembler when it must move past a packet).
    mutating func markGivenUp(_ ext: Int64) {
        givenUp.accept(UInt64(bitPattern: ext))
        packetsGivenUp += 1
    }
}

extension NACKGenerator: RTPReceiveLink {
    /// Gaps open holes, late arrivals fill them; a jump past the window forgets them all.
    mutating func received(_ event: RTPReceiveEvent, now: UInt64) {
        guard tracksHoles else { return }
        if event.resynced {
            reset()
        } else if event.ext > event.previousHighest + 1 {
            gap(from: event.previousHighest + 1, to: event.ext, now: now)
        } else if event.ext < event.previousHighest, received(event.ext), !event.isRepair {
            holesFilled += 1
        }
    }

    mutating func tick(_ clock: RTPLinkClock) -> Bool {
        pending = tracksHoles ? due(now: clock.now, roundTripTime: clock.roundTripTime) : 0
        return pending > 0
    }

    mutating func writeRTCP(_ out: inout RTCPOutput, _ clock: RTPLinkClock) throws(RTCPError) {
        guard pending > 0 else { return }
        let count = pending
        pending = 0
        // Entries are sorted, so the writer packs them into the fewest PID/BLP pairs.
        out.end = try items.withUnsafeBufferPointer { all throws(RTCPError) in
            try RTCPWriter.writeNACK(
                into: out.buffer, at: out.end, senderSSRC: out.localSSRC, mediaSSRC: out.mediaSSRC,
                lostSequenceNumbers: UnsafeBufferPointer(rebasing: all[0..<count]))
        }
        sent(now: clock.now)
        nacksSent += 1
        nackedSequenceNumbers += UInt64(count)
    }
}

/// Key-frame requester (PLI): wanted after a loss that breaks a frame, while waiting for the first
/// key frame, or on demand; sent at most once per `interval` and repeated until a key frame is
/// delivered.
struct KeyframeRequester {
    let enabled: Bool
    let interval: UInt64
    private(set) var wanted = false
    private var hasSent = false
    private var lastSent: UInt64 = 0
    /// A PLI prepared by ``tick(_:)`` for ``writeRTCP(_:_:)``.
    private var prepared = false
    /// PLIs sent.
    private(set) var plisSent: UInt64 = 0

    init(enabled: Bool, interval: UInt64) {
        self.enabled = enabled
        self.interval = interval
    }

    /// A key frame is needed.
    mutating func want() { wanted = true }

    /// The next ``isDue(now:)`` is true while a key frame is wanted (the caller throttles).
    mutating func allowNow() { hasSent = false }

    /// A key frame was delivered: nothing more to ask.
    mutating func satisfied() { wanted = false }

    /// Whether a PLI is due now.
    func isDue(now: UInt64) -> Bool {
        enabled && wanted && (!hasSent || now &- lastSent >= interval)
    }

    /// The PLI went out.
    mutating func sent(now: UInt64) {
        hasSent = true
        lastSent = now
    }
}

extension KeyframeRequester: RTPReceiveLink {
    mutating func tick(_ clock: RTPLinkClock) -> Bool {
        prepared = isDue(now: clock.now)
        return prepared
    }

    mutating func writeRTCP(_ out: inout RTCPOutput, _ clock: RTPLinkClock) throws(RTCPError) {
        guard prepared else { return }
        prepared = false
        out.end = try RTCPWriter.writePLI(
            into: out.buffer, at: out.end, senderSSRC: out.localSSRC, mediaSSRC: out.mediaSSRC)
        sent(now: clock.now)
        plisSent += 1
    }
}

/// Interarrival jitter (RFC 3550 §6.4.1, A.8), in RTP units scaled by 16, from packets that arrive
/// in order for the first time.
struct JitterEstimator {
    let clockRate: UInt32
    private var jitterQ4: UInt64 = 0
    private var lastTransit: Int64 = 0
    private var hasTransit = false

    init(clockRate: UInt32) { self.clockRate = clockRate }

    /// The jitter in RTP units, as a report block carries it.
    var jitter: UInt32 { UInt32(truncatingIfNeeded: jitterQ4 >> 4) }
    /// The jitter in milliseconds.
    var milliseconds: Double { Double(jitterQ4 >> 4) * 1000 / Double(clockRate) }

    /// A packet with RTP `timestamp` arrived `sinceStart` nanoseconds after the stream's first one.
    mutating func received(timestamp: UInt32, sinceStart: UInt64) {
        let arrival = rtpTicks(nanoseconds: sinceStart, clockRate: clockRate)
        let transit = Int64(UInt32(truncatingIfNeeded: arrival) &- timestamp)
        if hasTransit {
            // Differences are taken mod 2^32 so timestamp wrap does not look like a jump.
            let d = Int64(Int32(truncatingIfNeeded: transit &- lastTransit)).magnitude
            jitterQ4 = jitterQ4 &+ d &- ((jitterQ4 + 8) >> 4)
        }
        lastTransit = transit
        hasTransit = true
    }
}
