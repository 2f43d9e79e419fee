import Foundation
import Testing

@testable import Scenario

/// Which scenarios can run in a Janus VideoRoom (the runner itself is exercised against a real Janus
/// in Tests/Interop/test_janus_backend_scenario.py).
@Suite("Janus scenarios")
struct JanusScenarioTests {
    static let examples = examplesDirectory

    @Test func theJanusExampleIsAccepted() throws {
        let scenario = try Scenario.load(path: Self.examples + "/janus-stage.json")
        #expect(JanusScenarioRunner.unsupported(scenario) == [])
    }

    @Test func roomOnlyFeaturesAreNamedWithTheirLine() throws {
        let text = """
            {
              "name": "x",
              "bots": [{"id": "a"}, {"id": "b", "consume": "manual"}],
              "steps": [
                {"action": "join", "bot": "a"},
                {"action": "invite", "bot": "a", "participant": "b"},
                {"expect": "pinned", "participant": "a", "cam": true}
              ],
              "expect": [{"expect": "event", "bot": "a", "event": "roomJoined"}]
            }
            """
        let problems = JanusScenarioRunner.unsupported(try Scenario.parse(Array(text.utf8), path: "x.json"))
        #expect(problems.count == 4, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("x.json:3: bots[1]: consume 'manual'") })
        #expect(problems.contains { $0.hasPrefix("x.json:6: steps[1]: action 'invite'") })
        #expect(problems.contains { $0.hasPrefix("x.json:7: steps[2]: expectation 'pinned'") })
        #expect(problems.contains { $0.hasPrefix("x.json:9: expect[0]: expectation 'event'") })
    }

    @Test func theSeedExamplesAreRefused() throws {
        for name in ["seed000-stage-invite.json", "seed003-consume.json"] {
            let scenario = try Scenario.load(path: Self.examples + "/" + name)
            #expect(!JanusScenarioRunner.unsupported(scenario).isEmpty, "\(name)")
        }
    }
}
