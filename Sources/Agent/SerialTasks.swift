import Foundation

/// Work that runs one item after another, in the order queued, each as its own task: the agents'
/// consume and stop operations, republish changes and invite answers, which must not overlap.
// Safe: `tail` is guarded by `lock`.
final class SerialTasks: @unchecked Sendable {
    private let lock = NSLock()
    private var tail: Task<Void, Never>?

    init() {}

    /// Queues `work` after everything queued before it.
    func enqueue(_ work: @escaping @Sendable () async -> Void) {
        lock.withLock {
            let previous = tail
            tail = Task {
                await previous?.value
                await work()
            }
        }
    }

    /// Waits until everything queued so far has run.
    func drain() async { await lock.withLock { tail }?.value }
}
