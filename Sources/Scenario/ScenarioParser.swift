import Foundation
import Media
import RTC
import RoomProtocol
import Understudy

/// Why a scenario file was refused: `FILE:LINE: field 'steps[2].action': unknown action 'jump' (…)`.
public struct ScenarioFileError: Error, Sendable, CustomStringConvertible, Equatable {
    public var file: String
    public var line: Int
    /// The field path (`steps[2].action`); nil for JSON syntax errors and unreadable files.
    public var field: String?
    public var message: String

    public var description: String {
        if let field { return "\(file):\(line): field '\(field)': \(message)" }
        return "\(file):\(line): \(message)"
    }
}

extension Scenario {
    /// Reads and validates the scenario at `path`.
    public static func load(path: String) throws(ScenarioFileError) -> Scenario {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ScenarioFileError(file: path, line: 0, field: nil, message: "cannot read the file")
        }
        return try parse(Array(data), path: path)
    }

    /// Parses and validates scenario JSON; `path` only names the file in errors.
    public static func parse(_ bytes: [UInt8], path: String) throws(ScenarioFileError) -> Scenario {
        let root: LineJSON
        do {
            root = try LineJSONReader.parse(bytes)
        } catch {
            throw ScenarioFileError(file: path, line: error.line, field: nil, message: "invalid JSON: \(error.message)")
        }
        var decoder = ScenarioDecoder(file: path)
        return try decoder.scenario(root)
    }
}

/// Reads one JSON object's members, remembering which were used so unknown ones can be refused.
private struct Members {
    let decoder: ScenarioDecoder
    let json: LineJSON
    let path: String
    private(set) var used: Set<String> = []

    init(_ decoder: ScenarioDecoder, _ json: LineJSON, path: String) throws(ScenarioFileError) {
        guard case .object = json.value else {
            throw decoder.error(json, path, "expected an object, found \(json.typeName)")
        }
        self.decoder = decoder
        self.json = json
        self.path = path
    }

    func field(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    mutating func raw(_ key: String) -> LineJSON? {
        used.insert(key)
        guard let v = json[key] else { return nil }
        if case .null = v.value { return nil }
        return v
    }

    mutating func requireRaw(_ key: String) throws(ScenarioFileError) -> LineJSON {
        guard let v = raw(key) else { throw decoder.error(json, field(key), "missing required field") }
        return v
    }

    /// The value at `key` as `read` takes it; nil when absent or null, and an error saying that
    /// `expected` was expected when `read` refuses it.
    mutating func typed<T>(_ key: String, _ expected: String, _ read: (LineJSON) -> T?) throws(ScenarioFileError)
        -> T?
    {
        guard let v = raw(key) else { return nil }
        guard let value = read(v) else {
            throw decoder.error(v, field(key), "expected \(expected), found \(v.typeName)")
        }
        return value
    }

    mutating func string(_ key: String) throws(ScenarioFileError) -> String? {
        try typed(key, "a string") { v -> String? in
            guard case .string(let s) = v.value else { return nil }
            return s
        }
    }

    mutating func requireString(_ key: String) throws(ScenarioFileError) -> String {
        _ = try requireRaw(key)
        guard let s = try string(key) else { throw decoder.error(json, field(key), "missing required field") }
        guard !s.isEmpty else { throw decoder.error(json[key] ?? json, field(key), "must not be empty") }
        return s
    }

    mutating func bool(_ key: String) throws(ScenarioFileError) -> Bool? {
        try typed(key, "true or false") { v -> Bool? in
            guard case .bool(let b) = v.value else { return nil }
            return b
        }
    }

    mutating func number(_ key: String) throws(ScenarioFileError) -> Double? {
        try typed(key, "a number") { v -> Double? in
            guard case .number(let d) = v.value else { return nil }
            return d
        }
    }

    /// Seconds in (0, 1 day].
    mutating func seconds(_ key: String, allowZero: Bool = false) throws(ScenarioFileError) -> Double? {
        guard let d = try number(key) else { return nil }
        guard (allowZero ? d >= 0 : d > 0) && d <= 86400 else {
            throw decoder.error(json[key] ?? json, field(key), "expected seconds in (0, 86400], found \(d)")
        }
        return d
    }

    mutating func count(_ key: String) throws(ScenarioFileError) -> Int? {
        guard let d = try number(key) else { return nil }
        guard d >= 0, d <= 1e9, d == d.rounded() else {
            throw decoder.error(json[key] ?? json, field(key), "expected a non-negative whole number, found \(d)")
        }
        return Int(d)
    }

    mutating func strings(_ key: String) throws(ScenarioFileError) -> [String]? {
        let array = try typed(key, "an array of strings") { v -> [LineJSON]? in
            guard case .array(let items) = v.value else { return nil }
            return items
        }
        guard let items = array else { return nil }
        var out: [String] = []
        for (i, item) in items.enumerated() {
            guard case .string(let s) = item.value else {
                throw decoder.error(item, "\(field(key))[\(i)]", "expected a string, found \(item.typeName)")
            }
            out.append(s)
        }
        return out
    }

    mutating func choice<T>(_ key: String, _ what: String, _ options: [String], _ make: (String) -> T?)
        throws(ScenarioFileError) -> T?
    {
        guard let s = try string(key) else { return nil }
        guard let v = make(s) else {
            throw decoder.error(
                json[key] ?? json, field(key),
                "unknown \(what) '\(s)' (expected one of \(options.joined(separator: ", ")))")
        }
        return v
    }

    mutating func requireChoice<T>(_ key: String, _ what: String, _ options: [String], _ make: (String) -> T?)
        throws(ScenarioFileError) -> T
    {
        _ = try requireString(key)
        guard let v = try choice(key, what, options, make) else {
            throw decoder.error(json, field(key), "missing required field")
        }
        return v
    }

    mutating func mode(_ key: String) throws(ScenarioFileError) -> Mode? {
        try choice(key, "mode", Mode.allCases.map(\.rawValue)) { Mode(rawValue: $0)?.canonical }
    }

    /// A bot id that must name a bot of the scenario.
    mutating func bot(_ key: String) throws(ScenarioFileError) -> String {
        let id = try requireString(key)
        guard decoder.botIds.contains(id) else {
            throw decoder.error(
                json[key] ?? json, field(key),
                "unknown bot '\(id)' (bots: \(decoder.botIds.sorted().joined(separator: ", ")))")
        }
        return id
    }

    /// A participant id that must be a bot or listed in `participants`.
    mutating func participant(_ key: String) throws(ScenarioFileError) -> String {
        let id = try requireString(key)
        guard decoder.botIds.contains(id) || decoder.externalIds.contains(id) else {
            throw decoder.error(
                json[key] ?? json, field(key),
                "unknown participant '\(id)' (a bot id, or list it in 'participants': "
                    + "\(decoder.botIds.sorted().joined(separator: ", ")))")
        }
        return id
    }

    mutating func botList(_ key: String) throws(ScenarioFileError) -> [String]? {
        guard let list = try strings(key) else { return nil }
        for (i, id) in list.enumerated() where !decoder.botIds.contains(id) {
            let item: LineJSON? = {
                if case .array(let items)? = json[key]?.value, i < items.count { return items[i] }
                return nil
            }()
            throw decoder.error(
                item ?? json, "\(field(key))[\(i)]",
                "unknown bot '\(id)' (bots: \(decoder.botIds.sorted().joined(separator: ", ")))")
        }
        return list
    }

    /// An impairment: a preset name (`"lossy-wifi"`) or the JSON form (``Impairment/parse(_:)``),
    /// with a name for descriptions (the preset's, or `custom`).
    mutating func impairment(_ key: String) throws(ScenarioFileError) -> (impairment: Impairment, name: String)? {
        guard let v = raw(key) else { return nil }
        let text: String
        switch v.value {
        case .string(let name): text = name
        case .object: text = v.jsonText
        default: throw decoder.error(v, field(key), "expected a preset name or an object, found \(v.typeName)")
        }
        do {
            let impairment = try Impairment.parse(text)
            if case .string(let name) = v.value { return (impairment, name) }
            return (impairment, "custom")
        } catch {
            throw decoder.error(v, error.field.map { "\(field(key)).\($0)" } ?? field(key), error.message)
        }
    }

    /// Refuses members nobody asked for (a typo would otherwise be silently ignored).
    func finish() throws(ScenarioFileError) {
        guard case .object(let members) = json.value else { return }
        for m in members where !used.contains(m.key) {
            throw decoder.error(m.value, field(m.key), "unknown field")
        }
    }
}

private struct ScenarioDecoder {
    let file: String
    var botIds: Set<String> = []
    var externalIds: Set<String> = []

    init(file: String) { self.file = file }

    func error(_ at: LineJSON, _ field: String, _ message: String) -> ScenarioFileError {
        ScenarioFileError(file: file, line: at.line, field: field, message: message)
    }

    mutating func scenario(_ root: LineJSON) throws(ScenarioFileError) -> Scenario {
        var top = try Members(self, root, path: "")
        let name = try top.requireString("name")
        let room = try top.string("room")
        let server = try top.string("server")
        let timeout = try top.seconds("timeout") ?? 15
        let external = try top.strings("participants") ?? []
        let botsJSON = try top.requireRaw("bots")
        guard case .array(let botItems) = botsJSON.value else {
            throw error(botsJSON, "bots", "expected an array of bots, found \(botsJSON.typeName)")
        }
        guard !botItems.isEmpty else { throw error(botsJSON, "bots", "at least one bot is needed") }
        // Ids first, so steps and expectations can refer to any bot.
        var bots: [ParticipantSpec] = []
        for (i, item) in botItems.enumerated() {
            let bot = try botSpec(item, path: "bots[\(i)]", defaultTimeout: timeout)
            guard !botIds.contains(bot.id) else { throw error(item, "bots[\(i)].id", "duplicate bot id '\(bot.id)'") }
            botIds.insert(bot.id)
            bots.append(bot)
        }
        externalIds = Set(external)
        // Members is a value copy holding the decoder; refresh it now that ids are known.
        var rest = try Members(self, root, path: "")
        for key in ["name", "room", "server", "timeout", "participants", "bots"] { _ = rest.raw(key) }
        var steps: [Step] = []
        if let stepsJSON = rest.raw("steps") {
            guard case .array(let items) = stepsJSON.value else {
                throw error(stepsJSON, "steps", "expected an array of steps, found \(stepsJSON.typeName)")
            }
            for (i, item) in items.enumerated() {
                steps.append(try step(item, index: i, defaultTimeout: timeout))
            }
        }
        var expectations: [Expectation] = []
        if let expectJSON = rest.raw("expect") {
            guard case .array(let items) = expectJSON.value else {
                throw error(expectJSON, "expect", "expected an array of expectations, found \(expectJSON.typeName)")
            }
            for (i, item) in items.enumerated() {
                var m = try Members(self, item, path: "expect[\(i)]")
                expectations.append(try expectation(&m, defaultTimeout: timeout))
                try m.finish()
            }
        }
        try rest.finish()
        guard !steps.isEmpty || !expectations.isEmpty else {
            throw error(root, "steps", "a scenario needs steps or expectations")
        }
        return Scenario(
            name: name, path: file, room: room, server: server, defaultTimeout: timeout, bots: bots,
            externalParticipants: external, steps: steps, expectations: expectations)
    }

    func botSpec(_ json: LineJSON, path: String, defaultTimeout: Double) throws(ScenarioFileError) -> ParticipantSpec {
        var m = try Members(self, json, path: path)
        let id = try m.requireString("id")
        guard !id.contains(where: { $0.isWhitespace }) else {
            throw error(json["id"] ?? json, "\(path).id", "must not contain whitespace")
        }
        let bot = ParticipantSpec(
            id: id, displayName: try m.string("name") ?? id, mode: try m.mode("mode") ?? .SEND_AND_RECV,
            video: try source(&m, "video", synthetic: "testsrc") ?? "testsrc",
            audio: try source(&m, "audio", synthetic: "tone") ?? "tone",
            multiStream: try m.bool("multiStream") ?? false,
            consume: try m.choice("consume", "consume mode", ConsumeMode.allCases.map(\.rawValue)) {
                ConsumeMode(rawValue: $0)
            } ?? .auto,
            record: try m.bool("record") ?? false, acceptInvites: try m.bool("acceptInvites") ?? true,
            subscribe: try m.strings("subscribe") ?? [], line: json.line,
            impairment: try m.impairment("impair").flatMap { $0.impairment.isNone ? nil : $0.impairment })
        try m.finish()
        return bot
    }

    /// `testsrc`/`tone` (the synthetic sources), `none`, `alsa:DEVICE` (audio) or a media file, whose
    /// path is taken relative to the scenario file and checked now so a bad path gets its line.
    func source(_ m: inout Members, _ key: String, synthetic: String) throws(ScenarioFileError) -> String? {
        guard let value = try m.string(key) else { return nil }
        if value == synthetic || value == "none" || (key == "audio" && value.hasPrefix("alsa:")) { return value }
        let at = m.json[key] ?? m.json
        guard !value.isEmpty else {
            throw error(at, m.field(key), "expected \(synthetic), none or a file path, found an empty string")
        }
        let base = (file as NSString).deletingLastPathComponent
        let path = value.hasPrefix("/") || base.isEmpty ? value : (base as NSString).appendingPathComponent(value)
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw error(at, m.field(key), "'\(value)' is not \(synthetic), none or a readable file (looked at \(path))")
        }
        do {
            try key == "video"
                ? LocalSources.validate(video: path, audio: nil) : LocalSources.validate(video: nil, audio: path)
        } catch {
            throw self.error(at, m.field(key), "\(error)")
        }
        return path
    }

    func kinds(_ m: inout Members) throws(ScenarioFileError) -> MediaKinds {
        // The room's track-kind names, and `both`.
        try m.choice("kind", "kind", [TrackKind.mic.rawValue, TrackKind.webcam.rawValue, "both"]) { s -> MediaKinds? in
            if s == "both" { return MediaKinds(mic: true, webcam: true) }
            switch TrackKind(rawValue: s) {
            case .mic: return MediaKinds(mic: true, webcam: false)
            case .webcam: return MediaKinds(mic: false, webcam: true)
            default: return nil
            }
        } ?? MediaKinds(mic: true, webcam: true)
    }

    func pinType(_ m: inout Members) throws(ScenarioFileError) -> PinType {
        try m.choice("pinType", "pin type", ["SHARE_AND_CAM", "CAM", "SHARE"]) { PinType(rawValue: $0) }
            ?? .SHARE_AND_CAM
    }

    func step(_ json: LineJSON, index: Int, defaultTimeout: Double) throws(ScenarioFileError) -> Step {
        let path = "steps[\(index)]"
        var m = try Members(self, json, path: path)
        let hasAction = json["action"] != nil
        let hasExpect = json["expect"] != nil
        if hasAction && hasExpect {
            throw error(json, path, "a step has either 'action' or 'expect', not both")
        }
        if hasExpect {
            let e = try expectation(&m, defaultTimeout: defaultTimeout)
            try m.finish()
            return Step(index: index, kind: .expect(e), timeout: e.timeout, expectError: nil, line: json.line)
        }
        guard hasAction else {
            throw error(
                json, "\(path).action",
                "missing required field (a step needs 'action' or 'expect'; actions: \(Action.names.joined(separator: ", ")))"
            )
        }
        let actionName = try m.requireString("action")
        let timeout = try m.seconds("timeout") ?? defaultTimeout
        var expectError: String?
        if let v = m.raw("expectError") {
            switch v.value {
            case .string(let s): expectError = s
            case .number(let d) where d == d.rounded() && abs(d) < 1e9: expectError = String(Int(d))
            default: throw error(v, "\(path).expectError", "expected an error code or name, found \(v.typeName)")
            }
        }
        let action: Action
        switch actionName {
        case "join":
            action = .join(
                bot: try m.bot("bot"), mode: try m.mode("mode"),
                video: try source(&m, "video", synthetic: "testsrc"), audio: try source(&m, "audio", synthetic: "tone"))
        case "leave": action = .leave(bot: try m.bot("bot"))
        case "sleep":
            guard let s = try m.seconds("seconds", allowZero: true) else {
                throw error(json, "\(path).seconds", "missing required field")
            }
            action = .sleep(seconds: s)
        case "wait":
            action = .wait(bot: try m.bot("bot"), event: try eventMatcher(&m))
        case "invite":
            action = .invite(
                bot: try m.bot("bot"), participant: try m.participant("participant"),
                mode: try m.mode("mode") ?? .SEND_AND_RECV)
        case "changeMode":
            action = .changeMode(
                bot: try m.bot("bot"),
                mode: try m.requireChoice("mode", "mode", Mode.allCases.map(\.rawValue)) {
                    Mode(rawValue: $0)?.canonical
                })
        case "publish":
            action = .publish(
                bot: try m.bot("bot"), topic: try m.requireString("topic"), message: try m.string("message") ?? "",
                persist: try m.bool("persist") ?? false)
        case "subscribe":
            action = .subscribe(bot: try m.bot("bot"), topic: try m.requireString("topic"))
        case "pin":
            action = .pin(bot: try m.bot("bot"), participant: try m.participant("participant"), type: try pinType(&m))
        case "unpin":
            action = .unpin(
                bot: try m.bot("bot"), participant: try m.participant("participant"), type: try pinType(&m))
        case "remove":
            action = .remove(bot: try m.bot("bot"), participant: try m.participant("participant"))
        case "consume":
            action = .consume(
                bot: try m.bot("bot"), participant: try m.participant("participant"), kinds: try kinds(&m))
        case "stopConsuming":
            action = .stopConsuming(
                bot: try m.bot("bot"), participant: try m.participant("participant"), kinds: try kinds(&m))
        case "muteMic": action = .muteMic(bot: try m.bot("bot"))
        case "unmuteMic": action = .unmuteMic(bot: try m.bot("bot"))
        case "enableCam": action = .enableCam(bot: try m.bot("bot"))
        case "disableCam": action = .disableCam(bot: try m.bot("bot"))
        case "impair":
            let bot = try m.bot("bot")
            let seed = try m.count("seed").map { UInt64($0) }
            if let profile = try m.impairment("profile") {
                guard m.raw("drop") == nil else {
                    throw error(json["drop"]!, "\(path).drop", "give either 'profile' or 'drop', not both")
                }
                var impairment = profile.impairment
                if let seed { impairment.seed = seed }
                action = .impair(
                    bot: bot, impairment: impairment.isNone ? nil : impairment,
                    summary: impairment.isNone ? "\(bot) impairment off" : "\(bot)'s link becomes \(profile.name)")
                break
            }
            let drop = try m.number("drop") ?? 0
            guard drop >= 0 && drop <= 1 else {
                throw error(
                    json["drop"] ?? json, "\(path).drop", "expected a share of datagrams in [0, 1], found \(drop)")
            }
            action = .impair(
                bot: bot, impairment: drop > 0 ? Impairment(receiveDropRate: drop, seed: seed ?? 1) : nil,
                summary: drop > 0
                    ? "\(bot) drops \(Context.number(drop * 100))% of its received media" : "\(bot) impairment off")
        default:
            throw error(
                json["action"] ?? json, "\(path).action",
                "unknown action '\(actionName)' (expected one of \(Action.names.joined(separator: ", ")))")
        }
        try m.finish()
        return Step(index: index, kind: .action(action), timeout: timeout, expectError: expectError, line: json.line)
    }

    func eventMatcher(_ m: inout Members) throws(ScenarioFileError) -> EventMatcher {
        let name = try m.requireChoice("event", "event", EventName.allCases.map(\.rawValue)) { EventName(rawValue: $0) }
        var participant: String?
        if m.json["participant"] != nil { participant = try m.participant("participant") }
        return EventMatcher(
            name: name,
            details: EventDetails(
                participant: participant, mode: try m.mode("mode"), kind: try m.string("kind"),
                topic: try m.string("topic"), message: try m.string("message"), reason: try m.string("reason"),
                code: try m.count("code")),
            sinceStep: try m.count("sinceStep"))
    }

    /// The fields of a quality expectation: `bot`?, `participant`?, `kind`?, `atLeast`/`atMost` (one needed).
    func quality(_ m: inout Members, _ metric: QualityMetric) throws(ScenarioFileError) -> Expectation.Kind {
        let bot = m.json["bot"] == nil ? nil : try m.bot("bot")
        let participant = m.json["participant"] == nil ? nil : try m.participant("participant")
        let kind =
            try m.choice("kind", "frame kind", FrameKind.allCases.map(\.rawValue)) { FrameKind(rawValue: $0) }
            ?? metric.defaultKind
        let atLeast = try m.number("atLeast")
        let atMost = try m.number("atMost")
        guard atLeast != nil || atMost != nil else {
            throw error(
                m.json, m.field("atMost"), "missing required field (a quality expectation needs atLeast or atMost)")
        }
        if let atLeast, let atMost, atLeast > atMost {
            throw error(m.json["atMost"] ?? m.json, m.field("atMost"), "is below atLeast (\(atLeast))")
        }
        return .quality(
            bot: bot, participant: participant, kind: kind, metric: metric, atLeast: atLeast, atMost: atMost)
    }

    func expectation(_ m: inout Members, defaultTimeout: Double) throws(ScenarioFileError) -> Expectation {
        _ = try m.requireRaw("expect")
        let what = try m.requireString("expect")
        let timeout = try m.seconds("timeout") ?? defaultTimeout
        let kind: Expectation.Kind
        switch what {
        case "onStage": kind = .onStage(participant: try m.participant("participant"), on: try m.botList("on"))
        case "inAudience": kind = .inAudience(participant: try m.participant("participant"), on: try m.botList("on"))
        case "present": kind = .present(participant: try m.participant("participant"), on: try m.botList("on"))
        case "absent": kind = .absent(participant: try m.participant("participant"), on: try m.botList("on"))
        case "pinned":
            kind = .pinned(
                participant: try m.participant("participant"), on: try m.botList("on"), cam: try m.bool("cam") ?? true,
                share: try m.bool("share") ?? false)
        case "event": kind = .event(bot: try m.bot("bot"), event: try eventMatcher(&m))
        case "frames":
            let bot = try m.bot("bot")
            let participant = try m.participant("participant")
            let frameKind =
                try m.choice("kind", "frame kind", FrameKind.allCases.map(\.rawValue)) { FrameKind(rawValue: $0) }
                ?? .any
            let atLeast = try m.count("atLeast")
            let atMost = try m.count("atMost")
            let more = try m.count("more")
            if let atLeast, let atMost, atLeast > atMost {
                throw error(m.json["atMost"] ?? m.json, m.field("atMost"), "is below atLeast (\(atLeast))")
            }
            kind = .frames(
                bot: bot, participant: participant, kind: frameKind,
                atLeast: atLeast ?? (atMost == nil && more == nil ? 1 : nil), atMost: atMost, more: more)
        case "framesStop":
            kind = .framesStop(
                bot: try m.bot("bot"), participant: try m.participant("participant"),
                kind: try m.choice("kind", "frame kind", FrameKind.allCases.map(\.rawValue)) { FrameKind(rawValue: $0) }
                    ?? .any, quiet: try m.seconds("quiet") ?? 2)
        case "noErrors":
            var ignore: [Int] = []
            if let v = m.raw("ignore") {
                guard case .array(let items) = v.value else {
                    throw error(v, m.field("ignore"), "expected an array of error codes, found \(v.typeName)")
                }
                for (i, item) in items.enumerated() {
                    guard case .number(let d) = item.value, d == d.rounded(), abs(d) < 1e9 else {
                        throw error(
                            item, "\(m.field("ignore"))[\(i)]", "expected an error code, found \(item.typeName)")
                    }
                    ignore.append(Int(d))
                }
            }
            kind = .noErrors(bots: try m.botList("bots"), ignore: ignore)
        case "quality":
            let metric = try m.requireChoice("metric", "quality metric", QualityMetric.allCases.map(\.rawValue)) {
                QualityMetric(rawValue: $0)
            }
            kind = try quality(&m, metric)
        case let name where QualityMetric(rawValue: name) != nil:
            kind = try quality(&m, QualityMetric(rawValue: name) ?? .freezes)
        default:
            throw error(
                m.json["expect"] ?? m.json, m.field("expect"),
                "unknown expectation '\(what)' (expected one of \(Expectation.names.joined(separator: ", ")))")
        }
        return Expectation(kind: kind, timeout: timeout, line: m.json.line, field: m.path)
    }
}
