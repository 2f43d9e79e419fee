import Foundation
import TestSupport
import Testing
import Understudy

@testable import RoomServer

/// Holds the server-side room's serial queue until ``RoomGate/open()`` (or 60 s, so that a failed
/// test never holds it for good): requests to that room wait, in the order they arrived, however
/// slow the machine. Returns once the hold has begun.
func gateRoom(_ server: RoomServer, _ roomId: String) async throws -> RoomGate {
    let room = try #require(try? server.room(for: roomId))
    let gate = RoomGate(waiting: { room.waitingRequestCount })
    let started = Flag()
    room.enqueue {
        started.set()
        _ = gate.semaphore.wait(timeout: .now() + 60)
    }
    try await waitUntil("the room held") { started.isSet }
    return gate
}

/// A hold on a room's queue (``gateRoom(_:_:)``).
final class RoomGate: Sendable {
    fileprivate let semaphore = DispatchSemaphore(value: 0)
    // A closure, not the room: `Room` names both the SDK's class and the server's here.
    private let waiting: @Sendable () -> Int

    fileprivate init(waiting: @escaping @Sendable () -> Int) { self.waiting = waiting }

    /// Waits until `count` requests wait behind the hold (requests the server has received and queued).
    func waitForRequests(_ count: Int) async throws {
        try await waitUntil("\(count) requests queued") { self.waiting() >= count }
    }

    func open() { semaphore.signal() }
}

/// Queues `seconds` of work on the server-side room's serial queue without waiting for it: requests
/// to that room made meanwhile wait.
func holdRoom(_ server: RoomServer, _ roomId: String, seconds: Double) {
    (try? server.room(for: roomId))?.enqueue { Thread.sleep(forTimeInterval: seconds) }
}

/// A flag set once from any thread.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// Error codes by call name, set from any thread.
final class ErrorBox: @unchecked Sendable {
    private let lock = NSLock()
    private var codes: [String: Int] = [:]
    func set(_ key: String, _ error: Error?) {
        lock.withLock { codes[key] = (error as? UnderstudyError)?.code ?? (error == nil ? 0 : -1) }
    }
    func get(_ key: String) -> Int? { lock.withLock { codes[key] } }
}
