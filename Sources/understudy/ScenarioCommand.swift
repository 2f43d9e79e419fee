// `understudy scenario`: being built (issue 6); the scenario helper replaces this file.
func runScenario(_ args: [String]) async { fail("scenario: not available in this build", code: 2) }
