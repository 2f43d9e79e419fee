import Foundation
import Testing

@testable import Signaling

@Suite("Reactor bounds")
struct ReactorTests {
    /// Connections arm far-off timers (idle pings, close timeouts) and cancel them; cancelled
    /// entries must not pile up in the heap.
    @Test func cancelledTimersDoNotAccumulate() {
        var heap = TimerHeap()
        let far: UInt64 = 1 << 40
        for id in UInt64(1)...10_000 {
            heap.insert(deadline: far + id, id: id, action: {})
            heap.cancel(id)
        }
        #expect(heap.storedCount <= 200)
        // Live timers survive a compaction and still fire in deadline order.
        var fired: [Int] = []
        for id in UInt64(20_001)...20_010 { heap.insert(deadline: id, id: id, action: {}) }
        for id in UInt64(30_001)...30_500 {
            heap.insert(deadline: far + id, id: id, action: {})
            heap.cancel(id)
        }
        #expect(heap.storedCount <= 200)
        var now: UInt64 = 20_000
        while fired.count < 10, now < 20_100 {
            now += 1
            while let action = heap.popDue(now: now) {
                action()
                fired.append(Int(now))
            }
        }
        #expect(fired == Array(20_001...20_010))
    }
}

/// Many idle WebSocket connections on one server reactor, from one client process (the client
/// side shares ``Reactor/shared``). `SIGNALING_LOAD_CONNECTIONS` overrides the default 500.
@Suite("WebSocket load")
struct ReactorLoadTests {
    static var residentKiB: Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    @Test func holdsManyIdleConnections() async throws {
        let count = ProcessInfo.processInfo.environment["SIGNALING_LOAD_CONNECTIONS"].flatMap(Int.init) ?? 500
        let server = try makeEchoServer()
        defer { server.stop() }
        let rssBefore = Self.residentKiB
        let started = Date()
        var probes: [WSProbe] = []
        let batch = 50
        for first in stride(from: 0, to: count, by: batch) {
            let opened = try await withThrowingTaskGroup(of: WSProbe.self) { group in
                for _ in first..<min(count, first + batch) {
                    group.addTask {
                        WSProbe(
                            try await WebSocketConnection.connect(
                                url: "ws://127.0.0.1:\(server.port)/echo", timeout: 30))
                    }
                }
                var out: [WSProbe] = []
                for try await p in group { out.append(p) }
                return out
            }
            probes += opened
        }
        let connectSeconds = Date().timeIntervalSince(started)
        #expect(probes.count == count)
        #expect(server.connectionCount() == count)

        // Every connection is alive: one round trip each, all in flight at once.
        for (i, p) in probes.enumerated() { p.connection.send(text: "n\(i)") }
        var wrongEchoes = 0
        for (i, p) in probes.enumerated() where try await p.next("echo \(i)", seconds: 30) != .text("n\(i)") {
            wrongEchoes += 1
        }
        #expect(wrongEchoes == 0)
        let rssHeld = Self.residentKiB
        let roundTripSeconds = Date().timeIntervalSince(started) - connectSeconds
        print(
            "load: \(count) WebSocket connections (client+server in one process) opened in \(String(format: "%.2f", connectSeconds)) s, one echo each in \(String(format: "%.2f", roundTripSeconds)) s, RSS \(rssBefore / 1024) → \(rssHeld / 1024) MiB"
        )

        for p in probes { p.connection.close() }
        var codes: [UInt16: Int] = [:]
        for p in probes { codes[try await p.closed(seconds: 30).0, default: 0] += 1 }
        #expect(codes == [1000: count])
        try await withDeadline(30, "server to drop all connections") {
            while server.connectionCount() > 0 { try await Task.sleep(nanoseconds: 20_000_000) }
        }
        #expect(server.connectionCount() == 0)
    }
}
