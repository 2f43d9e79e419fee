import Foundation

/// A wait that ran past its deadline.
public struct WaitTimeout: Error, CustomStringConvertible {
    public var what: String
    public init(what: String) { self.what = what }
    public var description: String { "timed out waiting for \(what)" }
}

/// Checks `condition` every 10 ms until it holds; throws ``WaitTimeout`` after `seconds` (deadlines
/// are generous: tests must hold on a busy machine).
public func waitUntil(_ what: String, seconds: Double = 30, _ condition: () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { throw WaitTimeout(what: what) }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
}

/// A count shared between a loop thread and the test.
public final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    public init() {}
    public func add() { lock.withLock { count += 1 } }
    public var value: Int { lock.withLock { count } }
}

/// Runs `body` on a thread of its own and awaits its result: for a test's long blocking work
/// (encoding or decoding seconds of video), which on the cooperative pool (one thread per core)
/// would hold a thread other tests' waits and servers need. Check the result on the test's task:
/// `#expect` inside `body` would run outside the test.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
