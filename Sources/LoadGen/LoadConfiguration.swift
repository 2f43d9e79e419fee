import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol

/// How a subscriber bot lays out the stage, which decides what it consumes and at which view size.
///
/// The window is 1280x720. `speaker` shows the first stage participant big and up to five more as
/// 160x90 thumbnails; `grid(n)` shows up to n×n tiles of (1280/n)x(720/n). Every stage participant's
/// mic is consumed, as a real client hears everyone it cannot see.
public enum LoadLayout: Sendable, Equatable, CustomStringConvertible {
    case speaker
    case grid(Int)

    /// Parses `speaker`, `3x3`, `4x4` or `5x5` (any `NxN` with 1 ≤ N ≤ 8).
    public init?(_ text: String) {
        if text == "speaker" {
            self = .speaker
            return
        }
        let parts = text.split(separator: "x")
        guard parts.count == 2, let a = Int(parts[0]), let b = Int(parts[1]), a == b, (1...8).contains(a) else {
            return nil
        }
        self = .grid(a)
    }

    public var description: String {
        switch self {
        case .speaker: return "speaker"
        case .grid(let n): return "\(n)x\(n)"
        }
    }

    /// View sizes of the tiles in order (the first stage participant gets the first tile).
    public var tiles: [(width: Int, height: Int)] {
        switch self {
        case .speaker:
            return [(1280, 720)] + Array(repeating: (160, 90), count: 5)
        case .grid(let n):
            return Array(repeating: (1280 / n, 720 / n), count: n * n)
        }
    }
}

/// Everything `understudy load` needs to run; the CLI fills it from its flags, and a distributed
/// load test sends each worker its share as JSON (``Codable``: every field by its name, absent
/// ones keep their defaults, and decoding runs ``validate()``, so a share read from Redis that is
/// not valid is refused before anything runs).
public struct LoadConfiguration: Sendable, Equatable {
    /// Signalling URL, `ws://HOST:PORT` (the `/v1/rtc` path is added when missing).
    public var signalingURL: String
    /// Room name; with ``rooms`` > 1 the rooms are `ROOM-1` … `ROOM-N`.
    public var room: String
    /// Number of rooms; every room gets the publishers and subscribers below.
    public var rooms: Int = 1
    /// A token used as is for every bot (it must not name a participant), or nil to sign with ``secret``.
    public var token: String?
    /// Server secret: each room gets its own `allow_join` token signed here.
    public var secret: String?
    /// Video+audio publishers per room (webcam with 3 simulcast layers unless ``simulcast`` is off, and mic).
    public var publishers: Int = 1
    /// Audio-only publishers per room.
    public var audioPublishers: Int = 0
    /// Audience bots per room (RECV_ONLY, autoConsume off).
    public var subscribers: Int = 10
    /// Length of the run in seconds, counted from the moment the first bot (the probe) has joined.
    public var duration: Double = 60
    /// When set, the run goes on past ``duration`` until this many tracks are subscribed, then
    /// ``settleSeconds`` more, but never past ``maxDuration``: a test waits for the event on a busy
    /// machine instead of counting what arrived in a fixed window.
    public var waitForTracks: Int?
    /// Seconds the run goes on after ``waitForTracks`` was reached (and ``duration`` passed).
    public var settleSeconds: Double = 3
    /// When set, the run goes on past ``duration`` until every open track has received a packet (and
    /// no bot is still rejoining, ``reconnectWindow``), but
    /// never past this many seconds from the first join; stage invites stop at ``duration``. A test
    /// that checks every consumer got media waits for that on a busy machine instead of counting what
    /// arrived in a fixed window.
    public var waitForMediaUntil: Double?
    /// The hard limit of a run that waits for tracks, in seconds.
    public var maxDuration: Double = 120
    /// Joins started per second.
    public var joinRate: Double = 10
    /// What subscribers watch.
    public var layout: LoadLayout = .grid(3)
    /// Publish 3 simulcast layers (else one 640x360 layer).
    public var simulcast: Bool = true
    /// The codec publishers send (`--video-codec`): VP8, H.264, VP9 or AV1, encoded once per process and
    /// sent by every bot. The room must accept it: a produce it refuses fails the bot. `auto`: each
    /// publish (the join, a stage invite) sends what the room's receivers all accept then
    /// (`roomVideoCodecs`); a bot keeps that codec while it publishes (a mid-run switch would cut
    /// the run's measurements). A Janus run (no such list) sends VP8 for `auto`.
    public var videoCodec: VideoCodecChoice = .fixed(.vp8)
    /// Every this many seconds, one audience bot per room is invited on stage (and the previous one
    /// sent back to the audience), by a publisher of this run or, in a run of audience only, by
    /// another audience bot. Nil: no invites.
    public var inviteEvery: Double?
    /// I/O threads (event loops) shared by all bots; defaults to one per core.
    public var loopCount: Int = max(1, ProcessInfo.processInfo.activeProcessorCount)
    /// Seconds allowed for one WebSocket connect and for one signalling request.
    public var requestTimeout: Double = 15
    /// Participant id prefix, so two load processes can share a room.
    public var idPrefix: String = "load"
    /// TURN servers every bot relays its media through (`--ice-servers`); empty: host candidates.
    public var iceServers: [ICEServer] = []
    /// `--impair`: the network a share of the bots see, a preset name or the JSON form
    /// (``Impairment/parse(_:)``); nil: none.
    public var impair: String?
    /// `--impair-share`: the share of bots (0 to 1) that ``impair`` applies to, spread evenly over
    /// the bots in join order; each gets its own seed.
    public var impairShare: Double = 1
    /// `--quality-metrics on|off`: whether the bots measure each received track's quality (fps,
    /// freezes, MOS, …; the report's `quality`). Off saves those few operations per frame and packet,
    /// and is how `make bench` measures their cost. `UNDERSTUDY_RECEIVE_QUALITY=0` still turns them
    /// off for the whole process.
    public var qualityMetrics = true
    /// `--reconnect SECONDS`: a bot whose signalling connection drops rejoins with the same id
    /// through its own node or any other of the cluster (`clusterNodes`), with the SDK's backoff
    /// (``ReconnectPolicy``), for up to this many seconds; the report gains `reconnects` (per bot,
    /// loss to rejoin and to media again). Nil (the default): a dropped bot is gone, as before.
    public var reconnectWindow: Double?
    /// `--expect-participants N`: the room holds N participants in all, some of them in other
    /// processes (a cluster run with one `understudy load` per node): the roster check then asks
    /// each audience bot for N − 1 others, this run's with their modes. Nil: the room holds only
    /// this run's bots.
    public var expectParticipants: Int?
    /// `--stay SECONDS`: after the run and its roster check, the bots stay joined this long before
    /// leaving, so that other processes in the room check their rosters while all are present.
    public var staySeconds: Double = 0

    /// A configuration for `room` on the server at `signalingURL`; other fields keep their defaults.
    public init(signalingURL: String, room: String) {
        self.signalingURL = signalingURL
        self.room = room
    }

    /// Room names in use.
    public var roomNames: [String] { rooms <= 1 ? [room] : (1...rooms).map { "\(room)-\($0)" } }

    /// The full signalling URL (with `/v1/rtc`).
    var rtcURL: String {
        var url = signalingURL
        while url.hasSuffix("/") { url.removeLast() }
        let afterScheme = url.range(of: "://").map { url[$0.upperBound...] } ?? Substring(url)
        return afterScheme.contains("/") ? url : url + "/v1/rtc"
    }

    /// Checks the values; the message names the offending option.
    public func validate() throws(LoadError) {
        func bad(_ m: String) -> LoadError { .invalidConfiguration(m) }
        guard signalingURL.hasPrefix("ws://") else { throw bad("--server must be an http:// or ws:// URL") }
        guard !room.isEmpty, !room.contains(where: { $0.isWhitespace || $0 == "/" }) else {
            throw bad("--room must be non-empty, without whitespace or '/'")
        }
        guard (1...1000).contains(rooms) else { throw bad("--rooms must be 1…1000") }
        guard token != nil || secret != nil else { throw bad("give --token or --secret") }
        guard publishers >= 0, audioPublishers >= 0, subscribers >= 0 else { throw bad("counts must be ≥ 0") }
        guard publishers + audioPublishers + subscribers > 0 else { throw bad("nothing to do: no bots") }
        guard duration > 0, duration.isFinite else { throw bad("--duration must be positive") }
        guard joinRate > 0, joinRate.isFinite else { throw bad("--join-rate must be positive") }
        if let inviteEvery {
            guard inviteEvery > 0, inviteEvery.isFinite else { throw bad("--invite-every must be positive") }
        }
        // Timeouts become nanosecond counts (UInt64): a negative or NaN one would trap.
        guard requestTimeout > 0, requestTimeout <= 365 * 86400 else {
            throw bad("--request-timeout must be positive (at most a year)")
        }
        guard (1...1024).contains(loopCount) else { throw bad("need 1…1024 I/O threads") }
        guard publishers <= 100_000, audioPublishers <= 100_000, subscribers <= 100_000 else {
            throw bad("counts must be at most 100000")
        }
        guard !idPrefix.isEmpty, idPrefix.count <= 40,
            idPrefix.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) })
        else { throw bad("--id-prefix must be 1-40 letters, digits, '-', '_' or '.'") }
        if let waitForTracks, waitForTracks < 0 { throw bad("waitForTracks must be ≥ 0") }
        if let waitForMediaUntil {
            guard waitForMediaUntil >= duration, waitForMediaUntil.isFinite else {
                throw bad("--wait-for-media must be at least --duration")
            }
        }
        guard settleSeconds >= 0, settleSeconds.isFinite, maxDuration > 0, maxDuration <= 365 * 86400 else {
            throw bad("settle and maximum durations must be finite (at most a year)")
        }
        guard duration <= 365 * 86400 else { throw bad("--duration must be at most a year") }
        if case .fixed(let codec) = videoCodec, !VideoEncoders.codecs.contains(codec) {
            throw bad("--video-codec must be \(VideoCodecChoice.optionValues)")
        }
        if let impair {
            do { _ = try Impairment.parse(impair) } catch { throw bad("--impair: \(error.description)") }
        }
        guard impairShare >= 0, impairShare <= 1 else { throw bad("--impair-share must be a share in [0, 1]") }
        if let reconnectWindow {
            guard reconnectWindow > 0, reconnectWindow <= 86400 else {
                throw bad("--reconnect must be a window of more than 0 s and at most a day")
            }
        }
        guard staySeconds >= 0, staySeconds <= 3600 else { throw bad("--stay must be 0…3600 s") }
        if let expectParticipants {
            guard (1...1_000_000).contains(expectParticipants) else {
                throw bad("--expect-participants must be 1…1000000")
            }
        }
    }

    /// The impairment of the bot with this join index (0, 1, …), or nil for an unimpaired one: a bot
    /// is impaired when its index carries the running count of ``impairShare`` × bots over a whole
    /// number, which spreads the impaired bots evenly. Seeds differ from bot to bot.
    public func impairment(forBot index: Int) -> Impairment? {
        guard let impair, impairShare > 0, let base = try? Impairment.parse(impair), !base.isNone else { return nil }
        let before = (Double(index) * impairShare).rounded(.down)
        let after = (Double(index + 1) * impairShare).rounded(.down)
        guard after > before else { return nil }
        return base.withSeed(base.seed &+ UInt64(index))
    }
}

extension LoadLayout: Codable {
    /// Decodes `speaker` or `NxN` (``init(_:)``).
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let layout = LoadLayout(text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "'\(text.prefix(64))' is not speaker or NxN"))
        }
        self = layout
    }

    /// Encodes ``description``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

extension LoadConfiguration: Codable {
    private enum CodingKeys: String, CodingKey {
        case signalingURL, room, rooms, token, secret, publishers, audioPublishers, subscribers, duration
        case waitForTracks, settleSeconds, waitForMediaUntil, maxDuration, joinRate, layout, simulcast, inviteEvery
        case loopCount, requestTimeout, idPrefix, iceServers, videoCodec
        case impair, impairShare, qualityMetrics, reconnectWindow, expectParticipants, staySeconds
    }

    /// A TURN server as JSON: its URL and credentials.
    private struct ICEServerRecord: Codable {
        var url: String
        var username: String
        var credential: String
    }

    /// Decodes and validates (``validate()``); a missing field keeps its default.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            signalingURL: try c.decode(String.self, forKey: .signalingURL),
            room: try c.decode(String.self, forKey: .room))
        func take<T: Decodable>(_ key: CodingKeys, _ value: inout T) throws {
            if let decoded = try c.decodeIfPresent(T.self, forKey: key) { value = decoded }
        }
        try take(.rooms, &rooms)
        token = try c.decodeIfPresent(String.self, forKey: .token)
        secret = try c.decodeIfPresent(String.self, forKey: .secret)
        try take(.publishers, &publishers)
        try take(.audioPublishers, &audioPublishers)
        try take(.subscribers, &subscribers)
        try take(.duration, &duration)
        waitForTracks = try c.decodeIfPresent(Int.self, forKey: .waitForTracks)
        try take(.settleSeconds, &settleSeconds)
        waitForMediaUntil = try c.decodeIfPresent(Double.self, forKey: .waitForMediaUntil)
        try take(.maxDuration, &maxDuration)
        try take(.joinRate, &joinRate)
        try take(.layout, &layout)
        try take(.simulcast, &simulcast)
        inviteEvery = try c.decodeIfPresent(Double.self, forKey: .inviteEvery)
        try take(.loopCount, &loopCount)
        try take(.requestTimeout, &requestTimeout)
        try take(.idPrefix, &idPrefix)
        impair = try c.decodeIfPresent(String.self, forKey: .impair)
        try take(.impairShare, &impairShare)
        try take(.qualityMetrics, &qualityMetrics)
        reconnectWindow = try c.decodeIfPresent(Double.self, forKey: .reconnectWindow)
        expectParticipants = try c.decodeIfPresent(Int.self, forKey: .expectParticipants)
        try take(.staySeconds, &staySeconds)
        if let codec = try c.decodeIfPresent(String.self, forKey: .videoCodec) {
            guard let parsed = VideoCodecChoice.parse(codec) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .videoCodec, in: c,
                    debugDescription: "'\(codec.prefix(64))' is not \(VideoCodecChoice.optionValues)")
            }
            videoCodec = parsed
        }
        iceServers = try (c.decodeIfPresent([ICEServerRecord].self, forKey: .iceServers) ?? []).map { record in
            do { return try ICEServer(url: record.url, username: record.username, credential: record.credential) } catch
            {
                throw DecodingError.dataCorruptedError(
                    forKey: .iceServers, in: c, debugDescription: "\(error)")
            }
        }
        do { try validate() } catch {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(signalingURL, forKey: .signalingURL)
        try c.encode(room, forKey: .room)
        try c.encode(rooms, forKey: .rooms)
        try c.encodeIfPresent(token, forKey: .token)
        try c.encodeIfPresent(secret, forKey: .secret)
        try c.encode(publishers, forKey: .publishers)
        try c.encode(audioPublishers, forKey: .audioPublishers)
        try c.encode(subscribers, forKey: .subscribers)
        try c.encode(duration, forKey: .duration)
        try c.encodeIfPresent(waitForTracks, forKey: .waitForTracks)
        try c.encode(settleSeconds, forKey: .settleSeconds)
        try c.encodeIfPresent(waitForMediaUntil, forKey: .waitForMediaUntil)
        try c.encode(maxDuration, forKey: .maxDuration)
        try c.encode(joinRate, forKey: .joinRate)
        try c.encode(layout, forKey: .layout)
        try c.encode(simulcast, forKey: .simulcast)
        try c.encodeIfPresent(inviteEvery, forKey: .inviteEvery)
        try c.encode(loopCount, forKey: .loopCount)
        try c.encode(requestTimeout, forKey: .requestTimeout)
        try c.encode(idPrefix, forKey: .idPrefix)
        try c.encodeIfPresent(impair, forKey: .impair)
        try c.encode(impairShare, forKey: .impairShare)
        try c.encode(qualityMetrics, forKey: .qualityMetrics)
        try c.encodeIfPresent(reconnectWindow, forKey: .reconnectWindow)
        try c.encodeIfPresent(expectParticipants, forKey: .expectParticipants)
        try c.encode(staySeconds, forKey: .staySeconds)
        try c.encode(videoCodec.description, forKey: .videoCodec)
        if !iceServers.isEmpty {
            try c.encode(
                iceServers.map { ICEServerRecord(url: $0.url, username: $0.username, credential: $0.credential) },
                forKey: .iceServers)
        }
    }
}

/// Why a load run could not start or went wrong as a whole.
public enum LoadError: Error, Sendable, CustomStringConvertible {
    /// Bad flags or configuration (the CLI exits 2).
    case invalidConfiguration(String)
    /// The server could not be reached (TCP or WebSocket handshake, or no answer to the join):
    /// what failed, and the transport's error underneath when there is one.
    case unreachable(String, cause: (any Error)? = nil)
    /// The server refused the first join (token, room, permissions): its refusal.
    case refused(RoomError)
    /// Anything else that stops the run, with the error underneath when there is one.
    case failed(String, cause: (any Error)? = nil)

    public var description: String {
        switch self {
        case .invalidConfiguration(let m): return m
        case .unreachable(let m, let cause): return "server unreachable: \(m)" + (cause.map { ": \($0)" } ?? "")
        case .refused(let refusal): return "join refused: \(refusal)"
        case .failed(let m, let cause): return m + (cause.map { ": \($0)" } ?? "")
        }
    }
}
