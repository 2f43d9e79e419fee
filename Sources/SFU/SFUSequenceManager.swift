/// Maps the sequence numbers of the packets a down track forwards (from one source at a time) to one
/// continuous outgoing sequence, as mediasoup's `SeqManager` does.
///
/// - ``sync(_:)`` at a source switch: the switch packet continues one past the newest number sent.
///   Packets of the new source older than the switch packet are refused (they would reuse numbers
///   the old source already took).
/// - ``drop(_:)`` for a packet of the current source that will never be forwarded (padding, a
///   payload too large for the subscriber's packet): the packets after it move down by one, so the
///   subscriber sees no hole to NACK in vain.
/// - ``input(_:)`` maps a forwarded packet; reordered and repaired packets map to the same number as
///   they would have in order, so a retransmission fills the hole the subscriber saw.
///
/// Loop-thread confined; no allocation after init (the dropped list has a fixed capacity).
struct SFUSequenceManager {
    /// Drops remembered for reordering; an older one is folded into the offset.
    static let droppedCapacity = 128
    /// How far behind the newest input a packet may still be mapped (inputs older than the switch
    /// packet are refused only within this distance, 16-bit wrap).
    static let window: UInt16 = 1024

    private var offset: UInt16 = 0
    private var syncInput: UInt16 = 0
    private var guardingSync = false
    private var maxInput: UInt16 = 0
    /// Dropped inputs newer than the switch point, oldest first.
    private var dropped: [UInt16]
    /// Whether any packet was mapped yet.
    private(set) var started = false
    /// The newest outgoing number (valid once ``started``).
    private(set) var maxOutput: UInt16 = 0

    init() {
        dropped = []
        dropped.reserveCapacity(Self.droppedCapacity)
    }

    /// The next packet forwarded is `input`, from a new source: it gets the number after the newest
    /// one sent (or keeps its own on the very first packet).
    mutating func sync(_ input: UInt16) {
        offset = started ? maxOutput &+ 1 &- input : 0
        syncInput = input
        guardingSync = true
        maxInput = input &- 1
        dropped.removeAll(keepingCapacity: true)
    }

    /// `input` of the current source will not be forwarded. Only a packet newer than every mapped
    /// one can close its gap; an older one already has numbers after it.
    mutating func drop(_ input: UInt16) {
        guard started || guardingSync, Self.isNewer(input, than: maxInput) else { return }
        if dropped.count == Self.droppedCapacity {
            // Fold the oldest drop into the offset: every packet still to come is newer than it.
            offset &-= 1
            dropped.removeFirst()
        }
        dropped.append(input)
        maxInput = input
    }

    /// The outgoing number of forwarded packet `input`, or nil when it must not be sent (older
    /// than the switch packet of its source, or marked dropped).
    mutating func input(_ input: UInt16) -> UInt16? {
        if guardingSync {
            let distance = input &- syncInput
            if distance >= 0x8000 { return nil }  // before the switch point
            if distance > Self.window { guardingSync = false }
        }
        var below: UInt16 = 0
        if let last = dropped.last, Self.isNewer(input, than: last) {
            // In order (the drops are kept oldest first): every drop is below. The usual case, and
            // one comparison where a scalable stream's dropped layers fill the list.
            below = UInt16(dropped.count)
        } else {
            for d in dropped {
                if d == input { return nil }
                if Self.isNewer(input, than: d) { below &+= 1 }
            }
        }
        let output = input &+ offset &- below
        if Self.isNewer(input, than: maxInput) {
            maxInput = input
            // Forget drops the window has passed: fold them into the offset.
            while let first = dropped.first, maxInput &- first > Self.window {
                offset &-= 1
                dropped.removeFirst()
            }
        }
        if !started || Self.isNewer(output, than: maxOutput) { maxOutput = output }
        started = true
        return output
    }

    /// RTP sequence order with 16-bit wrap (RFC 3550 §A.1).
    @inline(__always)
    static func isNewer(_ a: UInt16, than b: UInt16) -> Bool {
        a != b && a &- b < 0x8000
    }
}
