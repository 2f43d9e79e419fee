import Foundation
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

/// What the sinks of the viewer's tracks saw, kept across threads for the test to read.
final class TrackLog: @unchecked Sendable {
    private let lock = NSLock()
    private var tracks: [RemoteTrack] = []
    private var frames: [String: Int] = [:]
    private var ended: [String] = []
    func started(_ t: RemoteTrack) { lock.withLock { tracks.append(t) } }
    func frame(_ t: RemoteTrack) { lock.withLock { frames[t.consumerId, default: 0] += 1 } }
    func end(_ t: RemoteTrack) { lock.withLock { ended.append(t.consumerId) } }
    func track(_ kind: StreamKind) -> RemoteTrack? { lock.withLock { tracks.last { $0.kind == kind } } }
    func frames(_ t: RemoteTrack) -> Int { lock.withLock { frames[t.consumerId] ?? 0 } }
    func hasEnded(_ t: RemoteTrack) -> Bool { lock.withLock { ended.contains(t.consumerId) } }
}

@Suite("Remote tracks and their sinks", .serialized)
struct RemoteTrackTests {
    /// A consumed stream becomes a track (``Room/onTrack``) whose sinks get its frames on the loop
    /// thread; a removed sink gets nothing more; closing the consumer ends the track once.
    @Test func sinksGetFramesUntilRemovedAndHearTheEnd() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (publisher, pubLog) = try await joinedRoom(
            server, room: "tracks", id: "pub", mode: .SEND_AND_RECV, mic: true, cam: true)
        try await waitUntil("published") { pubLog.has("streamOn:pub:video") && pubLog.has("streamOn:pub:audio") }

        let log = TrackLog()
        let (viewer, _) = try await joinedRoom(
            server, room: "tracks", id: "viewer", mode: .RECV_ONLY, autoConsume: false)
        // Nothing is consumed yet (autoConsume off), so no track can start before this is set.
        viewer.onTrack = { track in
            #expect(track.loop.isInLoop)
            log.started(track)
            track.addSink(
                FrameSink(
                    { frame, _, t in
                        #expect(frame.codec.kind == t.mediaKind)
                        log.frame(t)
                    }, ended: { t in log.end(t) }))
        }
        // onFrame still works beside the tracks' own sinks.
        let roomFrames = FrameCounter()
        viewer.onFrame = { pid, kind, _, _ in roomFrames.add(pid, kind) }
        let remote = try #require(viewer.participants["pub"])

        try await remote.consumeWebcamStreams()
        try await waitUntil("video track") { log.track(.video) != nil }
        let video = try #require(log.track(.video))
        #expect(video.participantId == "pub" && video.mediaKind == .video)
        try await waitUntil("video frames to the sink") { log.frames(video) >= 10 }
        try await waitUntil("video frames to onFrame") { roomFrames.count("pub", .video) >= 10 }

        try await remote.consumeMicStreams()
        try await waitUntil("audio track") { log.track(.audio) != nil }
        let audio = try #require(log.track(.audio))
        try await waitUntil("audio frames to the sink") { log.frames(audio) >= 10 }

        // A second sink on the audio track, removed again (on the loop, so the removal is done when
        // `submit` returns): after removal its count stays put while
        // the first sink's count keeps growing.
        let extra = FrameCounter()
        let sink = FrameSink { _, _, t in extra.add(t.participantId, .audio) }
        // Added from this (non-loop) thread: handed to the loop.
        audio.addSink(sink)
        try await waitUntil("extra sink frames") { extra.count("pub", .audio) >= 5 }
        await audio.loop.submit { audio.removeSink(sink) }
        let frozen = extra.count("pub", .audio)
        let mark = log.frames(audio)
        try await waitUntil("more audio frames") { log.frames(audio) >= mark + 25 }
        #expect(extra.count("pub", .audio) == frozen)

        try await remote.stopConsumingWebcamStreams()
        try await waitUntil("video track ended") { log.hasEnded(video) }
        #expect(!log.hasEnded(audio))
        let endedAt = log.frames(video)
        #expect(await video.loop.submit { video.isEnded })

        await viewer.leave()
        try await waitUntil("audio track ended by leave") { log.hasEnded(audio) }
        #expect(log.frames(video) == endedAt)
        await publisher.leave()
    }
}
