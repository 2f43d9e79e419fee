import Foundation
import Media
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

/// A UDP socket bound to a free loopback port whose next port is free too: a server given the
/// range `port...port+1` has exactly one usable media port while this socket stays open.
final class HeldUDPPort {
    let port: UInt16
    private let fd: Int32

    init() throws {
        for _ in 0..<50 {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { break }
            if let port = Self.bind(fd, 0), port < 65000, let next = Self.probe(port + 1) {
                _ = next
                self.fd = fd
                self.port = port
                return
            }
            close(fd)
        }
        throw WaitTimeout(what: "a pair of free UDP ports")
    }

    deinit { close(fd) }

    private static func bind(_ fd: Int32, _ port: UInt16) -> UInt16? {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return named == 0 ? UInt16(bigEndian: address.sin_port) : nil
    }

    /// Whether `port` can be bound now (bound and released at once).
    private static func probe(_ port: UInt16) -> UInt16? {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        return bind(fd, port)
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

    /// consume → stopConsuming → consume of the same webcam, three times: each round
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

    @Test func stopConsumingDoesNotMuteTheParticipantForOthers() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, _) = try await joinedRoom(server, room: "stop", id: "pub", mode: .SEND_AND_RECV, mic: true)
        let (picky, pickyLog) = try await joinedRoom(
            server, room: "stop", id: "picky", mode: .RECV_ONLY, autoConsume: false)
        let (other, _) = try await joinedRoom(server, room: "stop", id: "other", mode: .RECV_ONLY)
        let atPicky = try #require(picky.participants["pub"])
        atPicky.addEventListener(pickyLog)
        let atOther = try #require(other.participants["pub"])
        try await atPicky.consumeMicStreams()
        try await waitUntil("picky hears pub") { pickyLog.has("streamOn:pub:audio") }
        try await waitForStream(atOther, .audio)
        try await atPicky.stopConsumingMicStreams()
        try await waitUntil("picky stops") { pickyLog.has("streamOff:pub:audio") }
        #expect(atPicky.micOn, "the participant is not muted")
        #expect(pub.localParticipant.micOn)
        // Others still hear it: their stats show packets in the sampling clock's next intervals.
        try await waitUntil("others still hear it", seconds: 20) {
            (atOther.getAudioStats()?.first?["totalPackets"] as? Int ?? 0) > 0
        }
        // Receiving it again.
        try await atPicky.consumeMicStreams()
        try await waitUntil("picky hears pub again") { pickyLog.count("streamOn:pub:audio") == 2 }
        await other.leave()
        await picky.leave()
        await pub.leave()
    }

    /// The server has one usable media port: the publisher takes it, the subscriber's connection
    /// cannot be made. `consumeMicStreams()` fails with 4050 and nothing is announced.
    @Test func aConsumerTheServerCannotCreateIs4050() async throws {
        let held = try HeldUDPPort()
        var configuration = RoomServerConfiguration()
        configuration.listenPort = 0
        configuration.secret = "sdk-test-secret"
        configuration.udpPortLow = held.port
        configuration.udpPortHigh = held.port + 1
        let server = RoomServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        let (pub, pubLog) = try await joinedRoom(server, room: "no-port", id: "pub", mode: .SEND_AND_RECV, mic: true)
        try await waitUntil("mic on") { pubLog.has("streamOn:pub:audio") }
        let (manual, _) = try await joinedRoom(
            server, room: "no-port", id: "manual", mode: .RECV_ONLY, autoConsume: false)
        let remote = try #require(manual.participants["pub"])
        await expectCode(4050) { try await remote.consumeMicStreams() }
        // With autoConsume the failure comes as onError(4050).
        let (auto, autoLog) = try await joinedRoom(server, room: "no-port", id: "auto", mode: .RECV_ONLY)
        try await waitUntil("4050 reported") { autoLog.errorCodes.contains(4050) }
        #expect(autoLog.errors.first { $0.code == 4050 }?.name == "CREATE_CONSUMER_FAILED")
        await auto.leave()
        await manual.leave()
        await pub.leave()
        withExtendedLifetime(held) {}
    }
}
