import Agent
import Foundation
import Media
import RTC
import RTCWire
import TestSupport
import Testing

/// `RTPOutput`: URL parsing, the packets it puts on the wire, and ffmpeg playing its SDP.
@Suite(.serialized) struct RTPOutputTests {
    // MARK: - URL parsing

    @Test func parseURLAcceptsNumericHostsAndEvenPorts() throws {
        #expect(try RTPOutput.parseURL("rtp://127.0.0.1:5004") == ("127.0.0.1", 5004))
        #expect(try RTPOutput.parseURL("RTP://localhost:6000/") == ("127.0.0.1", 6000))
        #expect(try RTPOutput.parseURL("rtp://[::1]:5004") == ("::1", 5004))
        #expect(try RTPOutput.parseURL("rtp://10.1.2.3:65532") == ("10.1.2.3", 65532))
    }

    @Test func parseURLRejectsBadInputWithTypedErrors() {
        let cases: [(String, RTPOutputError)] = [
            ("http://127.0.0.1:5004", .unsupportedScheme("http://127.0.0.1:5004")),
            ("127.0.0.1:5004", .unsupportedScheme("127.0.0.1:5004")),
            ("rtp://", .missingHost),
            ("rtp://:5004", .missingHost),
            ("rtp://127.0.0.1", .missingPort),
            ("rtp://127.0.0.1:", .missingPort),
            ("rtp://127.0.0.1:abc", .invalidPort("abc")),
            ("rtp://127.0.0.1:5005", .invalidPort("5005")),
            ("rtp://127.0.0.1:0", .invalidPort("0")),
            ("rtp://127.0.0.1:65534", .invalidPort("65534")),
            ("rtp://127.0.0.1:70000", .invalidPort("70000")),
            ("rtp://127.0.0.1:-4", .invalidPort("-4")),
            ("rtp://127.0.0.1:99999999999999999999", .invalidPort("99999999999999999999")),
            ("rtp://example.com:5004", .invalidHost("example.com")),
            ("rtp://[::1:5004", .invalidHost("[::1:5004")),
            ("rtp://300.1.1.1:5004", .invalidHost("300.1.1.1")),
            ("rtp://127.0.0.1:5004/path", .unexpectedSuffix("/path")),
            ("rtp://127.0.0.1:5004?ttl=3", .unexpectedSuffix("?ttl=3")),
        ]
        for (url, expected) in cases {
            #expect(throws: expected, "\(url)") { _ = try RTPOutput.parseURL(url) }
        }
        // Each error reads as one line a CLI can print.
        #expect(RTPOutputError.invalidPort("5005").description.contains("even"))
    }

    @Test func unwritableSDPPathThrowsFileError() async throws {
        let loop = EventLoop(name: "relay-sdp")
        defer { loop.shutdown() }
        let relay = try RTPOutput(destination: "127.0.0.1", basePort: 5004, loop: loop)
        let path = "/nonexistent-understudy-dir/relay.sdp"
        #expect(throws: RTPOutputError.file(path: path, errno: ENOENT)) { try relay.writeSDP(to: path) }
        relay.close()
    }

    @Test func initRejectsOddPortAndHostName() {
        let loop = EventLoop(name: "relay-init")
        defer { loop.shutdown() }
        #expect(throws: RTPOutputError.invalidPort("5005")) {
            _ = try RTPOutput(destination: "127.0.0.1", basePort: 5005, loop: loop)
        }
        #expect(throws: RTPOutputError.invalidHost("localhost")) {
            _ = try RTPOutput(destination: "localhost", basePort: 5004, loop: loop)
        }
    }

    // MARK: - Wire format

    @Test func packetsCarryFreshIdentifiersAndTheSendersTiming() async throws {
        let loop = EventLoop(name: "relay-wire")
        defer { loop.shutdown() }
        let collector = PacketCollector()
        let (port, sockets) = try openEvenPortPair(loop: loop, handler: collector)
        let relay = try RTPOutput(destination: "127.0.0.1", basePort: port, loop: loop)
        let media = SyntheticMedia.shared(layers: 1)
        // A delta frame first must be dropped: nothing can decode it.
        let frames: [EncodedFrame] = [
            try #require(media.videoFrame(at: 1)), try #require(media.videoFrame(at: 0)),
            try #require(media.audioFrame(at: 0)), try #require(media.videoFrame(at: 1)),
            try #require(media.audioFrame(at: 1)), try #require(media.videoFrame(at: 2)),
        ]
        #expect(frames[0].isKeyframe == false && frames[1].isKeyframe)
        await loop.submit {
            for f in frames { relay.send(f, arrival: EventLoop.now()) }
        }
        let stats = await loop.submit { relay.stats }
        #expect(stats.framesBeforeKeyframe == 1)
        #expect(stats.videoFrames == 3 && stats.audioFrames == 2)
        try await waitUntil("relayed packets") { collector.count == Int(stats.packets) }
        let packets = collector.packets
        let video = packets.filter { $0.port == port }.map(\.bytes)
        let audio = packets.filter { $0.port == port + 2 }.map(\.bytes)
        #expect(audio.count == 2)

        // Audio: PT 111, one packet per frame, consecutive sequence numbers, timestamps 960 apart.
        for p in audio {
            #expect(p[0] == 0x80 && p[1] & 0x7F == 111)
            #expect(readUInt32(p, 8) == relay.audioSSRC)
        }
        #expect(Array(audio[0][12...]) == frames[2].data)
        #expect(readUInt16(audio[1], 2) == readUInt16(audio[0], 2) &+ 1)
        #expect(readUInt32(audio[1], 4) &- readUInt32(audio[0], 4) == frames[4].timestamp &- frames[2].timestamp)

        // Video: reassemble each frame from its descriptors and compare with what was sent.
        var reassembled: [[UInt8]] = []
        var timestamps: [UInt32] = []
        var current: [UInt8] = []
        var previousSeq: UInt16?
        for p in video {
            #expect(p[0] == 0x80 && p[1] & 0x7F == 96)
            #expect(readUInt32(p, 8) == relay.videoSSRC)
            let seq = readUInt16(p, 2)
            if let previousSeq { #expect(seq == previousSeq &+ 1) }
            previousSeq = seq
            let payload = Array(p[12...])
            let (descriptor, length) = try payload.withUnsafeBytes { try VP8PayloadDescriptor.parse($0) }
            #expect(descriptor.pictureID != nil)
            if descriptor.startOfPartition { #expect(current.isEmpty) }
            current += payload[length...]
            if p[1] & 0x80 != 0 {
                reassembled.append(current)
                timestamps.append(readUInt32(p, 4))
                current = []
            }
        }
        #expect(reassembled.count == 3)
        #expect(reassembled == [frames[1].data, frames[3].data, frames[5].data])
        if timestamps.count == 3 {
            #expect(timestamps[1] &- timestamps[0] == frames[3].timestamp &- frames[1].timestamp)
            #expect(timestamps[2] &- timestamps[1] == frames[5].timestamp &- frames[3].timestamp)
        }
        relay.close()
        for s in sockets { s.close() }
    }

    // MARK: - ffmpeg plays the SDP

    @Test func ffmpegPlaysTheRelayedStreams() async throws {
        let loop = EventLoop(name: "relay-ffmpeg")
        defer { loop.shutdown() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("relay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let sdpPath = dir.appendingPathComponent("relay.sdp").path
        let outPath = dir.appendingPathComponent("out.mkv").path

        // Find a free even port pair, then release it for ffmpeg.
        let (port, probeSockets) = try openEvenPortPair(loop: loop, handler: PacketCollector())
        for s in probeSockets { s.close() }
        try await Task.sleep(nanoseconds: 50_000_000)

        let relay = try RTPOutput(destination: "127.0.0.1", basePort: port, loop: loop)
        try relay.writeSDP(to: sdpPath)
        let sdp = try String(contentsOfFile: sdpPath, encoding: .utf8)
        #expect(sdp.contains("m=video \(port) RTP/AVP 96") && sdp.contains("a=rtpmap:96 VP8/90000"))
        #expect(sdp.contains("m=audio \(port + 2) RTP/AVP 111") && sdp.contains("a=rtpmap:111 opus/48000/2"))
        #expect(sdp.contains("c=IN IP4 127.0.0.1"))

        // Copy to a file (counted by ffprobe) and decode at the same time (errors on stderr).
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = [
            "-nostdin", "-v", "error", "-protocol_whitelist", "file,udp,rtp", "-i", sdpPath,
            "-map", "0", "-c", "copy", "-t", "3.5", "-y", outPath,
            "-map", "0", "-t", "3.5", "-f", "null", "-",
        ]
        let errPipe = Pipe()
        ffmpeg.standardError = errPipe
        ffmpeg.standardOutput = FileHandle.nullDevice
        try ffmpeg.run()
        try await Task.sleep(nanoseconds: 1_000_000_000)

        let pacer = Pacer(relay: relay, media: SyntheticMedia.shared(layers: 1), seconds: 4)
        await loop.submit { pacer.start = EventLoop.now() }
        loop.addTicker(pacer)
        try await waitUntil("the pacer", seconds: 15) { pacer.done.withLock { $0 } }
        loop.removeTicker(pacer)
        let stats = await loop.submit { relay.stats }
        #expect(stats.videoFrames >= 115 && stats.audioFrames >= 195)

        // ffmpeg stops by itself after 3.5 s of media (`-t`); SIGINT (which also makes it finish its
        // outputs) only if it is still waiting a few seconds later.
        let exited = (try? await waitUntil("ffmpeg to exit", seconds: 5) { !ffmpeg.isRunning }) != nil
        if !exited { ffmpeg.interrupt() }
        #expect(exited, "ffmpeg did not stop after 3.5 s of media")
        let errData = errPipe.fileHandleForReading.readDataToEndOfFile()
        ffmpeg.waitUntilExit()
        relay.close()

        // Over loopback, ffmpeg's RTP demuxer may still note a reorder timeout or a missed packet
        // at the start; those are tolerated only together with the frame counts below.
        let serious = String(decoding: errData, as: UTF8.self)
            .split(whereSeparator: \.isNewline)
            .filter { !$0.contains("max delay reached") && !$0.contains("RTP: missed") && !$0.isEmpty }
        #expect(serious.isEmpty, "ffmpeg reported: \(serious.joined(separator: "\n"))")

        let counts = try probeFrameCounts(outPath)
        #expect((counts["vp8"] ?? 0) >= 60, "counts: \(counts)")
        #expect((counts["opus"] ?? 0) >= 100, "counts: \(counts)")
        let decode = try runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", outPath, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.err.isEmpty, "decode: \(decode.err)")
    }
}

// MARK: - Helpers

/// Sends the synthetic loop through the relay in real time from the loop's 10 ms tick: key frame first.
private final class Pacer: EventLoopTicker, @unchecked Sendable {
    let relay: RTPOutput
    let media: SyntheticMedia
    let seconds: UInt64
    var start: UInt64 = 0
    var videoIndex = 0
    var audioIndex = 0
    let done = Mutex(false)

    init(relay: RTPOutput, media: SyntheticMedia, seconds: UInt64) {
        self.relay = relay
        self.media = media
        self.seconds = seconds
    }

    func tick(now: UInt64) {
        let elapsed = now &- start
        guard elapsed < seconds * 1_000_000_000 else {
            done.withLock { $0 = true }
            return
        }
        let fps = UInt64(max(1, media.fps))
        while UInt64(videoIndex) * 1_000_000_000 / fps <= elapsed, let f = media.videoFrame(at: videoIndex) {
            relay.send(f, arrival: now)
            videoIndex += 1
        }
        while UInt64(audioIndex) * 20_000_000 <= elapsed, let f = media.audioFrame(at: audioIndex) {
            relay.send(f, arrival: now)
            audioIndex += 1
        }
    }
}

/// Collects datagrams (with the port they arrived on) on the loop thread.
private final class PacketCollector: DatagramHandler, @unchecked Sendable {
    private let storage = Mutex<[(port: UInt16, bytes: [UInt8])]>([])
    var packets: [(port: UInt16, bytes: [UInt8])] { storage.withLock { $0 } }
    var count: Int { storage.withLock { $0.count } }
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        let entry = (socket.localAddress.port, Array(data))
        storage.withLock { $0.append(entry) }
    }
}

/// A small lock box (Foundation's NSLock) usable from tests in Swift 6 mode.
private final class Mutex<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Binds 127.0.0.1:P and 127.0.0.1:P+2 for a random even P.
private func openEvenPortPair(loop: EventLoop, handler: any DatagramHandler) throws -> (UInt16, [UDPSocket]) {
    for _ in 0..<50 {
        let port = UInt16.random(in: 10_000...30_000) & ~1
        guard let a = SocketAddress(ip: "127.0.0.1", port: port), let b = SocketAddress(ip: "127.0.0.1", port: port + 2)
        else { continue }
        guard let first = try? loop.openUDP(bindTo: a, handler: handler) else { continue }
        guard let second = try? loop.openUDP(bindTo: b, handler: handler) else {
            first.close()
            continue
        }
        return (port, [first, second])
    }
    throw WaitTimeout(what: "a free even port pair")
}

private func readUInt16(_ p: [UInt8], _ at: Int) -> UInt16 { UInt16(p[at]) << 8 | UInt16(p[at + 1]) }
private func readUInt32(_ p: [UInt8], _ at: Int) -> UInt32 {
    UInt32(p[at]) << 24 | UInt32(p[at + 1]) << 16 | UInt32(p[at + 2]) << 8 | UInt32(p[at + 3])
}
