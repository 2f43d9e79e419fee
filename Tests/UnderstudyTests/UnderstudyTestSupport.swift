import Foundation
import TestSupport
import Testing
import Understudy

@testable import RoomServer

/// Holds the server-side room's serial queue for `seconds`: requests to that room wait, as they
/// would on a slow or overloaded server. Returns once the stall has begun.
func stallRoom(_ server: RoomServer, _ roomId: String, seconds: Double) async throws {
    // `try?`: `room(for:)` returns an optional here and throws on newer servers; either way, nil = none.
    let room = try #require(try? server.room(for: roomId))
    let started = Flag()
    room.enqueue {
        started.set()
        Thread.sleep(forTimeInterval: seconds)
    }
    try await waitUntil("the room stalled") { started.isSet }
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
