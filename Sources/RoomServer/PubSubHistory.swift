import RoomProtocol
import Signaling

/// A room's persisted PubSub messages, with the memory they hold counted byte for byte.
///
/// Bounds: messages per topic (oldest dropped), topics with history (further topics refused),
/// bytes per room (the room's oldest messages dropped) and bytes over the whole server (a shared
/// budget; a publish that does not fit is refused). Room-queue confined.
struct PubSubHistory {
    private(set) var topics: [String: [StoredPubSubMessage]] = [:]
    /// Bytes held by the stored messages (``StoredPubSubMessage/storedBytes``).
    private(set) var bytes = 0

    func messages(_ topic: String) -> [StoredPubSubMessage] { topics[topic] ?? [] }

    /// Stores `message`, dropping older ones as the limits require.
    ///
    /// - Parameters:
    ///   - reserve: takes bytes from the server-wide budget; false when it is spent (→ 4087).
    ///   - release: gives bytes back to it.
    mutating func store(
        _ message: StoredPubSubMessage, configuration c: RoomServerConfiguration, reserve: (Int) -> Bool,
        release: (Int) -> Void
    ) throws(RoomError) {
        let size = message.storedBytes
        guard topics[message.message.topic] != nil || topics.count < c.maxPersistedTopicsPerRoom else {
            throw RoomError(4087, "the room already stores history for \(c.maxPersistedTopicsPerRoom) topics")
        }
        guard size <= c.maxPubSubHistoryBytesPerRoom else {
            throw RoomError(4087, "a message of \(size) stored bytes exceeds the room's history limit")
        }
        guard c.pubsubHistoryLimit > 0 else { return }
        guard reserve(size) else {
            throw RoomError(4087, "the server's PubSub history storage is full; publish without persist")
        }
        var list = topics[message.message.topic] ?? []
        list.append(message)
        bytes += size
        while list.count > c.pubsubHistoryLimit {
            let dropped = list.removeFirst()
            bytes -= dropped.storedBytes
            release(dropped.storedBytes)
        }
        topics[message.message.topic] = list
        while bytes > c.maxPubSubHistoryBytesPerRoom, dropOldest(release: release) {}
    }

    /// Drops the room's oldest stored message (over all topics); false when there is none.
    private mutating func dropOldest(release: (Int) -> Void) -> Bool {
        var oldest: (topic: String, sequence: UInt64)?
        for (topic, list) in topics {
            if let first = list.first, oldest == nil || first.sequence < oldest!.sequence {
                oldest = (topic, first.sequence)
            }
        }
        guard let oldest, var list = topics[oldest.topic] else { return false }
        let dropped = list.removeFirst()
        bytes -= dropped.storedBytes
        release(dropped.storedBytes)
        topics[oldest.topic] = list.isEmpty ? nil : list
        return true
    }

    /// Forgets everything and returns the bytes to the server-wide budget.
    mutating func removeAll(release: (Int) -> Void) {
        release(bytes)
        bytes = 0
        topics.removeAll()
    }
}
