/// The send side's memory of what it sent, per transport-wide sequence number: when and how big,
/// so that transport-cc feedback (which says only which numbers arrived, and when) can be turned
/// into send/arrival time pairs and acknowledged bytes.
///
/// A ring of 8-byte entries, allocated on the first packet with ``initialCapacity`` entries (2 KB:
/// about a second of an audience member's stream, and an SFU holds one per member) and doubled,
/// up to ``maxCapacity``, when a packet would overwrite one that is unreported and younger than
/// ``growthHorizonMicros`` (a faster stream, or feedback that comes late). Loop-thread confined;
/// recording and looking up are a few stores and loads, without allocation but on growth.
struct TransportSendHistory {
    static let initialCapacity = 256
    /// At 50–100 ms between feedback messages, 2,048 packets hold 20 Mbit/s with room to spare
    /// for a late or lost feedback message.
    static let maxCapacity = 2048
    /// An unreported entry younger than this is still waited for: overwriting it would lose the
    /// feedback's answer. Feedback comes every 50–100 ms plus a round trip.
    static let growthHorizonMicros: UInt32 = 1_000_000

    struct Entry: Equatable {
        /// Send time in microseconds of the loop clock.
        var sendMicros: Int64
        var size: Int
    }

    private var sendTimes: UnsafeMutablePointer<UInt32>?
    /// Size in bytes; 0: empty or already reported.
    private var sizes: UnsafeMutablePointer<UInt16>?
    private var tags: UnsafeMutablePointer<UInt16>?
    /// Entries in the ring (0 before the first packet).
    private(set) var capacity = 0
    private var mask: Int { capacity - 1 }
    /// The send time of the latest packet, which gives the wrapped 32-bit times their upper bits.
    private(set) var lastSendMicros: Int64 = 0
    /// Packets recorded.
    private(set) var packetsRecorded: UInt64 = 0

    init() {}

    /// Frees the ring (the owner calls this once, when it goes).
    mutating func release() {
        sendTimes?.deallocate()
        sizes?.deallocate()
        tags?.deallocate()
        sendTimes = nil
        sizes = nil
        tags = nil
        capacity = 0
    }

    /// Remembers that `sequence` left at `nowMicros` with `size` bytes on the wire.
    mutating func record(_ sequence: UInt16, size: Int, nowMicros: Int64) {
        if capacity == 0 { resize(to: Self.initialCapacity) }
        var slot = Int(sequence) & mask
        if sizes![slot] != 0, tags![slot] != sequence, capacity < Self.maxCapacity,
            UInt32(truncatingIfNeeded: nowMicros) &- sendTimes![slot] < Self.growthHorizonMicros
        {
            resize(to: capacity * 2)
            slot = Int(sequence) & mask
        }
        sendTimes![slot] = UInt32(truncatingIfNeeded: nowMicros)
        sizes![slot] = UInt16(clamping: max(1, size))
        tags![slot] = sequence
        lastSendMicros = nowMicros
        packetsRecorded &+= 1
    }

    /// A ring of `count` entries holding the unreported entries of the old one. Entries in
    /// different slots of a ring keep different slots in one twice its size (one more bit of the
    /// same sequence number).
    private mutating func resize(to count: Int) {
        let newTimes = UnsafeMutablePointer<UInt32>.allocate(capacity: count)
        newTimes.initialize(repeating: 0, count: count)
        let newSizes = UnsafeMutablePointer<UInt16>.allocate(capacity: count)
        newSizes.initialize(repeating: 0, count: count)
        let newTags = UnsafeMutablePointer<UInt16>.allocate(capacity: count)
        newTags.initialize(repeating: 0, count: count)
        if let sendTimes, let sizes, let tags {
            for i in 0..<capacity where sizes[i] != 0 {
                let j = Int(tags[i]) & (count - 1)
                newTimes[j] = sendTimes[i]
                newSizes[j] = sizes[i]
                newTags[j] = tags[i]
            }
        }
        release()
        sendTimes = newTimes
        sizes = newSizes
        tags = newTags
        capacity = count
    }

    /// Whether `sequence` was sent and not yet reported received (a "not received" status counts
    /// as a loss only for such a number).
    func isPending(_ sequence: UInt16) -> Bool {
        guard let sizes, let tags else { return false }
        let slot = Int(sequence) & mask
        return tags[slot] == sequence && sizes[slot] != 0
    }

    /// The send time and size of `sequence`, once: a number that is unknown, overwritten, older
    /// than a minute or already taken gives nil.
    mutating func take(_ sequence: UInt16) -> Entry? {
        guard let sendTimes, let sizes, let tags else { return nil }
        let slot = Int(sequence) & mask
        guard tags[slot] == sequence, sizes[slot] != 0 else { return nil }
        let age = Int64(UInt32(truncatingIfNeeded: lastSendMicros) &- sendTimes[slot])
        guard age < 60_000_000 else { return nil }
        let entry = Entry(sendMicros: lastSendMicros - age, size: Int(sizes[slot]))
        sizes[slot] = 0
        return entry
    }
}
