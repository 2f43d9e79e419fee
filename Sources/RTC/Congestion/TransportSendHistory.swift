/// The send side's memory of what it sent, per transport-wide sequence number: when and how big,
/// so that transport-cc feedback (which says only which numbers arrived, and when) can be turned
/// into send/arrival time pairs and acknowledged bytes.
///
/// A fixed ring of ``capacity`` entries (8 bytes each), allocated on the first packet, so a
/// connection that never sends holds none. Loop-thread confined; recording and looking up are a
/// few stores and loads, without allocation.
struct TransportSendHistory {
    /// Numbers remembered: at 50–100 ms between feedback messages, 2,048 packets hold 20 Mbit/s
    /// with room to spare for a late or lost feedback message.
    static let capacity = 2048

    struct Entry: Equatable {
        /// Send time in microseconds of the loop clock.
        var sendMicros: Int64
        var size: Int
    }

    private var sendTimes: UnsafeMutablePointer<UInt32>?
    /// Size in bytes; 0: empty or already reported.
    private var sizes: UnsafeMutablePointer<UInt16>?
    private var tags: UnsafeMutablePointer<UInt16>?
    private let mask = capacity - 1
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
    }

    /// Remembers that `sequence` left at `nowMicros` with `size` bytes on the wire.
    mutating func record(_ sequence: UInt16, size: Int, nowMicros: Int64) {
        if sendTimes == nil {
            sendTimes = .allocate(capacity: Self.capacity)
            sendTimes!.initialize(repeating: 0, count: Self.capacity)
            sizes = .allocate(capacity: Self.capacity)
            sizes!.initialize(repeating: 0, count: Self.capacity)
            tags = .allocate(capacity: Self.capacity)
            tags!.initialize(repeating: 0, count: Self.capacity)
        }
        let slot = Int(sequence) & mask
        sendTimes![slot] = UInt32(truncatingIfNeeded: nowMicros)
        sizes![slot] = UInt16(clamping: max(1, size))
        tags![slot] = sequence
        lastSendMicros = nowMicros
        packetsRecorded &+= 1
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
