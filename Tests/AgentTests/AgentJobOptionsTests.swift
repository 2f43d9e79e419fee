import Agent
import Egress
import Foundation
import Media
import RTCWire
import Testing

// Issue 34: the agent's options as data (what a fleet job carries), with their validation in Agent.

@Suite struct AgentJobOptionsTests {
    @Test func joinArgumentsMapToTypedOptionsAndReadBackFromJSON() throws {
        let options = try AgentJobOptions(arguments: [
            "--server", "http://h:7880", "--room=standup", "--token", "T", "--id", "rec", "--name", "Rec",
            "--agent", "--mode", "send_and_recv", "--consume", "a, b", "--consume-kinds", "video", "--max-video", "4",
            "--quality", "low", "--accept-invites", "from:mod", "--reconnect-for", "0", "--lobby-wait", "1.5m",
            "--record-format", "ogg+ivf", "--relay", "rtp://127.0.0.1:5004", "--relay-room", "mirror", "--video",
            "none", "--audio", "tone", "--ice-servers", "turn:u:p@10.0.0.1:3478", "--duration", "500ms",
            "--impair", #"{"down": {"loss": 0.1}}"#,
            "--video-codec", "h264",
            "--snapshot-every", "2s",
        ])
        try options.validate()
        #expect(options.room == "standup" && options.token == "T" && options.agent == true)
        #expect(options.reconnectFor == 0 && options.lobbyWait == 90 && options.duration == 0.5)
        let json = try JSONEncoder().encode(options)
        #expect(try JSONDecoder().decode(AgentJobOptions.self, from: json) == options)
        let agent = try options.roomAgentOptions(recordDirectory: "/r", checkMedia: false)
        #expect(agent.signalingURL == "ws://h:7880" && agent.mode == .SEND_AND_RECV)
        #expect(agent.consume == .ids(["a", "b"]) && agent.kinds == [.video] && agent.maxVideo == 4)
        #expect(agent.videoQuality == .low && agent.acceptInvites == .from(["mod"]))
        #expect(agent.reconnect.window == 0 && agent.lobbyWait == 90)
        #expect(agent.recordFormat == .oggIVF && agent.recordDirectory == "/r")
        #expect(agent.rtpOutputURL == "rtp://127.0.0.1:5004" && agent.republishRoom == "mirror")
        #expect(agent.iceServers?.first?.username == "u")
        #expect(agent.impairment?.down.loss == 0.1 && options.impair == #"{"down": {"loss": 0.1}}"#)
        #expect(agent.videoCodec == "h264")
        #expect(options.snapshotEvery == 2 && agent.snapshotInterval == 2)
        #expect(options.simulcast == nil && !agent.simulcast)
        let simulcast = try AgentJobOptions(arguments: [
            "--server", "http://h:1", "--room", "r", "--token", "T", "--simulcast",
        ])
        #expect(simulcast.simulcast == true)
        #expect(try simulcast.roomAgentOptions(recordDirectory: nil, checkMedia: false).simulcast)
    }

    @Test func eachBadValueIsRefusedNamingItsOption() {
        let cases: [([String], String)] = [
            (["--server", "ftp://h"], "--server"), (["--server", "janus://h/1"], "--server"),
            (["--room", ""], "--room"), (["--token", ""], "--token"), (["--mode", "LOUD"], "--mode"),
            (["--consume", ","], "--consume"), (["--consume-kinds", "smell"], "--consume-kinds"),
            (["--max-video", "-1"], "--max-video"), (["--quality", "ultra"], "--quality"),
            (["--accept-invites", "maybe"], "--accept-invites"), (["--accept-invites", "from:"], "--accept-invites"),
            (["--reconnect-for", "soon"], "--reconnect-for"), (["--lobby-wait", "0"], "--lobby-wait"),
            (["--duration", "nan"], "--duration"), (["--duration", "2000000h"], "--duration"),
            (["--record-format", "avi"], "--record-format"), (["--relay-room", "r"], "--relay-room"),
            (["--relay", "http://x"], "--relay"), (["--ice-servers", "stun:h"], "--ice-servers"),
            (["--record", "/tmp"], "options"), (["--secret", "s"], "options"), (["stray"], "options"),
            (["--consume"], "--consume"), (["--impair", "dial-up"], "--impair"),
            (["--impair", #"{"up": {"delayMs": -5}}"#], "--impair"), (["--video-codec", "vp7"], "--video-codec"),
            (["--consume"], "--consume"), (["--snapshot-every", "0"], "--snapshot-every"),
            (["--snapshot-every", "often"], "--snapshot-every"),
            (["--simulcast", "--video", "clip.ivf"], "--simulcast"),
            (["--simulcast", "--video", "none"], "--simulcast"),
        ]
        for (extra, option) in cases {
            // Later values win, so each case overrides one valid option.
            let arguments = ["--server", "http://h:1", "--room", "r", "--token", "T"] + extra
            do {
                let options = try AgentJobOptions(arguments: arguments)
                _ = try options.roomAgentOptions(recordDirectory: nil, checkMedia: false)
                Issue.record("\(extra) was accepted")
            } catch {
                #expect(error.option == option, "\(extra): \(error)")
            }
        }
    }

    @Test func audioEgressOptionsTravelAsDataAndBadOnesAreRefused() throws {
        let options = try AgentJobOptions(arguments: [
            "--server", "http://h:1", "--room", "r", "--token", "T", "--mix-audio", "/out/room.ogg",
            "--transcribe", "ws://10.0.0.5:9000/stt?lang=en", "--transcribe-rate", "48000",
        ])
        let json = try JSONEncoder().encode(options)
        let decoded = try JSONDecoder().decode(AgentJobOptions.self, from: json)
        #expect(decoded == options && decoded.mixAudio == "/out/room.ogg" && decoded.transcribeRate == 48_000)
        let agent = try decoded.roomAgentOptions(recordDirectory: nil, checkMedia: false)
        #expect(
            agent.audioEgress
                == AudioEgress.Options(
                    mixPath: "/out/room.ogg", transcribeURL: "ws://10.0.0.5:9000/stt?lang=en", transcribeRate: 48_000))
        // The default rate is 16 kHz; nothing asked, nothing produced.
        let plain = try AgentJobOptions(arguments: ["--server", "http://h:1", "--room", "r", "--token", "T"])
        #expect(try plain.roomAgentOptions(recordDirectory: nil, checkMedia: false).audioEgress.isEmpty)
        for (flag, value, reason) in [
            ("--transcribe", "http://h:1/x", "is not a ws://HOST:PORT/PATH URL"),
            ("--transcribe", "wss://h/x", "wss:// is not supported"),
            ("--transcribe", "ws://:80/x", "is not a ws://HOST:PORT/PATH URL"),
            ("--transcribe", "ws://h:99999/x", "is not a ws://HOST:PORT/PATH URL"),
            ("--transcribe", "ws://u:p@h/x", "is not a ws://HOST:PORT/PATH URL"),
            ("--transcribe", "not a url", "is not a ws://HOST:PORT/PATH URL"),
            ("--transcribe-rate", "44100", "is not 16000 or 48000"),
            ("--mix-audio", "/out/room.wav", "is not a .ogg, .opus, .webm, .mkv or .mp4 file"),
            ("--mix-audio", "", "is not a .ogg"),
        ] {
            do {
                let bad = try AgentJobOptions(arguments: [
                    "--server", "http://h:1", "--room", "r", "--token", "T", flag, value,
                ])
                try bad.validate()
                Issue.record("\(flag) \(value) was accepted")
            } catch {
                #expect(error.option == flag && error.reason.contains(reason), "\(flag) \(value): \(error)")
                #expect(error.description.hasPrefix("bad value for \(flag): "))
            }
        }
    }

    @Test func compositeOptionsTravelAsDataAndBadOnesAreRefused() throws {
        let options = try AgentJobOptions(arguments: [
            "--server", "http://h:1", "--room", "r", "--token", "T", "--composite", "/out/room.mp4", "--composite",
            "/out/room.webm", "--layout", "speaker", "--size", "640x360", "--fps", "25", "--composite-codec", "vp8",
            "--composite-bitrate", "1.5M", "--composite-preset", "ultrafast", "--composite-labels", "off",
        ])
        let decoded = try JSONDecoder().decode(AgentJobOptions.self, from: try JSONEncoder().encode(options))
        #expect(decoded == options && decoded.composite == ["/out/room.mp4", "/out/room.webm"])
        let agent = try decoded.roomAgentOptions(recordDirectory: nil, checkMedia: false)
        #expect(agent.composite == ["/out/room.mp4", "/out/room.webm"])
        let c = agent.compositeOptions
        #expect((c.width, c.height, c.fps, c.codec, c.bitrate) == (640, 360, 25, .vp8, 1_500_000))
        #expect(c.layout == .speaker && c.preset == "ultrafast" && !c.labels)
        // The HLS options reach the output's options; the names match the output's formats.
        let hls = try AgentJobOptions(arguments: [
            "--server", "http://h:1", "--room", "r", "--token", "T", "--composite", "live.m3u8", "--hls-segment", "ts",
            "--hls-window", "10",
        ]).roomAgentOptions(recordDirectory: nil, checkMedia: false)
        #expect(hls.hlsOptions.segmentFormat == .ts && hls.hlsOptions.window == 10)
        #expect(AgentJobOptions.hlsSegments == Set(HLSOutput.Options.SegmentFormat.allCases.map(\.rawValue)))
        // Defaults: 1280x720, 30 fps, H.264, grid, labels on.
        let plain = try AgentJobOptions(arguments: [
            "--server", "http://h:1", "--room", "r", "--token", "T", "--composite", "a.MP4",
        ]).roomAgentOptions(recordDirectory: nil, checkMedia: false)
        let d = plain.compositeOptions
        #expect((d.width, d.height, d.fps, d.codec, d.layout, d.labels) == (1280, 720, 30, .h264, .grid, true))
        for (extra, flag, reason) in [
            (["--composite", "x.mp4", "--size", "13x7"], "--size", "outside 64x64"),
            (["--composite", "x.mp4", "--size", "641x360"], "--size", "must be even"),
            (["--composite", "x.mp4", "--size", "big"], "--size", "is not WIDTHxHEIGHT"),
            (["--composite", "x.avi"], "--composite", "is not a .mp4, .webm, .mkv, .m3u8, rtmp:// destination"),
            (["--composite", "x.m3u8", "--composite-codec", "vp8"], "--composite", "HLS and RTMP carry H.264"),
            (["--composite", "rtmp://h/a/b", "--composite-codec", "vp8"], "--composite", "HLS and RTMP carry H.264"),
            (["--composite", "dir/"], "--composite", "is not a"),
            (["--composite", "x.webm"], "--composite", "WebM holds VP8"),
            (["--composite", "x.mp4", "--composite", "x.mp4"], "--composite", "given twice"),
            (["--composite", "x.mp4", "--layout", "pip"], "--layout", "is not grid or speaker"),
            (["--composite", "x.mp4", "--fps", "61"], "--fps", "is not a frame rate"),
            (["--composite", "x.mp4", "--composite-codec", "vp9"], "--composite-codec", "is not h264 or vp8"),
            (["--composite", "x.mp4", "--composite-bitrate", "10"], "--composite-bitrate", "100k to 50M"),
            (["--composite", "x.mp4", "--composite-preset", "warp"], "--composite-preset", "is not one of"),
            (["--composite", "x.mp4", "--composite-labels", "yes"], "--composite-labels", "is not on or off"),
            (["--size", "640x360"], "--size", "needs --composite"),
            (["--composite", "x.mp4", "--hls-segment", "ts"], "--hls-segment", "needs an .m3u8"),
            (["--composite", "x.m3u8", "--hls-segment", "mpegts"], "--hls-segment", "is not fmp4 or ts"),
            (["--composite", "x.m3u8", "--hls-window", "0"], "--hls-window", "is not a segment count"),
        ] {
            do {
                let bad = try AgentJobOptions(
                    arguments: ["--server", "http://h:1", "--room", "r", "--token", "T"] + extra)
                try bad.validate()
                Issue.record("\(extra) was accepted")
            } catch {
                #expect(error.option == flag && error.reason.contains(reason), "\(extra): \(error)")
            }
        }
    }

    /// Every destination kind the options accept is one the factory opens (the two name them apart).
    @Test func everyCompositeDestinationHasAnOutput() throws {
        let dir = NSTemporaryDirectory() + "understudy-composite-kinds-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for kind in AgentJobOptions.compositeDestinations where !kind.hasSuffix("://") {
            let output = try CompositeOutputs.make(destination: "\(dir)/out\(kind.uppercased())")
            try output.finish()
        }
    }

    @Test func hostileJSONIsRefusedByValidation() throws {
        for text in [
            #"{"server":"ws://h:1","room":"r","token":"T","maxVideo":-3}"#,
            #"{"server":"ws://h:1","room":"r\u0000","token":"T"}"#,
            #"{"server":"ws://h:1","room":"r","token":"T","duration":1e300}"#,
        ] {
            let options = try JSONDecoder().decode(AgentJobOptions.self, from: Data(text.utf8))
            #expect(throws: AgentJobOptions.Invalid.self, "\(text)") { try options.validate() }
        }
        // Not even JSON of options: the decoder refuses it.
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(AgentJobOptions.self, from: Data(#"{"room":"r"}"#.utf8))
        }
    }

    @Test func everyRecordFormatNameIsAFormatOfTheAgent() {
        for name in AgentJobOptions.recordFormats { #expect(RoomAgent.RecordFormat(rawValue: name) != nil, "\(name)") }
    }

    @Test func everyVideoCodecNameIsOneTheSourcesEncode() throws {
        var fixed: Set<MediaCodec> = []
        for name in AgentJobOptions.videoCodecs {
            switch try LocalSources.videoCodecChoice(name) {
            case .fixed(let codec): fixed.insert(codec)
            case .auto: #expect(name == "auto")
            }
        }
        #expect(fixed == Set(VideoEncoders.codecs))
        #expect(throws: MediaSourceError.self) { try LocalSources.videoCodecChoice("vp7") }
        #expect(throws: AgentJobOptions.Invalid.self) {
            var options = AgentJobOptions(server: "http://h:1", room: "r", token: "T")
            options.videoCodec = "vp7"
            try options.validate()
        }
    }

    @Test func mediaPathsAreCheckedOnlyWhenAsked() throws {
        var options = AgentJobOptions(server: "http://h:1", room: "r", token: "T")
        options.video = "/nonexistent/understudy.ivf"
        _ = try options.roomAgentOptions(recordDirectory: nil, checkMedia: false)
        #expect(throws: AgentJobOptions.Invalid.self) {
            try options.roomAgentOptions(recordDirectory: nil, checkMedia: true)
        }
    }
}
