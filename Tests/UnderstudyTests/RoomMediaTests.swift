import Foundation
import Media
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

/// Runs `work` from `onRoomJoined`, synchronously on the event queue.
final class JoinHook: RoomEventListener, @unchecked Sendable {
    let work: @Sendable () -> Void
    init(_ work: @escaping @Sendable () -> Void) { self.work = work }
    func onRoomJoined() { work() }
}

@Suite("Understudy publishing local media", .serialized)
struct RoomMediaTests {
    /// While the join still publishes the mic: `unmuteMic()` is 3054 (it is on), `muteMic()` and
    /// `changeMode()` are 3055 (an operation is running), and `join()` returns with the mic produced.
    @Test func publishingAtJoinHoldsTheOperationLock() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let room = try makeRoom(server, room: "join-lock", id: "pub", mode: .SEND_AND_RECV, mic: true)
        let log = EventLog()
        let results = ErrorBox()
        let done = Flag()
        room.addEventListener(log)
        room.localParticipant.addEventListener(log)
        room.addEventListener(
            JoinHook {
                // Hold the server's room so the join's produce cannot finish before the calls below.
                holdRoom(server, "join-lock", seconds: 1)
                Task {
                    do { try await room.unmuteMic() } catch { results.set("unmute", error) }
                    do { try await room.muteMic() } catch { results.set("mute", error) }
                    do { try await room.changeMode(.RECV_ONLY) } catch { results.set("mode", error) }
                    done.set()
                }
            })
        await room.join()
        try await waitUntil("the calls from onRoomJoined") { done.isSet }
        #expect(results.get("unmute") == 3054)
        #expect(results.get("mute") == 3055)
        #expect(results.get("mode") == 3055)
        #expect(room.localParticipant.mode == .SEND_AND_RECV)
        #expect(log.has("streamOn:pub:audio"))
        // Once the join's publishing is done the mic can be toggled normally.
        try await room.muteMic()
        #expect(!room.localParticipant.micOn)
        await room.leave()
    }

    /// A publish at join that fails reaches `onError` with the documented code, and the room is told
    /// the mic is off after all (the join announced it on).
    @Test func aFailedPublishAtJoinIsReportedAndCorrected() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (watcher, watcherLog) = try await joinedRoom(server, room: "join-fail", id: "watcher")
        watcherLog.onJoined = nil
        let room = try makeRoom(server, room: "join-fail", id: "pub", mode: .SEND_AND_RECV, mic: true)
        room.mediaSourceFactory = { _, _ in
            throw MediaSourceError.capture(.cannotOpen(device: "default", message: "no capture device"))
        }
        let log = EventLog()
        room.addEventListener(log)
        await room.join()
        #expect(log.errorCodes == [3059])
        #expect(log.errors.first?.name == "ERROR_NO_MICROPHONE_DEVICE_FOUND")
        // The source's own error stays reachable, typed, for callers that want the detail.
        guard case .capture(.cannotOpen(let device, _))? = log.errors.first?.underlyingError as? MediaSourceError else {
            Issue.record("no MediaSourceError cause in \(String(describing: log.errors.first))")
            return
        }
        #expect(device == "default")
        #expect(room.localParticipant.streams.isEmpty)
        try await waitUntil("the watcher sees pub") { watcher.participants["pub"] != nil }
        let seen = try #require(watcher.participants["pub"])
        try await waitUntil("the watcher sees the mic off") { !seen.micOn }
        // A file that cannot be read is a failed produce (3058), not a missing device.
        room.mediaSourceFactory = { _, _ in
            throw MediaSourceError.unreadable(path: "/nonexistent.ogg", errno: ENOENT)
        }
        await expectCode(3058) { try await room.unmuteMic() }
        await room.leave()
        await watcher.leave()
    }

    /// An offer whose video m-line has no codec the SFU forwards (H.265, H.264 only in the
    /// interleaved mode) is refused with 4051.
    @Test func anOfferWithoutASupportedCodecIs4051() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, _) = try await joinedRoom(server, room: "codec", id: "pub", mode: .SEND_AND_RECV)
        let fingerprint = Array(repeating: "00", count: 32).joined(separator: ":")
        let sdp = [
            "v=0", "o=- 1 1 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0",
            "m=video 9 UDP/TLS/RTP/SAVPF 98 102", "c=IN IP4 0.0.0.0", "a=mid:0", "a=sendonly",
            "a=rtpmap:98 H265/90000", "a=rtpmap:102 H264/90000", "a=fmtp:102 packetization-mode=2",
            "a=ice-ufrag:abcd", "a=ice-pwd:abcdefghijklmnopqrstuvwx",
            "a=fingerprint:sha-256 \(fingerprint)", "a=setup:actpass", "",
        ].joined(separator: "\r\n")
        await expectCode(4051) { _ = try await room.call(.produce, ["kind": "webcam", "sdp": .string(sdp)]) }
        await room.leave()
    }

    @Test func aRunningWebcamKeepsFlowingWhenTheMicStartsAndStops() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, pubLog) = try await joinedRoom(server, room: "toggle", id: "pub", mode: .SEND_AND_RECV, cam: true)
        try await waitUntil("cam on") { pubLog.has("streamOn:pub:video") }
        let (viewer, _) = try await joinedRoom(server, room: "toggle", id: "viewer", mode: .RECV_ONLY)
        let frames = FrameCounter()
        viewer.onFrame = { pid, kind, _, _ in frames.add(pid, kind) }
        // Several seconds of webcam first: a pump restarted from zero would now stall that long.
        try await waitUntil("5 s of video", seconds: 30) { frames.count("pub", .video) >= 150 }
        try await pub.unmuteMic()
        let before = frames.count("pub", .video)
        try await waitUntil("video keeps flowing after unmuting", seconds: 4) {
            frames.count("pub", .video) >= before + 30
        }
        try await waitUntil("audio flows") { frames.count("pub", .audio) >= 10 }
        try await pub.muteMic()
        let afterMute = frames.count("pub", .video)
        try await waitUntil("video keeps flowing after muting", seconds: 4) {
            frames.count("pub", .video) >= afterMute + 30
        }
        viewer.onFrame = nil
        await viewer.leave()
        await pub.leave()
    }
}
