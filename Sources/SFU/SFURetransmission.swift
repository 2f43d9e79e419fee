import RTC
import RTCWire

/// The last packets of one producer layer, kept once for all of its consumers.
///
/// Each consumer used to keep its own copy of everything it sent (about 750 KB per video consumer)
/// so that it could answer NACKs. As in mediasoup and LiveKit, the producer now keeps one buffer per
/// layer and every consumer answers NACKs from it through its ``SFUSequencer``, which only maps its
/// outgoing sequence numbers back to source packets: an audience member costs kilobytes.
///
/// Payloads are stored as received (after the RTP header); each consumer rewrites headers and the
/// VP8 picture ID when it resends. Slot `i` holds the packet whose sequence number is `i` modulo the
/// capacity, so a lookup is one comparison. Loop-thread confined, allocation-free after init.
final class SFUPacketBuffer {
    /// Largest payload kept; larger ones (never seen from WebRTC senders, whose packets fit an MTU)
    /// are not stored and their NACKs go unanswered.
    static let slotBytes = 1280

    let capacity: Int
    private let storage: UnsafeMutableRawBufferPointer
    private var sequence: [UInt16]
    private var length: [UInt16]  // 0: empty

    init(capacity: Int = 512) {
        self.capacity = max(1, capacity)
        storage = .allocate(byteCount: self.capacity * Self.slotBytes, alignment: 16)
        sequence = Array(repeating: 0, count: self.capacity)
        length = Array(repeating: 0, count: self.capacity)
    }

    deinit { storage.deallocate() }

    /// Keeps `payload` as the packet with `sequenceNumber` (a repair replaces the stored copy).
    func store(sequenceNumber: UInt16, payload: UnsafeRawBufferPointer) {
        let slot = Int(sequenceNumber) % capacity
        guard payload.count > 0, payload.count <= Self.slotBytes, let src = payload.baseAddress,
            let dst = storage.baseAddress
        else {
            length[slot] = 0
            return
        }
        (dst + slot * Self.slotBytes).copyMemory(from: src, byteCount: payload.count)
        sequence[slot] = sequenceNumber
        length[slot] = UInt16(payload.count)
    }

    /// The stored payload of `sequenceNumber`, valid until the next ``store(sequenceNumber:payload:)``;
    /// nil when it was never received or has been overwritten.
    func payload(sequenceNumber: UInt16) -> UnsafeRawBufferPointer? {
        let slot = Int(sequenceNumber) % capacity
        guard length[slot] > 0, sequence[slot] == sequenceNumber, let base = storage.baseAddress else { return nil }
        return UnsafeRawBufferPointer(start: base + slot * Self.slotBytes, count: Int(length[slot]))
    }
}

/// A consumer's map from the sequence numbers it sent to the source packets in its producer's
/// ``SFUPacketBuffer``, with what it rewrote (timestamp, VP8 picture ID and TL0PICIDX), so that a NACK is
/// answered with exactly the packet the subscriber missed. About 32 bytes per entry.
struct SFUSequencer {
    struct Entry {
        var outgoing: UInt16 = 0
        var source: UInt16 = 0
        var timestamp: UInt32 = 0
        /// The codec fields the munger rewrote (VP8 picture ID, TL0PICIDX), applied again on resend.
        var rewrite = RTPPayloadRewrite.none
        var layer: UInt8 = 0
        var valid = false
        var marker = false
        /// Loop time of the last resend (0: never).
        var lastResent: UInt64 = 0
    }

    private var entries: [Entry]

    init(capacity: Int = 512) { entries = Array(repeating: Entry(), count: max(1, capacity)) }

    var capacity: Int { entries.count }

    /// Notes one forwarded packet (a repair of the same outgoing number replaces it).
    mutating func record(
        outgoing: UInt16, source: UInt16, layer: Int, timestamp: UInt32, marker: Bool, rewrite: RTPPayloadRewrite
    ) {
        let slot = Int(outgoing) % entries.count
        entries[slot] = Entry(
            outgoing: outgoing, source: source, timestamp: timestamp, rewrite: rewrite,
            layer: UInt8(truncatingIfNeeded: layer), valid: true, marker: marker, lastResent: 0)
    }

    /// The entry for a NACKed outgoing sequence number, if it is still known and was not resent within
    /// `minimumInterval` (a repeated NACK while the first resend is in flight is not doubled).
    mutating func resendable(outgoing: UInt16, now: UInt64, minimumInterval: UInt64) -> Entry? {
        let slot = Int(outgoing) % entries.count
        guard entries[slot].valid, entries[slot].outgoing == outgoing else { return nil }
        let last = entries[slot].lastResent
        guard last == 0 || now < last || now - last >= minimumInterval else { return nil }
        entries[slot].lastResent = max(1, now)
        return entries[slot]
    }
}
