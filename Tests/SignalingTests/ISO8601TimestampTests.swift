import Foundation
import Testing

@testable import Signaling

@Suite struct ISO8601TimestampTests {
    @Test func formatsKnownInstantsInUTC() {
        #expect(ISO8601Timestamp.string(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
        // 2026-12-03T06:32:18.125Z
        let instant = Date(timeIntervalSince1970: 1_796_279_538.125)
        #expect(ISO8601Timestamp.string(instant) == "2026-12-03T06:32:18Z")
        #expect(ISO8601Timestamp.string(instant, milliseconds: true) == "2026-12-03T06:32:18.125Z")
        // A leap day, and a fraction that must not round up into the next second.
        let leap = Date(timeIntervalSince1970: 951_868_799.9999)
        #expect(ISO8601Timestamp.string(leap, milliseconds: true) == "2000-02-29T23:59:59.999Z")
        #expect(
            ISO8601Timestamp.string(Date(timeIntervalSince1970: -1), milliseconds: true) == "1969-12-31T23:59:59.000Z")
    }

    @Test func agreesWithFoundationsParser() throws {
        // Foundation's own parser, on one thread, reads back what we wrote.
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for seconds in stride(from: 1_000_000_000.0, to: 2_000_000_000.0, by: 86_399_937.5) {
            let text = ISO8601Timestamp.string(Date(timeIntervalSince1970: seconds), milliseconds: true)
            let back = try #require(parser.date(from: text), "\(text)")
            #expect(abs(back.timeIntervalSince1970 - seconds) < 0.001, "\(text)")
        }
    }

    @Test func isSafeFromManyThreadsAtOnce() async {
        // The reason this type exists: agents stamp manifests and log lines from several threads.
        let instant = Date(timeIntervalSince1970: 1_796_279_538.5)
        let results = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    (0..<2_000).allSatisfy { _ in
                        ISO8601Timestamp.string(instant, milliseconds: true) == "2026-12-03T06:32:18.500Z"
                    }
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 8))
    }
}
