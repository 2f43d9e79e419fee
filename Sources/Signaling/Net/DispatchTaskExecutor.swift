import Dispatch

/// A task executor backed by a private dispatch queue instead of Swift's cooperative pool.
///
/// Server work that other threads wait on (HTTP handlers, the room server's media calls) runs here,
/// so code that blocks a cooperative-pool thread — a synchronous test, a semaphore wait — cannot
/// starve it on a two-core machine.
// Safe: immutable (a DispatchQueue, itself thread-safe).
public final class DispatchTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let queue: DispatchQueue

    /// Creates an executor over a new queue; `concurrent` lets independent tasks run in parallel.
    public init(label: String, concurrent: Bool = false) {
        queue = DispatchQueue(label: label, attributes: concurrent ? [.concurrent] : [])
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { unowned.runSynchronously(on: executor) }
    }
}
