import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Turns SIGINT and SIGTERM into an event that long-running commands await, so they can stop
/// sending, finish their files and release server resources instead of dying mid-write.
///
/// The signal handler resumes the waiters itself: nothing polls a flag.
public final class ShutdownSignal: @unchecked Sendable {
    public static let shared = ShutdownSignal()
    private let lock = NSLock()
    private var requested = false
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter: UInt64 = 0
    private var sources: [DispatchSourceSignal] = []

    /// Installs the handlers (idempotent).
    public func install() {
        lock.lock()
        defer { lock.unlock() }
        guard sources.isEmpty else { return }
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [weak self] in self?.request() }
            source.resume()
            sources.append(source)
        }
    }

    /// Marks shutdown as requested and wakes every ``wait()``.
    public func request() {
        let woken = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            requested = true
            defer { waiters.removeAll() }
            return Array(waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Whether shutdown was requested.
    public var isRequested: Bool { lock.withLock { requested } }

    /// Returns once shutdown is requested (at once if it was already), or when the task is cancelled.
    public func wait() async {
        let id = lock.withLock { () -> UInt64 in
            nextWaiter += 1
            return nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = lock.withLock { () -> Bool in
                    if requested || Task.isCancelled { return true }
                    waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            lock.withLock { waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Sleeps up to `seconds`, returning as soon as shutdown is requested.
    public func sleep(seconds: Double) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9)) }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }
}
