import Foundation

/// The part of a scenario run that does not depend on the server: steps in order, an action step that
/// fails skips the rest, then the expectations that hold "after the last step". Each backend (our room
/// server through the SDK, a Janus VideoRoom) says how to name, perform and check.
struct ScenarioSteps {
    /// The step's title in the report.
    var title: (Step) -> String
    /// The expectation's title in the report.
    var expectationTitle: (Expectation) -> String
    /// Performs an action step; throws what the step failed with.
    var perform: @Sendable (Action, Step) async throws -> Void
    /// Nil when the expectation holds, else why not.
    var check: (Expectation) async -> String?
    /// Whether the error a step threw is the one its `expectError` names.
    var errorMatches: (Error, String) -> Bool = { _, _ in false }
    /// Called before each step runs (the SDK backend stamps events with the step index).
    var willRun: (Int) -> Void = { _ in }
    var log: @Sendable (String) -> Void

    func run(_ scenario: Scenario) async -> [ScenarioCaseResult] {
        var cases: [ScenarioCaseResult] = []
        var abortedBy: Int?
        func skipped(_ field: String, _ title: String, line: Int) -> ScenarioCaseResult? {
            guard let abortedBy else { return nil }
            return ScenarioCaseResult(
                field: field, title: title, status: .skipped, message: "skipped: steps[\(abortedBy)] failed",
                seconds: 0, line: line)
        }
        func result(
            _ field: String, _ title: String, logLabel: String, failure: String?, message: String?, since t0: Date,
            line: Int
        ) -> ScenarioCaseResult {
            if let failure { log("\(logLabel) failed: \(failure)") }
            return ScenarioCaseResult(
                field: field, title: title, status: failure == nil ? .passed : .failed, message: message,
                seconds: Date().timeIntervalSince(t0), line: line)
        }
        for step in scenario.steps {
            willRun(step.index)
            let field = "steps[\(step.index)]"
            let title = title(step)
            if let skip = skipped(field, title, line: step.line) {
                cases.append(skip)
                continue
            }
            log("\(field) \(title)")
            let t0 = Date()
            var failure: String?
            switch step.kind {
            case .action(let action):
                do {
                    let perform = self.perform
                    try await withTimeout(step.timeout, what: title) { try await perform(action, step) }
                    if let wanted = step.expectError { failure = "succeeded, but error \(wanted) was expected" }
                } catch {
                    if let wanted = step.expectError, errorMatches(error, wanted) {
                        failure = nil
                    } else {
                        failure = "\(error)"
                    }
                }
                if failure != nil { abortedBy = step.index }
            case .expect(let e):
                failure = await check(e)
            }
            cases.append(
                result(
                    field, title, logLabel: field, failure: failure,
                    message: failure.map { "\(field) (line \(step.line)): \($0)" },
                    since: t0, line: step.line))
        }
        willRun(scenario.steps.count)
        for (i, e) in scenario.expectations.enumerated() {
            let title = expectationTitle(e)
            if let skip = skipped(e.field, title, line: e.line) {
                cases.append(skip)
                continue
            }
            log("expect[\(i)] \(title)")
            let t0 = Date()
            let failure = await check(e)
            cases.append(
                result(
                    e.field, title, logLabel: "expect[\(i)]", failure: failure,
                    message: failure.map { "\(e.field) (line \(e.line)), after the last step: \($0)" }, since: t0,
                    line: e.line))
        }
        return cases
    }
}
