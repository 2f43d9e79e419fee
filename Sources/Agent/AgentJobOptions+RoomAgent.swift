import Egress
import Media
import RTC
import RTCWire
import Understudy

extension AgentJobOptions {
    /// `--consume` (`all`, `stage`, `none` or `ID,ID`) as a policy; the Janus agent reads it too.
    public static func consumePolicy(parsing text: String) throws(Invalid) -> RoomAgent.ConsumePolicy {
        let policy = try consumePolicy(text)
        switch policy.word {
        case "all": return .all
        case "stage": return .stage
        case "none": return .none
        default: return .ids(policy.ids)
        }
    }

    /// `--consume-kinds` (`audio`, `video` or both, comma-separated) as media kinds.
    public static func kinds(parsing text: String) throws(Invalid) -> Set<MediaKind> {
        Set(try kinds(text).compactMap(MediaKind.init(rawValue:)))
    }

    /// The ``RoomAgent/Options`` these options describe, recording into `recordDirectory` (nil
    /// records nothing).
    ///
    /// Validates first (``validate()``), then parses what needs the media stack: the ICE servers and
    /// the `--relay` URL. With `checkMedia` the `--video`/`--audio` files are read and an ALSA device is
    /// opened, which may block (a FIFO, a hung mount): a fleet worker does that on a thread of its own
    /// with a deadline, and a server never does it for a request.
    public func roomAgentOptions(recordDirectory: String?, checkMedia: Bool) throws(Invalid) -> RoomAgent.Options {
        try validate()
        var options = RoomAgent.Options(roomId: room, token: token, signalingURL: try signalingURL())
        options.participantName = name ?? "understudy"
        options.participantId = id
        options.asAgent = agent ?? false
        options.simulcast = simulcast ?? false
        options.mode =
            try mode.map { text throws(Invalid) in Mode(rawValue: try Self.mode(text)) ?? .RECV_ONLY }
            ?? .RECV_ONLY
        if let consume { options.consume = try Self.consumePolicy(parsing: consume) }
        if let consumeKinds { options.kinds = try Self.kinds(parsing: consumeKinds) }
        options.maxVideo = maxVideo
        options.videoQuality = quality.flatMap(VideoQuality.init(rawValue:))
        if let acceptInvites {
            let policy = try Self.invitePolicy(acceptInvites)
            switch policy.word {
            case "trusted": options.acceptInvites = .trusted
            case "yes": options.acceptInvites = .yes
            case "no": options.acceptInvites = .no
            default: options.acceptInvites = .from(policy.ids)
            }
        }
        if let reconnectFor { options.reconnect = ReconnectPolicy(window: reconnectFor, maxDelay: 10) }
        options.lobbyWait = lobbyWait
        options.recordDirectory = recordDirectory
        options.snapshotInterval = snapshotEvery
        options.analyze = analyze == true
        if let recordFormat {
            guard let format = RoomAgent.RecordFormat(rawValue: recordFormat) else {
                throw Invalid("--record-format", "'\(Self.shown(recordFormat))' is not a recording format")
            }
            options.recordFormat = format
        }
        options.republishRoom = relayRoom
        options.republishRoomToken = relayRoom == nil ? nil : relayRoomToken
        if let relay {
            do { _ = try RTPOutput.parseURL(relay) } catch { throw Invalid("--relay", "\(error)") }
            options.rtpOutputURL = relay
        }
        if let iceServers {
            do { options.iceServers = try ICEServer.parseList(iceServers) } catch {
                throw Invalid("--ice-servers", error.description)
            }
        }
        if let impair {
            do { options.impairment = try Impairment.parse(impair) } catch {
                throw Invalid("--impair", error.description)
            }
        }
        if checkMedia {
            do { try LocalSources.validate(video: video, audio: audio, videoCodec: videoCodec) } catch {
                if case .badOption(let option, _, _) = error { throw Invalid(option, error.explanation) }
                throw Invalid("--video/--audio", error.description)
            }
        }
        options.video = video
        options.audio = audio
        options.audioEgress = AudioEgress.Options(
            mixPath: mixAudio, transcribeURL: transcribe, transcribeRate: transcribeRate ?? 16_000)
        options.videoCodec = videoCodec
        if let composite {
            options.composite = composite
            var c = Compositor.Options()
            if let size { (c.width, c.height) = try Self.compositeSize(size) }
            if let fps { c.fps = fps }
            if let compositeCodec { c.codec = compositeCodec == "vp8" ? .vp8 : .h264 }
            if let compositeBitrate { c.bitrate = compositeBitrate }
            if let compositePreset { c.preset = compositePreset }
            if let layout { c.layout = CompositeLayout.Kind(rawValue: layout) ?? .grid }
            if let compositeLabels { c.labels = compositeLabels }
            options.compositeOptions = c
            if let hlsSegment { options.hlsOptions.segmentFormat = hlsSegment == "ts" ? .ts : .fmp4 }
            if let hlsWindow { options.hlsOptions.window = hlsWindow }
        }
        return options
    }
}
