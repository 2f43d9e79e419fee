import Foundation
import RTCWire
import RoomServer
import Signaling
import TestSupport
import Testing

@testable import LoadGen

/// A room server on ephemeral loopback ports whose tokens use the load tests' secret.
private func startServer(maxParticipants: Int? = nil) throws -> RoomServer {
    try startTestServer(secret: "load-test-secret") { c in
        if let maxParticipants { c.maxParticipantsPerRoom = maxParticipants }
    }
}

private func configuration(_ server: RoomServer, room: String) -> LoadConfiguration {
    var c = LoadConfiguration(signalingURL: server.signalingURL, room: room)
    c.secret = "load-test-secret"
    c.joinRate = 20
    return c
}

@Suite(.serialized) struct LoadRunTests {
    @Test func publishersAndSubscribersExchangeMediaWithoutLoss() async throws {
        let server = try startServer()
        defer { server.stop() }
        var c = configuration(server, room: "media")
        c.publishers = 2
        c.subscribers = 10
        c.duration = 8
        // On a busy machine the subscriptions may take longer than 8 s: wait for all 40 of them,
        // then 3 s more, within 2 minutes.
        c.waitForTracks = 40
        let report = try await LoadGen.run(c)
        #expect(report.joinedParticipants == 12)
        #expect(report.joinFailures == 0)
        // Each subscriber tiles both publishers (3x3): webcam + mic of each.
        #expect(report.announcedTracks == 40)
        #expect(report.subscribedTracks == 40)
        #expect(report.videoTracks == 20 && report.audioTracks == 20)
        for track in report.tracks {
            #expect(track.packets > 20, "\(track.subscriber) <- \(track.publisher) \(track.kind)")
            #expect(track.timeToFirstPacketMs != nil)
            if track.kind == "video" { #expect(track.timeToFirstKeyframeMs != nil) }
        }
        // Loopback: nothing should be lost beyond what NACK repairs.
        #expect(report.lossPercent < 1.0)
        // abs-capture-time crosses the SFU: every subscriber measured latency.
        #expect(report.latencyMs.count > 100)
        #expect((report.latencyMs.p50 ?? 1e9) < 1000)
        #expect(report.tracks.allSatisfy { $0.latencyAvgMs != nil })
        #expect(report.joinLatencyMs.count == 12)
        // Every track has a quality reading from its receiver; on loopback the media is smooth.
        let quality = try #require(report.quality)
        #expect(quality.videoTracks == 20 && quality.audioTracks == 20)
        for track in report.tracks {
            let q = try #require(track.quality, "\(track.subscriber) <- \(track.publisher) \(track.kind)")
            #expect(q.kind == track.kind && q.frames > 10)
            #expect(q.latencyMs != nil)
            if track.kind == "video" { #expect(q.framesPerSecond > 5) } else { #expect(q.mos != nil) }
        }
        #expect((quality.mos.p50 ?? 0) > 3.5)
        #expect(report.table().contains("audio quality 20 tracks: MOS p50"))
        // The steps to each video track's first key frame: its offer arrived and was answered, and the
        // subscribe connection connected.
        for track in report.tracks where track.kind == "video" {
            let offered = try #require(track.offeredMs, "\(track.subscriber) <- \(track.publisher)")
            let answered = try #require(track.answeredMs)
            #expect(offered >= 0 && answered >= offered)
            #expect(track.connectedMs != nil)
        }
        #expect(report.firstKeyframeSteps?.toKeyframe.count == 20)
        #expect(report.table().contains("→ connected"))
        #expect(report.errors.isEmpty, "\(report.errors)")
        // Publishers report what they sent: 3 simulcast layers + mic each.
        #expect(report.publishers.filter { $0.kind == "video" }.count == 6)
        #expect(report.publishers.allSatisfy { $0.packetsSent > 0 })
        // Both renderings carry the numbers.
        #expect(report.table().contains("load-pub-1 video"))
        let json = try JSONSerialization.jsonObject(with: Data(report.json().utf8)) as? [String: Any]
        #expect((json?["subscribedTracks"] as? Int) == 40)
    }

    @Test func qualityMetricsOffReceivesTheMediaWithoutReadings() async throws {
        let server = try startServer()
        defer { server.stop() }
        var c = configuration(server, room: "no-quality")
        c.publishers = 1
        c.subscribers = 2
        c.duration = 5
        c.waitForTracks = 4
        c.qualityMetrics = false
        let report = try await LoadGen.run(c)
        #expect(report.subscribedTracks == 4)
        // The media arrives and is counted, but no receiver measured its quality.
        for track in report.tracks {
            #expect(track.packets > 20, "\(track.subscriber) <- \(track.publisher) \(track.kind)")
            #expect((track.quality?.frames ?? 0) == 0 && track.quality?.mos == nil)
        }
        #expect(report.quality == nil)
        #expect(report.qualityMetrics == false)
        #expect(report.table().contains("quality       not measured (--quality-metrics off)"))
    }

    @Test func speakerLayoutAsksForABigAndASmallLayer() async throws {
        let server = try startServer()
        defer { server.stop() }
        var c = configuration(server, room: "speaker")
        c.publishers = 2
        c.subscribers = 3
        c.layout = .speaker
        c.duration = 8
        let report = try await LoadGen.run(c)
        let video = report.tracks.filter { $0.kind == "video" }
        let big = video.filter { $0.publisher == "load-pub-1" }.map(\.bytes).reduce(0, +)
        let small = video.filter { $0.publisher == "load-pub-2" }.map(\.bytes).reduce(0, +)
        // The speaker tile (1280x720) gets the top layer, the thumbnail (160x90) the lowest one; the
        // synthetic pattern compresses well, so the top layer is only about twice the lowest.
        #expect(Double(big) > Double(small) * 1.3, "big \(big) small \(small)")
    }

    @Test func stageInvitesPromoteAndDemoteAudienceBots() async throws {
        let server = try startServer()
        defer { server.stop() }
        var c = configuration(server, room: "stage")
        c.publishers = 1
        c.subscribers = 3
        c.inviteEvery = 2.5
        c.duration = 11
        let report = try await LoadGen.run(c)
        #expect(report.modeChanges.invitesSent >= 5)
        #expect(report.modeChanges.promotions >= 3)
        #expect(report.modeChanges.demotions >= 2)
        #expect(report.modeChanges.failures == 0)
        // Every mode change's changeMode answer is timed too, and comes before the change's end.
        let changeMode = try #require(report.modeChanges.changeModeMs)
        #expect(changeMode.count == report.modeChanges.promotions + report.modeChanges.demotions)
        #expect((changeMode.max ?? .infinity) <= (report.modeChanges.latencyMs.max ?? 0))
        // An invited bot published: the other subscribers consumed its tracks and received media.
        let fromGuests = report.tracks.filter { $0.publisher.contains("-sub-") && $0.packets > 0 }
        #expect(!fromGuests.isEmpty)
        #expect(report.errors.isEmpty, "\(report.errors)")
        // Every audience bot learnt every join and mode change (protocol 2's batched events).
        #expect(report.rosterCheck == LoadReport.RosterCheck(checked: 3, mismatched: 0, example: nil))
    }

    @Test func anAudienceBotAnswersItsOfferWhileItsConsumeIsOutstanding() async throws {
        let server = try startServer()
        defer { server.stop() }
        // Each consume's response waits until the bot has answered a subscriberOffer sent after it: a
        // bot that handles offers behind its pending consumes answers nothing (and receives nothing)
        // until its consume times out, which is after the run.
        let proxy = try HoldingProxy.start(to: server, hold: .consumeUntilAnswered)
        defer { proxy.stop() }
        var c = configuration(server, room: "offer-first")
        c.signalingURL = proxy.url
        c.publishers = 1
        c.subscribers = 1
        c.duration = 10
        c.requestTimeout = 30
        let report = try await LoadGen.run(c)
        // Both consumes (mic, webcam) were outstanding when the bot answered their offers.
        #expect(proxy.held == 2)
        #expect(proxy.releasedByAnswer == 2)
        #expect(report.announcedTracks == 2)
        #expect(report.subscribedTracks == 2)
        for track in report.tracks {
            #expect(track.packets > 0, "\(track.subscriber) <- \(track.publisher) \(track.kind)")
            #expect(track.answeredMs != nil)
        }
        #expect(report.errors.isEmpty, "\(report.errors)")
    }

    @Test func anInviteStillUnderWayAtTheEndIsWaitedForAndReported() async throws {
        let server = try startServer()
        defer { server.stop() }
        // The guest's changeMode response is held until 2 s after the run's last progress tick: its
        // promotion ends after the run's duration, and must still be in the report.
        let proxy = try HoldingProxy.start(to: server, hold: .changeModeUntilReleased)
        defer { proxy.stop() }
        var c = configuration(server, room: "late-invite")
        c.signalingURL = proxy.url
        c.publishers = 1
        c.subscribers = 1
        c.inviteEvery = 3
        c.duration = 5
        let duration = c.duration
        let ended = Counter()
        let report = try await LoadGen.run(c) { progress in
            guard progress.elapsed >= duration else { return }
            ended.add()
            guard ended.value == 1 else { return }
            Task {
                try? await Task.sleep(nanoseconds: 2_000_000_000)
                proxy.releaseChangeModes()
            }
        }
        #expect(ended.value >= 1)
        #expect(proxy.held == 1)  // the invite was under way at the end
        let modes = report.modeChanges
        #expect(modes.invitesSent == 1)
        #expect(modes.promotions == 1)
        #expect(modes.failures == 0 && modes.demotions == 0)
        #expect(modes.latencyMs.count == 1)
        #expect(report.table().contains("stage invites 1 sent, 1 promoted, 0 demoted, 0 failed"), "\(report.table())")
        #expect(report.errors.isEmpty, "\(report.errors)")
    }

    @Test func aRefusedJoinIsReportedOnceWithItsReason() async throws {
        let server = try startServer(maxParticipants: 4)
        defer { server.stop() }
        var c = configuration(server, room: "full")
        c.publishers = 1
        c.subscribers = 6
        c.duration = 5
        let report = try await LoadGen.run(c)
        #expect(report.joinedParticipants == 4)
        #expect(report.joinFailures == 3)
        let joinErrors = report.errors.filter { $0.kind.hasPrefix("join") }
        #expect(joinErrors.map(\.kind) == ["join 4009 MAX_PARTCIPANT_REACHED"], "\(report.errors)")
        #expect(joinErrors.first?.count == 3)
        // The server closes a refused socket: that is not a second failure.
        #expect(!report.errors.contains { $0.kind == "disconnected" }, "\(report.errors)")
        #expect(report.table().contains("join 4009 MAX_PARTCIPANT_REACHED: 3"))
        #expect(report.rosterCheck?.mismatched == 0)
    }

    @Test func wrongSecretIsRefusedAtTheFirstJoin() async throws {
        let server = try startServer()
        defer { server.stop() }
        var c = configuration(server, room: "refused")
        c.secret = "not-the-secret"
        c.duration = 5
        await #expect(throws: LoadError.self) { _ = try await LoadGen.run(c) }
        do {
            _ = try await LoadGen.run(c)
        } catch {
            guard case .refused(let refusal) = error else {
                Issue.record("expected a refusal, got \(error)")
                return
            }
            #expect(refusal.code == 4002 && refusal.name == "INVALID_TOKEN")
        }
    }

    @Test func unreachableServerFailsFast() async throws {
        var c = LoadConfiguration(signalingURL: "ws://127.0.0.1:1", room: "nowhere")
        c.secret = "s"
        c.duration = 5
        do {
            _ = try await LoadGen.run(c)
            Issue.record("the run should have failed")
        } catch {
            // The transport's own error is kept, not flattened into a sentence.
            guard case .unreachable(_, let cause?) = error, cause is WebSocketError else {
                Issue.record("expected unreachable with the WebSocket error, got \(error)")
                return
            }
        }
    }
}

@Test func badConfigurationsAreRejected() {
    var c = LoadConfiguration(signalingURL: "ws://127.0.0.1:7880", room: "r")
    #expect(throws: LoadError.self) { try c.validate() }  // no token or secret
    c.secret = "s"
    #expect(throws: Never.self) { try c.validate() }
    var bad = c
    bad.room = "has space"
    #expect(throws: LoadError.self) { try bad.validate() }
    bad = c
    bad.duration = 0
    #expect(throws: LoadError.self) { try bad.validate() }
    bad = c
    bad.joinRate = -1
    #expect(throws: LoadError.self) { try bad.validate() }
    bad = c
    bad.publishers = 0
    bad.subscribers = 0
    #expect(throws: LoadError.self) { try bad.validate() }
    bad = c
    bad.signalingURL = "http://x"
    #expect(throws: LoadError.self) { try bad.validate() }
    bad = c
    bad.inviteEvery = 0
    #expect(throws: LoadError.self) { try bad.validate() }
    // A zero, negative or NaN request timeout is refused, not turned into a trapping conversion.
    for timeout in [0, -1, Double.nan, .infinity] {
        bad = c
        bad.requestTimeout = timeout
        #expect(throws: LoadError.self) { try bad.validate() }
    }
}

@Test func layoutsParseAndSizeTheirTiles() {
    #expect(LoadLayout("speaker") == .speaker)
    #expect(LoadLayout("4x4") == .grid(4))
    #expect(LoadLayout("4x5") == nil)
    #expect(LoadLayout("grid") == nil)
    #expect(LoadLayout("0x0") == nil)
    #expect(LoadLayout.grid(3).tiles.count == 9)
    #expect(LoadLayout.grid(5).tiles.first! == (256, 144))
    #expect(LoadLayout.speaker.tiles.first! == (1280, 720))
    var c = LoadConfiguration(signalingURL: "ws://h:1", room: "r")
    #expect(c.rtcURL == "ws://h:1/v1/rtc")
    c.signalingURL = "ws://h:1/v1/rtc"
    #expect(c.rtcURL == "ws://h:1/v1/rtc")
    c.rooms = 3
    #expect(c.roomNames == ["r-1", "r-2", "r-3"])
}

@Test func latencyHistogramPercentiles() {
    var h = LatencyHistogram()
    #expect(h.percentileMilliseconds(0.5) == nil)
    for ms in 1...100 { h.add(UInt64(ms) * 1_000_000) }
    let p50 = h.percentileMilliseconds(0.5) ?? 0
    let p99 = h.percentileMilliseconds(0.99) ?? 0
    #expect(abs(p50 - 50) < 0.2)
    #expect(abs(p99 - 99) < 0.2)
    h.add(750_000_000)  // a coarse (1 ms) bucket
    #expect(abs((h.percentileMilliseconds(1.0) ?? 0) - 750) < 1)
    h.add(10_000_000_000)  // beyond the last bucket: reported as the maximum
    #expect(h.percentileMilliseconds(1.0) == 10_000)
}

@Test func vp8KeyframePeek() {
    // X=1, S=1, PID=0; I=1 with a 15-bit picture id; then a key frame header (P bit clear).
    let key: [UInt8] = [0x90, 0x80, 0x81, 0x23, 0x10, 0x02, 0x00]
    let delta: [UInt8] = [0x90, 0x80, 0x81, 0x23, 0x11, 0x02, 0x00]
    let continuation: [UInt8] = [0x80, 0x80, 0x81, 0x23, 0x10]
    key.withUnsafeBytes { #expect(vp8PayloadStartsKeyframe($0)) }
    delta.withUnsafeBytes { #expect(!vp8PayloadStartsKeyframe($0)) }
    continuation.withUnsafeBytes { #expect(!vp8PayloadStartsKeyframe($0)) }
    [UInt8]([0x90, 0x80]).withUnsafeBytes { #expect(!vp8PayloadStartsKeyframe($0)) }
}

@Test func absCaptureTimeRoundTripsThroughAnExtensionBlock() throws {
    let unix: UInt64 = 1_764_000_000_123_456_789
    let ntp = AbsCaptureTime.ntp(unixNanoseconds: unix)
    let back = AbsCaptureTime.unixNanoseconds(ntp: ntp)
    #expect(back <= unix && unix - back < 2)
    var packet = [UInt8](repeating: 0, count: 64)
    packet[0] = 0x80
    let end = try packet.withUnsafeMutableBytes { buffer in
        var w = try RTPExtensionBlockWriter(buffer: buffer, at: 12)
        try w.appendAbsCaptureTime(id: 7, ntp)
        return try w.finish()
    }
    let parsed = try packet[0..<end].withUnsafeBytes { bytes -> UInt64? in
        let header = try RTPHeader.parse(UnsafeRawBufferPointer(bytes))
        guard let r = header.extensionElement(id: 7, in: UnsafeRawBufferPointer(bytes)) else { return nil }
        return AbsCaptureTime.captureTime(UnsafeRawBufferPointer(bytes), r)
    }
    #expect(parsed == ntp)
    // Wrong sizes are refused rather than misread.
    let short: [UInt8] = [1, 2, 3, 4]
    short.withUnsafeBytes { #expect(AbsCaptureTime.captureTime($0, 0..<4) == nil) }
}

@Test func qualitySummaryGivesSpreadsAcrossTracksAndNamesTheWorst() {
    func track(_ sub: String, _ kind: MediaKind, _ q: ReceiveQualitySnapshot) -> LoadReport.TrackResult {
        var totals = ReceiverTotals()
        totals.packetsReceived = 100
        totals.quality = q
        return LoadReport.TrackResult(
            TrackCounter(subscriberID: sub, publisherID: "pub", kind: kind, mid: "0", createdAt: 1), receiver: totals)
    }
    var tracks: [LoadReport.TrackResult] = []
    for i in 0..<20 {
        var v = ReceiveQualitySnapshot(kind: "video")
        v.frames = 300
        v.framesPerSecond = 30 - Double(i)
        v.freezeCount = i < 3 ? UInt64(3 - i) : 0
        v.totalFreezesDurationMs = Double(v.freezeCount) * 400
        tracks.append(track("bot-\(i)", .video, v))
        var a = ReceiveQualitySnapshot(kind: "audio")
        a.frames = 500
        a.mos = 4.4 - Double(i) / 10
        a.concealmentPercent = Double(i)
        tracks.append(track("bot-\(i)", .audio, a))
    }
    // A track without frames is left out.
    tracks.append(track("bot-silent", .video, ReceiveQualitySnapshot(kind: "video")))
    let s = try! #require(LoadReport.QualitySummary.of(tracks))
    #expect(s.videoTracks == 20 && s.audioTracks == 20)
    #expect(s.tracksWithFreezes == 3)
    // Nearest rank over 20 values: p50 is the 10th, p95 the 19th, p05 the 1st.
    #expect(s.freezeCount.p50 == 0 && s.freezeCount.p95 == 2 && s.freezeCount.max == 3)
    #expect(s.framesPerSecond.p05 == 11 && s.framesPerSecond.p50 == 20 && s.framesPerSecond.min == 11)
    #expect(s.worstFreezes.map(\.subscriber) == ["bot-0", "bot-1", "bot-2"])
    #expect(s.worstFreezes.first?.value == 3)
    #expect(s.worstFramesPerSecond.first?.subscriber == "bot-19")
    #expect(s.worstMOS.map(\.subscriber) == ["bot-19", "bot-18", "bot-17", "bot-16", "bot-15"])
    #expect(abs((s.mos.p50 ?? 0) - 3.4) < 1e-9)
    #expect(s.table().contains("most freezes  bot-0 ← pub video: 300 frames, 30.0 fps, freezes 3 (1200 ms)"))
    // With bot-0 and bot-1 impaired: their worst lines are marked, and the split sets them apart.
    #expect(s.table(impairedBots: ["bot-0", "bot-1"]).contains("most freezes  bot-0 ← pub video (impaired): "))
    #expect(s.table(impairedBots: ["bot-0", "bot-1"]).contains("most freezes  bot-2 ← pub video: "))
    let split = try! #require(LoadReport.QualitySplit.of(tracks, impairedBots: ["bot-0", "bot-1"]))
    #expect(split.impaired?.videoTracks == 2 && split.impaired?.tracksWithFreezes == 2)
    #expect(split.others?.videoTracks == 18 && split.others?.tracksWithFreezes == 1)
    #expect(split.impaired?.freezeCount.max == 3 && split.others?.freezeCount.max == 1)
    #expect(
        split.table().contains("  impaired      2 video tracks, 2 froze (p50 2, max 3), fps p05 29.0; 2 audio tracks"))
    #expect(split.table().contains("  not impaired  18 video tracks, 1 froze (p50 0, max 1)"))
    // An impaired publisher's tracks count as impaired at every subscriber.
    #expect(LoadReport.QualitySplit.of(tracks, impairedBots: ["pub"])?.others == nil)
    #expect(LoadReport.QualitySplit.of(tracks, impairedBots: []) == nil)
}
