import Agent
import Foundation
import Media
import RTC
import RTCWire
import SystemCalls
import TestSupport
import Testing

/// The shared venv's Python (PyAV bundles a libavformat recent enough for AV1 over RTP).
private let relayPython: String = {
    let root =
        ProcessInfo.processInfo.environment["UNDERSTUDY_REPO"].map { URL(fileURLWithPath: $0) }
        ?? URL(fileURLWithPath: #filePath).resolvingSymlinksInPath().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".venv/bin/python").path
}()

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
        let media = SyntheticMedia.shared(layers: 1)
        let counts = try await playThroughFFmpeg(
            video: { media.videoFrame(at: $0) }, audio: { media.audioFrame(at: $0) }, fps: media.fps,
            checkSDP: { sdp, port in
                #expect(sdp.contains("m=video \(port) RTP/AVP 96") && sdp.contains("a=rtpmap:96 VP8/90000"))
                #expect(!sdp.contains("a=fmtp:96"))
                #expect(sdp.contains("m=audio \(port + 2) RTP/AVP 111") && sdp.contains("a=rtpmap:111 opus/48000/2"))
                #expect(sdp.contains("c=IN IP4 127.0.0.1"))
            })
        #expect((counts["vp8"] ?? 0) >= 60, "counts: \(counts)")
        #expect((counts["opus"] ?? 0) >= 100, "counts: \(counts)")
    }

    /// H.264 from libx264 through the relay: the first key frame rewrites the .sdp (H264/90000,
    /// packetization-mode=1, the SPS's profile-level-id, its SPS and PPS as sprop-parameter-sets)
    /// and ffmpeg, opening that .sdp, copies and decodes the stream without an error.
    @Test func ffmpegPlaysRelayedH264FromTheRewrittenSDP() async throws {
        let frames = try x264AccessUnits(seconds: 5)
        let media = SyntheticMedia.shared(layers: 1)
        let counts = try await playThroughFFmpeg(
            video: { $0 < frames.count ? frames[$0] : nil }, audio: { media.audioFrame(at: $0) }, fps: 30,
            checkSDP: { sdp, port in
                #expect(
                    sdp.contains("m=video \(port) RTP/AVP 96\na=rtpmap:96 H264/90000\na=fmtp:96 packetization-mode=1;"))
                #expect(sdp.contains(";sprop-parameter-sets="), "\(sdp)")
            })
        #expect((counts["h264"] ?? 0) >= 60, "counts: \(counts)")
        #expect((counts["opus"] ?? 0) >= 100, "counts: \(counts)")
    }

    /// VP9 from libvpx through the relay, played by GStreamer from the rewritten .sdp (`sdpdemux`,
    /// `rtpvp9depay`, `vp9dec`). Debian's ffmpeg 5.1 does not open VP9 over RTP (its depacketizer is
    /// an experimental draft-02 reader; it opens neither this stream nor GStreamer's `rtpvp9pay`).
    @Test func gstreamerPlaysRelayedVP9FromTheRewrittenSDP() async throws {
        // Counts the frames vp9dec decodes in 7 s (the 4 s of media fall inside); prints the count and
        // the first error.
        let (sdp, port, text) = try await relayWhilePlaying(try vp9Frames(seconds: 5), python: "/usr/bin/python3") {
            """
            import gi, sys, time
            gi.require_version('Gst', '1.0')
            from gi.repository import Gst
            Gst.init(None)
            p = Gst.parse_launch('filesrc location=\($0) ! sdpdemux name=d d. ! rtpvp9depay ! vp9dec '
                                 '! fakesink name=sink signal-handoffs=true sync=false')
            n = [0]
            p.get_by_name('sink').connect('handoff', lambda *a: n.__setitem__(0, n[0] + 1))
            p.set_state(Gst.State.PLAYING)
            bus = p.get_bus()
            m = bus.timed_pop_filtered(7 * Gst.SECOND, Gst.MessageType.ERROR)
            p.set_state(Gst.State.NULL)
            print(n[0], m.parse_error()[0].message if m else '')
            """
        }
        #expect(sdp.contains("m=video \(port) RTP/AVP 96\na=rtpmap:96 VP9/90000\na=fmtp:96 profile-id=0\n"), "\(sdp)")
        let decoded = Int(text.split(separator: " ").first ?? "") ?? -1
        // 4 s at 30 fps; GStreamer may join a little late (its start-up) and wait for a key frame.
        #expect(decoded >= 60, "GStreamer: \(text)")
        #expect(text.trimmingCharacters(in: .whitespacesAndNewlines) == "\(decoded)", "GStreamer: \(text)")
    }

    /// AV1 from libaom through the relay, read by libavformat from the rewritten .sdp (its RTP AV1
    /// depacketizer, through the PyAV of the shared venv: Debian's ffmpeg 5.1 predates it) and
    /// decoded by libdav1d without an error.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: relayPython)))
    func libavformatPlaysRelayedAV1FromTheRewrittenSDP() async throws {
        // Decodes the video stream for up to 7 s (the 4 s of media fall inside); prints the frame
        // count, the codec and the first error.
        let (sdp, port, text) = try await relayWhilePlaying(try av1Frames(seconds: 5), python: relayPython) {
            """
            import av, sys, time
            c = av.open('\($0)', options={'protocol_whitelist': 'file,udp,rtp', 'reorder_queue_size': '0'},
                        timeout=(10, 3))
            v = c.streams.video[0]
            n, err, end = 0, '', time.monotonic() + 7
            try:
                for packet in c.demux(v):
                    for frame in packet.decode():
                        n += 1
                    if time.monotonic() > end:
                        break
            except av.error.ExitError:
                pass
            except Exception as e:
                err = repr(e)
            print(n, v.codec_context.name, err)
            """
        }
        #expect(
            sdp.contains("m=video \(port) RTP/AVP 96\na=rtpmap:96 AV1/90000\na=fmtp:96 profile=0;level-idx="), "\(sdp)")
        let fields = text.split(separator: " ", maxSplits: 2)
        let decoded = Int(fields.first ?? "") ?? -1
        print("relayed AV1, libavformat read: \(text)")
        // 4 s at 30 fps; the player may join a little late (its start-up) and wait for a key frame.
        #expect(decoded >= 60, "libavformat: \(text)")
        // Decoded as AV1 (libdav1d, as this libavformat picks), every frame without an error.
        #expect(fields.count >= 2 && ["libdav1d", "av1", "libaom-av1"].contains(String(fields[1])), "\(text)")
        #expect(fields.count == 2 || fields[2].trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(text)")
    }

    @Test func vp9PacketsCarryDescriptorsAndReassembleToTheFrames() async throws {
        let loop = EventLoop(name: "relay-vp9-wire")
        defer { loop.shutdown() }
        let collector = PacketCollector()
        let (port, sockets) = try openEvenPortPair(loop: loop, handler: collector)
        let relay = try RTPOutput(destination: "127.0.0.1", basePort: port, loop: loop)
        let frames = Array(try vp9Frames(seconds: 1).prefix(4))
        #expect(frames[0].isKeyframe && frames[0].data.count > RTPOutput.maxPayloadSize)  // several packets
        await loop.submit {
            for f in frames { relay.send(f, arrival: EventLoop.now()) }
        }
        let stats = await loop.submit { relay.stats }
        #expect(stats.videoFrames == 4 && stats.framesFailed == 0)
        try await waitUntil("relayed packets") { collector.count == Int(stats.packets) }
        var rebuilt: [[UInt8]] = []
        var current: [UInt8] = []
        var pictureIDs: [UInt16] = []
        for p in collector.packets.map(\.bytes) {
            let payload = Array(p[12...])
            let info = try payload.withUnsafeBytes { try VP9PayloadFormat.inspect($0) }
            // Our own VP9 reader: B on a frame's first packet, P clear on the key frame's.
            #expect(info.startsFrame == current.isEmpty)
            if info.startsFrame { #expect(info.isKeyframe == rebuilt.isEmpty) }
            #expect(info.hasPictureID && info.pictureIDIs15Bit)
            #expect((payload[0] & 0x04 != 0) == (p[1] & 0x80 != 0))  // E with the marker
            current += payload[info.headerLength...]
            if p[1] & 0x80 != 0 {
                rebuilt.append(current)
                pictureIDs.append(info.pictureID)
                current = []
            }
        }
        #expect(rebuilt == frames.map(\.data))
        #expect(pictureIDs.count == 4 && zip(pictureIDs, pictureIDs.dropFirst()).allSatisfy { $1 == ($0 + 1) & 0x7FFF })
        relay.close()
        for s in sockets { s.close() }
    }

    // MARK: - Video formats

    @Test func h264FormatCarriesProfileAndParameterSetsOfTheKeyframe() throws {
        let frames = try x264AccessUnits(seconds: 1)
        let key = try #require(frames.first { $0.isKeyframe })
        let format = try #require(key.data.withUnsafeBytes { RTPOutputVideoFormat(codec: .h264, keyframe: $0) })
        #expect(format.rtpmap == "H264/90000")
        let fmtp = try #require(format.fmtp)
        // The SPS and PPS of the key frame, in that order.
        var sps: [UInt8] = []
        var pps: [UInt8] = []
        key.data.withUnsafeBytes { b in
            H264AnnexB.forEachUnit(b) { unit in
                if unit[0] & 0x1F == H264NALType.sps, sps.isEmpty { sps = Array(unit) }
                if unit[0] & 0x1F == H264NALType.pps, pps.isEmpty { pps = Array(unit) }
            }
        }
        let plid = H264ProfileLevelID(profileIDC: sps[1], constraints: sps[2], level: sps[3]).text
        #expect(plid.hasPrefix("42"))  // libx264 -profile:v baseline
        #expect(fmtp.hasPrefix("packetization-mode=1;profile-level-id=\(plid);sprop-parameter-sets="))
        // sprop-parameter-sets decodes back to exactly those units (the SDP parser reads it so).
        let list = fmtp.split(separator: ";").map { item in
            let kv = item.split(separator: "=", maxSplits: 1).map(String.init)
            return SDPParameter(key: kv[0], value: kv.count > 1 ? kv[1] : nil)
        }
        let parsed = try #require(H264FormatParameters(list))
        #expect(parsed.packetizationMode == 1 && parsed.profileLevelID.text == plid)
        #expect(parsed.spropAnnexB == [0, 0, 0, 1] + sps + [0, 0, 0, 1] + pps)
        // A key frame without parameter sets still announces the packetization mode.
        let idrOnly: [UInt8] = [0, 0, 0, 1, 0x65, 0x88, 0x84, 0x00]
        let bare = idrOnly.withUnsafeBytes { RTPOutputVideoFormat(codec: .h264, keyframe: $0) }
        #expect(bare == RTPOutputVideoFormat(codec: .h264, fmtp: "packetization-mode=1"))
    }

    @Test func vp9AndAV1FormatsCarryTheirProfileFromTheKeyframe() throws {
        let vp9 = try #require(try vp9Frames(seconds: 1).first { $0.isKeyframe })
        let vp9Format = vp9.data.withUnsafeBytes { RTPOutputVideoFormat(codec: .vp9, keyframe: $0) }
        #expect(vp9Format == RTPOutputVideoFormat(codec: .vp9, fmtp: "profile-id=0"))
        #expect(vp9Format?.rtpmap == "VP9/90000")

        let av1 = try #require(try av1Frames(seconds: 1).first { $0.isKeyframe })
        let av1Format = try #require(av1.data.withUnsafeBytes { RTPOutputVideoFormat(codec: .av1, keyframe: $0) })
        let seq = try #require(av1.data.withUnsafeBytes { AV1SequenceHeader.configurationRecord(fromTemporalUnit: $0) })
        #expect(av1Format.rtpmap == "AV1/90000")
        #expect(av1Format.fmtp == "profile=0;level-idx=\(seq[1] & 0x1F);tier=0")

        let vp8 = try #require(SyntheticMedia.shared(layers: 1).videoFrame(at: 0))
        #expect(vp8.data.withUnsafeBytes { RTPOutputVideoFormat(codec: .vp8, keyframe: $0) } == .vp8)
        #expect([UInt8]().withUnsafeBytes { RTPOutputVideoFormat(codec: .opus, keyframe: $0) } == nil)
    }

    @Test func sessionDescriptionPerCodec() async throws {
        let loop = EventLoop(name: "relay-sdp-codecs")
        defer { loop.shutdown() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("relay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("relay.sdp").path
        let relay = try RTPOutput(destination: "127.0.0.1", basePort: 5004, loop: loop)
        try relay.writeSDP(to: path)
        let before = try String(contentsOfFile: path, encoding: .utf8)
        #expect(before == relay.sessionDescription && before.contains("a=rtpmap:96 VP8/90000\na=recvonly\n"))

        let frames = try x264AccessUnits(seconds: 1)
        let changes = Box<[(RTPOutputVideoFormat, Result<String?, RTPOutputError>)]>([])
        await loop.submit {
            relay.onFormatChange = { format, outcome in changes.withLock { $0.append((format, outcome)) } }
            // A delta frame, then the key frame that picks H.264, then VP8 (dropped: another codec).
            relay.send(frames[1], arrival: 0)
            relay.send(frames[0], arrival: 0)
            relay.send(frames[1], arrival: 0)
            relay.send(try! #require(SyntheticMedia.shared(layers: 1).videoFrame(at: 0)), arrival: 0)
        }
        let (stats, format) = await loop.submit { (relay.stats, relay.videoFormat) }
        #expect(stats.framesBeforeKeyframe == 1 && stats.videoFrames == 2 && stats.framesOtherCodec == 1)
        #expect(format.codec == .h264)
        let seen = changes.withLock { $0 }
        #expect(seen.count == 1 && seen.first?.0 == format)
        if case .success(let written)? = seen.first?.1 { #expect(written == path) } else { Issue.record("\(seen)") }
        let after = try String(contentsOfFile: path, encoding: .utf8)
        #expect(after == relay.sessionDescription)
        let fmtp = try #require(format.fmtp)
        #expect(
            after.contains(
                "m=video 5004 RTP/AVP 96\na=rtpmap:96 H264/90000\na=fmtp:96 \(fmtp)\na=recvonly\n"
                    + "m=audio 5006 RTP/AVP 111\na=rtpmap:111 opus/48000/2\n"))
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
        relay.close()
    }

    @Test func h264PacketsReassembleToTheAccessUnits() async throws {
        let loop = EventLoop(name: "relay-h264-wire")
        defer { loop.shutdown() }
        let collector = PacketCollector()
        let (port, sockets) = try openEvenPortPair(loop: loop, handler: collector)
        let relay = try RTPOutput(destination: "127.0.0.1", basePort: port, loop: loop)
        let frames = Array(try x264AccessUnits(seconds: 1).prefix(6))
        #expect(frames[0].isKeyframe && frames[0].data.count > RTPOutput.maxPayloadSize)  // FU-A on the wire
        await loop.submit {
            for f in frames { relay.send(f, arrival: EventLoop.now()) }
        }
        let stats = await loop.submit { relay.stats }
        #expect(stats.videoFrames == 6 && stats.framesFailed == 0)
        try await waitUntil("relayed packets") { collector.count == Int(stats.packets) }
        var units: [[UInt8]] = []
        var payloads: [[UInt8]] = []
        var previousSeq: UInt16?
        for p in collector.packets.map(\.bytes) {
            #expect(p[0] == 0x80 && p[1] & 0x7F == 96 && p.count <= 12 + RTPOutput.maxPayloadSize)
            let seq = readUInt16(p, 2)
            if let previousSeq { #expect(seq == previousSeq &+ 1) }
            previousSeq = seq
            payloads.append(Array(p[12...]))
            guard p[1] & 0x80 != 0 else { continue }
            // The marker ends the access unit: rebuild it as the receive path does.
            var counter = H264PayloadFormat.AnnexBWriter(output: nil)
            for q in payloads { q.withUnsafeBytes { counter.append($0) } }
            counter.finish()
            var unit = [UInt8](repeating: 0, count: counter.length)
            unit.withUnsafeMutableBytes { out in
                var writer = H264PayloadFormat.AnnexBWriter(output: out)
                for q in payloads { q.withUnsafeBytes { writer.append($0) } }
                writer.finish()
                #expect(!writer.sawNonContinuousFragment)
            }
            units.append(unit)
            payloads = []
        }
        #expect(units == frames.map(\.data))
        relay.close()
        for s in sockets { s.close() }
    }
}

/// Relays `frames` (video, 30 fps, 4 s, with the synthetic Opus) in real time while a Python player
/// (`script`, given the .sdp's path) reads the relay's .sdp, rewritten by the first key frame before
/// the player starts. Returns that .sdp, the video port and what the player printed.
private func relayWhilePlaying(
    _ frames: [EncodedFrame], python: String, script: (String) -> String
) async throws -> (sdp: String, port: UInt16, output: String) {
    let loop = EventLoop(name: "relay-player")
    defer { loop.shutdown() }
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("relay-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let sdpPath = dir.appendingPathComponent("relay.sdp").path
    let (port, probeSockets) = try openEvenPortPair(loop: loop, handler: PacketCollector())
    for s in probeSockets { s.close() }
    let relay = try RTPOutput(destination: "127.0.0.1", basePort: port, loop: loop)
    try relay.writeSDP(to: sdpPath)
    await loop.submit { relay.send(frames[0], arrival: EventLoop.now()) }
    let sdp = try String(contentsOfFile: sdpPath, encoding: .utf8)
    let player = try ChildProcess(python, ["-c", script(sdpPath)], standardOutput: .pipe, standardError: .null)
    try await Task.sleep(nanoseconds: 1_000_000_000)
    let media = SyntheticMedia.shared(layers: 1)
    let pacer = Pacer(
        relay: relay, video: { $0 < frames.count ? frames[$0] : nil }, audio: { media.audioFrame(at: $0) }, fps: 30,
        seconds: 4)
    await loop.submit { pacer.start = EventLoop.now() }
    loop.addTicker(pacer)
    try await waitUntil("the pacer", seconds: 15) { pacer.done.withLock { $0 } }
    loop.removeTicker(pacer)
    _ = try? await waitUntil("the player to exit", seconds: 15) { player.hasExited }
    player.signal(SIGTERM)
    let out = ChildProcess.readToEnd(player.standardOutput!)
    player.wait()
    relay.close()
    return (sdp, port, String(decoding: out, as: UTF8.self))
}

/// Relays `video` and `audio` (by index, until nil) in real time while ffmpeg plays the relay's .sdp
/// (rewritten by the first key frame, which is relayed before ffmpeg starts); returns ffprobe's frame
/// counts of what ffmpeg copied, after checking that ffmpeg decoded it without an error.
private func playThroughFFmpeg(
    video: @escaping @Sendable (Int) -> EncodedFrame?, audio: @escaping @Sendable (Int) -> EncodedFrame?, fps: Int,
    checkSDP: (String, UInt16) -> Void
) async throws -> [String: Int] {
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
    // The first key frame fixes the codec and rewrites the .sdp; nobody listens yet.
    let first = try #require(video(0))
    await loop.submit { relay.send(first, arrival: EventLoop.now()) }
    checkSDP(try String(contentsOfFile: sdpPath, encoding: .utf8), port)

    // Copy to a file (counted by ffprobe) and decode at the same time (errors on stderr).
    let ffmpeg = try ChildProcess(
        "/usr/bin/ffmpeg",
        [
            "-nostdin", "-v", "error", "-protocol_whitelist", "file,udp,rtp", "-i", sdpPath,
            "-map", "0", "-c", "copy", "-t", "3.5", "-y", outPath,
            "-map", "0", "-t", "3.5", "-f", "null", "-",
        ], standardOutput: .null, standardError: .pipe)
    try await Task.sleep(nanoseconds: 1_000_000_000)

    let pacer = Pacer(relay: relay, video: video, audio: audio, fps: fps, seconds: 4)
    await loop.submit { pacer.start = EventLoop.now() }
    loop.addTicker(pacer)
    try await waitUntil("the pacer", seconds: 15) { pacer.done.withLock { $0 } }
    loop.removeTicker(pacer)
    let stats = await loop.submit { relay.stats }
    #expect(stats.videoFrames >= 115 && stats.audioFrames >= 195)

    // ffmpeg stops by itself after 3.5 s of media (`-t`); SIGINT (which also makes it finish its
    // outputs) only if it is still waiting a few seconds later.
    let exited = (try? await waitUntil("ffmpeg to exit", seconds: 5) { ffmpeg.hasExited }) != nil
    if !exited { ffmpeg.signal(SIGINT) }
    #expect(exited, "ffmpeg did not stop after 3.5 s of media")
    let errData = ChildProcess.readToEnd(ffmpeg.standardError!)
    ffmpeg.wait()
    relay.close()

    // Over loopback, ffmpeg's RTP demuxer may still note a reorder timeout or a missed packet
    // at the start; those are tolerated only together with the frame counts the callers check.
    let serious = String(decoding: errData, as: UTF8.self)
        .split(whereSeparator: \.isNewline)
        .filter { !$0.contains("max delay reached") && !$0.contains("RTP: missed") && !$0.isEmpty }
    #expect(serious.isEmpty, "ffmpeg reported: \(serious.joined(separator: "\n"))")

    let decode = try runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", outPath, "-f", "null", "-"])
    #expect(decode.status == 0 && decode.err.isEmpty, "decode: \(decode.err)")
    return try probeFrameCounts(outPath)
}

// MARK: - Helpers

/// Sends frames through the relay in real time from the loop's 10 ms tick: video at `fps` (key frame
/// first), audio every 20 ms.
private final class Pacer: EventLoopTicker, @unchecked Sendable {
    let relay: RTPOutput
    let video: (Int) -> EncodedFrame?
    let audio: (Int) -> EncodedFrame?
    let fps: Int
    let seconds: UInt64
    var start: UInt64 = 0
    var videoIndex = 0
    var audioIndex = 0
    let done = Mutex(false)

    init(
        relay: RTPOutput, video: @escaping (Int) -> EncodedFrame?, audio: @escaping (Int) -> EncodedFrame?, fps: Int,
        seconds: UInt64
    ) {
        self.relay = relay
        self.video = video
        self.audio = audio
        self.fps = fps
        self.seconds = seconds
    }

    func tick(now: UInt64) {
        let elapsed = now &- start
        guard elapsed < seconds * 1_000_000_000 else {
            done.withLock { $0 = true }
            return
        }
        let fps = UInt64(max(1, fps))
        while UInt64(videoIndex) * 1_000_000_000 / fps <= elapsed, let f = video(videoIndex) {
            relay.send(f, arrival: now)
            videoIndex += 1
        }
        while UInt64(audioIndex) * 20_000_000 <= elapsed, let f = audio(audioIndex) {
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

private typealias Box = Mutex

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
