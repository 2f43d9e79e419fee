import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Turns SIGINT and SIGTERM into a flag that long-running commands poll, so they can stop sending,
/// finish their files and release server resources instead of dying mid-write.
public final class ShutdownSignal: @unchecked Sendable {
    public static let shared = ShutdownSignal()
    private let lock = NSLock()
    private var requested = false
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

    /// Marks shutdown as requested.
    public func request() {
        lock.lock()
        requested = true
        lock.unlock()
    }

    public var isRequested: Bool {
        lock.lock()
        defer { lock.unlock() }
        return requested
    }

    /// Sleeps up to `seconds`, returning early when shutdown is requested.
    public func sleep(seconds: Double) async {
        let end = Date().addingTimeInterval(seconds)
        while !isRequested && Date() < end {
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
    }
}
