import Foundation
import RoomProtocol
import Signaling
import Synchronization
import TestSupport
import Testing

/// The one reconnect loop the SDK's room and the load bots share: attempts until one succeeds, the
/// window or the attempt cap runs out, or the caller stops; and the cluster's URLs tried in order.
@Suite struct ReconnectPolicyTests {
    @Test func retryStopsAtTheFirstSuccess() async {
        let made = Mutex(0)
        let policy = ReconnectPolicy(window: 30, initialDelay: 0.01, maxDelay: 0.02)
        let ok = await policy.retry {
            made.withLock { n in
                n += 1
                return n == 3
            }
        }
        #expect(ok)
        #expect(made.withLock { $0 } == 3)
    }

    @Test func retryGivesUpAtTheCapOrWhenStopped() async {
        let made = Mutex(0)
        let capped = ReconnectPolicy(window: 30, initialDelay: 0.01, maxDelay: 0.02, maxAttempts: 4)
        #expect(
            await !capped.retry {
                made.withLock { $0 += 1 }
                return false
            })
        #expect(made.withLock { $0 } == 4)
        // A stop before the first attempt: none is made.
        let stopped = ReconnectPolicy(window: 30, initialDelay: 0.01)
        #expect(
            await !stopped.retry(stop: { true }) {
                made.withLock { $0 += 1 }
                return true
            })
        #expect(made.withLock { $0 } == 4)
    }

    @Test func retryMakesTheFirstAttemptEvenWithoutAWindowAndNoneAfterIt() async {
        let made = Mutex(0)
        let policy = ReconnectPolicy(window: 0, initialDelay: 0.01)
        #expect(
            await !policy.retry {
                made.withLock { $0 += 1 }
                return false
            })
        #expect(made.withLock { $0 } == 1)
    }

    @Test func theFirstPauseSpreadsOverTheWholeInitialDelayAndLaterOnesDouble() {
        let policy = ReconnectPolicy(window: 30, initialDelay: 0.5, maxDelay: 5, jitter: 0.2)
        let first = (0..<2000).map { _ in policy.delay(beforeAttempt: 0) }
        #expect(first.allSatisfy { (0...0.5).contains($0) })
        // Spread over the whole range, not ±jitter around 0.5 s (2000 draws: each tenth is hit).
        #expect(Set(first.map { Int($0 / 0.05) }).isSuperset(of: 0..<10))
        for (attempt, base) in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)] {
            for _ in 0..<200 {
                #expect((base * 0.8 - 1e-9...base * 1.2 + 1e-9).contains(policy.delay(beforeAttempt: attempt)))
            }
        }
        #expect(ReconnectPolicy(window: 30, initialDelay: 0).delay(beforeAttempt: 0) == 0)
        // Not spread: the first pause is the initial delay within the jitter, like the others.
        var fixed = policy
        fixed.spreadsFirstPause = false
        for _ in 0..<200 { #expect((0.4 - 1e-9...0.6 + 1e-9).contains(fixed.delay(beforeAttempt: 0))) }
    }

    @Test func aRejoinTriesItsOwnNodeFirstThenTheOthersInARandomOrder() {
        let cluster = ["ws://a", "ws://b", "ws://c", "ws://d", "ws://b"]
        var seconds: Set<String> = []
        for _ in 0..<400 {
            let order = ReconnectPolicy.nodeOrder(own: "ws://b", cluster: cluster)
            #expect(order.first == "ws://b")
            #expect(order.count == 4)
            #expect(Set(order) == ["ws://a", "ws://b", "ws://c", "ws://d"])
            seconds.insert(order[1])
        }
        // The clients of one dead node spread over every survivor (400 draws: each is second at times).
        #expect(seconds == ["ws://a", "ws://c", "ws://d"])
        #expect(ReconnectPolicy.nodeOrder(own: "ws://a", cluster: []) == ["ws://a"])
    }

    @Test func connectTriesTheURLsInOrder() async throws {
        let server = try startTestServer(secret: "reconnect-test")
        defer { server.stop() }
        // A closed port first (a dead node), then the live one.
        let dead = "ws://127.0.0.1:1/v1/rtc"
        let client = try await RoomProtocolClient.connect(urls: [dead, server.signalingURL], timeout: 10)
        client.close()
        await #expect(throws: WebSocketError.self) {
            _ = try await RoomProtocolClient.connect(urls: [dead], timeout: 10)
        }
        await #expect(throws: WebSocketError.self) {
            _ = try await RoomProtocolClient.connect(urls: [], timeout: 10)
        }
    }
}
