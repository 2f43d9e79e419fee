// `understudy --help`, `understudy COMMAND --help|-h`: every command's usage, each of its options, an
// example. The parsers take their option names from these tables, so a command cannot accept an
// option that its help does not list.

/// One command's help, and the option names its parser accepts.
struct CommandHelp {
    struct Option {
        var name: String
        /// What the value looks like (`HOST:PORT`); nil for a switch.
        var value: String?
        var text: String
    }

    var name: String
    var synopsis: String
    var summary: String
    var options: [Option]
    var examples: [String]
    var notes: String = ""

    var valueOptions: Set<String> { Set(options.filter { $0.value != nil }.map(\.name)) }
    var switches: Set<String> { Set(options.filter { $0.value == nil }.map(\.name)) }

    /// The options named in `names` (for a subcommand that takes a subset).
    func subset(_ names: Set<String>) -> CommandHelp {
        var copy = self
        copy.options = options.filter { names.contains($0.name) }
        return copy
    }

    var text: String {
        var out = "usage: understudy \(synopsis)\n\n\(summary)\n"
        if !options.isEmpty {
            out += "\noptions:\n"
            let width = min(34, options.map { $0.name.count + ($0.value.map { $0.count + 1 } ?? 0) }.max() ?? 0)
            for option in options {
                let left = option.name + (option.value.map { " " + $0 } ?? "")
                let pad = String(repeating: " ", count: max(1, width - left.count + 2))
                out += "  \(left)\(pad)\(option.text)\n"
            }
            out += "  -h, --help" + String(repeating: " ", count: max(1, width - 8)) + "this help\n"
        }
        if !notes.isEmpty { out += "\n\(notes)\n" }
        out += "\nexample" + (examples.count > 1 ? "s" : "") + ":\n"
        for example in examples { out += "  \(example)\n" }
        return out
    }
}

/// Shared option texts.
private let serverOption = CommandHelp.Option(
    name: "--server", value: "URL", text: "the room server (http://HOST:PORT or ws://HOST:PORT)")
private let roomOption = CommandHelp.Option(name: "--room", value: "ROOM", text: "the room id")
private let tokenOption = CommandHelp.Option(name: "--token", value: "JWT", text: "a room token")
private let secretOption = CommandHelp.Option(
    name: "--secret", value: "S", text: "sign a token here with the server's secret (or UNDERSTUDY_SECRET)")
private let redisOption = CommandHelp.Option(
    name: "--redis", value: "redis://HOST:PORT[/DB]", text: "the fleet's Redis (redis://:PASSWORD@HOST:PORT/DB)")
private let logFormatOption = CommandHelp.Option(
    name: "--log-format", value: "text|json", text: "one line per event, as text (default) or JSON")

/// The network a client's media sees (docs/load-testing.md, "Impairment").
let impairOption = CommandHelp.Option(
    name: "--impair", value: "PRESET|JSON",
    text: "shape the media's network: none, 3g, lossy-wifi, congested or {\"down\":{…},\"up\":{…}}")

/// TURN servers for the client's media (docs: README "TURN and ICE-TCP").
let iceServersOption = CommandHelp.Option(
    name: "--ice-servers", value: "turn:USER:PASS@HOST:PORT[?transport=udp|tcp],turns:…",
    text: "TURN servers to relay media through (default: those the room server hands out)")

enum Help {
    static let whip = CommandHelp(
        name: "whip", synopsis: "whip URL [options]",
        summary: "Publish the test pattern and tone (or files) to a WHIP endpoint (RFC 9725).",
        options: [
            .init(name: "--token", value: "T", text: "Bearer token for the endpoint"),
            .init(name: "--video", value: "testsrc|none|FILE.ivf", text: "what to send as video (default testsrc)"),
            .init(name: "--audio", value: "tone|none|FILE.ogg", text: "what to send as audio (default tone)"),
            .init(name: "--duration", value: "SECONDS", text: "how long to publish (default 30 s)"),
            iceServersOption,
        ], examples: ["understudy whip http://127.0.0.1:8080/whip --duration 20s"])

    static let whep = CommandHelp(
        name: "whep", synopsis: "whep URL --record FILE [options]",
        summary: "Play from a WHEP endpoint and record without transcoding.",
        options: [
            .init(name: "--token", value: "T", text: "Bearer token for the endpoint"),
            .init(name: "--record", value: "FILE.webm|.mkv|.ogg|.ivf", text: "where to record (required)"),
            .init(name: "--duration", value: "SECONDS", text: "how long to play (default 30 s)"),
            iceServersOption,
        ], examples: ["understudy whep http://127.0.0.1:8080/whep --record out.webm --duration 20s"])

    static let serve = CommandHelp(
        name: "serve", synopsis: "serve [options]",
        summary: "Run the room server: HTTP + WebSocket signalling, the SFU, the browser page, the admin API.",
        options: [
            .init(name: "--listen", value: "HOST:PORT", text: "HTTP/WebSocket address (default 127.0.0.1:7880)"),
            .init(name: "--media-address", value: "IP", text: "address of the media sockets and ICE candidates"),
            .init(name: "--udp-port", value: "N", text: "one shared UDP port for every connection (default 7882)"),
            .init(name: "--udp-ports", value: "A-B", text: "one UDP port per connection from this range instead"),
            .init(name: "--config", value: "FILE.json", text: "settings and limits (docs/protocol.md, Limits)"),
            .init(
                name: "--stale-media", value: "MS",
                text: "drop media that waited longer than this in the shared port's queue (default 1000; 0: never)"),
            secretOption,
            .init(
                name: "--anyone-may-end", value: nil, text: "let every participant end the room (default: allow_mod)"),
            .init(
                name: "--redis", value: "redis://HOST:PORT[/DB]",
                text: "join a cluster of room servers over this Redis (docs/cluster.md)"),
            .init(name: "--node-id", value: "ID", text: "this node's name in the cluster"),
            .init(name: "--advertise", value: "HOST:PORT", text: "where clients and other nodes reach this node"),
            .init(
                name: "--edge-audience", value: "N",
                text: "serve up to N audience members per room whose stage lives on another node (default 0: off)"),
            .init(
                name: "--jobs", value: "redis://HOST:PORT",
                text: "enable POST /admin/jobs on this fleet (docs/fleet.md)"),
            .init(
                name: "--webhook", value: "http://HOST:PORT/PATH",
                text: "POST signed job and room events here (repeatable; docs/protocol.md, Webhooks)"),
            .init(
                name: "--webhook-secret", value: "S",
                text: "HMAC-SHA256 key of the webhook events (or UNDERSTUDY_WEBHOOK_SECRET)"),
            .init(
                name: "--auto-record", value: "\"JOIN OPTIONS\"",
                text: "submit a job with these join options when a room is created (needs --jobs)"),
            .init(
                name: "--auto-stop-empty", value: "SECONDS|off",
                text: "stop an auto-started job once nobody but job agents was in its room this long (default 5)"),
            .init(
                name: "--auto-stop-agents-only", value: "SECONDS|off",
                text: "stop it once only agents were in its room this long (default off)"),
            .init(
                name: "--auto-stop-no-media", value: "SECONDS|off",
                text: "stop it once nobody but job agents published a track this long (default off)"),
            .init(
                name: "--ice-servers", value: "turn:USER:PASS@HOST:PORT[?transport=udp|tcp],…",
                text: "TURN servers handed to clients in the join response (iceServers)"),
            .init(
                name: "--ice-tcp", value: nil,
                text: "also accept media over TCP on the media port's number (ICE-TCP passive candidates)"),
        ],
        examples: [
            "understudy serve --secret s3cret",
            "understudy serve --listen 127.0.0.1:7890 --udp-port 7892 --secret s3cret --redis redis://127.0.0.1:6379 --node-id n2",
        ])

    static let token = CommandHelp(
        name: "token", synopsis: "token --secret S [options]", summary: "Print an HS256 room token.",
        options: [
            .init(name: "--secret", value: "S", text: "the server's secret (or UNDERSTUDY_SECRET)"),
            .init(name: "--room", value: "ROOM", text: "bind the token to one room"),
            .init(name: "--participant", value: "ID", text: "bind the token to one participant id"),
            .init(
                name: "--permissions", value: "LIST",
                text: "comma list of allow_join, ask_join, allow_mod (default allow_join)"),
            .init(name: "--ttl", value: "DURATION", text: "lifetime such as 45s, 30m, 2h, 1d (default 2h)"),
            .init(name: "--apikey", value: "KEY", text: "the apikey claim (default understudy)"),
            .init(name: "--roles", value: "LIST", text: "comma list of roles"),
        ],
        examples: [
            "understudy token --secret s3cret --room demo --participant alice --permissions allow_join,allow_mod --ttl 2h"
        ])

    static let demo = CommandHelp(
        name: "demo", synopsis: "demo [options]",
        summary:
            "The main job on the embedded server: an agent records a host, is invited on stage, publishes; A/V offsets.",
        options: [
            .init(name: "--duration", value: "SECONDS", text: "how long each phase runs (default 20)"),
            .init(name: "--out", value: "DIR", text: "where the recordings go"),
        ], examples: ["understudy demo --duration 20 --out demo-out"])

    static let analyze = CommandHelp(
        name: "analyze", synopsis: "analyze FILE [options]",
        summary:
            "Full-reference checks of a recording of the synthetic media (WebM/MKV/MP4): frame numbers read from each "
            + "picture (dropped, repeated), PSNR/SSIM against the regenerated source frame, freezes, black spans, "
            + "A/V offset. Exit 1 when the file cannot be analysed.",
        options: [
            .init(name: "--json", value: nil, text: "print the report as JSON"),
            .init(name: "--fps", value: "N", text: "the source's frame rate (default 30, the synthetic media's)"),
        ], examples: ["understudy analyze out/alice.webm", "understudy analyze out/alice.webm --json"],
        notes: "Definitions: docs/load-testing.md, \"Full-reference checks\".")

    static let bench = CommandHelp(
        name: "bench", synopsis: "bench [options]",
        summary: "Run the performance benchmarks; every figure is a ratio against an anchor of the same run.",
        options: [
            .init(name: "--quick", value: nil, text: "shrink every workload (a harness check; figures mean nothing)"),
            .init(name: "--only", value: "SECTIONS", text: "comma list of sections to run"),
            .init(
                name: "--out", value: "FILE", text: "write the report there (default docs/benchmarks.md for a full run)"
            ),
        ], examples: ["understudy bench --only join,cluster --out /tmp/bench.md"])

    static let join = CommandHelp(
        name: "join", synopsis: "join --server URL --room ROOM [--token T | --secret S] [options]",
        summary: "A headless participant: consumes, records, relays and follows stage invites until stopped.",
        options: [
            serverOption, roomOption, tokenOption, secretOption,
            .init(name: "--name", value: "NAME", text: "display name"),
            iceServersOption,
            impairOption,
            .init(name: "--id", value: "ID", text: "participant id"),
            .init(name: "--mode", value: "MODE", text: "SEND_AND_RECV, RECV_ONLY (default) or SIGNALLING_ONLY"),
            .init(name: "--agent", value: nil, text: "join as an agent"),
            .init(
                name: "--simulcast", value: nil,
                text: "on stage, send the test pattern in three layers; those the uplink cannot carry stop"),
            .init(name: "--consume", value: "all|stage|none|ID,ID", text: "whom to receive (default all)"),
            .init(name: "--consume-kinds", value: "audio,video", text: "which kinds to receive"),
            .init(name: "--max-video", value: "N", text: "receive at most N webcams"),
            .init(
                name: "--quality", value: "low|medium|high",
                text: "simulcast layer asked for each webcam (default: the top one the link carries)"),
            .init(
                name: "--accept-invites", value: "trusted|yes|no|from:ID,ID",
                text: "whose stage invites to follow (default trusted: senders whose token has allow_mod)"),
            .init(name: "--record", value: "DIR", text: "record each participant (and a manifest) there"),
            .init(
                name: "--record-format", value: "webm|mp4|ogg+ivf",
                text: "container of the recordings (default webm; mp4 is fragmented)"),
            .init(
                name: "--snapshot-every", value: "DURATION",
                text:
                    "with --record: write each consumed webcam's current picture (any codec) there as ID.jpg this often"
            ),
            .init(
                name: "--analyze", value: nil,
                text:
                    "with --record: decode each consumed webcam and check it against the synthetic source (drops, freezes, PSNR/SSIM) into the manifest and /metrics"
            ),
            .init(name: "--relay", value: "rtp://HOST:PORT", text: "relay plain RTP there (and write relay.sdp)"),
            .init(name: "--relay-room", value: "ROOM", text: "republish what is consumed into another room"),
            .init(
                name: "--mix-audio", value: "FILE",
                text: "mix every consumed mic into one Opus file (.ogg, .webm, .mkv, .mp4)"),
            .init(
                name: "--transcribe", value: "ws://HOST:PORT/PATH",
                text: "push each speaker's PCM and events there (docs/protocol.md)"),
            .init(
                name: "--transcribe-rate", value: "16000|48000", text: "PCM rate sent to --transcribe (default 16000)"),
            .init(
                name: "--composite", value: "OUT",
                text:
                    "write one picture of the stage with the mixed audio there: .mp4, .webm (vp8), .mkv, .m3u8 (HLS) or rtmp://host/app/key (repeatable)"
            ),
            .init(name: "--layout", value: "grid|speaker", text: "composite layout (default grid)"),
            .init(name: "--size", value: "WxH", text: "composite size, even (default 1280x720)"),
            .init(name: "--fps", value: "N", text: "composite frame rate, 1-60 (default 30)"),
            .init(name: "--composite-codec", value: "h264|vp8", text: "composite video codec (default h264)"),
            .init(name: "--composite-bitrate", value: "BPS", text: "composite video bitrate such as 2.5M (default)"),
            .init(name: "--composite-preset", value: "PRESET", text: "libx264 preset for h264 (default superfast)"),
            .init(name: "--composite-labels", value: "on|off", text: "names on the composite's tiles (default on)"),
            .init(
                name: "--hls-segment", value: "fmp4|ts",
                text: "segments of an .m3u8 output: fragmented MP4 or MPEG-TS (default fmp4)"),
            .init(name: "--hls-window", value: "N", text: "segments in an .m3u8 output's live playlist (default 6)"),
            .init(name: "--video", value: "testsrc|none|FILE", text: "what to send on stage (default testsrc)"),
            .init(name: "--audio", value: "tone|none|FILE|alsa:DEVICE", text: "what to send on stage (default tone)"),
            .init(
                name: "--video-codec", value: "auto|vp8|h264|vp9|av1",
                text:
                    "codec of the video sent on stage (default vp8; h264: libx264, a FILE must be H.264 .mkv; auto: what every receiver in the room accepts, H.264 first, followed as it changes)"
            ),
            .init(name: "--duration", value: "SECONDS", text: "leave after this long (default: until stopped)"),
            .init(name: "--metrics", value: "127.0.0.1:PORT", text: "serve Prometheus metrics there"),
            .init(
                name: "--reconnect-for", value: "DURATION",
                text: "keep reconnecting this long after a drop (default 5m; 0 turns it off)"),
            .init(
                name: "--lobby-wait", value: "DURATION",
                text: "with an ask_join token: wait this long to be let in, then withdraw (default: as the server)"),
            logFormatOption,
        ],
        examples: [
            "understudy join --server http://127.0.0.1:7880 --room demo --secret s3cret --consume stage --record out/",
            "understudy join --server http://127.0.0.1:7880 --room demo --secret s3cret --mix-audio room.ogg --transcribe ws://127.0.0.1:9000/stt",
            "understudy join --server http://127.0.0.1:7880 --room demo --secret s3cret --consume stage --composite room.mp4 --layout speaker",
            "understudy join --server janus://127.0.0.1:8088/1234 --record out/   (a Janus VideoRoom: docs/janus.md)",
        ])

    static let invite = CommandHelp(
        name: "invite", synopsis: "invite --server URL --room ROOM --participant ID [options]",
        summary: "Send a stage invite (a PubSub message) to one participant.",
        options: [
            serverOption, roomOption, .init(name: "--participant", value: "ID", text: "whom to invite"),
            .init(name: "--mode", value: "MODE", text: "the mode to invite to (default SEND_AND_RECV)"), tokenOption,
            secretOption,
        ],
        examples: ["understudy invite --server http://127.0.0.1:7880 --room demo --participant agent --secret s3cret"])

    static let pubsub = CommandHelp(
        name: "pubsub", synopsis: "pubsub publish|subscribe --server URL --room ROOM --topic T [options]",
        summary: "Publish one PubSub message, or print the messages of a topic as they arrive.",
        options: [
            serverOption, roomOption, .init(name: "--topic", value: "T", text: "the topic"),
            .init(name: "--message", value: "M", text: "the message (publish)"),
            .init(name: "--persist", value: nil, text: "keep it in the topic's history (publish)"), tokenOption,
            secretOption, .init(name: "--duration", value: "SECONDS", text: "how long to listen (subscribe)"),
        ],
        examples: [
            "understudy pubsub publish --server http://127.0.0.1:7880 --room demo --topic chat --message hi --persist --secret s3cret"
        ])

    static let load = CommandHelp(
        name: "load", synopsis: "load --server URL --room ROOM [--token T | --secret S] [options]",
        summary: "Many virtual participants in one process (or over a fleet with --workers); docs/load-testing.md.",
        options: [
            serverOption, roomOption, .init(name: "--rooms", value: "N", text: "spread over N rooms ROOM-1…ROOM-N"),
            tokenOption, secretOption,
            .init(name: "--publishers", value: "N", text: "bots publishing simulcast VP8 + Opus, per room (default 1)"),
            .init(name: "--audio-publishers", value: "N", text: "bots publishing audio only, per room"),
            .init(name: "--subscribers", value: "N", text: "RECV_ONLY bots, per room (default 10)"),
            .init(name: "--duration", value: "SECONDS", text: "how long the test runs (default 60s)"),
            .init(name: "--join-rate", value: "N/s", text: "joins per second (default 10/s)"),
            .init(name: "--layout", value: "speaker|3x3|4x4|5x5", text: "what each subscriber consumes (default 3x3)"),
            .init(name: "--no-simulcast", value: nil, text: "publish one layer"),
            .init(
                name: "--video-codec", value: "auto|vp8|h264|vp9|av1",
                text: "codec publishers send (default vp8; auto: what the room's receivers all accept, H.264 first)"),
            .init(name: "--invite-every", value: "SECONDS", text: "invite a subscriber on stage this often"),
            .init(
                name: "--wait-for-media", value: "SECONDS",
                text: "after --duration, go on until every open track has received media, at most this long in all"),
            .init(
                name: "--request-timeout", value: "SECONDS",
                text: "a request, or a publish connection's ICE + DTLS, fails after this long (default 15s)"),
            .init(name: "--threads", value: "N", text: "I/O threads (default: one per core)"),
            .init(name: "--json", value: "FILE", text: "write the full report as JSON"),
            .init(name: "--quiet", value: nil, text: "no progress line"),
            .init(name: "--id-prefix", value: "PREFIX", text: "prefix of the bots' participant ids"),
            iceServersOption,
            impairOption,
            .init(name: "--impair-share", value: "SHARE", text: "the share of bots --impair applies to (default 1)"),
            .init(
                name: "--quality-metrics", value: "on|off",
                text: "measure each received track's fps, freezes and MOS (default on)"),
            .init(
                name: "--reconnect", value: "SECONDS",
                text: "a dropped bot rejoins through any node of the cluster for up to this long (report: reconnects)"),
            .init(
                name: "--expect-participants", value: "N",
                text: "the room holds N participants in all, some from other processes (the roster check)"),
            .init(
                name: "--stay", value: "SECONDS",
                text: "after the run and its roster check, stay joined this long (other processes check theirs)"),
            .init(
                name: "--workers", value: "redis://HOST:PORT",
                text: "run the test over every worker of this fleet and merge the reports (docs/fleet.md)"),
        ],
        examples: [
            "understudy load --server http://127.0.0.1:7880 --room load --secret s3cret --publishers 2 --subscribers 50 --duration 60s",
            "understudy load --server janus://127.0.0.1:8088/1234 --publishers 2 --subscribers 20   (docs/janus.md)",
        ])

    static let scenario = CommandHelp(
        name: "scenario", synopsis: "scenario FILE.json... [options]",
        summary: "Run scripted stage tests with bots and expectations (docs/scenarios.md); exit 0 only when all hold.",
        options: [
            .init(
                name: "--server", value: "URL",
                text: "a room server to use (default: an embedded one), or janus://HOST:PORT/ROOM (docs/janus.md)"),
            secretOption, .init(name: "--junit", value: "FILE", text: "write a JUnit XML report"),
            .init(name: "--out", value: "DIR", text: "where the bots' recordings go"),
            .init(name: "--quiet", value: nil, text: "only the result lines"),
        ],
        examples: [
            "understudy scenario examples/seed000-stage-invite.json --junit report.xml",
            "understudy scenario examples/janus-stage.json --server janus://127.0.0.1:8088/1234",
        ])

    static let worker = CommandHelp(
        name: "worker", synopsis: "worker --redis redis://HOST:PORT [options]",
        summary: "Run recording/relay jobs (and load-test shares) from a fleet's Redis until stopped (docs/fleet.md).",
        options: [
            redisOption,
            .init(name: "--capacity", value: "N", text: "stream units this worker runs at once (default 60 per core)"),
            .init(name: "--out", value: "DIR", text: "where jobs write (DIR/JOB/attempt-N; default jobs)"),
            .init(name: "--id", value: "ID", text: "this worker's name (default host-pid)"),
            .init(
                name: "--claim-timeout", value: "SECONDS",
                text: "take over a silent worker's jobs after this (default 5s)"),
            logFormatOption,
        ], examples: ["understudy worker --redis redis://127.0.0.1:6379 --out /var/lib/understudy/jobs"])

    static let jobs = CommandHelp(
        name: "jobs",
        synopsis:
            "jobs submit --redis URL [--job-id ID] [--cost N] <join options> | jobs list|workers --redis URL [--json] | jobs stop ID --redis URL",
        summary: "Queue, list and stop a fleet's recording jobs; list its live workers (docs/fleet.md).",
        options: [
            redisOption,
            .init(
                name: "--job-id", value: "ID",
                text: "the new job's id: 1-64 of A-Z a-z 0-9 . _ -, not . or .. (submit; default generated)"),
            .init(name: "--cost", value: "N", text: "expected stream units (submit; default max-video, at least 2)"),
            .init(name: "--json", value: nil, text: "print JSON (list, workers)"),
        ],
        examples: [
            "understudy jobs submit --redis redis://127.0.0.1:6379 --server http://127.0.0.1:7880 --room demo --secret s3cret --consume stage --duration 10m",
            "understudy jobs list --redis redis://127.0.0.1:6379",
        ], notes: "submit takes every option of `understudy join` except --record and --metrics (the worker chooses).")

    static let all: [CommandHelp] = [
        serve, token, join, invite, pubsub, whip, whep, load, scenario, worker, jobs, demo, bench, analyze,
    ]

    static func command(_ name: String) -> CommandHelp? { all.first { $0.name == name } }

    /// Whether `args` ask for help (`--help` or `-h` anywhere).
    static func isRequested(_ args: [String]) -> Bool { args.contains("--help") || args.contains("-h") }
}

extension Arguments {
    /// Parses `args` with the options that `help` lists.
    init(_ args: [String], help: CommandHelp) throws(Failure) {
        try self.init(args, valueOptions: help.valueOptions, switches: help.switches)
    }
}

/// `understudy completion bash`: a bash completion script built from the same tables
/// (`source <(understudy completion bash)`).
func runCompletion(_ args: [String]) {
    guard args == ["bash"] else { fail("completion: only 'bash' is supported (understudy completion bash)", code: 2) }
    var script = "# bash completion for understudy (generated by `understudy completion bash`)\n"
    script += "_understudy() {\n"
    script += "    local cur=${COMP_WORDS[COMP_CWORD]}\n"
    script += "    if [[ $COMP_CWORD -eq 1 ]]; then\n"
    script +=
        "        COMPREPLY=($(compgen -W \"\(Help.all.map(\.name).joined(separator: " ")) completion help\" -- \"$cur\"))\n"
    script += "        return\n    fi\n"
    script += "    case ${COMP_WORDS[1]} in\n"
    for command in Help.all {
        let words = (command.options.map(\.name) + ["--help"]).joined(separator: " ")
        script += "    \(command.name)) COMPREPLY=($(compgen -W \"\(words)\" -- \"$cur\")) ;;\n"
    }
    script += "    esac\n}\ncomplete -o default -F _understudy understudy\n"
    print(script, terminator: "")
}
