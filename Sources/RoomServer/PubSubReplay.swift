import Foundation
import RoomProtocol
import Signaling

/// Sends one member's PubSub history replays (`pubsubHistory`) off the room's queue, at the pace
/// the member reads (issue 31 item 8).
///
/// A `subscribe` takes a snapshot of the visible history on the room's queue (a copy of an array of
/// at most `pubsubHistoryLimit` stored messages whose strings are shared) and answers at once; the
/// batches are encoded and sent here, on the member's own serial queue, one at a time: the next one
/// only once the member's connection has handed the previous one to its socket. A member that
/// re-subscribes to a large history, or reads slowly, so costs its own queue and its own socket,
/// and the room answers everyone else meanwhile.
///
/// Order: live `pubsubMessage`s for this member wait behind a replay in progress (``deliver(_:)``),
/// so each member still sees a topic's history before the messages published after its subscribe.
// Safe: its queues are guarded by `lock`.
final class PubSubReplay: @unchecked Sendable {
    private enum Item {
        case history(topic: String, messages: [StoredPubSubMessage], bytes: Int)
        case live(PreparedTextMessage)
    }

    private let session: any ParticipantSignaling
    private let batchSize: Int
    /// Largest batch in stored bytes (at least one message): half the member's output bound, so a
    /// batch never pushes its queue past the bound by itself.
    private let batchBytes: Int
    private let queue = DispatchQueue(label: "pubsub.replay")
    private let lock = NSLock()
    private var items = FIFO<Item>()
    /// Messages of the replay under way already sent (into `items.first`).
    private var sentOfFirst = 0
    private var running = false
    /// Stored bytes of the history replays waiting (the bound of ``enqueue(topic:messages:limit:)``).
    private var waitingBytes = 0
    /// Bytes of the live messages waiting behind a replay, and their bound (the member's output
    /// bound: past it they go straight to the connection, whose own bound then drops a member that
    /// does not read, as it would without a replay).
    private var liveBytes = 0
    private let liveLimit: Int

    init(session: any ParticipantSignaling, batchSize: Int, batchBytes: Int) {
        self.session = session
        self.batchSize = max(1, batchSize)
        self.batchBytes = max(1, batchBytes)
        liveLimit = 2 * self.batchBytes
    }

    /// Queues the replay of `messages`; false (nothing queued) when the replays already waiting
    /// hold more than `limit` stored bytes. Room queue.
    func enqueue(topic: String, messages: [StoredPubSubMessage], limit: Int) -> Bool {
        let bytes = messages.reduce(0) { $0 + $1.storedBytes }
        let (accepted, start): (Bool, Bool) = lock.withLock {
            // One replay always fits: the bound is on what piles up behind it.
            guard waitingBytes == 0 || waitingBytes + bytes <= limit else { return (false, false) }
            waitingBytes += bytes
            items.append(.history(topic: topic, messages: messages, bytes: bytes))
            let start = !running
            running = true
            return (true, start)
        }
        if start { queue.async { [self] in pump() } }
        return accepted
    }

    /// Whether a replay of `bytes` stored bytes would be queued now (see ``enqueue(topic:messages:limit:)``).
    func accepts(_ bytes: Int, limit: Int) -> Bool {
        lock.withLock { waitingBytes == 0 || waitingBytes + bytes <= limit }
    }

    /// Sends a live message now, or behind the replay under way; room queue.
    func deliver(_ message: PreparedTextMessage) {
        let queued: Bool = lock.withLock {
            guard running, liveBytes + message.byteCount <= liveLimit else { return false }
            liveBytes += message.byteCount
            items.append(.live(message))
            return true
        }
        if !queued { session.send(message) }
    }

    /// Sends the next batch (or the live messages at the head), then waits for the drain.
    private func pump() {
        if session.isClosed {
            lock.withLock {
                items = FIFO()
                waitingBytes = 0
                liveBytes = 0
                sentOfFirst = 0
                running = false
            }
            return
        }
        // Live messages at the head go at once; a history batch goes alone, then waits.
        while true {
            let next: Item? = lock.withLock {
                guard let first = items.first else {
                    running = false
                    return nil
                }
                if case .live(let message) = first {
                    _ = items.popFirst()
                    liveBytes -= message.byteCount
                }
                return first
            }
            switch next {
            case nil: return
            case .live(let message)?: session.send(message)
            case .history(let topic, let messages, let bytes)?:
                let start = lock.withLock { sentOfFirst }
                var end = start
                var size = 0
                while end < messages.count, end - start < batchSize,
                    end == start || size + messages[end].storedBytes <= batchBytes
                {
                    size += messages[end].storedBytes
                    end += 1
                }
                let isLast = end == messages.count
                session.notify(
                    .pubsubHistory,
                    [
                        "topic": .string(topic), "messages": .array(messages[start..<end].map(\.json)),
                        "isLast": .bool(isLast),
                    ])
                lock.withLock {
                    if isLast {
                        _ = items.popFirst()
                        sentOfFirst = 0
                        waitingBytes -= bytes
                    } else {
                        sentOfFirst = end
                    }
                }
                session.whenOutputDrained { [self] in queue.async { [self] in pump() } }
                return
            }
        }
    }
}
