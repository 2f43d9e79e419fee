import Dispatch
import Foundation

/// A Redis client that owns its connection on a private serial queue, so callers on any thread or
/// task can use it and no blocking call ever runs on theirs. A broken connection is re-made on the
/// next command; ``isConnected`` and ``onConnectionChange`` tell logs and metrics about it.
// Safe: the connection is used only on its private serial queue; the rest is guarded by `lock`.
public final class RedisClient: @unchecked Sendable {
    public let url: RedisURL
    private let timeout: Double
    private let queue: DispatchQueue
    private let stateLock = NSLock()
    // Only touched on `queue`.
    private var connection: RedisConnection?
    private var connectedState = false
    private var changeHandler: (@Sendable (Bool, String?) -> Void)?
    private var failures = 0

    /// `timeout` bounds each connect and each reply.
    public init(url: RedisURL, timeout: Double = 2, label: String = "redis") {
        self.url = url
        self.timeout = timeout
        self.queue = DispatchQueue(label: "understudy.\(label)")
    }

    /// True while the last command reached the server.
    public var isConnected: Bool { stateLock.withLock { connectedState } }

    /// Commands that failed on a broken or refused connection since the client was made.
    public var connectionFailures: Int { stateLock.withLock { failures } }

    /// Called (on the client's queue) when the connection goes up or down; the string says why it went down.
    public func onConnectionChange(_ handler: @escaping @Sendable (Bool, String?) -> Void) {
        stateLock.withLock { changeHandler = handler }
    }

    /// Runs one command, connecting first if needed.
    @discardableResult
    public func command(_ arguments: [String]) async throws(RedisError) -> RedisValue {
        let result: Result<RedisValue, RedisError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: self.runOnQueue { c throws(RedisError) in try c.command(arguments) })
            }
        }
        return try result.get()
    }

    /// Runs several commands on one connection in order (no other command runs between them); the
    /// first failure stops the batch and is thrown.
    @discardableResult
    public func pipeline(_ commands: [[String]]) async throws(RedisError) -> [RedisValue] {
        let result: Result<[RedisValue], RedisError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(
                    returning: self.runOnQueue { c throws(RedisError) in try Self.run(commands, on: c) })
            }
        }
        return try result.get()
    }

    private static func run(_ commands: [[String]], on connection: RedisConnection) throws(RedisError) -> [RedisValue] {
        var values: [RedisValue] = []
        for command in commands { values.append(try connection.command(command)) }
        return values
    }

    /// The blocking form, for threads that may block (never a packet loop or a Swift task).
    @discardableResult
    public func commandSync(_ arguments: [String]) throws(RedisError) -> RedisValue {
        try queue.sync { runOnQueue { c throws(RedisError) in try c.command(arguments) } }.get()
    }

    /// The blocking form of ``pipeline(_:)``.
    @discardableResult
    public func pipelineSync(_ commands: [[String]]) throws(RedisError) -> [RedisValue] {
        try queue.sync { runOnQueue { c throws(RedisError) in try Self.run(commands, on: c) } }.get()
    }

    /// Closes the connection; a later command opens a new one.
    public func close() {
        queue.sync {
            connection?.close()
            connection = nil
        }
    }

    private func runOnQueue<T>(_ body: (RedisConnection) throws(RedisError) -> T) -> Result<T, RedisError> {
        do throws(RedisError) {
            let current: RedisConnection
            if let existing = connection, existing.isUsable {
                current = existing
            } else {
                current = try RedisConnection(url: url, timeout: timeout)
                connection = current
            }
            let value = try body(current)
            setConnected(true, nil)
            return .success(value)
        } catch {
            if case .connection(let why) = error {
                connection?.close()
                connection = nil
                stateLock.withLock { failures += 1 }
                setConnected(false, why)
            } else {
                setConnected(true, nil)
            }
            return .failure(error)
        }
    }

    private func setConnected(_ up: Bool, _ why: String?) {
        let handler: (@Sendable (Bool, String?) -> Void)? = stateLock.withLock {
            guard connectedState != up else { return nil }
            connectedState = up
            return changeHandler
        }
        handler?(up, why)
    }
}
