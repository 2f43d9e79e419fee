import Foundation

/// The tasks that end an agent's `run(duration:until:)` (``RoomAgent``, ``JanusAgent``): one sleeps
/// `duration` seconds, one awaits `stopEvent`; whichever finishes first calls `stop`. Each wakes the
/// run itself, nothing is polled; cancel them once the run is over.
func runWatchers(
    duration: Double?, until stopEvent: (@Sendable () async -> Void)?, stop: @escaping @Sendable () -> Void
) -> [Task<Void, Never>] {
    var tasks: [Task<Void, Never>] = []
    if let duration {
        tasks.append(
            Task {
                try? await Task.sleep(nanoseconds: UInt64(max(0, duration) * 1e9))
                if !Task.isCancelled { stop() }
            })
    }
    if let stopEvent {
        tasks.append(
            Task {
                await stopEvent()
                if !Task.isCancelled { stop() }
            })
    }
    return tasks
}

/// The end of an agent's run (``RoomAgent``, ``JanusAgent``): ``wait(duration:until:stop:)`` parks
/// the run until ``end()`` is called, by a watcher or by the agent itself (room left, Janus gone).
/// An end that comes first makes the wait return at once.
// Safe: `ended` and `waiter` are guarded by `lock`.
final class RunEnd: @unchecked Sendable {
    private let lock = NSLock()
    private var ended = false
    private var waiter: CheckedContinuation<Void, Never>?

    /// Starts the ``runWatchers(duration:until:stop:)`` (their `stop` should lead to ``end()``),
    /// waits for the end, then cancels them.
    func wait(
        duration: Double?, until stopEvent: (@Sendable () async -> Void)?, stop: @escaping @Sendable () -> Void
    ) async {
        let watchers = runWatchers(duration: duration, until: stopEvent, stop: stop)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let over = lock.withLock {
                if ended { return true }
                waiter = c
                return false
            }
            if over { c.resume() }
        }
        for w in watchers { w.cancel() }
    }

    /// Ends the run; calls after the first do nothing.
    func end() {
        let pending = lock.withLock {
            ended = true
            defer { waiter = nil }
            return waiter
        }
        pending?.resume()
    }
}
