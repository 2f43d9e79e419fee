import Foundation
import Testing

@testable import Scenario

/// Quality expectations end to end: a viewer whose media is cut for a second (the `impair` step
/// drops every datagram its connections receive) fails `freezes ≤ 0`, `freezeDuration ≤ 600` and
/// `mos ≥ 4`, naming the metric, the bot and the track; the same scenario without the outage passes.
/// Without the outage only the frozen time is bounded, not the count: on this shared 2-core machine
/// a loop can stall for 200 ms now and then, which is a real (and counted) freeze, while a second
/// without media is at least 1,000 ms frozen.
@Suite(.serialized) struct ScenarioQualityTests {
    private func scenario(outage: Bool) throws -> Scenario {
        let cut =
            outage
            ? """
                {"action": "impair", "bot": "viewer", "drop": 1},
                {"action": "sleep", "seconds": 1},
                {"action": "impair", "bot": "viewer", "drop": 0},
            """ : ""
        let text = """
            {
              "name": "quality \(outage ? "with" : "without") an outage",
              "timeout": 30,
              "bots": [
                {"id": "host", "mode": "SEND_AND_RECV"},
                {"id": "viewer", "mode": "RECV_ONLY"}
              ],
              "steps": [
                {"action": "join", "bot": "host"},
                {"action": "join", "bot": "viewer"},
                {"expect": "frames", "bot": "viewer", "participant": "host", "kind": "video", "atLeast": 45},
                \(cut)
                {"expect": "frames", "bot": "viewer", "participant": "host", "kind": "video", "more": 45}
              ],
              "expect": [
                \(outage ? #"{"expect": "freezes", "bot": "viewer", "participant": "host", "atMost": 0},"# : "")
                {"expect": "freezeDuration", "bot": "viewer", "participant": "host", "atMost": 600},
                {"expect": "mos", "bot": "viewer", "atLeast": 4.0},
                {"expect": "quality", "metric": "fps", "bot": "viewer", "atLeast": 5}
              ]
            }
            """
        return try Scenario.parse(Array(text.utf8), path: "quality.json")
    }

    @Test func anOutageFailsFreezesAndMOSAndTheReportNamesMetricAndBot() async throws {
        let server = try startServer()
        defer { server.stop() }
        let s = try scenario(outage: true)
        let result = await run(s, on: server)
        let final = Array(result.cases.suffix(4))
        #expect(final.map(\.status) == [.failed, .failed, .failed, .passed])
        let freezes = try #require(final[0].message)
        #expect(freezes.contains("viewer: freezes "), "\(freezes)")
        #expect(freezes.contains("for video from host, wants ≤ 0"), "\(freezes)")
        let frozen = try #require(final[1].message)
        #expect(frozen.contains("viewer: freezeDuration "), "\(frozen)")
        #expect(frozen.contains(" ms for video from host, wants ≤ 600"), "\(frozen)")
        let mos = try #require(final[2].message)
        #expect(mos.contains("viewer: mos "), "\(mos)")
        #expect(mos.contains("for audio from host, wants ≥ 4"), "\(mos)")
        #expect(final[0].title == "freezes ≤ 0 for video tracks from host at viewer")
        let (_, cases) = try junitCases(result.junitXML())
        let failed = cases.compactMap {
            $0.elements(forName: "failure").first?.attribute(forName: "message")?.stringValue
        }
        #expect(failed.contains { $0.contains("viewer: freezes ") })
        #expect(failed.contains { $0.contains("viewer: mos ") })
    }

    @Test func withoutTheOutageTheSameExpectationsPass() async throws {
        let server = try startServer()
        defer { server.stop() }
        let result = await run(try scenario(outage: false), on: server)
        #expect(result.passed)
    }

    @Test func qualityExpectationsParseAndRefuseBadBounds() throws {
        let ok = """
            {"name": "q", "bots": [{"id": "a"}],
             "expect": [{"expect": "quality", "metric": "jitterBuffer", "atMost": 80},
                        {"expect": "concealment", "bot": "a", "atMost": 1.5, "kind": "audio"}]}
            """
        let s = try Scenario.parse(Array(ok.utf8), path: "q.json")
        guard case .quality(nil, nil, .any, .jitterBuffer, nil, 80) = s.expectations[0].kind else {
            Issue.record("\(s.expectations[0].kind)")
            return
        }
        guard case .quality("a", nil, .audio, .concealment, nil, 1.5) = s.expectations[1].kind else {
            Issue.record("\(s.expectations[1].kind)")
            return
        }
        for (bad, wants) in [
            (#"{"expect": "mos"}"#, "needs atLeast or atMost"),
            (#"{"expect": "quality", "metric": "smoothness", "atMost": 1}"#, "unknown quality metric 'smoothness'"),
            (#"{"expect": "fps", "atLeast": 30, "atMost": 20}"#, "is below atLeast"),
            (#"{"expect": "freezes", "bot": "b", "atMost": 0}"#, "unknown bot 'b'"),
        ] {
            let text = #"{"name": "q", "bots": [{"id": "a"}], "expect": ["# + bad + "]}"
            #expect(throws: ScenarioFileError.self) { try Scenario.parse(Array(text.utf8), path: "q.json") }
            do {
                _ = try Scenario.parse(Array(text.utf8), path: "q.json")
            } catch {
                #expect("\(error)".contains(wants), "\(error)")
            }
        }
        let impair = #"{"name": "q", "bots": [{"id": "a"}], "steps": [{"action": "impair", "bot": "a", "drop": 1.5}]}"#
        #expect(throws: ScenarioFileError.self) { try Scenario.parse(Array(impair.utf8), path: "q.json") }
    }
}
