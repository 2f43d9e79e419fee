import Foundation
import FoundationXML
import Media
import RoomServer
import TestSupport
import Testing

@testable import Scenario

/// An embedded room server on 127.0.0.1 with ephemeral ports, as `understudy scenario` starts it.
func startServer() throws -> RoomServer { try startTestServer() }

func run(_ scenario: Scenario, on server: RoomServer) async -> ScenarioResult {
    let out = NSTemporaryDirectory() + "scenario-test-\(UUID().uuidString)"
    let result = await ScenarioRunner.run(
        scenario,
        environment: ScenarioEnvironment(signalingURL: server.signalingURL, secret: server.secret, outputDirectory: out)
    )
    if !result.passed {
        print(result.summary)
        print(result.eventLog.suffix(60).joined(separator: "\n"))
    }
    return result
}

/// Parses JUnit XML strictly (XMLDocument refuses malformed markup) and returns the test cases.
func junitCases(_ xml: String) throws -> (root: XMLElement, cases: [XMLElement]) {
    let doc = try XMLDocument(xmlString: xml, options: [])
    let root = try #require(doc.rootElement())
    let cases = try root.nodes(forXPath: "//testcase").compactMap { $0 as? XMLElement }
    return (root, cases)
}

@Suite struct JUnitTests {
    @Test func reportParsesBackWithFailuresAndSkips() throws {
        let result = ScenarioResult(
            name: "demo <&> \"quotes\"", path: "x.json",
            cases: [
                ScenarioCaseResult(field: "steps[0]", title: "join host", status: .passed, seconds: 0.5, line: 3),
                ScenarioCaseResult(
                    field: "steps[1]", title: "host invites viewer", status: .failed,
                    message: "steps[1] (line 4): timed out: <viewer> & \u{1}stuff", seconds: 5, line: 4),
                ScenarioCaseResult(
                    field: "expect[0]", title: "no errors", status: .skipped, message: "skipped: steps[1] failed",
                    seconds: 0, line: 9),
            ], seconds: 5.5, eventLog: ["host: roomJoined <x>"], recordings: [:])
        let (root, cases) = try junitCases(result.junitXML())
        #expect(root.name == "testsuites")
        #expect(root.attribute(forName: "tests")?.stringValue == "3")
        #expect(root.attribute(forName: "failures")?.stringValue == "1")
        #expect(root.attribute(forName: "skipped")?.stringValue == "1")
        #expect(cases.count == 3)
        #expect(cases[0].attribute(forName: "name")?.stringValue == "steps[0] join host")
        #expect(cases[0].attribute(forName: "time")?.stringValue == "0.500")
        let failure = try #require(cases[1].elements(forName: "failure").first)
        #expect(failure.attribute(forName: "message")?.stringValue?.contains("timed out: <viewer> & ") == true)
        #expect(cases[2].elements(forName: "skipped").count == 1)
        let suite = try #require(root.elements(forName: "testsuite").first)
        #expect(suite.attribute(forName: "name")?.stringValue == "demo <&> \"quotes\"")
        #expect(suite.elements(forName: "system-out").first?.stringValue == "host: roomJoined <x>")
    }
}

/// The examples and failing scenarios against the embedded server. Serialized: each runs several
/// bots with real media, and the machine is small.
@Suite(.serialized) struct ScenarioRunTests {
    @Test func seed000ExamplePasses() async throws {
        let server = try startServer()
        defer { server.stop() }
        let scenario = try Scenario.load(path: examplesDirectory + "/seed000-stage-invite.json")
        let result = await run(scenario, on: server)
        #expect(result.passed)
        #expect(result.cases.count == scenario.steps.count + scenario.expectations.count)
        // The host recorded the viewer after the invite; the file is there.
        let hostFile = try #require(result.recordings["host"]?["viewer"])
        let reader = try WebMReader(path: hostFile)
        #expect(reader.frames.filter { $0.kind == .video }.count >= 30)
        #expect(reader.frames.filter { $0.kind == .audio }.count >= 25)
        let (_, cases) = try junitCases(result.junitXML())
        #expect(cases.count == result.cases.count)
        #expect(cases.allSatisfy { $0.elements(forName: "failure").isEmpty })
    }

    @Test func seed003ExamplePasses() async throws {
        let server = try startServer()
        defer { server.stop() }
        let scenario = try Scenario.load(path: examplesDirectory + "/seed003-consume.json")
        let result = await run(scenario, on: server)
        #expect(result.passed)
        #expect(result.recordings["viewer"]?["host"] != nil)
    }

    @Test func failingExpectationsFailWithTheirStep() async throws {
        let server = try startServer()
        defer { server.stop() }
        // Nobody invites the viewer, so it never reaches the stage and the host never receives it.
        let text = """
            {
              "name": "must fail",
              "timeout": 15,
              "bots": [
                {"id": "host", "mode": "SEND_AND_RECV", "video": "none", "audio": "none"},
                {"id": "viewer", "mode": "RECV_ONLY"}
              ],
              "steps": [
                {"action": "join", "bot": "host"},
                {"action": "join", "bot": "viewer"},
                {"expect": "onStage", "participant": "viewer", "timeout": 2},
                {"expect": "frames", "bot": "host", "participant": "viewer", "atLeast": 1, "timeout": 2},
                {"action": "pin", "bot": "host", "participant": "ghost"},
                {"action": "leave", "bot": "viewer"}
              ],
              "participants": ["ghost"],
              "expect": [{"expect": "noErrors"}]
            }
            """
        let scenario = try Scenario.parse(Array(text.utf8), path: "fail.json")
        let result = await run(scenario, on: server)
        #expect(!result.passed)
        #expect(result.cases.map(\.status) == [.passed, .passed, .failed, .failed, .failed, .skipped, .skipped])
        let stage = try #require(result.cases[2].message)
        #expect(stage.hasPrefix("steps[2] (line 11): not true after 2.0 s:"))
        #expect(stage.contains("audience [viewer]"))
        #expect(result.cases[3].message?.contains("host has 0 any frames from viewer, wants at least 1") == true)
        #expect(result.cases[4].message?.contains("host does not see participant 'ghost'") == true)
        #expect(result.cases[5].message == "skipped: steps[4] failed")
        let (root, cases) = try junitCases(result.junitXML())
        #expect(root.attribute(forName: "failures")?.stringValue == "3")
        #expect(cases.filter { !$0.elements(forName: "failure").isEmpty }.count == 3)
    }

    @Test func expectedErrorsAndUnexpectedSuccess() async throws {
        let server = try startServer()
        defer { server.stop() }
        let text = """
            {
              "name": "errors",
              "bots": [{"id": "host", "video": "none", "audio": "none"}],
              "steps": [
                {"action": "join", "bot": "host"},
                {"action": "changeMode", "bot": "host", "mode": "SEND_AND_RECV", "expectError": 3054},
                {"action": "changeMode", "bot": "host", "mode": "RECV_ONLY", "expectError": 3054}
              ],
              "expect": [{"expect": "event", "bot": "host", "event": "error", "code": 3054}]
            }
            """
        let result = await run(try Scenario.parse(Array(text.utf8), path: "errors.json"), on: server)
        #expect(result.cases.map(\.status) == [.passed, .passed, .failed, .skipped])
        #expect(result.cases[2].message?.contains("succeeded, but error 3054 was expected") == true)
    }

    @Test func pubSubMessagesAndSinceStep() async throws {
        let server = try startServer()
        defer { server.stop() }
        let text = """
            {
              "name": "pubsub",
              "bots": [
                {"id": "a", "video": "none", "audio": "none"},
                {"id": "b", "mode": "SIGNALLING_ONLY", "subscribe": ["chat"]}
              ],
              "steps": [
                {"action": "join", "bot": "a"},
                {"action": "join", "bot": "b"},
                {"action": "publish", "bot": "a", "topic": "chat", "message": "one"},
                {"action": "wait", "bot": "b", "event": "message", "topic": "chat", "participant": "a", "message": "one"},
                {"action": "publish", "bot": "a", "topic": "chat", "message": "two"},
                {"action": "wait", "bot": "b", "event": "message", "message": "two", "sinceStep": 4},
                {"expect": "event", "bot": "b", "event": "message", "message": "one", "sinceStep": 4, "timeout": 1},
                {"expect": "present", "participant": "b", "on": ["a"]}
              ]
            }
            """
        let result = await run(try Scenario.parse(Array(text.utf8), path: "pubsub.json"), on: server)
        // "one" arrived during step 3, so the sinceStep 4 expectation must not see it.
        #expect(result.cases.map(\.status) == [.passed, .passed, .passed, .passed, .passed, .passed, .failed, .passed])
    }

    /// Issue 31 item 2 in the scenario bots: peers `cam.a` and `cam_a` both became `cam_a.webm`,
    /// and the later one truncated the earlier one's recording. Now they get distinct files.
    @Test func lookAlikePeersGetDistinctRecordings() async throws {
        let dir = NSTemporaryDirectory() + "scenario-names-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let text = """
            {
              "name": "names",
              "bots": [
                {"id": "cam.a"},
                {"id": "cam_a"},
                {"id": "rec", "mode": "RECV_ONLY", "consume": "all", "record": true}
              ],
              "steps": [
                {"action": "join", "bot": "cam.a"},
                {"action": "join", "bot": "cam_a"},
                {"action": "join", "bot": "rec"},
                {"expect": "frames", "bot": "rec", "participant": "cam.a", "kind": "video", "atLeast": 30, "timeout": 30},
                {"expect": "frames", "bot": "rec", "participant": "cam_a", "kind": "video", "atLeast": 30, "timeout": 30}
              ]
            }
            """
        let path = dir + "/names.json"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let server = try startServer()
        defer { server.stop() }
        let result = await run(try Scenario.load(path: path), on: server)
        #expect(result.passed)
        let files = try #require(result.recordings["rec"])
        let dotted = try #require(files["cam.a"])
        let underscored = try #require(files["cam_a"])
        #expect(dotted != underscored)
        for file in [dotted, underscored] {
            let reader = try WebMReader(path: file)
            #expect(reader.frames.filter { $0.kind == .video }.count >= 30, "\(file)")
        }
    }

    @Test func fileSourcesArePublished() async throws {
        let dir = NSTemporaryDirectory() + "scenario-files-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Real VP8 and Opus files made by ffmpeg; the scenario names them relative to itself.
        for (args, name) in [
            (
                ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-t", "2", "-c:v", "libvpx", "-g", "30"],
                "clip.ivf"
            ),
            (["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "2", "-c:a", "libopus"], "clip.ogg"),
        ] {
            let made = try runTool("ffmpeg", ["-v", "error", "-y"] + args + [dir + "/" + name])
            #expect(made.status == 0, "\(made.err)")
        }
        let text = """
            {
              "name": "files",
              "bots": [
                {"id": "caster", "video": "clip.ivf", "audio": "clip.ogg"},
                {"id": "viewer", "mode": "RECV_ONLY", "consume": "all"}
              ],
              "steps": [
                {"action": "join", "bot": "caster"},
                {"action": "join", "bot": "viewer"},
                {"expect": "frames", "bot": "viewer", "participant": "caster", "kind": "video", "atLeast": 30, "timeout": 30},
                {"expect": "frames", "bot": "viewer", "participant": "caster", "kind": "audio", "atLeast": 50, "timeout": 30}
              ]
            }
            """
        let path = dir + "/files.json"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let scenario = try Scenario.load(path: path)
        #expect(scenario.bots[0].video == dir + "/clip.ivf")
        let server = try startServer()
        defer { server.stop() }
        let result = await run(scenario, on: server)
        #expect(result.passed)

        // A missing file is a malformed scenario, reported at its line.
        let bad = text.replacingOccurrences(of: "clip.ivf", with: "missing.ivf")
        let e = try #require(refusal(bad))
        #expect(e.line == 4 && e.field == "bots[0].video")
        #expect(e.message.contains("'missing.ivf' is not testsrc, none or a readable file"))
    }
}
