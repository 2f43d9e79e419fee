public import RTCWire
import Synchronization

/// A small locked ring of Opus packets handed from a capture thread to the event loop thread.
///
/// Slots are preallocated, so pushing allocates nothing. When the reader falls behind (for example
/// before the connection is up) the oldest packet is dropped and counted.
// Safe: the ring is guarded by a Mutex.
public final class EncodedAudioRing: @unchecked Sendable {
    /// The largest Opus packet (RFC 6716 §3.2.1).
    public static let maxPacketBytes = 1275
    /// Packets the ring holds.
    public let capacity: Int
    private let bytes: UnsafeMutablePointer<UInt8>
    private struct State {
        var lengths: [Int]
        var timestamps: [UInt32]
        var head = 0
        var count = 0
        var dropped = 0
    }
    private let state: Mutex<State>

    /// Creates a ring of `capacity` packets (at least 1).
    public init(capacity: Int) {
        self.capacity = max(1, capacity)
        bytes = .allocate(capacity: self.capacity * Self.maxPacketBytes)
        bytes.initialize(repeating: 0, count: self.capacity * Self.maxPacketBytes)
        state = Mutex(
            State(
                lengths: [Int](repeating: 0, count: self.capacity),
                timestamps: [UInt32](repeating: 0, count: self.capacity)))
    }

    deinit { bytes.deallocate() }

    /// Packets dropped because the ring was full.
    public var droppedPackets: Int { state.withLock { $0.dropped } }
    /// Packets waiting.
    public var count: Int { state.withLock { $0.count } }

    /// Adds a packet (longer ones are cut to ``maxPacketBytes``); drops the oldest when full.
    public func push(_ packet: UnsafeRawBufferPointer, timestamp: UInt32) {
        let length = min(packet.count, Self.maxPacketBytes)
        state.withLock { s in
            if s.count == capacity {
                s.head = (s.head + 1) % capacity
                s.count -= 1
                s.dropped += 1
            }
            let slot = (s.head + s.count) % capacity
            if length > 0, let base = packet.baseAddress {
                (bytes + slot * Self.maxPacketBytes).update(
                    from: base.assumingMemoryBound(to: UInt8.self), count: length)
            }
            s.lengths[slot] = length
            s.timestamps[slot] = timestamp
            s.count += 1
        }
    }

    /// Drops all but the newest `keep` packets (stale audio from before the reader started);
    /// returns how many were dropped. They are not counted in ``droppedPackets``.
    @discardableResult
    public func discardOldest(keepingNewest keep: Int) -> Int {
        state.withLock { s in
            let n = max(0, s.count - max(0, keep))
            s.head = (s.head + n) % capacity
            s.count -= n
            return n
        }
    }

    /// Removes the oldest packet as an Opus ``EncodedFrame`` of 20 ms, or returns nil when empty.
    public func pop() -> EncodedFrame? {
        state.withLock { s -> EncodedFrame? in
            guard s.count > 0 else { return nil }
            let slot = s.head
            let data = Array(UnsafeBufferPointer(start: bytes + slot * Self.maxPacketBytes, count: s.lengths[slot]))
            s.head = (s.head + 1) % capacity
            s.count -= 1
            return EncodedFrame(
                codec: .opus, data: data, timestamp: s.timestamps[slot], isKeyframe: true, duration: 960)
        }
    }
}
