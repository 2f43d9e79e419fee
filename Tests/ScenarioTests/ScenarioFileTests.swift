import Foundation
import RTC
import Testing

@testable import Scenario

/// The repository's `examples/` directory.
let examplesDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("examples").path

/// Parses `text` as the scenario file `bad.json` and returns the refusal.
func refusal(_ text: String) -> ScenarioFileError? {
    do {
        _ = try Scenario.parse(Array(text.utf8), path: "bad.json")
        return nil
    } catch {
        return error
    }
}

let minimalBots = """
    "bots": [
      {"id": "host", "mode": "SEND_AND_RECV"},
      {"id": "viewer", "mode": "RECV_ONLY"}
    ],
    """

@Suite struct ScenarioFileTests {
    @Test func examplesParse() throws {
        for file in ["seed000-stage-invite.json", "seed003-consume.json"] {
            let s = try Scenario.load(path: examplesDirectory + "/" + file)
            #expect(!s.steps.isEmpty)
            #expect(s.bots.count >= 2)
        }
        let s = try Scenario.load(path: examplesDirectory + "/seed000-stage-invite.json")
        #expect(s.bots.map(\.id) == ["host", "viewer", "observer"])
        #expect(s.bots[1].mode == .RECV_ONLY && s.bots[1].consume == .stage && s.bots[1].record)
        guard case .action(.invite(let bot, let participant, let mode)) = s.steps[7].kind else {
            Issue.record("steps[7] should be the invite")
            return
        }
        #expect(bot == "host" && participant == "viewer" && mode == .SEND_AND_RECV)
    }

    @Test func unknownActionNamesFileLineAndField() throws {
        let e = try #require(
            refusal(
                """
                {
                  "name": "x",
                  \(minimalBots)
                  "steps": [
                    {"action": "join", "bot": "host"},
                    {"action": "join", "bot": "viewer"},
                    {"action": "jump", "bot": "host"}
                  ]
                }
                """))
        #expect(e.file == "bad.json")
        #expect(e.line == 10)
        #expect(e.field == "steps[2].action")
        #expect(
            e.description.hasPrefix(
                "bad.json:10: field 'steps[2].action': unknown action 'jump' (expected one of join,"))
    }

    @Test func missingFieldWrongTypeBadModeUnknownBot() throws {
        let missing = try #require(
            refusal(
                """
                {"name": "x", \(minimalBots)
                 "steps": [
                   {"action": "invite", "bot": "host"}
                 ]}
                """))
        #expect(missing.line == 6 && missing.field == "steps[0].participant")
        #expect(missing.message == "missing required field")

        let wrongType = try #require(
            refusal(
                """
                {"name": "x", \(minimalBots)
                 "steps": [{"action": "sleep",
                            "seconds": "two"}]}
                """))
        #expect(wrongType.line == 6 && wrongType.field == "steps[0].seconds")
        #expect(wrongType.message.contains("expected a number, found a string"))

        let badMode = try #require(
            refusal(
                """
                {"name": "x",
                 "bots": [{"id": "a", "mode": "SPEAKER"}],
                 "steps": [{"action": "join", "bot": "a"}]}
                """))
        #expect(badMode.line == 2 && badMode.field == "bots[0].mode")
        #expect(badMode.message.contains("unknown mode 'SPEAKER' (expected one of SEND_AND_RECV, RECV_ONLY"))

        let unknownBot = try #require(
            refusal(
                """
                {"name": "x", \(minimalBots)
                 "steps": [{"action": "join", "bot": "host"}],
                 "expect": [
                   {"expect": "frames", "bot": "hots", "participant": "viewer"}
                 ]}
                """))
        #expect(unknownBot.line == 7 && unknownBot.field == "expect[0].bot")
        #expect(unknownBot.message == "unknown bot 'hots' (bots: host, viewer)")

        let unknownParticipant = try #require(
            refusal(
                """
                {"name": "x", \(minimalBots)
                 "steps": [{"action": "pin", "bot": "host", "participant": "stranger"}]}
                """))
        #expect(unknownParticipant.field == "steps[0].participant")
        #expect(unknownParticipant.message.contains("unknown participant 'stranger'"))

        let typo = try #require(
            refusal(
                """
                {"name": "x", \(minimalBots)
                 "steps": [{"action": "sleep", "seconds": 1,
                   "timout": 3}]}
                """))
        #expect(typo.line == 6 && typo.field == "steps[0].timout" && typo.message == "unknown field")

        let duplicate = try #require(
            refusal(#"{"name": "x", "bots": [{"id": "a"}, {"id": "a"}], "steps": [{"action": "leave", "bot": "a"}]}"#))
        #expect(duplicate.field == "bots[1].id" && duplicate.message.contains("duplicate bot id"))

        let noBots = try #require(refusal(#"{"name": "x", "steps": []}"#))
        #expect(noBots.field == "bots" && noBots.message == "missing required field")
    }

    @Test func syntaxErrorsGiveTheirLine() throws {
        let missingComma = try #require(
            refusal(
                """
                {
                  "name": "x",
                  "bots": [{"id": "a"}]
                  "steps": []
                }
                """))
        #expect(missingComma.line == 4 && missingComma.field == nil)
        #expect(missingComma.description == "bad.json:4: invalid JSON: expected ',' or '}' in an object, found '\"'")

        let unterminated = try #require(refusal("{\n\"name\": \"x\n\"}"))
        #expect(unterminated.line == 2 && unterminated.message.contains("unterminated string"))

        let trailing = try #require(refusal("{\"a\": [1, 2,]\n}"))
        #expect(trailing.line == 1 && trailing.message.contains("expected a value, found ']'"))

        let empty = try #require(refusal("\n\n"))
        #expect(empty.line == 3 && empty.message.contains("end of file"))

        var missingFile: ScenarioFileError?
        do throws(ScenarioFileError) {
            _ = try Scenario.load(path: "/nonexistent/scenario.json")
        } catch { missingFile = error }
        #expect(missingFile?.description == "/nonexistent/scenario.json:0: cannot read the file")
    }
}

@Suite struct LineJSONTests {
    @Test func valuesAndLines() throws {
        let doc = try LineJSONReader.parse(
            Array("{\"a\": [1, -2.5e2, true, null],\n \"b\": \"x\\n\\u00e9\\ud83d\\ude00\\\"\",\n\n \"c\": {}}".utf8))
        #expect(doc.line == 1)
        guard case .array(let items)? = doc["a"]?.value, items.count == 4 else {
            Issue.record("a should be an array of 4")
            return
        }
        if case .number(let n) = items[1].value { #expect(n == -250) } else { Issue.record("items[1] not a number") }
        #expect(doc["b"]?.line == 2)
        if case .string(let s)? = doc["b"]?.value { #expect(s == "x\né😀\"") } else { Issue.record("b not a string") }
        #expect(doc["c"]?.line == 4)
    }

    @Test func refusesMalformedInput() {
        for bad in [
            "01", "1.", "-", "tru", "\"\\x\"", "\"\\ud800\"", "[1 2]", "{\"a\" 1}", "{1: 2}", "1 2", "\"a\u{1}\"",
        ] {
            #expect(throws: LineJSONSyntaxError.self, "\(bad)") { try LineJSONReader.parse(Array(bad.utf8)) }
        }
        // Deep nesting is refused, not a stack overflow.
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: LineJSONSyntaxError.self) { try LineJSONReader.parse(Array(deep.utf8)) }
        #expect(throws: LineJSONSyntaxError.self) { try LineJSONReader.parse(Array("{\"a\":1,\"a\":2}".utf8)) }
    }
}

/// Impairment in scenario files: a participant's `impair` and the `impair` step's `profile` take a
/// preset name or the JSON form; bad ones name the field and its line.
@Suite struct ScenarioImpairmentFileTests {
    @Test func participantsAndStepsTakePresetsAndJSON() throws {
        let s = try Scenario.parse(
            Array(
                """
                {
                  "name": "links",
                  "bots": [
                    {"id": "host", "impair": {"up": {"rateKbps": 800, "burst": {"p": 0.01, "r": 0.2}}}},
                    {"id": "viewer", "mode": "RECV_ONLY", "impair": "lossy-wifi"},
                    {"id": "clean", "impair": "none"}
                  ],
                  "steps": [
                    {"action": "join", "bot": "viewer"},
                    {"action": "impair", "bot": "viewer", "profile": "congested", "seed": 9},
                    {"action": "impair", "bot": "viewer", "profile": {"down": {"delayMs": 250}}},
                    {"action": "impair", "bot": "viewer", "profile": "none"},
                    {"action": "impair", "bot": "viewer", "drop": 0.5}
                  ]
                }
                """.utf8), path: "links.json")
        #expect(s.bots[0].impairment?.up.rateKbps == 800 && s.bots[0].impairment?.up.burst?.r == 0.2)
        #expect(s.bots[1].impairment == Impairment.preset(named: "lossy-wifi"))
        #expect(s.bots[2].impairment == nil)
        var actions: [(Impairment?, String)] = []
        for step in s.steps {
            if case .action(.impair(_, let impairment, let summary)) = step.kind {
                actions.append((impairment, summary))
            }
        }
        #expect(actions.count == 4)
        #expect(actions[0].0 == Impairment.preset(named: "congested")!.withSeed(9))
        #expect(actions[0].1 == "viewer's link becomes congested")
        #expect(
            actions[1].0 == Impairment(down: LinkImpairment(delayMs: 250))
                && actions[1].1 == "viewer's link becomes custom")
        #expect(actions[2].0 == nil && actions[2].1 == "viewer impairment off")
        #expect(
            actions[3].0 == Impairment(receiveDropRate: 0.5) && actions[3].1 == "viewer drops 50% of its received media"
        )
    }

    @Test(arguments: [
        (#"{"id": "viewer", "impair": "dial-up"}"#, "[]", "bots[0].impair", "unknown preset 'dial-up'"),
        (
            #"{"id": "viewer", "impair": 3}"#, "[]", "bots[0].impair",
            "expected a preset name or an object, found a number"
        ),
        (
            #"{"id": "viewer", "impair": {"down": {"loss": 2}}}"#, "[]", "bots[0].impair.down.loss",
            "expected a number in [0, 1]"
        ),
        (
            #"{"id": "viewer"}"#, #"[{"action": "impair", "bot": "viewer", "profile": {"up": {"burst": {"p": 1}}}}]"#,
            "steps[0].profile.up.burst", "expected both 'p' and 'r'"
        ),
        (
            #"{"id": "viewer"}"#, #"[{"action": "impair", "bot": "viewer", "profile": "3g", "drop": 0.1}]"#,
            "steps[0].drop", "give either 'profile' or 'drop'"
        ),
    ])
    func badImpairmentsNameTheField(bot: String, steps: String, field: String, message: String) throws {
        let e = try #require(refusal(#"{"name": "x", "bots": [\#(bot)], "steps": \#(steps)}"#))
        #expect(e.field == field, "\(e)")
        #expect(e.message.hasPrefix(message), "\(e)")
        #expect(e.line == 1)
    }
}
