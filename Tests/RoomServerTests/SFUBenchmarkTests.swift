import Testing

@testable import RoomServer

/// The forwarding benchmark runs end to end (its number is reported by `make bench`, not checked here).
@Suite(.serialized) struct SFUBenchmarkTests {
    @Test func benchmarkForwardsToEverySubscriber() async throws {
        let result = try await SFUBenchmark.run(seconds: 1, subscribers: 2, packetsPerSecond: 1200)
        #expect(result.packetsPerSecondPerCore > 0)
        #expect(result.method.contains("2 subscribers"))
    }
}
