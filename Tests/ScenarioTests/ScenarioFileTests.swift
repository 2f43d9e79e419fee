import Foundation
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
