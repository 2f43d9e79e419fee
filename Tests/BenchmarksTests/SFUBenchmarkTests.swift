import Testing

@testable import Benchmarks

/// The forwarding benchmark runs end to end (its number is reported by `make bench`, not checked here).
@Suite(.serialized) struct SFUBenchmarkTests {
    @Test func benchmarkForwardsToEverySubscriber() async throws {
        let result = try await SFUBenchmark.run(seconds: 1, subscribers: 2, packetsPerSecond: 1200)
        #expect(result.packetsPerSecondPerCore > 0)
        #expect(result.method.contains("2 subscribers"))
    }

    /// Every packet is forwarded well past 32768 packets after the last layer switch (a 16-bit
    /// sequence comparison against the switch point once dropped everything from there on).
    @Test func longRunsForwardEveryPacket() async throws {
        let m = try await SFUBenchmark.measure(seconds: 3, subscribers: 1, packetsPerSecond: 15000)
        #expect(m.packetsIn > 0)
        #expect(m.packetsForwarded + 64 >= m.packetsIn, "in \(m.packetsIn), forwarded \(m.packetsForwarded)")
    }

    /// The memory row runs end to end: every subscriber gets its consumer and offer.
    @Test func memoryPerConsumerIsMeasuredOverEverySubscriber() async throws {
        let m = try await SFUBenchmark.memoryPerVideoConsumer(subscribers: 20)
        #expect(m.kilobytes.isFinite)
        #expect(m.method.contains("20 subscribers"))
        print("SFU memory per video consumer: \(m.kilobytes) KB")
    }
}
