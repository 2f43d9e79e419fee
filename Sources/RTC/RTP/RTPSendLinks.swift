import RTCWire

// The feature links of a send stream, held by ``RTPSender`` (see RTPReceiveLinks.swift).

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
    private var nextDue: UInt64 = 0
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
