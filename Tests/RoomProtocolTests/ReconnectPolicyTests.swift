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
