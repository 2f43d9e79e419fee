import Testing

@testable import Scenario

@Test func scenarioModuleLinks() { #expect(String(describing: ScenarioRunner.self) == "ScenarioRunner") }
