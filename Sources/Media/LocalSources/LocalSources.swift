import RTCWire

/// What the agent publishes when it is on stage, from its `--video` and `--audio` options.
///
/// `--video testsrc|none|FILE` (VP8 in `.ivf`, `.webm`, `.mkv`; H.264 in `.mkv`),
/// `--video-codec auto|vp8|h264|vp9|av1` (what the test pattern is encoded in and a file must hold; VP9
/// and AV1 are the test pattern's only; `auto` the test pattern's only, in the codec the room accepts) and
/// `--audio tone|none|FILE|alsa:DEVICE` (Opus in `.ogg`, `.opus`, `.webm`; an ALSA capture device).
/// A missing option means the synthetic source (`testsrc`, `tone`).
public enum LocalSources {
    /// A parsed `--video` value.
    public enum Video: Sendable, Equatable {
        /// The synthetic test pattern with its sync flashes.
        case testPattern
        /// No video is published.
        case none
        /// VP8 from an IVF or WebM/Matroska file, looped.
        case file(String)
    }

    /// A parsed `--audio` value.
    public enum Audio: Sendable, Equatable {
        /// The synthetic tone with its sync beeps.
        case tone
        /// No audio is published.
        case none
        /// Opus from an Ogg or WebM/Matroska file, looped.
        case file(String)
        /// An ALSA capture device (`alsa:DEVICE`), through webrtc-audio-processing.
        case alsa(device: String)
    }

    /// Parses a `--video` value (nil: `testsrc`). Does not touch the file; see ``validate(video:audio:)``.
    public static func video(_ value: String?) -> Video {
        switch value {
        case nil, "testsrc": return .testPattern
        case "none": return .none
        case let path?: return .file(path)
        }
    }

    /// Parses an `--audio` value (nil: `tone`). Does not touch files or devices.
    public static func audio(_ value: String?) -> Audio {
        switch value {
        case nil, "tone": return .tone
        case "none": return .none
        case let v? where v.hasPrefix("alsa:"): return .alsa(device: String(v.dropFirst("alsa:".count)))
        case let path?: return .file(path)
        }
    }

    /// Parses a `--video-codec` value (nil: `vp8`) that must name one codec: the codec the test
    /// pattern is encoded in, and the one a video file must hold. Throws
    /// ``MediaSourceError/badOption(option:message:cause:)`` (also for `auto`: see ``videoCodecChoice(_:)``).
    public static func videoCodec(_ value: String?) throws(MediaSourceError) -> MediaCodec {
        guard case .fixed(let codec) = try videoCodecChoice(value) else {
            throw .badOption(option: "--video-codec", message: "'auto' is not vp8, h264, vp9 or av1", cause: nil)
        }
        return codec
    }

    /// Parses a `--video-codec` value (nil: `vp8`): one codec, or `auto`, the codec the room's
    /// receivers all accept (``VideoCodecChoice``). Throws
    /// ``MediaSourceError/badOption(option:message:cause:)``: "'x' is not auto, vp8, h264, vp9 or av1".
    public static func videoCodecChoice(_ value: String?) throws(MediaSourceError) -> VideoCodecChoice {
        guard let choice = VideoCodecChoice.parse(value) else {
            throw .badOption(
                option: "--video-codec",
                message: "'\(value?.prefix(64) ?? "")' is not \(VideoCodecChoice.optionValues)", cause: nil)
        }
        return choice
    }

    /// Whether `kind` is published at all with these options (false for `none`).
    public static func publishes(_ kind: MediaKind, video: String?, audio: String?) -> Bool {
        kind == .video ? Self.video(video) != .none : Self.audio(audio) != .none
    }

    /// Checks both options at startup: files are read and parsed, an ALSA device is opened and
    /// closed. Throws ``MediaSourceError/badOption(option:message:cause:)``, which reads as one line, e.g.
    /// `--video: 'x.mp4' is not testsrc, none or a readable .ivf/.webm file (x.mp4: MP4/QuickTime …)`.
    ///
    /// `videoCodec` is the `--video-codec` value (nil: `vp8`); a video file must hold that codec
    /// (`auto` is for the test pattern only: a file holds one codec, which the option names).
    public static func validate(video: String?, audio: String?, videoCodec: String? = nil) throws(MediaSourceError) {
        let choice = try Self.videoCodecChoice(videoCodec)
        if case .file(let path) = Self.video(video) {
            guard case .fixed(let codec) = choice else {
                throw .badOption(
                    option: "--video-codec",
                    message: "auto chooses the test pattern's codec; a file is sent as it is: name its codec",
                    cause: nil)
            }
            do { _ = try MediaFile.videoPlayback(path: path, codec: codec) } catch {
                throw .badOption(
                    option: "--video",
                    message: "'\(path)' is not testsrc, none or a readable \(MediaFile.videoFileKinds(codec)) file",
                    cause: error)
            }
        }
        switch Self.audio(audio) {
        case .file(let path):
            do { _ = try MediaFile.audioPlayback(path: path) } catch {
                throw .badOption(
                    option: "--audio",
                    message: "'\(path)' is not tone, none, alsa:DEVICE or a readable .ogg/.opus/.webm file",
                    cause: error)
            }
        case .alsa(let device):
            guard !device.isEmpty else {
                throw .badOption(
                    option: "--audio", message: "'alsa:' needs a device name, e.g. alsa:default", cause: nil)
            }
            do { try ALSACapture.probe(device: device) } catch {
                throw .badOption(
                    option: "--audio", message: "'alsa:\(device)' is not a usable capture device",
                    cause: .capture(error))
            }
        case .tone, .none:
            break
        }
    }

    /// A factory for `Room.mediaSourceFactory`, or nil when both options are the synthetic sources
    /// (the SDK's default, which shares one pre-encoded loop).
    ///
    /// Validates first (see ``validate(video:audio:)``). For a kind configured as `none` the factory
    /// throws ``MediaSourceError/notPublished(_:)``: do not start that track (check
    /// ``publishes(_:video:audio:)``). Files are read again and devices opened each time a track
    /// starts, and closed when it stops.
    ///
    /// With `--video-codec auto` the test pattern is encoded in `autoCodec()` each time the video
    /// track starts (the SDK's `Room.publishVideoCodec`); nil (or no closure) means VP8.
    public static func factory(
        video: String?, audio: String?, videoCodec: String? = nil, autoCodec: (@Sendable () -> MediaCodec)? = nil
    ) throws(MediaSourceError) -> MediaSourceFactory? {
        try validate(video: video, audio: audio, videoCodec: videoCodec)
        let v = Self.video(video)
        let a = Self.audio(audio)
        let choice = try Self.videoCodecChoice(videoCodec)
        if v == .testPattern && a == .tone && choice == .fixed(.vp8) { return nil }
        return { kind, layers in
            let codec: MediaCodec
            switch choice {
            case .fixed(let c): codec = c
            case .auto: codec = autoCodec?() ?? .vp8
            }
            return try makeSource(kind: kind, layers: layers, video: v, audio: a, videoCodec: codec)
        }
    }

    /// Makes one source for `kind` from parsed options; throws ``MediaSourceError``. The test
    /// pattern is encoded in `videoCodec` (once per process, ``SyntheticMedia/shared(layers:codec:)``);
    /// a file must hold it.
    public static func makeSource(
        kind: MediaKind, layers: Int, video: Video, audio: Audio, videoCodec: MediaCodec = .vp8
    ) throws(MediaSourceError) -> MediaSource {
        switch kind {
        case .video:
            switch video {
            case .testPattern:
                guard VideoEncoders.codecs.contains(videoCodec) else {
                    throw .badOption(option: "--video-codec", message: "\(videoCodec) cannot be encoded", cause: nil)
                }
                let n = max(1, min(layers, 3))
                do {
                    return SyntheticVideoSource(
                        media: try SyntheticMedia.sharedLoop(layers: n, codec: videoCodec), layers: n)
                } catch let error as MediaError { throw .encoder(error) } catch {
                    throw .encoder(.invalidArgument("\(error)"))
                }
            case .none: throw .notPublished(.video)
            case .file(let path): return try FileVideoSource(path: path, codec: videoCodec)
            }
        case .audio:
            switch audio {
            case .tone: return SyntheticAudioSource(media: SyntheticMedia.shared(layers: 1))
            case .none: throw .notPublished(.audio)
            case .file(let path): return try FileAudioSource(path: path)
            case .alsa(let device): return try ALSAAudioSource(device: device)
            }
        }
    }
}
