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
    /// Per slot: a header-extension element kept with the payload (an AV1 dependency descriptor,
    /// which a repair must carry as the original did); none when `elementBytes` is 0.
    let elementBytes: Int
    private let elements: UnsafeMutableRawBufferPointer
    private var elementLength: [UInt8]

    /// - Parameter elementBytes: room per packet for one header-extension element (0: none kept;
    ///   at most 255, the two-byte form's longest).
    init(capacity: Int = 512, elementBytes: Int = 0) {
        self.capacity = max(1, capacity)
        storage = .allocate(byteCount: self.capacity * Self.slotBytes, alignment: 16)
        sequence = Array(repeating: 0, count: self.capacity)
        length = Array(repeating: 0, count: self.capacity)
        self.elementBytes = min(max(0, elementBytes), 255)
        elements = .allocate(byteCount: self.capacity * self.elementBytes, alignment: 16)
        elementLength = Array(repeating: 0, count: self.elementBytes > 0 ? self.capacity : 0)
    }

    deinit {
        storage.deallocate()
        elements.deallocate()
    }

    /// Keeps `payload` (and `element`, when this buffer keeps elements) as the packet with
    /// `sequenceNumber` (a repair replaces the stored copy).
    func store(sequenceNumber: UInt16, payload: UnsafeRawBufferPointer, element: UnsafeRawBufferPointer? = nil) {
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
        guard elementBytes > 0 else { return }
        if let element, element.count <= elementBytes, let from = element.baseAddress, let to = elements.baseAddress {
            (to + slot * elementBytes).copyMemory(from: from, byteCount: element.count)
            elementLength[slot] = UInt8(element.count)
        } else {
            elementLength[slot] = 0
        }
    }

    /// The element stored with `sequenceNumber`'s payload (nil: none, or the payload is gone).
    func element(sequenceNumber: UInt16) -> UnsafeRawBufferPointer? {
        guard elementBytes > 0, payload(sequenceNumber: sequenceNumber) != nil, let base = elements.baseAddress else {
            return nil
        }
        let slot = Int(sequenceNumber) % capacity
        guard elementLength[slot] > 0 else { return nil }
        return UnsafeRawBufferPointer(start: base + slot * elementBytes, count: Int(elementLength[slot]))
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
/// answered with exactly the packet the subscriber missed. 16 bytes per entry.
struct SFUSequencer {
    /// 16 bytes: a video consumer keeps 512 of these (8 KB), so an audience member stays small.
    struct Entry {
        var outgoing: UInt16 = 0
        var source: UInt16 = 0
        var timestamp: UInt32 = 0
        /// The codec fields the munger rewrote (VP8 picture ID, TL0PICIDX), applied again on resend.
        private var pictureID: UInt16 = 0
        private var pictureIDOffset: UInt8 = 0
        private var tl0PicIdxOffset: UInt8 = 0
        private var tl0PicIdx: UInt8 = 0
        /// Bits 0–3: valid, marker, 15-bit picture ID, resent; bits 4–7: the layer.
        private var flags: UInt8 = 0
        /// Loop time of the last resend in units of 2^20 ns (about 1 ms), wrapping after about 68 s:
        /// a NACK for a packet that old finds its slot long reused.
        private var resentAt: UInt16 = 0

        private static let validBit: UInt8 = 1
        private static let markerBit: UInt8 = 2
        private static let longPictureIDBit: UInt8 = 4
        private static let resentBit: UInt8 = 8

        init() {}

        init(outgoing: UInt16, source: UInt16, layer: Int, timestamp: UInt32, marker: Bool, rewrite: RTPPayloadRewrite)
        {
            self.outgoing = outgoing
            self.source = source
            self.timestamp = timestamp
            pictureID = rewrite.pictureID
            pictureIDOffset = rewrite.pictureIDOffset
            tl0PicIdxOffset = rewrite.tl0PicIdxOffset
            tl0PicIdx = rewrite.tl0PicIdx
            flags =
                Self.validBit | (marker ? Self.markerBit : 0) | (rewrite.pictureIDIs15Bit ? Self.longPictureIDBit : 0)
                | UInt8(truncatingIfNeeded: min(max(layer, 0), 15) << 4)
        }

        var valid: Bool { flags & Self.validBit != 0 }
        var marker: Bool { flags & Self.markerBit != 0 }
        var layer: UInt8 { flags >> 4 }
        var rewrite: RTPPayloadRewrite {
            RTPPayloadRewrite(
                pictureIDOffset: pictureIDOffset, pictureIDIs15Bit: flags & Self.longPictureIDBit != 0,
                pictureID: pictureID, tl0PicIdxOffset: tl0PicIdxOffset, tl0PicIdx: tl0PicIdx)
        }

        /// Whether a resend at `now` is at least `minimumInterval` after the last one; if so it is noted.
        mutating func claimResend(now: UInt64, minimumInterval: UInt64) -> Bool {
            let stamp = UInt16(truncatingIfNeeded: now >> 20)
            if flags & Self.resentBit != 0 {
                let minimum = UInt16(min(UInt64(UInt16.max), (minimumInterval + (1 << 20) - 1) >> 20))
                guard stamp &- resentAt >= minimum else { return false }
            }
            flags |= Self.resentBit
            resentAt = stamp
            return true
        }
    }

    private var entries: [Entry]

    init(capacity: Int = 512) { entries = Array(repeating: Entry(), count: max(1, capacity)) }

    var capacity: Int { entries.count }

    /// Notes one forwarded packet (a repair of the same outgoing number replaces it).
    mutating func record(
        outgoing: UInt16, source: UInt16, layer: Int, timestamp: UInt32, marker: Bool, rewrite: RTPPayloadRewrite
    ) {
        entries[Int(outgoing) % entries.count] = Entry(
            outgoing: outgoing, source: source, layer: layer, timestamp: timestamp, marker: marker, rewrite: rewrite)
    }

    /// The entry for an outgoing sequence number still known, without noting a resend (probe padding).
    func entry(outgoing: UInt16) -> Entry? {
        let e = entries[Int(outgoing) % entries.count]
        return e.valid && e.outgoing == outgoing ? e : nil
    }

    /// The entry for a NACKed outgoing sequence number, if it is still known and was not resent within
    /// `minimumInterval` (a repeated NACK while the first resend is in flight is not doubled).
    mutating func resendable(outgoing: UInt16, now: UInt64, minimumInterval: UInt64) -> Entry? {
        let slot = Int(outgoing) % entries.count
        guard entries[slot].valid, entries[slot].outgoing == outgoing,
            entries[slot].claimResend(now: now, minimumInterval: minimumInterval)
        else { return nil }
        return entries[slot]
    }
}
