import Glibc
import RTCWire

/// The receive side of transport-wide congestion control for one transport (BUNDLE group):
/// records when each transport-wide sequence number arrived and reports it to the sender in
/// transport-cc feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01). The sender's
/// estimator (libwebrtc's send-side GCC in a browser) turns the arrival-time deltas and losses into
/// the rate it sends at; without this feedback a browser stays near its start rate.
///
/// Loop-thread confined. Recording a packet is one store into a fixed ring: no allocation. The ring
/// and the message buffer (about 14 KB) are made on the first packet: an SFU's subscribe transports
/// negotiate transport-cc but receive only RTCP, and there is one per audience member.
final class TransportFeedbackGenerator {
    /// How often feedback is sent while packets arrive. libwebrtc's receive-side proxy sends every
    /// 50–250 ms depending on the rate; 50 ms keeps a sender's delay detector fed at any rate for
    /// one small RTCP packet per interval.
    static let defaultInterval: UInt64 = 50 * RTPNanos.millisecond
    /// Sequence numbers held between two reports: 20,000 packets a second at 50 ms, far more than
    /// any real stream (8 KB per transport).
    static let window = 1 << 10
    /// Statuses per feedback message, so that even the largest encoding (2-byte deltas, 2-bit
    /// chunks) stays under 700 bytes, well inside one datagram after SRTP.
    static let maxStatusesPerMessage = 250

    /// Whether transport-cc is offered and answered: on unless `UNDERSTUDY_TRANSPORT_CC=0` (for A/B
    /// runs against a sender that gets no feedback).
    static let negotiable: Bool = {
        guard let value = getenv("UNDERSTUDY_TRANSPORT_CC") else { return true }
        return String(cString: value) != "0"
    }()

    let interval: UInt64
    /// The sender SSRC written into the feedback (the transport's own RTCP SSRC).
    var senderSSRC: UInt32 = 1
    /// Lowered when the first unreported packet arrives, so the owner's timers run in time.
    var tickDeadline: TickDeadline?
    /// When ``tick(now:emit:)`` next has feedback to send (`.max`: nothing pending).
    private(set) var nextTimer: UInt64 = .max
    /// Feedback messages sent.
    private(set) var messagesSent: UInt64 = 0

    /// Arrival time + 1 (0: not received) of unwrapped sequence number `s` at `s & mask`; empty
    /// before the first packet.
    private var arrivals: [UInt64] = []
    private let mask = Int64(window - 1)
    /// First sequence number not yet reported, and the highest received (unwrapped); nil before the
    /// first packet.
    private var next: Int64 = 0
    private var highest: Int64?
    private var mediaSSRC: UInt32 = 0
    private var feedbackCount: UInt8 = 0
    /// Arrival clock origin (ns): the reference time counts 64 ms units from here.
    private var epoch: UInt64?
    private var statuses: [RTCPTransportFeedback.PacketStatus] = []
    /// One feedback message's bytes; allocated with ``arrivals``.
    private var buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    init(interval: UInt64 = TransportFeedbackGenerator.defaultInterval) {
        self.interval = interval
    }

    deinit { buffer.deallocate() }

    /// Records that the packet with transport-wide sequence number `sequence`, sent on `ssrc`,
    /// arrived at `now` (loop clock, ns).
    func record(_ sequence: UInt16, ssrc: UInt32, now: UInt64) {
        if arrivals.isEmpty {
            arrivals = Array(repeating: 0, count: Self.window)
            statuses.reserveCapacity(Self.maxStatusesPerMessage)
            buffer = .allocate(byteCount: 1500, alignment: 16)
        }
        let unwrapped: Int64
        if let highest {
            unwrapped = highest + Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: highest)))
            // Already reported (a late duplicate or a packet reported lost): the sender has moved on.
            guard unwrapped >= next else { return }
            if unwrapped - next >= Int64(Self.window) {
                // A jump past the window (a sender restart): what was pending cannot be told apart
                // from the new numbers, so start over from here.
                if next <= highest { for s in next...highest { arrivals[Int(s & mask)] = 0 } }
                next = unwrapped
                self.highest = unwrapped
            } else if unwrapped > highest {
                self.highest = unwrapped
            }
        } else {
            unwrapped = Int64(sequence)
            next = unwrapped
            highest = unwrapped
            epoch = now
        }
        arrivals[Int(unwrapped & mask)] = now &+ 1
        mediaSSRC = ssrc
        if nextTimer == .max {
            nextTimer = now &+ interval
            tickDeadline?.lower(to: nextTimer)
        }
    }

    /// Sends the feedback that is due: every packet since the last report, in messages of at most
    /// ``maxStatusesPerMessage`` statuses. `emit` gets the buffer and the length of one RTCP packet.
    func tick(now: UInt64, emit: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        guard now >= nextTimer, let highest, let epoch else { return }
        while next <= highest {
            guard let length = writeMessage(upTo: highest, epoch: epoch) else { break }
            emit(buffer, length)
            messagesSent &+= 1
        }
        nextTimer = .max
    }

    /// Writes one feedback message from ``next`` into ``buffer`` and advances ``next`` past what it
    /// describes; nil when nothing could be written.
    private func writeMessage(upTo highest: Int64, epoch: UInt64) -> Int? {
        // Leading losses are described from `next`; the reference time is that of the first
        // received packet, rounded down to 64 ms, and each delta runs from the previous packet's
        // time as the receiver will rebuild it (quantized to 250 µs, so errors do not add up).
        statuses.removeAll(keepingCapacity: true)
        var referenceMicros: Int64?
        var previousMicros: Int64 = 0
        var s = next
        while s <= highest, statuses.count < Self.maxStatusesPerMessage {
            let slot = Int(s & mask)
            let arrival = arrivals[slot]
            let seq = UInt16(truncatingIfNeeded: s)
            if arrival == 0 {
                statuses.append(.init(sequenceNumber: seq, received: false))
            } else {
                let micros = Int64((arrival - 1 &- epoch) / 1000)
                if referenceMicros == nil {
                    referenceMicros = micros / 64_000 * 64_000
                    previousMicros = referenceMicros!
                }
                let units = (micros - previousMicros) / 250
                // A gap a 16-bit delta cannot say (over 8 s) starts the next message.
                guard units >= Int64(Int16.min), units <= Int64(Int16.max) else { break }
                previousMicros += units * 250
                statuses.append(.init(sequenceNumber: seq, received: true, deltaMicros: Int32(units * 250)))
            }
            s += 1
        }
        guard let referenceMicros, !statuses.isEmpty else {
            // Only losses so far (cannot happen: `highest` was received); drop them.
            for k in next..<s { arrivals[Int(k & mask)] = 0 }
            next = s
            return nil
        }
        // The reference time is a 24-bit signed count of 64 ms units; it wraps after 149 hours.
        let units = referenceMicros / 64_000
        let reference = Int32(truncatingIfNeeded: ((units + 0x80_0000) & 0xFF_FFFF) - 0x80_0000)
        let feedback = RTCPTransportFeedback(
            senderSSRC: senderSSRC, mediaSSRC: mediaSSRC, baseSequenceNumber: UInt16(truncatingIfNeeded: next),
            referenceTime: reference, feedbackPacketCount: feedbackCount, packets: statuses)
        let length: Int
        do { length = try RTCPWriter.writeTransportFeedback(into: buffer, at: 0, feedback) } catch { return nil }
        for k in next..<s { arrivals[Int(k & mask)] = 0 }
        next = s
        feedbackCount &+= 1
        return length
    }
}
