import Foundation
import Media
import RTCWire
import RoomProtocol
import Signaling
import Understudy

/// Where a scenario runs: the room server and the secret its tokens are signed with.
public struct ScenarioEnvironment: Sendable {
    /// `ws://host:port` (or with `/v1/rtc`) of the room server.
    public var signalingURL: String
    /// HS256 secret for the bots' tokens.
    public var secret: String
    /// Recording bots write `<dir>/<bot>/<participant>.webm` here; nil uses a fresh temporary directory.
    public var outputDirectory: String?
    /// Progress lines (events, step starts); ignored by default.
    public var log: @Sendable (String) -> Void

    public init(
        signalingURL: String, secret: String, outputDirectory: String? = nil,
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.signalingURL = signalingURL
        self.secret = secret
        self.outputDirectory = outputDirectory
        self.log = log
    }
}

/// The outcome of one step or expectation: one JUnit test case.
public struct ScenarioCaseResult: Sendable {
    public enum Status: String, Sendable { case passed, failed, skipped }
    /// `steps[3]` or `expect[1]`.
    public var field: String
    /// A readable summary (`invite host → viewer`).
    public var title: String
    public var status: Status
    /// Why it failed or was skipped.
    public var message: String?
    public var seconds: Double
    public var line: Int
}

/// Everything a run produced.
public struct ScenarioResult: Sendable {
    public var name: String
    public var path: String
    public var cases: [ScenarioCaseResult]
    public var seconds: Double
    /// Every bot's events, in order, for the report.
    public var eventLog: [String]
    /// Recordings by bot id, then participant id.
    public var recordings: [String: [String: String]]

    /// True only when every step and expectation passed.
    public var passed: Bool { cases.allSatisfy { $0.status == .passed } }
    public var failures: [ScenarioCaseResult] { cases.filter { $0.status == .failed } }

    /// One line per case, then the verdict.
    public var summary: String {
        var lines: [String] = []
        for c in cases {
            let tag = c.status == .passed ? "PASS" : c.status == .failed ? "FAIL" : "SKIP"
            var line = "\(tag) \(c.field) \(c.title) (\(String(format: "%.2f", c.seconds)) s)"
            if let m = c.message { line += ": \(m)" }
            lines.append(line)
        }
        let failed = cases.filter { $0.status != .passed }.count
        lines.append(
            passed
                ? "scenario '\(name)': ok (\(cases.count) checks)"
                : "scenario '\(name)': FAILED (\(failed) of \(cases.count) checks did not pass)")
        return lines.joined(separator: "\n")
    }
}

/// Runs scenarios: bots join through the SDK, steps run in order, expectations are polled until they
/// hold or time out. An action step that fails skips the rest (later steps would only report noise).
public enum ScenarioRunner {
    public static func run(_ scenario: Scenario, environment: ScenarioEnvironment) async -> ScenarioResult {
        let started = Date()
        let clock = StepClock()
        let outDir =
            environment.outputDirectory
            ?? (NSTemporaryDirectory() as NSString).appendingPathComponent("understudy-scenario-\(UUID().uuidString)")
        let lines = EventLines(echo: environment.log)
        let log: @Sendable (String) -> Void = lines.add
        var bots: [String: ScenarioParticipant] = [:]
        for spec in scenario.bots {
            bots[spec.id] = ScenarioParticipant(
                spec: spec, clock: clock,
                recordDirectory: (outDir as NSString).appendingPathComponent(spec.id), log: log)
        }
        let roomId = scenario.room ?? "scenario-\(UUID().uuidString.prefix(8).lowercased())"
        let token = RoomToken.sign(
            RoomToken(
                apikey: "scenario", permissions: ["allow_join", "allow_mod"], roomId: roomId, lifetime: 6 * 3600),
            secret: environment.secret)
        let context = Context(
            scenario: scenario, bots: bots, order: scenario.bots.map(\.id), roomId: roomId, token: token,
            url: environment.signalingURL, log: log)

        let cases = await ScenarioSteps(
            title: context.title, expectationTitle: context.title,
            perform: { action, step in try await context.perform(action, step: step) }, check: context.check,
            errorMatches: Self.error(_:matches:), willRun: { clock.current = $0 }, log: log
        ).run(scenario)
        for id in context.order { await bots[id]?.shutdown() }
        var recordings: [String: [String: String]] = [:]
        for (id, bot) in bots where !bot.recordingPaths.isEmpty { recordings[id] = bot.recordingPaths }
        return ScenarioResult(
            name: scenario.name, path: scenario.path, cases: cases, seconds: Date().timeIntervalSince(started),
            eventLog: lines.all, recordings: recordings)
    }

    /// `wanted` is a code (`3035`) or a name (`ERROR_ACTION_PERFORMED_BEFORE_ROOM_JOINED`).
    static func error(_ error: Error, matches wanted: String) -> Bool {
        guard let e = error as? UnderstudyError else { return false }
        return String(e.code) == wanted || e.name == wanted
    }
}

/// A run's event log: each line stamped with the seconds since the log began (scenario runs and
/// `understudy demo`), and each event also handed to `echo` as it happens.
// Safe: the lines are guarded by `lock`; `start` and `echo` are immutable.
package final class EventLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    private let start = Date()
    private let echo: @Sendable (String) -> Void

    package init(echo: @escaping @Sendable (String) -> Void = { _ in }) { self.echo = echo }

    package func add(_ s: String) {
        let line = String(format: "%7.2f s  ", Date().timeIntervalSince(start)) + s
        lock.withLock { lines.append(line) }
        echo(s)
    }

    /// The stamped lines so far.
    package var all: [String] { lock.withLock { lines } }
}

/// Runs `body`, failing with a timeout error after `seconds` (the body is then cancelled).
func withTimeout(_ seconds: Double, what: String, _ body: @escaping @Sendable () async throws -> Void) async throws {
    let gate = OnceFlag()
    try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, Error>) in
        let work = Task {
            do {
                try await body()
                if gate.claim() { c.resume() }
            } catch {
                if gate.claim() { c.resume(throwing: error) }
            }
        }
        Task {
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            if gate.claim() {
                work.cancel()
                c.resume(throwing: ScenarioStepError.timedOut("after \(seconds) s"))
            }
        }
    }
}

/// The run's shared state: the bots and how to reach the room.
struct Context: Sendable {
    let scenario: Scenario
    let bots: [String: ScenarioParticipant]
    let order: [String]
    let roomId: String
    let token: String
    let url: String
    let log: @Sendable (String) -> Void

    func bot(_ id: String) throws -> ScenarioParticipant {
        guard let b = bots[id] else { throw ScenarioStepError.unknownBot(id) }
        return b
    }

    func title(_ step: Step) -> String {
        switch step.kind {
        case .expect(let e): return title(e)
        case .action(let a):
            let base: String
            switch a {
            case .join(let bot, let mode, _, _):
                base = "join \(bot) as \((mode ?? (try? self.bot(bot))?.spec.mode)?.rawValue ?? "?")"
            case .leave(let bot): base = "leave \(bot)"
            case .sleep(let s): base = "sleep \(s) s"
            case .wait(let bot, let event): base = "\(bot) waits for \(event.summary)"
            case .invite(let bot, let p, let mode): base = "\(bot) invites \(p) (\(mode.rawValue))"
            case .changeMode(let bot, let mode): base = "\(bot) changeMode \(mode.rawValue)"
            case .publish(let bot, let topic, let message, _): base = "\(bot) publishes '\(message)' on \(topic)"
            case .subscribe(let bot, let topic): base = "\(bot) subscribes to \(topic)"
            case .pin(let bot, let p, let t): base = "\(bot) pins \(p) (\(t.rawValue))"
            case .unpin(let bot, let p, let t): base = "\(bot) unpins \(p) (\(t.rawValue))"
            case .remove(let bot, let p): base = "\(bot) removes \(p)"
            case .consume(let bot, let p, let k): base = "\(bot) consumes \(p) \(Self.kindsText(k))"
            case .stopConsuming(let bot, let p, let k): base = "\(bot) stops consuming \(p) \(Self.kindsText(k))"
            case .muteMic(let bot): base = "\(bot) muteMic"
            case .unmuteMic(let bot): base = "\(bot) unmuteMic"
            case .enableCam(let bot): base = "\(bot) enableCam"
            case .disableCam(let bot): base = "\(bot) disableCam"
            case .impair(_, _, let summary): base = summary
            }
            return step.expectError.map { "\(base), expecting error \($0)" } ?? base
        }
    }

    static func kindsText(_ k: MediaKinds) -> String {
        k.mic && k.webcam ? "mic+webcam" : (k.mic ? TrackKind.mic : .webcam).rawValue
    }

    func title(_ e: Expectation) -> String {
        func on(_ list: [String]?) -> String { list.map { " on \($0.joined(separator: ","))" } ?? " on every bot" }
        switch e.kind {
        case .onStage(let p, let list): return "\(p) on stage" + on(list)
        case .inAudience(let p, let list): return "\(p) in the audience" + on(list)
        case .present(let p, let list): return "\(p) present" + on(list)
        case .absent(let p, let list): return "\(p) absent" + on(list)
        case .pinned(let p, let list, let cam, let share): return "\(p) pin cam=\(cam) share=\(share)" + on(list)
        case .event(let bot, let event): return "\(bot) received \(event.summary)"
        case .frames(let bot, let p, let kind, let atLeast, let atMost, let more):
            var bounds: [String] = []
            if let atLeast { bounds.append("≥ \(atLeast)") }
            if let atMost { bounds.append("≤ \(atMost)") }
            if let more { bounds.append("\(more) more") }
            return "\(bot) has \(bounds.joined(separator: ", ")) \(kind.rawValue) frames from \(p)"
        case .framesStop(let bot, let p, let kind, let quiet):
            return "\(bot)'s \(kind.rawValue) frames from \(p) stop growing for \(quiet) s"
        case .noErrors(let list, _): return "no errors" + (list.map { " on \($0.joined(separator: ","))" } ?? "")
        case .quality(let bot, let p, let kind, let metric, let atLeast, let atMost):
            var bounds: [String] = []
            if let atLeast { bounds.append("≥ \(Self.number(atLeast))") }
            if let atMost { bounds.append("≤ \(Self.number(atMost))") }
            let tracks = kind == .any ? "" : " \(kind.rawValue)"
            return "\(metric.rawValue) \(bounds.joined(separator: ", "))\(metric.unit) for\(tracks) tracks"
                + (p.map { " from \($0)" } ?? "") + (bot.map { " at \($0)" } ?? " at every bot")
        }
    }

    /// A number without a needless fraction.
    static func number(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(format: "%.2f", v)
    }

    // MARK: Actions

    func perform(_ action: Action, step: Step) async throws {
        // Polls give up just before the step's timeout so the failure says what was missing.
        let deadline = Date().addingTimeInterval(max(0.05, step.timeout - 0.2))
        func poll(_ state: @escaping @Sendable () -> String?) async throws {
            try await self.poll(until: deadline, state)
        }
        switch action {
        case .join(let id, let mode, let video, let audio):
            let b = try bot(id)
            try await b.join(roomId: roomId, token: token, url: url, mode: mode, video: video, audio: audio)
            if b.spec.acceptInvites {
                try await poll { b.inviteReady ? nil : "\(id) is not yet listening for invites" }
            }
        case .leave(let id): try await bot(id).leave()
        case .sleep(let s): try await Task.sleep(nanoseconds: UInt64(s * 1e9))
        case .wait(let id, let matcher):
            let b = try bot(id)
            try await poll {
                b.events.contains(where: matcher.matches)
                    ? nil : "\(id) has not received \(matcher.summary); last events: \(Self.recent(b.events))"
            }
        case .invite(let id, let participant, let mode):
            let room = try bot(id).requireRoom()
            // A bot invitee must be listening, or the request reaches nobody (docs/spec/change-mode.md).
            if let invitee = bots[participant], invitee.spec.acceptInvites {
                try await poll { invitee.inviteReady ? nil : "\(participant) is not listening for invites" }
            }
            try await room.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_\(participant)", message: mode.rawValue)
        case .changeMode(let id, let mode): try await settled(id).requireRoom().changeMode(mode)
        case .publish(let id, let topic, let message, let persist):
            try await bot(id).requireRoom().pubSub.publish(
                topic: topic, message: message, options: persist ? ["persist": true] : [:])
        case .subscribe(let id, let topic): try await bot(id).subscribe(topic: topic)
        case .pin(let id, let p, let type): try await bot(id).remote(p).pin(type)
        case .unpin(let id, let p, let type): try await bot(id).remote(p).unpin(type)
        case .remove(let id, let p): try await bot(id).remote(p).remove()
        case .consume(let id, let p, let kinds):
            let participant = try bot(id).remote(p)
            if kinds.mic { try await participant.consumeMicStreams() }
            if kinds.webcam { try await participant.consumeWebcamStreams() }
        case .stopConsuming(let id, let p, let kinds):
            let participant = try bot(id).remote(p)
            if kinds.mic { try await participant.stopConsumingMicStreams() }
            if kinds.webcam { try await participant.stopConsumingWebcamStreams() }
        case .muteMic(let id): try await settled(id).requireRoom().muteMic()
        case .unmuteMic(let id): try await settled(id).requireRoom().unmuteMic()
        case .enableCam(let id): try await settled(id).requireRoom().enableCam()
        case .disableCam(let id): try await settled(id).requireRoom().disableCam()
        case .impair(let id, let impairment, _): try bot(id).requireRoom().impairment = impairment
        }
    }

    /// The participant `id` once it has answered the invites it received (`finishInviteResponses()`).
    private func settled(_ id: String) async throws -> ScenarioParticipant {
        let b = try bot(id)
        await b.finishInviteResponses()
        return b
    }

    static func recent(_ events: [ParticipantEvent]) -> String {
        let tail = events.suffix(5).map(\.description)
        return tail.isEmpty ? "none" : tail.joined(separator: "; ")
    }

    /// Polls `state` (nil = satisfied, else why not) until it holds; throws the last reason at `deadline`.
    func poll(until deadline: Date, _ state: @escaping @Sendable () -> String?) async throws {
        while let why = state() {
            if Date() >= deadline { throw ScenarioStepError.timedOut(why) }
            do { try await Task.sleep(nanoseconds: 50_000_000) } catch { throw ScenarioStepError.cancelled(why) }
        }
    }

    // MARK: Expectations

    /// Nil when `e` holds within its timeout, else what was seen.
    func check(_ e: Expectation) async -> String? {
        let deadline = Date().addingTimeInterval(e.timeout)
        switch e.kind {
        case .noErrors, .quality:
            // Errors already seen do not go away by waiting; quality is what the run measured so far.
            return evaluate(e.kind)
        case .framesStop(let id, let p, let kind, let quiet):
            guard let b = bots[id] else { return "unknown bot \(id)" }
            // Stopped = unchanged for `quiet` seconds; the deadline is the timeout plus that window.
            let end = deadline.addingTimeInterval(quiet)
            var last = b.frames(from: p, kind: kind)
            var since = Date()
            while Date() < end {
                if Date().timeIntervalSince(since) >= quiet { return nil }
                try? await Task.sleep(nanoseconds: 100_000_000)
                let now = b.frames(from: p, kind: kind)
                if now != last {
                    last = now
                    since = Date()
                }
            }
            return "\(id)'s \(kind.rawValue) frames from \(p) kept growing (now \(last)) for \(e.timeout) s"
        default:
            // `more` is relative to the count when the check begins.
            var baseline: (ScenarioParticipant, FrameKind, String, Int, Int)?
            if case .frames(let id, let p, let kind, _, _, let more?) = e.kind, let b = bots[id] {
                baseline = (b, kind, p, b.frames(from: p, kind: kind), more)
            }
            func state() -> String? {
                if let why = evaluate(e.kind) { return why }
                if let (b, kind, p, start, more) = baseline {
                    let now = b.frames(from: p, kind: kind)
                    if now - start < more {
                        return
                            "\(b.id) got \(now - start) new \(kind.rawValue) frames from \(p) (\(start) → \(now)), wants \(more)"
                    }
                }
                return nil
            }
            var why = state()
            while let reason = why {
                if Date() >= deadline { return "not true after \(e.timeout) s: \(reason)" }
                try? await Task.sleep(nanoseconds: 50_000_000)
                why = state()
            }
            return nil
        }
    }

    /// The bots an "on every bot" expectation looks at: the listed ones, or every bot in the room.
    private func viewers(_ list: [String]?) -> Result<[ScenarioParticipant], ScenarioStepError> {
        if let list {
            var out: [ScenarioParticipant] = []
            for id in list {
                guard let b = bots[id] else { return .failure(ScenarioStepError.unknownBot(id)) }
                guard b.isJoined else { return .failure(ScenarioStepError.notInRoom(id)) }
                out.append(b)
            }
            return .success(out)
        }
        let joined = order.compactMap { bots[$0] }.filter(\.isJoined)
        return joined.isEmpty ? .failure(ScenarioStepError.noBotJoined) : .success(joined)
    }

    private func everyBot(_ list: [String]?, _ check: (ScenarioParticipant) -> String?) -> String? {
        switch viewers(list) {
        case .failure(let e): return e.description
        case .success(let bots):
            let problems = bots.compactMap(check)
            return problems.isEmpty ? nil : problems.joined(separator: "; ")
        }
    }

    /// Nil when `b` sees `p` on the stage (`onStage`) or in the audience, and only there; else
    /// what `b` sees.
    private static func placement(of p: String, seenBy b: ScenarioParticipant, onStage: Bool) -> String? {
        let stage = b.stage
        let audience = b.audience
        if stage.contains(p) == onStage && audience.contains(p) != onStage { return nil }
        return "\(b.id): stage [\(stage.joined(separator: ", "))], audience [\(audience.joined(separator: ", "))]"
    }

    private func seen(_ b: ScenarioParticipant, _ p: String) -> Participant? {
        guard let room = b.room else { return nil }
        if room.localParticipant.id == p { return room.localParticipant }
        return room.participants[p]
    }

    /// Nil when every track `b` receives (from `participant`, of `kind`) has `metric` within the
    /// bounds; else which track, its value and the rest of its reading.
    static func quality(
        of b: ScenarioParticipant, from participant: String?, kind: FrameKind, metric: QualityMetric, atLeast: Double?,
        atMost: Double?
    ) -> String? {
        guard let room = b.room else { return "\(b.id) is not in the room" }
        let tracks = room.receiveQuality().filter { t in
            let audio = t.kind == .audio || t.kind == .shareAudio
            let kindMatches = kind == .any || (kind == .audio) == audio
            return kindMatches && (participant.map { $0 == t.participantId } ?? true)
        }
        let what = (kind == .any ? "" : "\(kind.rawValue) ") + "tracks" + (participant.map { " from \($0)" } ?? "")
        guard !tracks.isEmpty else { return "\(b.id) receives no \(what)" }
        var problems: [String] = []
        for t in tracks {
            let q = t.quality
            let track = "\(t.kind.rawValue) from \(t.participantId)"
            guard q.frames > 0 else {
                problems.append("\(b.id): no frames yet of \(track)")
                continue
            }
            guard let value = metric.value(q) else {
                problems.append(
                    "\(b.id): \(metric.rawValue) not measured for \(track)"
                        + (metric == .latency ? " (the sender does not stamp abs-capture-time)" : ""))
                continue
            }
            let shown = "\(metric.rawValue) \(number(value))\(metric.unit)"
            if let atLeast, value < atLeast {
                problems.append("\(b.id): \(shown) for \(track), wants ≥ \(number(atLeast)) (\(q.reading))")
            } else if let atMost, value > atMost {
                problems.append("\(b.id): \(shown) for \(track), wants ≤ \(number(atMost)) (\(q.reading))")
            }
        }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }

    func evaluate(_ kind: Expectation.Kind) -> String? {
        switch kind {
        case .onStage(let p, let list):
            return everyBot(list) { b in Self.placement(of: p, seenBy: b, onStage: true) }
        case .inAudience(let p, let list):
            return everyBot(list) { b in Self.placement(of: p, seenBy: b, onStage: false) }
        case .present(let p, let list):
            return everyBot(list) { b in seen(b, p) == nil ? "\(b.id) does not see \(p)" : nil }
        case .absent(let p, let list):
            return everyBot(list) { b in seen(b, p) != nil ? "\(b.id) still sees \(p)" : nil }
        case .pinned(let p, let list, let cam, let share):
            return everyBot(list) { b in
                guard let participant = seen(b, p) else { return "\(b.id) does not see \(p)" }
                let s = participant.pinState
                return s.cam == cam && s.share == share ? nil : "\(b.id) sees \(p) pin cam=\(s.cam) share=\(s.share)"
            }
        case .event(let id, let matcher):
            guard let b = bots[id] else { return "unknown bot \(id)" }
            return b.events.contains(where: matcher.matches)
                ? nil : "\(id) has not received \(matcher.summary); last events: \(Self.recent(b.events))"
        case .frames(let id, let p, let kind, let atLeast, let atMost, _):
            guard let b = bots[id] else { return "unknown bot \(id)" }
            let have = b.frames(from: p, kind: kind)
            if let atLeast, have < atLeast {
                return "\(id) has \(have) \(kind.rawValue) frames from \(p), wants at least \(atLeast)"
            }
            if let atMost, have > atMost {
                return "\(id) has \(have) \(kind.rawValue) frames from \(p), wants at most \(atMost)"
            }
            return nil
        case .framesStop:
            return nil  // handled in check(_:)
        case .quality(let id, let p, let kind, let metric, let atLeast, let atMost):
            let list = id.map { [$0] }
            return everyBot(list) { b in
                Self.quality(of: b, from: p, kind: kind, metric: metric, atLeast: atLeast, atMost: atMost)
            }
        case .noErrors(let list, let ignore):
            let ids = list ?? order
            var problems: [String] = []
            for id in ids {
                guard let b = bots[id] else { continue }
                for e in b.events where e.name == .error && !ignore.contains(e.details.code ?? -1) {
                    problems.append(
                        "\(id) got error \(e.details.code ?? 0) \(e.details.reason ?? "") at steps[\(e.step)]: \(e.details.message ?? "")"
                    )
                }
                for r in b.recordingErrors { problems.append("\(id): \(r)") }
            }
            return problems.isEmpty ? nil : problems.joined(separator: "; ")
        }
    }
}
