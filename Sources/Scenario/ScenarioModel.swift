import RTC
import RTCWire
import Understudy

/// A parsed scenario file: bots, the steps they take in order, and what must hold at the end.
/// The format is documented in `docs/scenarios.md`.
public struct Scenario: Sendable {
    /// The scenario's name (the JUnit test suite name).
    public var name: String
    /// The file it was read from.
    public var path: String
    /// The room the bots join; nil makes a fresh room id per run.
    public var room: String?
    /// `ws://host:port` of a running room server; the command line's `--server` wins.
    public var server: String?
    /// Seconds a step or expectation may take when it does not say.
    public var defaultTimeout: Double
    /// The scenario participants (the file's `bots:` list).
    public var bots: [ParticipantSpec]
    /// Participant ids that are not bots but may be named in steps (an app joined from elsewhere).
    public var externalParticipants: [String]
    public var steps: [Step]
    /// Checked after the last step, in order.
    public var expectations: [Expectation]
}

/// One scenario participant (a `bots:` entry): what the scenario drives through the SDK.
public struct ParticipantSpec: Sendable {
    /// Participant id in the room, and the name steps use.
    public var id: String
    public var displayName: String
    /// The mode it joins in (a join step may override it).
    public var mode: Mode
    /// What it publishes as video on stage: `testsrc` (synthetic test pattern), `none`, or a VP8 file path.
    public var video: String
    /// What it publishes as audio on stage: `tone` (synthetic tone), `none`, an Opus file path or `alsa:DEVICE`.
    public var audio: String
    /// Three simulcast layers instead of one.
    public var multiStream: Bool
    public var consume: ConsumeMode
    /// Writes one WebM per remote participant into the scenario's output directory.
    public var record: Bool
    /// Follows `REQUEST_TO_JOIN_AS_HOST_<id>` invites by calling its own `changeMode` (docs/spec/change-mode.md).
    public var acceptInvites: Bool
    /// PubSub topics it subscribes to right after joining (their messages become events).
    public var subscribe: [String]
    public var line: Int
    /// The network its media connections see from the start (`impair`: a preset name or the JSON
    /// form of ``Impairment``), or nil; an `impair` step changes it.
    public var impairment: Impairment? = nil
}

/// Whose media a bot receives.
public enum ConsumeMode: String, Sendable, CaseIterable {
    /// `autoConsume` on: the SDK receives everyone.
    case auto
    /// `autoConsume` off and nothing consumed until `consume` steps.
    case manual
    /// `autoConsume` off; the bot consumes exactly the participants on stage, re-derived on every mode change.
    case stage
    /// `autoConsume` off; the bot consumes every remote participant.
    case all
}

/// One entry of `steps`: an action, or an expectation checked at that point.
public struct Step: Sendable {
    public enum Kind: Sendable {
        case action(Action)
        case expect(Expectation)
    }
    /// Position in `steps`, 0-based (as in error messages).
    public var index: Int
    public var kind: Kind
    public var timeout: Double
    /// For an action: the error (code or name) it must fail with; the step fails if it succeeds.
    public var expectError: String?
    public var line: Int
}

/// What a bot does in a step.
public enum Action: Sendable {
    case join(bot: String, mode: Mode?, video: String?, audio: String?)
    case leave(bot: String)
    case sleep(seconds: Double)
    /// Waits until the bot has received a matching event.
    case wait(bot: String, event: EventMatcher)
    /// Publishes `REQUEST_TO_JOIN_AS_HOST_<participant>` with the mode (docs/spec/change-mode.md, steps 1–2).
    case invite(bot: String, participant: String, mode: Mode)
    case changeMode(bot: String, mode: Mode)
    case publish(bot: String, topic: String, message: String, persist: Bool)
    case subscribe(bot: String, topic: String)
    case pin(bot: String, participant: String, type: PinType)
    case unpin(bot: String, participant: String, type: PinType)
    case remove(bot: String, participant: String)
    case consume(bot: String, participant: String, kinds: MediaKinds)
    case stopConsuming(bot: String, participant: String, kinds: MediaKinds)
    case muteMic(bot: String)
    case unmuteMic(bot: String)
    case enableCam(bot: String)
    case disableCam(bot: String)
    /// Changes the network the bot's media connections see: `profile` (a preset name or the JSON
    /// form of ``Impairment``), or `drop` (this share of received datagrams lost, from a seeded
    /// sequence; 1 is an outage); `"none"` or a drop of 0 ends it. `summary` describes it.
    /// Signalling is not affected.
    case impair(bot: String, impairment: Impairment?, summary: String)

    /// The action names accepted in files.
    public static let names = [
        "join", "leave", "sleep", "wait", "invite", "changeMode", "publish", "subscribe", "pin", "unpin", "remove",
        "consume", "stopConsuming", "muteMic", "unmuteMic", "enableCam", "disableCam", "impair",
    ]
}

/// `mic`, `webcam` or both.
public struct MediaKinds: Sendable, Equatable {
    public var mic: Bool
    public var webcam: Bool
}

/// Which media counts toward a frame expectation.
public enum FrameKind: String, Sendable, CaseIterable {
    case video, audio, any
}

/// A condition that must become true within its timeout.
public struct Expectation: Sendable {
    public enum Kind: Sendable {
        /// The participant is in SEND_AND_RECV in the stage list each bot rebuilt from its events.
        case onStage(participant: String, on: [String]?)
        /// The participant is in RECV_ONLY in the audience list each bot rebuilt from its events.
        case inAudience(participant: String, on: [String]?)
        /// The participant is in the room as each bot sees it.
        case present(participant: String, on: [String]?)
        /// The participant is not in the room as each bot sees it.
        case absent(participant: String, on: [String]?)
        /// The participant's room-wide pin state, as each bot sees it.
        case pinned(participant: String, on: [String]?, cam: Bool, share: Bool)
        /// The bot received a matching event.
        case event(bot: String, event: EventMatcher)
        /// The bot's frame count from the participant (written frames when recording, else received):
        /// at least `atLeast`, at most `atMost`, and at least `more` above the count when the check began.
        case frames(bot: String, participant: String, kind: FrameKind, atLeast: Int?, atMost: Int?, more: Int?)
        /// The bot's frame count from the participant stays unchanged for `quiet` seconds.
        case framesStop(bot: String, participant: String, kind: FrameKind, quiet: Double)
        /// No bot (or only these bots) reported an error through `onError`, other than `ignore` codes.
        case noErrors(bots: [String]?, ignore: [Int])
        /// A received-quality metric of every matching track (from `participant`, of `kind`) of the
        /// bot (or of every bot in the room) is within the bounds; checked at once.
        case quality(
            bot: String?, participant: String?, kind: FrameKind, metric: QualityMetric, atLeast: Double?,
            atMost: Double?)
    }
    public var kind: Kind
    public var timeout: Double
    public var line: Int
    /// Where it was written (`expect[1]` or `steps[4]`).
    public var field: String

    /// The expectation names accepted in files.
    public static let names =
        [
            "onStage", "inAudience", "present", "absent", "pinned", "event", "frames", "framesStop", "noErrors",
            "quality",
        ] + QualityMetric.allCases.map(\.rawValue)
}

/// A received-quality metric a `quality` expectation bounds (``ReceiveQualitySnapshot``; definitions
/// in `docs/load-testing.md`). Each name is also an expectation of its own (`"expect": "freezes"`).
public enum QualityMetric: String, Sendable, CaseIterable {
    case freezes, freezeDuration, pauses, fps, jitter, jitterBuffer, loss, nacks, plis, latency, layerSwitches
    case concealment, concealedMs, mos

    /// The media the metric is about when the expectation does not say.
    public var defaultKind: FrameKind {
        switch self {
        case .freezes, .freezeDuration, .pauses, .fps, .layerSwitches, .plis: return .video
        case .concealment, .concealedMs, .mos: return .audio
        case .jitter, .jitterBuffer, .loss, .nacks, .latency: return .any
        }
    }

    /// Its unit in messages.
    public var unit: String {
        switch self {
        case .freezeDuration, .jitter, .jitterBuffer, .latency, .concealedMs: return " ms"
        case .loss, .concealment: return " %"
        case .fps: return " fps"
        default: return ""
        }
    }

    /// The metric's value in `q` (nil where it does not apply or is not measured).
    public func value(_ q: ReceiveQualitySnapshot) -> Double? {
        switch self {
        case .freezes: return Double(q.freezeCount)
        case .freezeDuration: return q.totalFreezesDurationMs
        case .pauses: return Double(q.pauseCount)
        case .fps: return q.framesPerSecond
        case .jitter: return q.jitterMs
        case .jitterBuffer: return q.jitterBufferDelayMs
        case .loss: return q.lossPercent
        case .nacks: return Double(q.nacksSent)
        case .plis: return Double(q.plisSent)
        case .latency: return q.latencyMs
        case .layerSwitches: return q.layerSwitches.map(Double.init)
        case .concealment: return q.concealmentPercent
        case .concealedMs: return q.concealedMs
        case .mos: return q.mos
        }
    }
}

/// The events a bot records, by the SDK callback they come from.
public enum EventName: String, Sendable, CaseIterable {
    case roomJoined, roomLeft, roomStateChanged, participantJoined, participantLeft, participantModeChanged
    case pinStateChanged, streamEnabled, streamDisabled, mediaStatusChanged, presenterChanged, speakerChanged
    case micRequested, webcamRequested, message, error
}

/// What an event says besides its name, each field set only where the SDK callback has it.
public struct EventDetails: Sendable {
    public var participant: String?
    public var mode: Mode?
    /// Stream or media kind: `audio`, `video`, `share`, `shareAudio`.
    public var kind: String?
    public var topic: String?
    public var message: String?
    /// Leave reason name (`REMOVE_PEER`…), state (`CONNECTED`…) or error name.
    public var reason: String?
    public var code: Int?

    /// Whether `event` has every field set here (a mode by its canonical name).
    func isPresent(in event: EventDetails) -> Bool {
        if let participant, event.participant != participant { return false }
        if let mode, event.mode != mode.canonical { return false }
        if let kind, event.kind != kind { return false }
        if let topic, event.topic != topic { return false }
        if let message, event.message != message { return false }
        if let reason, event.reason != reason { return false }
        if let code, event.code != code { return false }
        return true
    }

    /// The fields that are set, as `name=value`, or (`labelled` false) the participant, mode, kind
    /// and reason as bare values.
    func parts(labelled: Bool) -> [String] {
        func field(_ name: String, _ value: String?, bare: Bool) -> String? {
            value.map { bare && !labelled ? $0 : "\(name)=\($0)" }
        }
        return [
            field("participant", participant, bare: true), field("mode", mode?.rawValue, bare: true),
            field("kind", kind, bare: true), field("topic", topic, bare: false),
            field("message", message, bare: false), field("reason", reason, bare: true),
            field("code", code.map(String.init), bare: false),
        ].compactMap { $0 }
    }
}

/// Matches a recorded event: its name, and every field of `details` that is set.
public struct EventMatcher: Sendable {
    public var name: EventName
    public var details: EventDetails
    /// Only events that arrived after step `sinceStep` began (default: any time in the run).
    public var sinceStep: Int?

    func matches(_ e: ParticipantEvent) -> Bool {
        guard e.name == name else { return false }
        if let sinceStep, e.step < sinceStep { return false }
        return details.isPresent(in: e.details)
    }

    var summary: String {
        ([name.rawValue] + details.parts(labelled: true) + (sinceStep.map { ["sinceStep=\($0)"] } ?? []))
            .joined(separator: " ")
    }
}

/// One thing a scenario participant saw, stamped with the step that was running.
public struct ParticipantEvent: Sendable, CustomStringConvertible {
    public var name: EventName
    public var step: Int
    public var details: EventDetails

    public var description: String { ([name.rawValue] + details.parts(labelled: false)).joined(separator: " ") }
}
