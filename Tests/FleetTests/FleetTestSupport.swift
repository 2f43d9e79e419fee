import Agent
import Foundation

@testable import Fleet

/// A valid job of `id` in `room` (a server that is never reached: workers in these tests fail or
/// refuse jobs before joining).
func job(_ id: String, cost: Int, room: String = "r", submittedAt: Double, video: String? = nil) -> FleetJobSpec {
    var agent = AgentJobOptions(server: "http://127.0.0.1:9", room: room, token: "token")
    agent.video = video
    return FleetJobSpec(id: id, agent: agent, cost: cost, submittedAt: submittedAt)
}

/// A job's state, nil when it has none or Redis cannot be read.
func state(_ store: FleetStore, _ id: String) async -> FleetJobState? {
    (try? await store.status(id))?.state
}

/// Polls `condition` every 50 ms until it holds or `seconds` pass (a generous deadline, for a busy machine).
func waitFor(seconds: Double, _ condition: () async -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if await condition() { return true }
        try? await Task.sleep(nanoseconds: 50_000_000)
    }
    return await condition()
}

final class Recorder: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func append(_ value: String) { lock.withLock { list.append(value) } }
    var values: [String] { lock.withLock { list } }
}

final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
