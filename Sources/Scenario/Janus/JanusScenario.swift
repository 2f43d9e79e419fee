import Agent
import Foundation
import Janus
import Signaling
import Understudy

/// Runs a scenario in a Janus VideoRoom (`understudy scenario --server janus://HOST:PORT/ROOM`).
///
/// Each bot is a ``JanusAgent`` named after its id (Janus's `display`): `SEND_AND_RECV` bots publish,
/// every bot consumes every publisher and records when asked. Only the part of the scenario
/// vocabulary that a VideoRoom has is accepted (``unsupported(_:)`` lists the rest, which the CLI
/// refuses before anything runs): `join`, `leave`, `sleep`; `onStage`, `present`, `absent` (Janus shows
/// only publishers, so present means on stage), `frames`, `framesStop` and `noErrors`.
public enum JanusScenarioRunner {
    /// Why each step, expectation or bot of `scenario` cannot run against Janus (`FILE:LINE: field: why`).
    public static func unsupported(_ scenario: Scenario) -> [String] {
        var out: [String] = []
        func refuse(_ line: Int, _ field: String, _ why: String) {
            out.append("\(scenario.path):\(line): \(field): \(why) has no Janus counterpart (docs/janus.md)")
        }
        for (i, bot) in scenario.bots.enumerated() {
            if bot.mode.canonical == .SIGNALLING_ONLY { refuse(bot.line, "bots[\(i)]", "mode SIGNALLING_ONLY") }
            if bot.multiStream { refuse(bot.line, "bots[\(i)]", "multiStream (simulcast)") }
            if bot.consume == .manual { refuse(bot.line, "bots[\(i)]", "consume 'manual'") }
            if !bot.subscribe.isEmpty { refuse(bot.line, "bots[\(i)]", "PubSub 'subscribe'") }
        }
        for step in scenario.steps {
            let field = "steps[\(step.index)]"
            if step.expectError != nil { refuse(step.line, field, "'expectError'") }
            switch step.kind {
            case .action(let action):
                switch action {
                case .join(_, let mode, _, _):
                    if mode?.canonical == .SIGNALLING_ONLY { refuse(step.line, field, "mode SIGNALLING_ONLY") }
                case .leave, .sleep: break
                default: refuse(step.line, field, "action '\(Self.name(action))'")
                }
            case .expect(let e):
                if let why = Self.unsupported(e) { refuse(step.line, field, why) }
            }
        }
        for e in scenario.expectations {
            if let why = Self.unsupported(e) { refuse(e.line, e.field, why) }
        }
        return out
    }

    private static func unsupported(_ e: Expectation) -> String? {
        switch e.kind {
        case .onStage, .present, .absent, .frames, .framesStop, .noErrors: return nil
        case .inAudience: return "expectation 'inAudience' (Janus lists only publishers)"
        case .pinned: return "expectation 'pinned'"
        case .event: return "expectation 'event'"
        case .quality: return "quality expectations (the Janus agent reads no receiver statistics)"
        }
    }

    private static func name(_ action: Action) -> String {
        let text = "\(action)"
        return String(text.prefix { $0 != "(" })
    }

    /// Runs `scenario` (which ``unsupported(_:)`` accepted) in the Janus room `room`.
    public static func run(
        _ scenario: Scenario, room: JanusRoomURL, outputDirectory: String?,
        log environmentLog: @escaping @Sendable (String) -> Void = { _ in }
    ) async -> ScenarioResult {
        let started = Date()
        let outDir =
            outputDirectory
            ?? (NSTemporaryDirectory() as NSString).appendingPathComponent("understudy-scenario-\(UUID().uuidString)")
        let lines = EventLines(echo: environmentLog)
        let log: @Sendable (String) -> Void = lines.add
        // Titles only read the scenario and the bot specs.
        let titles = Context(
            scenario: scenario, bots: [:], order: scenario.bots.map(\.id), roomId: String(room.room), token: "",
            url: "", log: log)
        let bots = JanusBots(scenario: scenario, room: room, outDir: outDir, log: log)

        let cases = await ScenarioSteps(
            title: { step in
                if case .action(.join(let bot, let mode, _, _)) = step.kind {
                    // `titles` has no bots to look the default mode up in.
                    let spec = scenario.bots.first { $0.id == bot }
                    return "join \(bot) as \((mode ?? spec?.mode)?.rawValue ?? "?")"
                }
                return titles.title(step)
            },
            expectationTitle: titles.title, perform: { action, _ in try await bots.perform(action) },
            check: bots.check, log: log
        ).run(scenario)
        let recordings = await bots.shutdown()
        return ScenarioResult(
            name: scenario.name, path: scenario.path, cases: cases, seconds: Date().timeIntervalSince(started),
            eventLog: lines.all, recordings: recordings)
    }
}

/// The scenario's bots as Janus agents: joined ones, and those that left (kept for their counts).
// Safe: the bot lists are guarded by `lock`.
final class JanusBots: @unchecked Sendable {
    let scenario: Scenario
    let room: JanusRoomURL
    let outDir: String
    let log: @Sendable (String) -> Void
    private let lock = NSLock()
    private var agents: [String: JanusAgent] = [:]
    private var left: Set<String> = []

    init(scenario: Scenario, room: JanusRoomURL, outDir: String, log: @escaping @Sendable (String) -> Void) {
        self.scenario = scenario
        self.room = room
        self.outDir = outDir
        self.log = log
    }

    private func spec(_ id: String) throws -> ParticipantSpec {
        guard let spec = scenario.bots.first(where: { $0.id == id }) else {
            throw ScenarioStepError.unknownBot(id)
        }
        return spec
    }

    private func joined(_ id: String) throws -> JanusAgent {
        guard let agent = lock.withLock({ left.contains(id) ? nil : agents[id] }) else {
            throw ScenarioStepError.notInRoom(id)
        }
        return agent
    }

    /// Joined bots, or the named ones.
    private func viewers(_ list: [String]?) -> [(String, JanusAgent)] {
        lock.withLock {
            let ids = list ?? scenario.bots.map(\.id).filter { agents[$0] != nil && !left.contains($0) }
            return ids.compactMap { id in agents[id].map { (id, $0) } }
        }
    }

    func perform(_ action: Action) async throws {
        switch action {
        case .join(let id, let mode, let video, let audio):
            let spec = try spec(id)
            if lock.withLock({ agents[id] != nil && !left.contains(id) }) {
                throw ScenarioStepError.alreadyJoined(id)
            }
            var options = JanusAgent.Options(url: room)
            options.display = id
            options.publish = (mode ?? spec.mode).canonical == .SEND_AND_RECV
            options.video = video ?? spec.video
            options.audio = audio ?? spec.audio
            options.consume = .all
            if spec.record { options.recordDirectory = (outDir as NSString).appendingPathComponent(id) }
            let log = self.log
            let agent = JanusAgent(options: options, log: { log("\(id): \($0)") })
            lock.withLock {
                agents[id] = agent
                left.remove(id)
            }
            do { try await agent.start() } catch {
                await agent.stop()
                throw ScenarioStepError.joinFailed(bot: id, detail: "", cause: error)
            }
        case .leave(let id):
            let agent = try joined(id)
            _ = lock.withLock { left.insert(id) }
            await agent.stop()
        case .sleep(let seconds):
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
        default:
            throw ScenarioStepError.notSupported("not available with a Janus room")
        }
    }

    /// Nil when `e` holds within its timeout, else what was seen last.
    func check(_ e: Expectation) async -> String? {
        let deadline = Date().addingTimeInterval(e.timeout)
        var baseline: Int?
        var quietSince: (count: Int, at: Date)?
        while true {
            let why: String?
            switch e.kind {
            case .onStage(let p, let list), .present(let p, let list):
                why =
                    viewers(list).lazy.compactMap { id, agent in
                        self.sees(id, agent, p)
                            ? nil : "\(id) does not see \(p) on stage (publishers: \(agent.publisherNames))"
                    }.first
            case .absent(let p, let list):
                why =
                    viewers(list).lazy.compactMap { id, agent in
                        id != p && self.sees(id, agent, p) ? "\(id) still sees \(p)" : nil
                    }.first
            case .frames(let bot, let p, let kind, let atLeast, let atMost, let more):
                let count = await frames(bot, p, kind)
                if baseline == nil { baseline = count }
                if let atLeast, count < atLeast {
                    why = "\(count) \(kind.rawValue) frames from \(p), want ≥ \(atLeast)"
                } else if let atMost, count > atMost {
                    // An upper bound only ever gets worse: fail now.
                    return "\(count) \(kind.rawValue) frames from \(p), want ≤ \(atMost)"
                } else if let more, count - (baseline ?? 0) < more {
                    why = "\(count - (baseline ?? 0)) new \(kind.rawValue) frames from \(p), want \(more) more"
                } else {
                    why = nil
                }
            case .framesStop(let bot, let p, let kind, let quiet):
                let count = await frames(bot, p, kind)
                if let q = quietSince, q.count == count {
                    why =
                        Date().timeIntervalSince(q.at) >= quiet
                        ? nil : "\(kind.rawValue) frames from \(p) still growing"
                } else {
                    quietSince = (count, Date())
                    why = "\(kind.rawValue) frames from \(p) still growing (\(count))"
                }
            case .noErrors(let list, _):
                why = viewers(list).lazy.compactMap { id, agent in agent.failure.map { "\(id): \($0)" } }.first
            case .inAudience, .pinned, .event, .quality:
                return "not available with a Janus room"
            }
            guard let why else { return nil }
            if Date() >= deadline { return "timed out: \(why)" }
            try? await Task.sleep(nanoseconds: 100_000_000)
        }
    }

    private func sees(_ viewer: String, _ agent: JanusAgent, _ participant: String) -> Bool {
        viewer == participant ? agent.isPublishing : agent.publisherNames.contains(participant)
    }

    private func frames(_ bot: String, _ participant: String, _ kind: FrameKind) async -> Int {
        guard let agent = lock.withLock({ agents[bot] }) else { return 0 }
        let counts = await agent.frameCounts()[participant] ?? (0, 0)
        switch kind {
        case .video: return counts.video
        case .audio: return counts.audio
        case .any: return counts.video + counts.audio
        }
    }

    /// Stops every bot still in the room; returns the recordings by bot, then participant.
    func shutdown() async -> [String: [String: String]] {
        let all = lock.withLock { agents }
        var recordings: [String: [String: String]] = [:]
        for (id, agent) in all {
            if lock.withLock({ !left.contains(id) }) { await agent.stop() }
            if !agent.recordingPaths.isEmpty { recordings[id] = agent.recordingPaths }
        }
        return recordings
    }
}
