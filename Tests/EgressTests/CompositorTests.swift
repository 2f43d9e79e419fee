import Egress
import Foundation
import Media
import RTCWire
import Synchronization
import TestSupport
import Testing

/// The compositor end to end: real VP8 streams of distinct colours in, real files out, read back by
/// ffprobe and ffmpeg.
@Suite(.serialized) struct CompositorTests {
    /// Luma of each synthetic participant (distinct, away from black 16 and the placeholder 48).
    static let colours: [String: UInt8] = ["ann": 200, "bob": 110]

    /// Feeds `seconds` of 320x180 VP8 at 30 fps per participant (a solid picture of its colour) and a
    /// 440 Hz tone as the mixed audio, paced in real time. `until` may end a participant early.
    static func feed(
        _ compositor: Compositor, seconds: Double, participants: [String], leaving: (id: String, after: Double)? = nil
    ) async throws {
        var encoders: [String: VP8Encoder] = [:]
        var slots: [String: Compositor.VideoSlot] = [:]
        for id in participants {
            encoders[id] = try VP8Encoder(width: 320, height: 180, fps: 30, bitrate: 300_000, keyframeInterval: 30)
            slots[id] = compositor.videoSlot(participantId: id)
        }
        compositor.setStage(participants.map { Compositor.StageMember(id: $0, name: $0.uppercased()) })
        let opus = try OpusEncoder(channels: 1, bitrate: 32_000, application: .audio)
        let tone = (0..<960).map { Int16(8000 * sin(2 * Double.pi * 440 * Double($0) / 48_000)) }
        let start = Date()
        var frame = 0
        var audioBlock = 0
        var left = false
        // Counted in frames, not wall time: a starved test process still feeds every frame.
        while Double(frame) < seconds * 30 {
            let elapsed = Double(frame) / 30
            if let leaving, !left, elapsed >= leaving.after {
                left = true
                slots[leaving.id]?.end()
                compositor.setStage(
                    participants.filter { $0 != leaving.id }.map { Compositor.StageMember(id: $0, name: nil) })
            }
            for id in participants where !(left && id == leaving?.id) {
                let picture = I420Image(width: 320, height: 180, fillY: colours[id]!)
                for f in try encoders[id]!.encode(i420: picture) { slots[id]!.write(f) }
            }
            // The mix runs behind the video, as the agent's does (blocks up to 400 ms late).
            let mixedUpTo = Int((elapsed - 0.4) / 0.02)
            while audioBlock < mixedUpTo {
                let packet = try opus.encode(pcm: tone)
                compositor.writeAudio(
                    EncodedFrame(
                        codec: .opus, data: packet, timestamp: UInt32(audioBlock * 960), isKeyframe: true, duration: 960
                    ),
                    pcm: tone, ptsMicros: Int64(audioBlock) * 20_000)
                audioBlock += 1
            }
            frame += 1
            let next = start.addingTimeInterval(Double(frame) / 30)
            let wait = next.timeIntervalSinceNow
            if wait > 0 { try await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
        }
        _ = frame
    }

    /// One decoded frame's luma plane as coded (`at` seconds from the start, or the last when nil):
    /// raw I420 from ffmpeg, so no range conversion touches the values.
    static func lumaFrame(_ path: String, at: Double?, width: Int, height: Int) throws -> [UInt8] {
        let raw = temporaryPath("frame-\(UUID().uuidString).gray")
        defer { try? FileManager.default.removeItem(atPath: raw) }
        var args = ["-nostdin", "-v", "error", "-y"]
        if let at { args += ["-ss", String(at)] } else { args += ["-sseof", "-0.3"] }
        args += ["-i", path, "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "yuv420p", raw]
        let r = try runTool("/usr/bin/ffmpeg", args)
        #expect(r.status == 0, "\(r.err)")
        let data = try Data(contentsOf: URL(fileURLWithPath: raw))
        #expect(data.count == width * height * 3 / 2)
        return [UInt8](data.prefix(width * height))
    }

    static func duration(_ path: String) throws -> Double {
        let out = try runToolText(
            "/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path])
        return Double(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    static func near(_ value: UInt8, _ expected: UInt8) -> Bool { abs(Int(value) - Int(expected)) <= 12 }

    @Test(arguments: [(MediaCodec.h264, ["mp4", "mkv"]), (MediaCodec.vp8, ["mp4", "webm"])])
    func composesEveryParticipantIntoEachOutput(codec: MediaCodec, extensions: [String]) async throws {
        var options = Compositor.Options()
        options.width = 640
        options.height = 360
        options.codec = codec
        options.bitrate = 800_000
        options.preset = "ultrafast"
        let paths = extensions.map { temporaryPath("composite-\(codec.rawValue).\($0)") }
        let outputs = try paths.map { try CompositeOutputs.make(destination: $0) }
        let sizes = Mutex<[String: (Int, Int)]>([:])
        let compositor = try Compositor(
            options: options, outputs: outputs,
            tileSize: { id, w, h in sizes.withLock { $0[id] = (w, h) } })
        let seconds = 3.0
        let started = Date()
        try await Self.feed(compositor, seconds: seconds, participants: ["ann", "bob"])
        #expect(compositor.layout.map(\.member.id) == ["ann", "bob"])
        let results = compositor.stop()
        // The files last as long as the compositor ran (wall time; longer than the feed on a busy machine).
        let ran = Date().timeIntervalSince(started)
        #expect(results.map(\.destination) == paths)
        #expect(results.allSatisfy { $0.error == nil }, "\(results)")
        let stats = compositor.stats
        // Every frame time is accounted for; on a starved machine fewer are encoded (inputs dropped
        // at the hand-off, frames skipped), but each one encoded reaches every file.
        #expect(stats.frames + stats.unchanged + stats.skipped >= 60, "\(stats)")
        #expect(stats.frames >= 3, "\(stats)")
        #expect(stats.audioBlocks >= 100, "\(stats)")
        // The tile sizes the agent would ask layers for: each half of the canvas.
        #expect(sizes.withLock { $0["ann"]?.0 } == 320 && sizes.withLock { $0["bob"]?.1 } == 360)
        for path in paths {
            #expect(try ffmpegDecodeErrors(path) == "", "\(path)")
            let counts = try probeFrameCounts(path)
            #expect((counts[codec == .h264 ? "h264" : "vp8"] ?? 0) == stats.frames, "\(path): \(counts), \(stats)")
            #expect((counts["opus"] ?? 0) >= 100, "\(path): \(counts)")
            let d = try Self.duration(path)
            #expect(d >= seconds - 0.5 && d <= ran + 0.5, "\(path): \(d) s, ran \(ran) s")
            // Grid of two: ann left, bob right (both 320x180 in a 320x360 column, letterboxed).
            let luma = try Self.lumaFrame(path, at: nil, width: 640, height: 360)
            #expect(Self.near(luma[180 * 640 + 160], 200), "\(path): ann's tile \(luma[180 * 640 + 160])")
            #expect(Self.near(luma[180 * 640 + 480], 110), "\(path): bob's tile \(luma[180 * 640 + 480])")
            #expect(Self.near(luma[20 * 640 + 160], 16), "\(path): letterbox \(luma[20 * 640 + 160])")
        }
    }

    /// A tile whose participant stops sending keeps its last picture, and libx264 is told its
    /// macroblocks did not change, while the other tile, which does change, is encoded anew: the last
    /// frame shows both right (a tile wrongly marked unchanged would keep its old colour).
    @Test func onlyTheTilesThatChangedAreEncodedAnew() async throws {
        var options = Compositor.Options()
        options.width = 640
        options.height = 360
        options.preset = "ultrafast"
        options.bitrate = 800_000
        // No key frame after the first: every later picture of a tile is coded against the one before.
        options.keyframeSeconds = 60
        let path = temporaryPath("composite-unchanged-tile-\(UUID().uuidString).mp4")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let compositor = try Compositor(options: options, outputs: [try CompositeOutputs.make(destination: path)])
        var encoders: [String: VP8Encoder] = [:]
        var slots: [String: Compositor.VideoSlot] = [:]
        for id in ["ann", "bob"] {
            encoders[id] = try VP8Encoder(width: 320, height: 180, fps: 30, bitrate: 300_000, keyframeInterval: 30)
            slots[id] = compositor.videoSlot(participantId: id)
        }
        compositor.setStage([.init(id: "ann", name: nil), .init(id: "bob", name: nil)])
        let start = Date()
        // Counted in frames: ann sends for 1 s then goes quiet (its track stays); bob turns from 110
        // to 60 at 1.5 s and keeps sending.
        for frame in 0..<90 {
            if frame < 30 {
                for f in try encoders["ann"]!.encode(i420: I420Image(width: 320, height: 180, fillY: 200)) {
                    slots["ann"]!.write(f)
                }
            }
            let bob = I420Image(width: 320, height: 180, fillY: frame < 45 ? 110 : 60)
            for f in try encoders["bob"]!.encode(i420: bob) { slots["bob"]!.write(f) }
            let wait = start.addingTimeInterval(Double(frame + 1) / 30).timeIntervalSinceNow
            if wait > 0 { try await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
        }
        compositor.stop()
        let stats = compositor.stats
        #expect(stats.tilesRedrawn < stats.tilesShown, "\(stats)")
        #expect(try ffmpegDecodeErrors(path) == "")
        let luma = try Self.lumaFrame(path, at: nil, width: 640, height: 360)
        #expect(Self.near(luma[180 * 640 + 160], 200), "ann's tile \(luma[180 * 640 + 160])")
        #expect(Self.near(luma[180 * 640 + 480], 60), "bob's tile \(luma[180 * 640 + 480])")
    }

    @Test func aLeavingParticipantChangesTheLayout() async throws {
        var options = Compositor.Options()
        options.width = 640
        options.height = 360
        options.preset = "ultrafast"
        options.bitrate = 600_000
        let path = temporaryPath("composite-leave.mp4")
        let compositor = try Compositor(options: options, outputs: [try CompositeOutputs.make(destination: path)])
        try await Self.feed(compositor, seconds: 3, participants: ["ann", "bob"], leaving: ("bob", 1.5))
        #expect(compositor.layout.map(\.member.id) == ["ann"])
        compositor.stop()
        #expect(try ffmpegDecodeErrors(path) == "")
        let before = try Self.lumaFrame(path, at: 1.0, width: 640, height: 360)
        #expect(Self.near(before[180 * 640 + 480], 110), "bob before leaving: \(before[180 * 640 + 480])")
        let after = try Self.lumaFrame(path, at: nil, width: 640, height: 360)
        // Ann alone fills the canvas: her colour where Bob was.
        #expect(Self.near(after[180 * 640 + 160], 200) && Self.near(after[180 * 640 + 480], 200))
    }

    @Test func aParticipantWithoutVideoHasANamedPlaceholder() async throws {
        var options = Compositor.Options()
        options.width = 640
        options.height = 360
        options.preset = "ultrafast"
        let path = temporaryPath("composite-placeholder.mkv")
        let compositor = try Compositor(options: options, outputs: [try CompositeOutputs.make(destination: path)])
        compositor.setStage([.init(id: "ann", name: "Ann"), .init(id: "cam-off", name: "Cam Off")])
        try await waitUntil("frames", seconds: 30) { compositor.stats.frames + compositor.stats.unchanged >= 20 }
        compositor.stop()
        let luma = try Self.lumaFrame(path, at: nil, width: 640, height: 360)
        #expect(Self.near(luma[100 * 640 + 480], 48), "placeholder \(luma[100 * 640 + 480])")
        // The label's white glyphs at the tile's bottom left.
        let labelRows = (300..<356).flatMap { y in (322..<500).map { luma[y * 640 + $0] } }
        #expect(labelRows.contains { $0 > 200 }, "no label drawn")
    }

    @Test func theCompositorThreadIsNamed() async throws {
        var options = Compositor.Options()
        options.width = 320
        options.height = 180
        options.preset = "ultrafast"
        let path = temporaryPath("composite-named.mp4")
        let compositor = try Compositor(options: options, outputs: [try CompositeOutputs.make(destination: path)])
        defer { compositor.stop() }
        // What the bench's per-thread split and `top -H` read.
        func names() -> [String] {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
                .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        }
        try await waitUntil("the named thread", seconds: 30) { names().contains(Compositor.threadName) }
    }

    @Test func anOutputThatFailsIsDroppedAndTheOthersGoOn() async throws {
        final class Failing: CompositeOutput {
            let destination = "failing"
            func writeVideo(_ frame: EncodedFrame, ptsMicros: Int64) throws { throw MediaError.closed }
            func writeAudio(_ opus: EncodedFrame, pcm: UnsafeBufferPointer<Int16>, ptsMicros: Int64) throws {}
            func finish() throws {}
        }
        var options = Compositor.Options()
        options.width = 320
        options.height = 180
        options.preset = "ultrafast"
        let path = temporaryPath("composite-survivor.mp4")
        let compositor = try Compositor(
            options: options, outputs: [Failing(), try CompositeOutputs.make(destination: path)])
        try await waitUntil("frames", seconds: 30) { compositor.stats.frames + compositor.stats.unchanged >= 15 }
        let results = compositor.stop()
        #expect(results.first { $0.destination == "failing" }?.error != nil)
        #expect(results.first { $0.destination == path }?.error == nil)
        // Every frame encoded reached the surviving file (an empty stage: one a second, and the stop's).
        #expect((try probeFrameCounts(path)["h264"] ?? 0) == compositor.stats.frames)
    }

    /// A canvas that does not change (placeholder tiles only) is encoded once a second, not 30 times:
    /// the file still lasts as long as the compositor ran, shows the placeholders, and has a key frame
    /// every `keyframeSeconds` of its time although the encoder saw far fewer frames than that.
    @Test func anUnchangedCanvasIsNotEncodedAgain() async throws {
        var options = Compositor.Options()
        options.width = 320
        options.height = 180
        options.preset = "ultrafast"
        options.keyframeSeconds = 2
        let path = temporaryPath("composite-unchanged.mp4")
        let started = Date()
        let compositor = try Compositor(options: options, outputs: [try CompositeOutputs.make(destination: path)])
        compositor.setStage([.init(id: "cam-off", name: "Cam Off")])
        try await waitUntil("frame times", seconds: 30) {
            compositor.stats.frames + compositor.stats.unchanged >= 5 * 30
        }
        compositor.stop()
        let ran = Date().timeIntervalSince(started)
        let stats = compositor.stats
        // About one frame a second (and the stop's), every other frame time skipped as unchanged.
        #expect(stats.frames <= Int(ran) + 6 && stats.frames >= 5, "\(stats), ran \(ran) s")
        #expect(stats.unchanged >= 5 * 30 - stats.frames - stats.skipped, "\(stats)")
        #expect(try ffmpegDecodeErrors(path) == "")
        let d = try Self.duration(path)
        #expect(d >= 5 - 0.1 && d <= ran + 0.2, "\(d) s, ran \(ran) s")
        // Key frames at least every 2 s of output time (+ the one-second step of the encoded frames).
        let r = try runTool(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-select_streams", "v", "-show_entries", "frame=key_frame,pts_time", "-of", "csv=p=0",
                path,
            ])
        let keys = r.out.split(separator: "\n").compactMap { line -> Double? in
            let f = line.split(separator: ",")
            return f.count == 2 && f[0] == "1" ? Double(f[1]) : nil
        }
        #expect(keys.count >= 2, "key frames at \(keys)")
        for (a, b) in zip(keys, keys.dropFirst()) { #expect(b - a <= 2.05, "key frames at \(keys)") }
        let luma = try Self.lumaFrame(path, at: nil, width: 320, height: 180)
        #expect(Self.near(luma[60 * 320 + 160], 48), "placeholder \(luma[60 * 320 + 160])")
    }

    @Test func refusesBadOptionsAndDestinations() throws {
        var options = Compositor.Options()
        options.width = 13
        options.height = 7
        #expect(throws: MediaError.self) { try Compositor(options: options, outputs: []) }
        options = Compositor.Options()
        options.codec = .vp9
        #expect(throws: MediaError.self) { try Compositor(options: options, outputs: []) }
        options = Compositor.Options()
        options.fps = 0
        #expect(throws: MediaError.self) { try Compositor(options: options, outputs: []) }
        #expect(throws: MediaError.self) { try CompositeOutputs.make(destination: temporaryPath("x.avi")) }
        #expect(throws: MediaError.self) { try CompositeOutputs.make(destination: "/nonexistent-dir/x.mp4") }
    }

    @Test func aWebMOutputRefusesH264() throws {
        let out = try CompositeOutputs.make(destination: temporaryPath("h264.webm"))
        let frames = try x264AccessUnits(seconds: 1)
        #expect(throws: MediaError.self) { try out.writeVideo(frames[0], ptsMicros: 0) }
        try out.finish()
    }
}
