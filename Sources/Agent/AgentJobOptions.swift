import Foundation

// The fuzz build compiles RoomProtocol's vocabulary into this module (Fuzz/run.sh).
#if canImport(RoomProtocol)
    import RoomProtocol
#endif

// Foundation only: a fleet worker decodes these from Redis (untrusted input), and the fuzz build
// (`Fuzz/Targets/fleetrecords.swift`) compiles this file alone as the module Agent.

/// The options of a ``RoomAgent`` as data: what `understudy join` takes, what a fleet job carries
/// (`understudy jobs submit`, `POST /admin/jobs`), in JSON.
///
/// Each field is one `understudy join` option, named in camelCase (`--consume-kinds` is
/// `consumeKinds`), with the value the option takes (durations in seconds). Nil means the option was
/// not given. ``validate()`` checks every value's grammar without touching the file system;
/// ``roomAgentOptions(recordDirectory:checkMedia:)`` turns valid options into ``RoomAgent/Options``.
/// A record decoded from Redis that does not validate is refused, never run.
public struct AgentJobOptions: Codable, Sendable, Equatable {
    /// `--server`: the room server, `http(s)://` or `ws(s)://HOST:PORT`.
    public var server: String
    /// `--room`.
    public var room: String
    /// `--token`: the room token (a job always carries one; the CLI signs one from `--secret`).
    public var token: String
    /// The token for ``relayRoom`` when it is not ``token`` (signed by whoever signed ``token``).
    public var relayRoomToken: String?
    /// `--id`: the participant id.
    public var id: String?
    /// `--name`: the display name (default `understudy`).
    public var name: String?
    /// `--agent`: join as an agent.
    public var agent: Bool?
    /// `--analyze`: full-reference checks of each consumed webcam, live (needs a record directory).
    public var analyze: Bool?
    /// `--simulcast`: on stage, publish the test pattern in three simulcast layers (q, h, f) as the
    /// SDK's `multiStream` does, so that the layers that do not fit the uplink's estimate stop and
    /// each subscriber gets the layer its own link carries. Only with the `testsrc` video.
    public var simulcast: Bool?
    /// `--mode`: `SEND_AND_RECV`, `RECV_ONLY` (default) or `SIGNALLING_ONLY`.
    public var mode: String?
    /// `--consume`: `all` (default), `stage`, `none` or `ID,ID`.
    public var consume: String?
    /// `--consume-kinds`: `audio`, `video` or `audio,video` (default).
    public var consumeKinds: String?
    /// `--max-video`: at most this many webcams consumed at once.
    public var maxVideo: Int?
    /// `--quality`: `low`, `medium` or `high`.
    public var quality: String?
    /// `--accept-invites`: `trusted` (default), `yes`, `no` or `from:ID,ID`.
    public var acceptInvites: String?
    /// `--reconnect-for`: seconds of reconnection after a drop (0 turns it off; default 300).
    public var reconnectFor: Double?
    /// `--lobby-wait`: seconds an `ask_join` token waits in the lobby.
    public var lobbyWait: Double?
    /// `--record-format`: `webm` (default) or `ogg+ivf`. Where to record is not an option of a job:
    /// the worker chooses the directory.
    public var recordFormat: String?
    /// `--relay`: `rtp://HOST:PORT`.
    public var relay: String?
    /// `--relay-room`: another room to republish into.
    public var relayRoom: String?
    /// `--video`: `testsrc`, `none` or a file on the machine that runs the agent.
    public var video: String?
    /// `--audio`: `tone`, `none`, a file or `alsa:DEVICE` on the machine that runs the agent.
    public var audio: String?
    /// `--video-codec`: `vp8` (default), `h264`, `vp9`, `av1`, or `auto` (the codec the room's
    /// receivers all accept, followed as it changes), what the agent publishes its video in.
    public var videoCodec: String?
    /// `--ice-servers`: TURN URLs, comma-separated (credentials inline).
    public var iceServers: String?
    /// `--impair`: the network the media sees, a preset name or the JSON form (``Impairment/parse(_:)``).
    public var impair: String?
    /// `--duration`: seconds until the agent leaves (nil: until stopped).
    public var duration: Double?
    /// `--mix-audio`: the mixed audio file (`.ogg`, `.opus`, `.webm`, `.mkv` or `.mp4`) on the machine
    /// that runs the agent.
    public var mixAudio: String?
    /// `--transcribe`: `ws://HOST:PORT/PATH` to push each speaker's PCM to.
    public var transcribe: String?
    /// `--transcribe-rate`: 16000 (default) or 48000.
    public var transcribeRate: Int?
    /// `--snapshot-every`: seconds between pictures of each consumed webcam (`captureImage`), written
    /// as `ID.jpg` beside the recordings (nil: none).
    public var snapshotEvery: Double?
    /// `--composite` (repeatable): where the room's composite goes, each a `.mp4`, `.webm` or `.mkv`
    /// file or a `.m3u8` HLS playlist on the machine that runs the agent, or an `rtmp://` URL
    /// (``compositeDestinations`` lists the kinds).
    public var composite: [String]?
    /// `--layout`: `grid` (default) or `speaker`.
    public var layout: String?
    /// `--size`: the composite's `WIDTHxHEIGHT`, even, 64x64 to 3840x2160 (default 1280x720).
    public var size: String?
    /// `--fps`: the composite's frame rate, 1 to 60 (default 30).
    public var fps: Int?
    /// `--composite-codec`: `h264` (default, libx264) or `vp8` (libvpx).
    public var compositeCodec: String?
    /// `--composite-bitrate`: bits per second, 100k to 50M (`2500000`, `2500k`, `2.5M`; default 2.5M).
    public var compositeBitrate: Int?
    /// `--composite-preset`: the libx264 preset (default `superfast`).
    public var compositePreset: String?
    /// `--composite-labels`: `on` (default) or `off`, the names on the tiles.
    public var compositeLabels: Bool?
    /// `--hls-segment`: the container of an `.m3u8` output's segments, `fmp4` (default) or `ts`.
    public var hlsSegment: String?
    /// `--hls-window`: segments in an `.m3u8` output's live playlist, 1 to 1000 (default 6).
    public var hlsWindow: Int?

    /// Options for `room` on `server` with `token`; every other option is not given.
    public init(server: String, room: String, token: String) {
        self.server = server
        self.room = room
        self.token = token
    }

    /// Why options were refused: the option (as its flag) and the reason, read as one line.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        /// The flag, e.g. `--consume`; `options` when the list as a whole is wrong.
        public var option: String
        public var reason: String
        public init(_ option: String, _ reason: String) {
            self.option = option
            self.reason = reason
        }
        public var description: String { "bad value for \(option): \(reason)" }
    }

    // MARK: - Flags

    /// The flags that take a value, as `understudy join` spells them.
    public static let valueFlags: Set<String> = [
        "--server", "--room", "--token", "--id", "--name", "--mode", "--consume", "--consume-kinds", "--max-video",
        "--quality", "--accept-invites", "--reconnect-for", "--lobby-wait", "--record-format", "--relay",
        "--relay-room", "--video", "--audio", "--ice-servers", "--duration", "--impair", "--video-codec",
        "--mix-audio", "--transcribe", "--transcribe-rate", "--snapshot-every", "--composite", "--layout", "--size",
        "--fps", "--composite-codec", "--composite-bitrate", "--composite-preset", "--composite-labels",
        "--hls-segment", "--hls-window",
    ]
    /// The value flags that may be given more than once (each value kept, in order).
    public static let repeatableFlags: Set<String> = ["--composite"]
    /// The flags without a value.
    public static let switchFlags: Set<String> = ["--agent", "--analyze", "--simulcast"]
    /// The flags whose values are secrets: stored for the agent, never shown.
    public static let secretFlags: Set<String> = ["--token", "--ice-servers"]

    /// Options from flags already split into names and values (a switch given has the value `true`);
    /// names outside ``valueFlags`` and ``switchFlags`` are left to the caller. A missing `--token`
    /// leaves ``token`` empty for the caller to sign one. Durations take `6`, `6s`, `1.5m`, `2h`, `500ms`.
    /// `repeated` holds every value of each of ``repeatableFlags`` (`--composite`), in order.
    public init(flags: [String: String], repeated: [String: [String]] = [:]) throws(Invalid) {
        self.init(server: flags["--server"] ?? "", room: flags["--room"] ?? "", token: flags["--token"] ?? "")
        id = flags["--id"]
        name = flags["--name"]
        agent = flags["--agent"] == "true" ? true : nil
        analyze = flags["--analyze"] == "true" ? true : nil
        simulcast = flags["--simulcast"] == "true" ? true : nil
        mode = flags["--mode"]
        consume = flags["--consume"]
        consumeKinds = flags["--consume-kinds"]
        if let text = flags["--max-video"] {
            guard let n = Int(text), n >= 0 else {
                throw Invalid("--max-video", "'\(text)' is not a count (0 or more)")
            }
            maxVideo = n
        }
        quality = flags["--quality"]
        acceptInvites = flags["--accept-invites"]
        // `0` turns reconnection off; any other value is a duration.
        if let text = flags["--reconnect-for"] {
            reconnectFor = Double(text) == 0 ? 0 : try Self.seconds(text, option: "--reconnect-for")
        }
        lobbyWait = try flags["--lobby-wait"].map { text throws(Invalid) in
            try Self.seconds(text, option: "--lobby-wait")
        }
        recordFormat = flags["--record-format"]
        relay = flags["--relay"]
        relayRoom = flags["--relay-room"]
        video = flags["--video"]
        audio = flags["--audio"]
        videoCodec = flags["--video-codec"]
        iceServers = flags["--ice-servers"]
        impair = flags["--impair"]
        duration = try flags["--duration"].map { text throws(Invalid) in try Self.seconds(text, option: "--duration") }
        mixAudio = flags["--mix-audio"]
        transcribe = flags["--transcribe"]
        if let rate = try Self.whole(flags, "--transcribe-rate", Self.transcribeRates.contains, "16000 or 48000") {
            transcribeRate = rate
        }
        snapshotEvery = try flags["--snapshot-every"].map { text throws(Invalid) in
            try Self.seconds(text, option: "--snapshot-every")
        }
        if let outputs = repeated["--composite"] ?? flags["--composite"].map({ [$0] }), !outputs.isEmpty {
            composite = outputs
        }
        layout = flags["--layout"]
        size = flags["--size"]
        if let n = try Self.whole(flags, "--fps", Self.compositeFPS.contains, "a frame rate from 1 to 60") { fps = n }
        compositeCodec = flags["--composite-codec"]
        compositeBitrate = try flags["--composite-bitrate"].map { text throws(Invalid) in try Self.bitrate(text) }
        compositePreset = flags["--composite-preset"]
        if let text = flags["--composite-labels"] {
            guard text == "on" || text == "off" else {
                throw Invalid("--composite-labels", "'\(Self.shown(text))' is not on or off")
            }
            compositeLabels = text == "on"
        }
        hlsSegment = flags["--hls-segment"]
        if let n = try Self.whole(flags, "--hls-window", Self.hlsWindows.contains, "a segment count from 1 to 1000") {
            hlsWindow = n
        }
    }

    /// The whole number `flags[option]` (nil when absent); one that `allowed` refuses is ``Invalid``,
    /// said to be not `expected`.
    private static func whole(
        _ flags: [String: String], _ option: String, _ allowed: (Int) -> Bool, _ expected: String
    ) throws(Invalid) -> Int? {
        guard let text = flags[option] else { return nil }
        guard let n = Int(text), allowed(n) else { throw Invalid(option, "'\(shown(text))' is not \(expected)") }
        return n
    }

    /// Options from an `understudy join` argument list (`--consume stage`, `--consume=stage`,
    /// `--agent`), as `POST /admin/jobs` takes them. Any other argument is refused.
    public init(arguments: [String]) throws(Invalid) {
        guard arguments.count <= 256 else { throw Invalid("options", "\(arguments.count) arguments (at most 256)") }
        var flags: [String: String] = [:]
        var repeated: [String: [String]] = [:]
        var i = 0
        while i < arguments.count {
            let argument = arguments[i]
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            if Self.switchFlags.contains(name), parts.count == 1 {
                flags[name] = "true"
            } else if Self.valueFlags.contains(name) {
                if parts.count == 2 {
                    flags[name] = String(parts[1])
                } else {
                    guard i + 1 < arguments.count else { throw Invalid(name, "needs a value") }
                    flags[name] = arguments[i + 1]
                    i += 1
                }
                if Self.repeatableFlags.contains(name) { repeated[name, default: []].append(flags[name] ?? "") }
            } else {
                throw Invalid("options", "'\(Self.shown(argument))' is not an option of understudy join")
            }
            i += 1
        }
        try self.init(flags: flags, repeated: repeated)
    }

    /// A duration such as `6`, `6s`, `500ms`, `1.5m` or `2h`, in seconds: positive, at most a year.
    public static func seconds(_ text: String, option: String) throws(Invalid) -> Double {
        var number = Substring(text)
        var scale = 1.0
        for (suffix, factor) in [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)] where number.hasSuffix(suffix) {
            number = number.dropLast(suffix.count)
            scale = factor
            break
        }
        guard let value = Double(number), value > 0, value.isFinite, value * scale <= 365 * 86400 else {
            throw Invalid(option, "'\(text)' is not a positive duration")
        }
        return value * scale
    }

    // MARK: - Validation

    /// Checks every value's grammar (nothing on disk or the network is touched): the server URL's
    /// scheme, the room, a token, the mode, the consume and invite policies, the kinds, the quality,
    /// the record format, the relay room and every duration.
    public func validate() throws(Invalid) {
        _ = try signalingURL()
        try Self.checkName(room, option: "--room")
        guard !token.isEmpty else { throw Invalid("--token", "a token is needed (or --secret to sign one)") }
        guard token.utf8.count <= 16 * 1024 else { throw Invalid("--token", "longer than 16 KiB") }
        if let mode { _ = try Self.mode(mode) }
        if let consume { _ = try Self.consumePolicy(consume) }
        if let consumeKinds { _ = try Self.kinds(consumeKinds) }
        if let maxVideo, maxVideo < 0 { throw Invalid("--max-video", "'\(maxVideo)' is not a count (0 or more)") }
        if simulcast == true, let video, video != "testsrc" {
            throw Invalid("--simulcast", "needs the testsrc video (a file is one layer), not '\(Self.shown(video))'")
        }
        if let quality, !["low", "medium", "high"].contains(quality) {
            throw Invalid("--quality", "'\(Self.shown(quality))' is not low, medium or high")
        }
        if let acceptInvites { _ = try Self.invitePolicy(acceptInvites) }
        if let videoCodec, !Self.videoCodecs.contains(videoCodec.lowercased()) {
            throw Invalid("--video-codec", "'\(Self.shown(videoCodec))' is not auto, vp8, h264, vp9 or av1")
        }
        if let recordFormat, !Self.recordFormats.contains(recordFormat) {
            throw Invalid("--record-format", "'\(Self.shown(recordFormat))' is not webm, mp4 or ogg+ivf")
        }
        if let relayRoom {
            guard !relayRoom.isEmpty, relayRoom != room else {
                throw Invalid("--relay-room", "'\(Self.shown(relayRoom))' must name another room than --room")
            }
            try Self.checkName(relayRoom, option: "--relay-room")
        }
        if let id { try Self.checkName(id, option: "--id") }
        if let reconnectFor, !(reconnectFor == 0 || Self.isDuration(reconnectFor)) {
            throw Invalid("--reconnect-for", "\(reconnectFor) is not 0 or a positive duration")
        }
        for (option, value) in [
            ("--lobby-wait", lobbyWait), ("--duration", duration), ("--snapshot-every", snapshotEvery),
        ] {
            if let value, !Self.isDuration(value) { throw Invalid(option, "\(value) is not a positive duration") }
        }
        if let mixAudio { try Self.checkMixAudio(mixAudio) }
        if let transcribe { try Self.checkTranscribeURL(transcribe) }
        if let transcribeRate, !Self.transcribeRates.contains(transcribeRate) {
            throw Invalid("--transcribe-rate", "'\(transcribeRate)' is not 16000 or 48000")
        }
        try validateComposite()
        for (option, value) in [
            ("--name", name), ("--video", video), ("--audio", audio), ("--relay", relay), ("--ice-servers", iceServers),
            ("--token", relayRoomToken), ("--impair", impair),
        ] {
            if let value, value.utf8.count > 4096 { throw Invalid(option, "longer than 4096 bytes") }
        }
    }

    /// ``server`` as a signalling URL: `http://` and `https://` become `ws://` and `wss://`.
    public func signalingURL() throws(Invalid) -> String {
        if server.hasPrefix("janus://") {
            throw Invalid("--server", "janus:// servers work only with join, load and scenario (docs/janus.md)")
        }
        if server.hasPrefix("http://") { return "ws://" + server.dropFirst(7) }
        if server.hasPrefix("https://") { return "wss://" + server.dropFirst(8) }
        if server.hasPrefix("ws://") || server.hasPrefix("wss://") { return server }
        throw Invalid("--server", "'\(Self.shown(server))' is not an http://, https://, ws:// or wss:// URL")
    }

    /// The options with every secret (``token``, ``relayRoomToken``, ``iceServers``) replaced by
    /// `[redacted]`: what a listing shows.
    public var redacted: AgentJobOptions {
        var copy = self
        copy.token = "[redacted]"
        if relayRoomToken != nil { copy.relayRoomToken = "[redacted]" }
        if iceServers != nil { copy.iceServers = "[redacted]" }
        return copy
    }

    // MARK: - Value grammars (shared with the conversion to RoomAgent.Options)

    /// The destinations `--composite` takes: file extensions (any case) and URL schemes. Named again
    /// here (Foundation only); `Egress.CompositeOutputs.make(destination:)` opens each, and
    /// AgentJobOptionsTests checks that the two agree.
    public static let compositeDestinations: [String] = [".mp4", ".webm", ".mkv", ".m3u8", "rtmp://"]
    /// At most this many `--composite` outputs.
    public static let maxCompositeOutputs = 8
    /// The `--layout` values.
    public static let compositeLayouts: Set<String> = ["grid", "speaker"]
    /// The `--composite-codec` values.
    public static let compositeCodecs: Set<String> = ["h264", "vp8"]
    /// The `--composite-preset` values (libx264's presets).
    public static let compositePresets: [String] = [
        "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow",
    ]
    /// The `--fps` range.
    public static let compositeFPS = 1...60
    /// The `--hls-segment` values (named again here, Foundation only; AgentJobOptionsTests checks them
    /// against `HLSOutput.Options.SegmentFormat`).
    public static let hlsSegments: Set<String> = ["fmp4", "ts"]
    /// The `--hls-window` range.
    public static let hlsWindows = 1...1000
    /// The `--composite-bitrate` range, bits per second.
    public static let compositeBitrates = 100_000...50_000_000

    /// `--size`: `WIDTHxHEIGHT`, both even, from 64x64 to 3840x2160.
    public static func compositeSize(_ text: String) throws(Invalid) -> (width: Int, height: Int) {
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]) else {
            throw Invalid("--size", "'\(shown(text))' is not WIDTHxHEIGHT (such as 1280x720)")
        }
        guard (64...3840).contains(w), (64...2160).contains(h) else {
            throw Invalid("--size", "'\(shown(text))' is outside 64x64 to 3840x2160")
        }
        guard w % 2 == 0, h % 2 == 0 else {
            throw Invalid("--size", "'\(shown(text))' must be even both ways (the video is 4:2:0)")
        }
        return (w, h)
    }

    /// `--composite-bitrate`: `2500000`, `2500k` or `2.5M`, within ``compositeBitrates``.
    static func bitrate(_ text: String) throws(Invalid) -> Int {
        var number = Substring(text.lowercased())
        var scale = 1.0
        if number.hasSuffix("k") {
            scale = 1_000
            number = number.dropLast()
        } else if number.hasSuffix("m") {
            scale = 1_000_000
            number = number.dropLast()
        }
        guard let value = Double(number), value.isFinite, compositeBitrates.contains(Int(value * scale)) else {
            throw Invalid("--composite-bitrate", "'\(shown(text))' is not a bitrate from 100k to 50M")
        }
        return Int(value * scale)
    }

    /// The composite options together: the outputs' kinds, no option without `--composite`, and a
    /// `.webm` output only with VP8.
    func validateComposite() throws(Invalid) {
        guard let composite else {
            for (flag, given) in [
                ("--layout", layout != nil), ("--size", size != nil), ("--fps", fps != nil),
                ("--composite-codec", compositeCodec != nil), ("--composite-bitrate", compositeBitrate != nil),
                ("--composite-preset", compositePreset != nil), ("--composite-labels", compositeLabels != nil),
                ("--hls-segment", hlsSegment != nil), ("--hls-window", hlsWindow != nil),
            ] where given {
                throw Invalid(flag, "needs --composite OUT (what the composite is written to)")
            }
            return
        }
        guard !composite.isEmpty, composite.count <= Self.maxCompositeOutputs else {
            throw Invalid("--composite", "\(composite.count) outputs (1 to \(Self.maxCompositeOutputs))")
        }
        for destination in composite {
            let lower = destination.lowercased()
            guard !destination.isEmpty, destination.utf8.count <= 4096, !destination.hasSuffix("/"),
                Self.compositeDestinations.contains(where: {
                    $0.hasSuffix("://") ? lower.hasPrefix($0) : lower.hasSuffix($0)
                })
            else {
                throw Invalid(
                    "--composite",
                    "'\(Self.shown(destination))' is not a \(Self.compositeDestinations.joined(separator: ", ")) destination"
                )
            }
        }
        guard Set(composite).count == composite.count else { throw Invalid("--composite", "an output is given twice") }
        if let layout, !Self.compositeLayouts.contains(layout) {
            throw Invalid("--layout", "'\(Self.shown(layout))' is not grid or speaker")
        }
        if let size { _ = try Self.compositeSize(size) }
        if let fps, !Self.compositeFPS.contains(fps) { throw Invalid("--fps", "\(fps) is not from 1 to 60") }
        if hlsSegment != nil || hlsWindow != nil, !composite.contains(where: { $0.lowercased().hasSuffix(".m3u8") }) {
            throw Invalid(hlsSegment != nil ? "--hls-segment" : "--hls-window", "needs an .m3u8 --composite output")
        }
        if let hlsSegment, !Self.hlsSegments.contains(hlsSegment) {
            throw Invalid("--hls-segment", "'\(Self.shown(hlsSegment))' is not fmp4 or ts")
        }
        if let hlsWindow, !Self.hlsWindows.contains(hlsWindow) {
            throw Invalid("--hls-window", "\(hlsWindow) is not from 1 to 1000")
        }
        if let compositeCodec, !Self.compositeCodecs.contains(compositeCodec) {
            throw Invalid("--composite-codec", "'\(Self.shown(compositeCodec))' is not h264 or vp8")
        }
        if let compositeBitrate, !Self.compositeBitrates.contains(compositeBitrate) {
            throw Invalid("--composite-bitrate", "\(compositeBitrate) is not from 100k to 50M")
        }
        if let compositePreset, !Self.compositePresets.contains(compositePreset) {
            throw Invalid(
                "--composite-preset",
                "'\(Self.shown(compositePreset))' is not one of \(Self.compositePresets.joined(separator: ", "))")
        }
        if (compositeCodec ?? "h264") == "h264",
            let webm = composite.first(where: { $0.lowercased().hasSuffix(".webm") })
        {
            throw Invalid(
                "--composite",
                "'\(Self.shown(webm))': WebM holds VP8, not H.264 (add --composite-codec vp8, or write .mkv)")
        }
        if compositeCodec == "vp8",
            let live = composite.first(where: {
                $0.lowercased().hasSuffix(".m3u8") || $0.lowercased().hasPrefix("rtmp://")
            })
        {
            throw Invalid(
                "--composite", "'\(Self.shown(live))': HLS and RTMP carry H.264, not VP8 (drop --composite-codec vp8)")
        }
    }

    /// The raw values of ``RoomAgent/RecordFormat`` (this file is Foundation only, so it names them
    /// again; AgentJobOptionsTests checks that each one is a format).
    public static let recordFormats: Set<String> = ["webm", "mp4", "ogg+ivf"]
    /// The `--video-codec` values (any case; `VideoCodecChoice.parse` parses the same, and
    /// AgentJobOptionsTests checks that the two agree).
    public static let videoCodecs: Set<String> = ["auto", "vp8", "h264", "h.264", "vp9", "av1"]

    /// The rates `--transcribe-rate` takes.
    public static let transcribeRates: Set<Int> = [16_000, 48_000]

    /// `--mix-audio`: a path (at most 4096 bytes) ending in a container that holds Opus.
    static func checkMixAudio(_ path: String) throws(Invalid) {
        let lower = path.lowercased()
        guard !path.isEmpty, path.utf8.count <= 4096, !path.hasSuffix("/"),
            [".ogg", ".opus", ".webm", ".mkv", ".mp4"].contains(where: { lower.hasSuffix($0) })
        else {
            throw Invalid("--mix-audio", "'\(shown(path))' is not a .ogg, .opus, .webm, .mkv or .mp4 file")
        }
    }

    /// `--transcribe`: `ws://HOST[:PORT][/PATH]` (`wss://` is not supported: put a TLS proxy on the
    /// transcriber's side, or run it beside the agent).
    static func checkTranscribeURL(_ url: String) throws(Invalid) {
        let problem = "'\(shown(url))' is not a ws://HOST:PORT/PATH URL"
        guard url.utf8.count <= 4096, let parts = URLComponents(string: url) else {
            throw Invalid("--transcribe", problem)
        }
        if parts.scheme?.lowercased() == "wss" {
            throw Invalid("--transcribe", "'\(shown(url))': wss:// is not supported (use ws://)")
        }
        guard parts.scheme?.lowercased() == "ws", let host = parts.host, !host.isEmpty, parts.user == nil,
            parts.fragment == nil, (parts.port ?? 80) > 0, (parts.port ?? 80) <= 65_535
        else { throw Invalid("--transcribe", problem) }
    }

    /// `--mode` (any case) as its protocol name.
    static func mode(_ text: String) throws(Invalid) -> String {
        let upper = text.uppercased()
        guard ParticipantMode(rawValue: upper) != nil else {
            throw Invalid("--mode", "'\(shown(text))' is not SEND_AND_RECV, RECV_ONLY or SIGNALLING_ONLY")
        }
        return upper
    }

    /// `--consume`: nil ids for `all`/`stage`/`none` (returned as the word), else the id list.
    static func consumePolicy(_ text: String) throws(Invalid) -> (word: String?, ids: [String]) {
        if ["all", "stage", "none"].contains(text) { return (text, []) }
        let ids = idList(text)
        guard !ids.isEmpty else { throw Invalid("--consume", "empty id list") }
        return (nil, ids)
    }

    /// `--consume-kinds`: a non-empty subset of `audio,video`.
    static func kinds(_ text: String) throws(Invalid) -> Set<String> {
        var set: Set<String> = []
        for kind in idList(text) {
            guard kind == "audio" || kind == "video" else {
                throw Invalid("--consume-kinds", "'\(shown(kind))' is not audio or video")
            }
            set.insert(kind)
        }
        return set
    }

    /// `--accept-invites`: the word, or the ids of `from:ID,ID`.
    static func invitePolicy(_ text: String) throws(Invalid) -> (word: String?, ids: [String]) {
        if ["trusted", "yes", "no"].contains(text) { return (text, []) }
        guard text.hasPrefix("from:") else {
            throw Invalid("--accept-invites", "'\(shown(text))' is not trusted, yes, no or from:ID,ID")
        }
        let ids = idList(String(text.dropFirst(5)))
        guard !ids.isEmpty else { throw Invalid("--accept-invites", "empty id list") }
        return (nil, ids)
    }

    static func idList(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    private static func isDuration(_ value: Double) -> Bool { value > 0 && value.isFinite && value <= 365 * 86400 }

    /// A room or participant id: 1–256 bytes, no control characters.
    private static func checkName(_ name: String, option: String) throws(Invalid) {
        guard !name.isEmpty else { throw Invalid(option, "must not be empty") }
        guard name.utf8.count <= 256, !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { throw Invalid(option, "'\(shown(name))' must be 1-256 bytes without control characters") }
    }

    /// `text` as it may appear in a message: at most 64 characters, non-printable ones as `?`.
    public static func shown(_ text: String) -> String {
        String(text.unicodeScalars.prefix(64).map { $0.value >= 0x20 && $0.value != 0x7F ? Character($0) : "?" })
    }
}
