import Foundation
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

final class FrameCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [String: Int] = [:]
    func add(_ participant: String, _ kind: MediaKind) {
        lock.withLock { counts["\(participant):\(kind)", default: 0] += 1 }
    }
    func count(_ participant: String, _ kind: MediaKind) -> Int {
        lock.withLock { counts["\(participant):\(kind)"] ?? 0 }
    }
}

@Suite("Understudy consuming media", .serialized)
struct ConsumeTests {
    @Test func withAutoConsumeOffFramesArriveOnlyAfterConsume() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (publisher, pubLog) = try await joinedRoom(
            server, room: "consume", id: "pub", mode: .SEND_AND_RECV, mic: true, cam: true)
        try await waitUntil("published") { pubLog.has("streamOn:pub:video") && pubLog.has("streamOn:pub:audio") }

        let (viewer, viewerLog) = try await joinedRoom(
            server, room: "consume", id: "viewer", mode: .RECV_ONLY, autoConsume: false)
        let frames = FrameCounter()
        viewer.onFrame = { pid, kind, _, _ in frames.add(pid, kind) }
        let remote = try #require(viewer.participants["pub"])
        remote.addEventListener(viewerLog)
        #expect(remote.micOn && remote.webcamOn)

        // Nothing was asked for: the server forwards nothing to the viewer (its own count, not a wait).
        let stats = try await viewer.call(.getStats)
        #expect(stats["consumers"]?.arrayValue?.isEmpty == true, "\(stats)")
        #expect(frames.count("pub", .video) == 0)
        #expect(frames.count("pub", .audio) == 0)

        try await remote.consumeWebcamStreams()
        try await waitUntil("video frames") { frames.count("pub", .video) >= 5 }
        try await waitUntil("stream enabled") { viewerLog.has("streamOn:pub:video") }
        #expect(frames.count("pub", .audio) == 0)
        try await waitUntil("video stats", seconds: 20) { remote.getVideoStats()?.isEmpty == false }

        try await remote.consumeMicStreams()
        try await waitUntil("audio frames") { frames.count("pub", .audio) >= 5 }

        try await remote.stopConsumingWebcamStreams()
        try await waitUntil("stream disabled") { viewerLog.has("streamOff:pub:video") }

        await viewer.leave()
        await publisher.leave()
        try await waitUntil("publisher left") { pubLog.has("left:1101") }
        #expect(Array(pubLog.events.suffix(4)).contains("streamOff:pub:audio"))
        #expect(remote.getVideoStats() == nil)
    }

    /// consume → stopConsuming → consume of the same webcam, three times (issue 32, item 1): each round
    /// brings frames, on a new m-line or on a rejected one the server recycled under a new mid.
    @Test func theSameWebcamConsumedAgainAfterStopBringsFramesEachTime() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (publisher, pubLog) = try await joinedRoom(
            server, room: "reconsume", id: "pub", mode: .SEND_AND_RECV, mic: false, cam: true)
        try await waitUntil("published") { pubLog.has("streamOn:pub:video") }
        let (viewer, viewerLog) = try await joinedRoom(
            server, room: "reconsume", id: "viewer", mode: .RECV_ONLY, autoConsume: false)
        let frames = FrameCounter()
        viewer.onFrame = { pid, kind, _, _ in frames.add(pid, kind) }
        let remote = try #require(viewer.participants["pub"])
        remote.addEventListener(viewerLog)
        for round in 1...3 {
            let before = frames.count("pub", .video)
            try await remote.consumeWebcamStreams()
            try await waitUntil("round \(round): video frames", seconds: 30) {
                frames.count("pub", .video) >= before + 5
            }
            try await remote.stopConsumingWebcamStreams()
            try await waitUntil("round \(round): stream disabled", seconds: 30) {
                viewerLog.events.filter { $0 == "streamOff:pub:video" }.count >= round
            }
        }
        await viewer.leave()
        await publisher.leave()
    }
}
