import Foundation
import Media
import RTC
import RTCWire
import RoomServer
import SDKTestSupport
import TestSupport
import Testing

@testable import Understudy

/// Decodes a captured base64 JPEG with libturbojpeg; nil when it is not a decodable JPEG.
func decodeCapture(_ base64: String) -> (width: Int, height: Int, pixels: [UInt8])? {
    guard let data = Data(base64Encoded: base64) else { return nil }
    return JPEGDecoder.decodeLuma([UInt8](data))
}

/// Records `onMediaStatusChanged` as `participantId:kind:status`.
final class StatusLog: ParticipantEventListener, @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var events: [String] { lock.withLock { lines } }
    func onMediaStatusChanged(peerId: String, kind: StreamKind, newStatus: MediaStatus) {
        lock.withLock { lines.append("\(peerId):\(kind.rawValue):\(newStatus.rawValue)") }
    }
}

/// Waits until `participant` has a stream of `kind` on this device.
func waitForStream(_ participant: Participant, _ kind: StreamKind, seconds: Double = 20) async throws {
    try await waitUntil("\(participant.id) \(kind) stream", seconds: seconds) {
        participant.streams.values.contains { $0.kind == kind }
    }
}

/// A screen flash that counts its calls (an app's own ``ScreenFlash``).
final class CountingScreenFlash: ScreenFlash, @unchecked Sendable {
    private let lock = NSLock()
    private var applied = 0
    private var cleared = 0
    var calls: (applied: Int, cleared: Int) { lock.withLock { (applied, cleared) } }
    func apply() async { lock.withLock { applied += 1 } }
    func clear() async { lock.withLock { cleared += 1 } }
}

@Suite("Understudy captureImage", .serialized)
struct CaptureImageTests {
    /// A capture waiting for a keyframe is woken by the keyframe itself (no polling), ignores delta
    /// frames before it, and a stopped stream (`clear()`) wakes it empty-handed.
    @Test func aWaitingCaptureWakesOnTheKeyframeOrWhenTheStreamStops() async throws {
        let buffer = CaptureFrameBuffer()
        let keyframe: [UInt8] = [0x10, 0, 0, 0x9d, 0x01, 0x2a, 64, 0, 48, 0, 1, 2, 3]
        let waiting = Task { await buffer.framesFromNextKeyframe(timeout: 60) }
        // Nothing may be waiting yet when the frames arrive; then the capture reads the buffer.
        buffer.append(EncodedFrame(codec: .vp8, data: [0x11, 9, 9], timestamp: 1, isKeyframe: false))
        buffer.append(EncodedFrame(codec: .vp8, data: keyframe, timestamp: 2, isKeyframe: true))
        #expect(await waiting.value == CaptureRun(codec: .vp8, frames: [keyframe]))

        buffer.clear()
        let stopped = Task { await buffer.framesFromNextKeyframe(timeout: 60) }
        try await Task.sleep(nanoseconds: 100_000_000)
        buffer.clear()
        #expect(await stopped.value == nil)
    }

    @Test func aRemoteWebcamIsCapturedAsAJPEGScaledDownButNeverUp() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (publisher, pubLog) = try await joinedRoom(
            server, room: "capture", id: "pub", mode: .SEND_AND_RECV, cam: true, multiStream: true)
        try await waitUntil("published") { pubLog.has("streamOn:pub:video") }
        let (viewer, viewerLog) = try await joinedRoom(server, room: "capture", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["pub"])
        try await waitForStream(remote, .video)

        // Full size: the received layer's size (one of the pattern's 16:9 layers), decodable, not blank.
        let full = try #require(decodeCapture(try await remote.captureImage()))
        #expect([640, 320, 160].contains(full.width), "width \(full.width)")
        #expect(full.width * 9 == full.height * 16, "\(full.width)x\(full.height)")
        // The pattern has bars, a box and digits, except on its all-white sync-marker frames.
        var structured = Set(full.pixels).count > 8
        for _ in 0..<20 where !structured {
            try await Task.sleep(nanoseconds: 100_000_000)
            structured = Set(try #require(decodeCapture(try await remote.captureImage())).pixels).count > 8
        }
        #expect(structured, "the picture has structure")

        // Scaled to fit within the bounds, keeping the aspect ratio.
        let small = try #require(decodeCapture(try await remote.captureImage(width: 100)))
        #expect(small.width == 100 && small.height == 56)
        let byHeight = try #require(decodeCapture(try await remote.captureImage(width: 1000, height: 45)))
        #expect(byHeight.width == 80 && byHeight.height == 45)
        // Never enlarged.
        let big = try #require(decodeCapture(try await remote.captureImage(width: 4000, height: 4000)))
        #expect(big.width <= 640 && big.width * 9 == big.height * 16)

        // ffprobe agrees it is a JPEG of that size.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cap-\(UUID().uuidString).jpg").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try #require(Data(base64Encoded: try await remote.captureImage(width: 64, height: 64)))
            .write(to: URL(fileURLWithPath: path))
        let (_, out, _) = try runTool(
            "ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", path])
        #expect(out.trimmingCharacters(in: .whitespacesAndNewlines) == "mjpeg,64,36")

        // flash .ON works only for the local participant: 3069, also sent to onError.
        await expectCode(3069) { _ = try await remote.captureImage(flash: .ON) }
        await expectCode(3069) { _ = try await remote.captureImage(width: 0) }
        await expectCode(3069) { _ = try await remote.captureImage(height: .nan) }
        try await waitUntil("3069 reported") { viewerLog.errorCodes.filter { $0 == 3069 }.count == 3 }

        // The viewer itself has no webcam: 3062, not sent to onError.
        await expectCode(3062) { _ = try await viewer.localParticipant.captureImage() }

        // The publisher turns its webcam off: nothing to capture.
        try await publisher.disableCam()
        try await waitUntil("stream gone") { !remote.streams.values.contains { $0.kind == .video } }
        await expectCode(3062) { _ = try await remote.captureImage() }
        await viewer.onQueue {}  // a report to onError would have been queued before the throw
        #expect(!viewerLog.errorCodes.contains(3062))
        await viewer.leave()
        await publisher.leave()
    }

    @Test func theLocalWebcamIsCapturedWithFlashUnlitAndNotBeforeJoin() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let early = try makeRoom(server, room: "selfie", id: "early", mode: .SEND_AND_RECV, cam: true)
        // Not gated: before the join there is simply no webcam (3062, not 3035).
        await expectCode(3062) { _ = try await early.localParticipant.captureImage() }

        let (room, log) = try await joinedRoom(
            server, room: "selfie", id: "me", mode: .SEND_AND_RECV, cam: true, multiStream: true)
        try await waitUntil("cam on") { log.has("streamOn:me:video") }
        // The top layer of the local camera (640x360), scaled to 320 wide.
        let local = try #require(decodeCapture(try await room.localParticipant.captureImage(width: 320)))
        #expect(local.width == 320 && local.height == 180)
        let full = try #require(decodeCapture(try await room.localParticipant.captureImage()))
        #expect(full.width == 640 && full.height == 360)
        // No torch or screen flash on a headless participant: flash captures unlit, and succeeds.
        let flashed = try #require(decodeCapture(try await room.localParticipant.captureImage(flash: .ON)))
        #expect(flashed.width == 640)

        try await room.disableCam()
        await expectCode(3062) { _ = try await room.localParticipant.captureImage() }
        await room.leave()
        await expectCode(3062) { _ = try await room.localParticipant.captureImage() }
    }

    @Test func aWebcamThisDeviceDoesNotConsumeIsNotCaptured() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (publisher, pubLog) = try await joinedRoom(
            server, room: "capture-ac", id: "pub", mode: .SEND_AND_RECV, cam: true)
        try await waitUntil("published") { pubLog.has("streamOn:pub:video") }
        let (viewer, _) = try await joinedRoom(
            server, room: "capture-ac", id: "viewer", mode: .RECV_ONLY, autoConsume: false)
        let remote = try #require(viewer.participants["pub"])
        #expect(remote.webcamOn)
        await expectCode(3062) { _ = try await remote.captureImage() }
        try await remote.consumeWebcamStreams()
        try await waitForStream(remote, .video)
        let image = try #require(decodeCapture(try await remote.captureImage()))
        #expect(image.width == 640 && image.height == 360)  // single layer (multiStream off)
        try await remote.stopConsumingWebcamStreams()
        try await waitUntil("stopped") { !remote.streams.values.contains { $0.kind == .video } }
        await expectCode(3062) { _ = try await remote.captureImage() }
        // Not consuming it, this device still hears about the webcam turning off (docs/spec/room-api.md §4).
        let status = StatusLog()
        remote.addEventListener(status)
        try await publisher.disableCam()
        try await waitUntil("status off") { status.events.contains("pub:video:off") }
        #expect(!remote.webcamOn)
        await viewer.leave()
        await publisher.leave()
    }

    @Test func theFrameBufferKeepsOnlyFramesFromTheLastKeyframeAndIsBounded() throws {
        let media = try SyntheticMedia(
            seconds: 4, layers: 1, width: 64, height: 36, fps: 10, keyframeIntervalSeconds: 2)
        let buffer = CaptureFrameBuffer()
        let frames = media.videoFrames[0]
        // Delta frames before any keyframe are useless: dropped.
        buffer.append(frames[1])
        #expect(buffer.snapshot == nil)
        for f in frames.prefix(25) { buffer.append(f) }
        // Keyframes at 0 and 20: the buffer holds 20...24.
        let run = try #require(buffer.snapshot)
        #expect(run.codec == .vp8 && run.frames.count == 5)
        #expect(VP8KeyframeInfo.parse(run.frames[0]) != nil)
        let jpeg = try Participant.decodeAndEncode(run, maxWidth: nil, maxHeight: nil)
        #expect(JPEGDecoder.size(of: jpeg).map { [$0.width, $0.height] } == [64, 36])
        // Too many frames without a keyframe: dropped until the next keyframe.
        for _ in 0..<CaptureFrameBuffer.maxFrames { buffer.append(frames[21]) }
        #expect(buffer.snapshot == nil)
        buffer.append(frames[20])
        #expect(buffer.snapshot?.frames.count == 1)
        buffer.clear()
        #expect(buffer.snapshot == nil)
    }

    /// Every codec a webcam may use (issue 35): the buffer starts a run at the codec's own key frame
    /// (H.264: IDR with SPS/PPS; AV1: with its sequence header) and the run decodes to a JPEG of
    /// the stream's size whose picture is the pattern's, not a grey or broken one.
    @Test(arguments: [MediaCodec.vp9, .h264, .av1])
    func theFrameBufferCapturesEveryCodec(_ codec: MediaCodec) throws {
        let frames: [EncodedFrame] =
            switch codec {
            case .vp9: try vp9Frames(seconds: 2)
            case .h264: try x264AccessUnits(seconds: 2)
            default: try av1Frames(seconds: 2)
            }
        let buffer = CaptureFrameBuffer()
        buffer.append(frames[1])
        #expect(buffer.snapshot == nil)
        for f in frames.prefix(40) { buffer.append(f) }
        // Keyframes every 30 frames: the run is 30...39.
        let run = try #require(buffer.snapshot)
        #expect(run.codec == codec && run.frames.count == 10)
        #expect(buffer.pictureSize.map { [$0.width, $0.height] } == [320, 240])
        let jpeg = try Participant.decodeAndEncode(run, maxWidth: 160, maxHeight: nil)
        let decoded = try #require(JPEGDecoder.decodeLuma(jpeg))
        #expect(decoded.width == 160 && decoded.height == 120)
        #expect(Set(decoded.pixels).count > 8, "the picture has structure")
        // A delta frame of another codec ends the run: it cannot continue it.
        buffer.append(
            EncodedFrame(codec: codec == .vp9 ? .av1 : .vp9, data: [1, 2, 3], timestamp: 0, isKeyframe: false))
        #expect(buffer.snapshot == nil)
        // Without their key frame, the frames do not decode: an error, not a crash.
        #expect(throws: MediaError.self) {
            try Participant.decodeAndEncode(
                CaptureRun(codec: codec, frames: frames[31..<35].map(\.data)), maxWidth: nil, maxHeight: nil)
        }
    }

    @Test func aFlashCaptureCallsTheScreenFlashSetWithVideoSDK() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, _) = try await joinedRoom(server, room: "screen-flash", id: "me", mode: .SEND_AND_RECV, cam: true)
        defer { VideoSDK.setScreenFlash(nil) }
        let counting = CountingScreenFlash()
        VideoSDK.setScreenFlash(counting)
        let lit = try await room.localParticipant.captureImage(width: 160, height: 90, flash: .ON)
        #expect(!lit.isEmpty)
        let after = counting.calls
        #expect(after.applied >= 1 && after.cleared >= 1)

        // The documented call compiles and runs; headless, the overlay is a no-op hook.
        let overlay = WhiteOverlayScreenFlash(window: nil)
        VideoSDK.setScreenFlash(overlay)
        #expect(VideoSDK.screenFlash === overlay)
        #expect(!(try await room.localParticipant.captureImage(flash: .ON)).isEmpty)
        #expect(!overlay.isLit)
        await room.leave()
    }

    @Test func aFlashCaptureRunningRefusesAnotherFlashCaptureWith3069() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, log) = try await joinedRoom(server, room: "flash", id: "me", mode: .SEND_AND_RECV, cam: true)
        try await waitUntil("cam on") { log.has("streamOn:me:video") }
        let me = room.localParticipant
        #expect(me.beginFlashCapture())  // a flash capture is running
        await expectCode(3069) { _ = try await me.captureImage(flash: .ON) }
        #expect(!(try await me.captureImage(flash: .OFF)).isEmpty)  // without flash it is not blocked
        me.endFlashCapture()
        #expect(!(try await me.captureImage(flash: .ON)).isEmpty)
        try await waitUntil("3069 reported") { log.errorCodes.contains(3069) }
        await room.leave()
    }
}
