import Egress
import Foundation
import Media
import RTC
import RTCWire
import SFU

#if canImport(Glibc)
    import Glibc
#endif

/// The composite cost in a room (issue 37, "Cheap"): four publishers send simulcast as Chromium does
/// (1280x720, 640x360 and 320x180), through a real ``SFU`` over loopback DTLS-SRTP, to one subscriber
/// connection that feeds a ``Compositor``. The compositor's tile sizes go to the SFU as viewports
/// (`setViewportOnLoop`, what `setViewPort` does for the agent), so each tile receives the layer the
/// SFU's own layer choice picks for it. The anchor, an ffmpeg pipeline fed by a relay or WHEP, gets
/// the top layer: it decodes four 1280x720 streams, scales each into its tile and `xstack`s them, with
/// the same libx264 settings.
enum CompositeRoomBenchmark {
    struct Result {
        /// Seconds measured (after the warm-up).
        var seconds: Double
        /// Ours at the default preset (``CompositeBenchmark/preset``).
        var ours: Ours
        /// The tile size the compositor asked for.
        var tile: String
        var ffmpegCPUSeconds: Double
        var ffmpegFrames: Int
        var ffmpegWallSeconds: Double
        /// The same anchor paced at real time (`-re` on every input), as a live pipeline reads its
        /// streams: CPU seconds and wall seconds.
        var ffmpegRealtimeCPUSeconds: Double = 0
        var ffmpegRealtimeWallSeconds: Double = 0
        /// Decoding the four tiles' layer files alone (ffmpeg, one thread, to null), CPU seconds per
        /// second of video: libvpx (the anchor's decoder) and libavcodec's own VP8 decoder (ours, since issue 37's third pass).
        var decodeLibvpx: Double
        var decodeNative: Double
        /// The same room at other libx264 presets, each against the anchor at that preset.
        var presets: [PresetRow] = []

        var oursPerOutputSecond: Double { ours.perOutputSecond }
        var ffmpegPerOutputSecond: Double { ffmpegCPUSeconds / (Double(max(1, ffmpegFrames)) / 30) }
        var ffmpegRealtimePerOutputSecond: Double { ffmpegRealtimeCPUSeconds / (Double(max(1, ffmpegFrames)) / 30) }
        var ratio: Double { oursPerOutputSecond / max(1e-9, ffmpegPerOutputSecond) }
        var realtimeRatio: Double { oursPerOutputSecond / max(1e-9, ffmpegRealtimePerOutputSecond) }
        /// The lowest ratio ours could reach at the default preset: its own libx264 time plus the
        /// tiles' decode alone (``decodeNative``), with nothing for receive, draw or mux, over the anchor.
        var floorRatio: Double {
            (ours.encodePerOutputSecond + decodeNative) / max(1e-9, ffmpegPerOutputSecond)
        }
    }

    /// The room at one more libx264 preset: ours and the anchor both at `preset`, CPU seconds per
    /// second of output, and ours' encode stage alone.
    struct PresetRow {
        var preset: String
        var ours: Double
        var anchor: Double
        var encode: Double
        var ratio: Double { ours / max(1e-9, anchor) }
    }

    /// The presets measured after the default (``CompositeBenchmark/preset``): where the ratio lands
    /// when the encoder, the same on both sides, costs more (`veryfast`, the default until issue 37's
    /// fifth pass and LiveKit Egress's) or less (`ultrafast`).
    static let otherPresets = ["veryfast", "ultrafast"]

    /// What ours measured over the window (``measureOurs``).
    struct Ours {
        /// CPU seconds: the whole process less the SFU's and the publishers' loop threads.
        var cpuSeconds: Double
        var frames: Int
        var skipped: Int
        /// The simulcast layer (RID) the SFU forwarded to each tile during the window.
        var layers: [String]
        /// By thread, CPU seconds: the subscriber's loop (receive), the compositor's thread (decode,
        /// scale, encode), the disk writer, and the rest of ours.
        var split: [(String, Double)]
        /// The compositor thread by stage (``Compositor/Stats``), CPU seconds; libx264's alone too.
        var stages: [(String, Double)]
        var encodeSeconds: Double
        /// Tiles shown over the frames encoded, and how many of them had no new picture for their frame.
        var tilesShown: Int
        var tilesUnchanged: Int

        var outputSeconds: Double { Double(max(1, frames)) / 30 }
        var perOutputSecond: Double { cpuSeconds / outputSeconds }
        var encodePerOutputSecond: Double { encodeSeconds / outputSeconds }
    }

    /// The layers as Chromium sends a 720p camera (lowest first, as the sender's RIDs): size and bitrate.
    static let layers: [(rid: String, width: Int, height: Int, bitrate: String)] = [
        ("q", 320, 180, "200k"), ("h", 640, 360, "700k"), ("f", 1280, 720, "2500k"),
    ]
    static let subscriber = "bench-composite"

    /// `presets`: the libx264 presets measured after the default (``otherPresets``; none in quick mode).
    static func run(
        seconds: Double, directory: String, presets otherPresets: [String] = otherPresets,
        progress: @Sendable (String) -> Void
    ) async throws -> Result {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        progress("bench:   composite room: making 4 publishers × 3 simulcast layers (ffmpeg libvpx)")
        let files = try (0..<4).map { try makeLayers(publisher: $0, seconds: seconds + 1, directory: directory) }
        let frames = try files.map { layers in try layers.map { try IVFReader(path: $0).frames.map(\.data) } }
        let ours = try await measureOurs(
            preset: CompositeBenchmark.preset, frames: frames, seconds: seconds, directory: directory,
            progress: progress)

        // The anchor: the top layers, scaled into the tiles and stacked, as fast as it goes.
        progress("bench:   composite room: ffmpeg on the 1280x720 layers (scale + xstack + libx264)")
        let frameCount = Int(seconds * 30)
        func anchorArguments(preset: String, realtime: Bool) -> [String] {
            var args = ["-nostdin", "-v", "error", "-y"]
            for layers in files {
                args += (realtime ? ["-re"] : []) + ["-threads", "1", "-c:v", "libvpx", "-i", layers[2]]
            }
            let tile = "640:360:flags=bilinear"
            args += [
                "-filter_complex",
                "[0:v]scale=\(tile)[a];[1:v]scale=\(tile)[b];[2:v]scale=\(tile)[c];[3:v]scale=\(tile)[d];"
                    + "[a][b][c][d]xstack=inputs=4:layout=0_0|w0_0|0_h0|w0_h0[v]",
                "-filter_threads", "1", "-map", "[v]", "-frames:v", "\(frameCount)",
            ]
            return args + CompositeBenchmark.x264Arguments(preset: preset) + [directory + "/room-ffmpeg.mp4"]
        }
        let (ffmpegCPU, ffmpegWall) = try CompositeBenchmark.timeFFmpeg(
            anchorArguments(preset: CompositeBenchmark.preset, realtime: false))
        // The same, paced as a live pipeline reads (ours runs in real time too).
        progress("bench:   composite room: ffmpeg again, paced at real time (-re)")
        let (realtimeCPU, realtimeWall) = try CompositeBenchmark.timeFFmpeg(
            anchorArguments(preset: CompositeBenchmark.preset, realtime: true))
        // Would another VP8 decoder make ours cheaper? The tiles' layer files decoded alone by each.
        let chosenLayer = layers.firstIndex { $0.rid == ours.layers.first } ?? 1
        func decodeCost(_ decoder: String) throws -> Double {
            var args = ["-nostdin", "-v", "error"]
            for layers in files { args += ["-threads", "1", "-c:v", decoder, "-i", layers[chosenLayer]] }
            for i in 0..<files.count { args += ["-map", "\(i):v", "-frames:v", "\(frameCount)", "-f", "null", "-"] }
            return try CompositeBenchmark.timeFFmpeg(args).cpu / seconds
        }
        let decodeLibvpx = try decodeCost("libvpx")
        let decodeNative = try decodeCost("vp8")
        // The other presets: ours and the anchor again, each at that preset.
        var presets: [PresetRow] = []
        for preset in otherPresets {
            let o = try await measureOurs(
                preset: preset, frames: frames, seconds: seconds, directory: directory, progress: progress)
            progress("bench:   composite room: ffmpeg at \(preset)")
            let anchor = try CompositeBenchmark.timeFFmpeg(anchorArguments(preset: preset, realtime: false)).cpu
            presets.append(
                PresetRow(
                    preset: preset, ours: o.perOutputSecond, anchor: anchor / (Double(frameCount) / 30),
                    encode: o.encodePerOutputSecond))
        }
        return Result(
            seconds: seconds, ours: ours, tile: "640x360", ffmpegCPUSeconds: ffmpegCPU, ffmpegFrames: frameCount,
            ffmpegWallSeconds: ffmpegWall, ffmpegRealtimeCPUSeconds: realtimeCPU,
            ffmpegRealtimeWallSeconds: realtimeWall, decodeLibvpx: decodeLibvpx, decodeNative: decodeNative,
            presets: presets)
    }

    /// Ours in the room at `preset`: four simulcast publishers through a fresh SFU to one subscriber
    /// whose frames feed a ``Compositor``; the CPU of ours over `seconds` once every tile gets its layer.
    private static func measureOurs(
        preset: String, frames: [[[[UInt8]]]], seconds: Double, directory: String,
        progress: @Sendable (String) -> Void
    ) async throws -> Ours {
        let sfu = SFU(configuration: SFUConfiguration(loopName: "bench-room-sfu"))
        let publisherLoop = EventLoop(name: "bench-room-pub")
        let subscriberLoop = EventLoop(name: "bench-room-sub")
        defer {
            publisherLoop.shutdown()
            subscriberLoop.shutdown()
        }
        // Four simulcast publishers.
        var publishers: [PeerConnection] = []
        var producerIDs: [String] = []
        var sources: [LayerFileSource] = []
        for i in 0..<4 {
            let pc = try PeerConnection(loop: publisherLoop)
            let (offer, video) = try await publisherLoop.submit {
                let t = pc.addTransceiver(kind: .video, direction: .sendonly, sendRIDs: layers.map(\.rid))
                let o = try pc.createOffer()
                try pc.setLocalDescription(o)
                return (o, UncheckedSendable(t))
            }
            let published = try await sfu.publish(participantID: "p\(i)", offer: offer)
            try await publisherLoop.submit { try pc.setRemoteDescription(published.answer, type: .answer) }
            try await pc.waitUntilConnected(timeout: 10)
            guard let producer = published.producers.first else { throw SFUError.negotiation("no producer") }
            publishers.append(pc)
            producerIDs.append(producer.id)
            sources.append(LayerFileSource(connection: pc, transceiver: video.value, layers: frames[i]))
        }
        for source in sources { await publisherLoop.submit { publisherLoop.addTicker(source) } }

        // The composite's subscriber: one connection, a consumer per publisher, each frame to its tile.
        var options = Compositor.Options()
        options.preset = preset
        options.bitrate = CompositeBenchmark.bitrate
        options.labels = true
        let output = try CompositeOutputs.make(destination: directory + "/room-\(preset).mp4")
        let ids = producerIDs
        let compositor = try Compositor(options: options, outputs: [output]) { _ in
        } tileSize: { participant, width, height in
            // The compositor thread must not wait: the viewport goes to the SFU's loop on its own.
            guard let index = Int(participant.dropFirst()), ids.indices.contains(index) else { return }
            Task {
                try? await sfu.onLoop {
                    try $0.setViewportOnLoop(
                        subscriber: subscriber, producerID: ids[index], width: width, height: height)
                }
            }
        }
        let pc = try PeerConnection(loop: subscriberLoop)
        var slots: [String: Compositor.VideoSlot] = [:]
        for (i, producerID) in producerIDs.enumerated() {
            _ = try await sfu.onLoop { try $0.consumeOnLoop(subscriber: subscriber, producerID: producerID) }
            let offer = try await sfu.onLoop { try $0.subscriberOfferOnLoop(participantID: subscriber) }
            let (answer, mid) = try await subscriberLoop.submit {
                try pc.setRemoteDescription(offer, type: .offer)
                let a = try pc.createAnswer()
                try pc.setLocalDescription(a)
                return (a, pc.transceivers.last?.mid)
            }
            _ = try await sfu.onLoop { try $0.subscriberAnswerOnLoop(participantID: subscriber, answer: answer) }
            guard let mid else { throw SFUError.negotiation("no mid for consumer \(i)") }
            slots[mid] = compositor.videoSlot(participantId: "p\(i)")
        }
        let byMid = slots
        await subscriberLoop.submit { pc.onFrame = { t, _, frame, _ in t.mid.flatMap { byMid[$0] }?.write(frame) } }
        try await pc.waitUntilConnected(timeout: 10)
        compositor.setStage((0..<4).map { Compositor.StageMember(id: "p\($0)", name: "Participant \($0)") })

        // Warm up until every tile gets the layer the SFU chose for its viewport (a switch waits for a key frame).
        progress("bench:   composite room: waiting for each tile's layer")
        var chosen: [String] = []
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            try await Task.sleep(nanoseconds: 500_000_000)
            chosen = await currentLayers(sfu, producerIDs)
            if await settled(sfu, producerIDs) { break }
        }
        progress("bench:   composite room: layers \(chosen)")
        try await Task.sleep(nanoseconds: 1_000_000_000)

        progress("bench:   composite room: ours, \(Int(seconds)) s, libx264 \(preset)")
        let others = ["bench-room-sfu", "bench-room-pub"]
        let threads0 = ThreadCPUSample.read(pid: getpid())
        let cpu0 = processCPUNanoseconds()
        let stats0 = compositor.stats
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
        let cpu1 = processCPUNanoseconds()
        let threads1 = ThreadCPUSample.read(pid: getpid())
        let stats1 = compositor.stats
        let layersAfter = await currentLayers(sfu, producerIDs)
        var byName: [String: Double] = [:]
        for (tid, end) in threads1 {
            let start = threads0[tid] ?? ThreadCPUSample(name: end.name, user: 0, system: 0)
            byName[end.name, default: 0] += (end.user + end.system) - (start.user + start.system)
        }
        let excluded = others.reduce(0.0) { $0 + (byName[$1] ?? 0) }
        let oursCPU = Double(cpu1 - cpu0) / 1e9 - excluded
        let named = [
            ("receive (subscriber loop)", "bench-room-sub"), ("compositor thread", "understudy-comp"),
            ("disk writer", "understudy-disk"),
        ]
        var split = named.map { ($0.0, byName[$0.1] ?? 0) }
        split.append(("other threads of ours", max(0, oursCPU - split.reduce(0) { $0 + $1.1 })))

        for source in sources { await publisherLoop.submit { publisherLoop.removeTicker(source) } }
        let results = await withCheckedContinuation { (c: CheckedContinuation<[Compositor.OutputResult], Never>) in
            DispatchQueue.global().async { c.resume(returning: compositor.stop()) }
        }
        await subscriberLoop.submit { pc.close() }
        for p in publishers { await publisherLoop.submit { p.close() } }
        await sfu.shutdown()
        if let error = results.compactMap({ $0.error }).first {
            throw CompositeBenchmark.Failure(description: "\(error)")
        }

        let encode = Double(stats1.encodeNanos &- stats0.encodeNanos) / 1e9
        return Ours(
            cpuSeconds: oursCPU, frames: stats1.frames + stats1.unchanged - stats0.frames - stats0.unchanged,
            skipped: stats1.skipped - stats0.skipped, layers: layersAfter, split: split,
            stages: [
                ("decode", Double(stats1.decodeNanos &- stats0.decodeNanos) / 1e9),
                ("draw (scale, labels)", Double(stats1.drawNanos &- stats0.drawNanos) / 1e9),
                ("encode (libx264)", encode),
                ("outputs (mux, write)", Double(stats1.outputNanos &- stats0.outputNanos) / 1e9),
            ], encodeSeconds: encode, tilesShown: stats1.tilesShown - stats0.tilesShown,
            tilesUnchanged: (stats1.tilesShown - stats1.tilesRedrawn) - (stats0.tilesShown - stats0.tilesRedrawn))
    }

    /// The report's subsection (after ``CompositeBenchmark/markdown(_:verdict:)``).
    static func markdown(_ r: Result, verdict: String) -> String {
        var body = "### The room case: simulcast publishers, each tile takes the layer that fits it\n\n"
        body += "| pipeline | CPU per second of output | frames | note |\n|---|---|---|---|\n"
        body += String(
            format:
                "| ours: SFU → one subscriber connection → `Compositor`, tiles %@ get layers %@ | %.3f CPU-s/s | %d (%d skipped) | real time, %.0f s; DTLS-SRTP receive included |\n",
            r.tile, r.ours.layers.joined(separator: ", "), r.oursPerOutputSecond, r.ours.frames, r.ours.skipped,
            r.seconds)
        body += String(
            format:
                "| ffmpeg: libvpx decode of the four 1280x720 layers, scale to %@, `xstack`, libx264 %@ (anchor) | %.3f CPU-s/s | %d | as fast as it goes: %.1f s wall |\n",
            r.tile, CompositeBenchmark.preset, r.ffmpegPerOutputSecond, r.ffmpegFrames, r.ffmpegWallSeconds)
        body += String(
            format:
                "| ffmpeg: the same, paced at real time (`-re` on each input, as a live pipeline reads) | %.3f CPU-s/s | %d | %.1f s wall |\n",
            r.ffmpegRealtimePerOutputSecond, r.ffmpegFrames, r.ffmpegRealtimeWallSeconds)
        body += String(
            format: "| **ours ÷ ffmpeg, room case** (target ≤ 0.5×) | **%.2f×** — %@ | | |\n", r.ratio, verdict)
        body += String(
            format: "| ours ÷ ffmpeg paced at real time | %.2f× | | |\n\n", r.realtimeRatio)
        body += String(
            format:
                "Decoding the four tiles' layer alone (ffmpeg, one thread each, to null): libvpx (the anchor's) %.3f, libavcodec's `vp8` (ours) %.3f CPU-s/s (%.0f %% %@).\n\n",
            r.decodeLibvpx, r.decodeNative, abs(100 * (1 - r.decodeNative / max(1e-9, r.decodeLibvpx))),
            r.decodeNative <= r.decodeLibvpx ? "less" : "more")
        body += String(
            format:
                "Ours' floor at %@: its libx264 (%.3f) plus that decode of the tiles (%.3f) is already %.2f× of the anchor, before any receive, draw or mux.\n\n",
            CompositeBenchmark.preset, r.ours.encodePerOutputSecond, r.decodeNative, r.floorRatio)
        let outputSeconds = r.ours.outputSeconds
        body +=
            "Ours by thread (CPU-s per second of output): "
            + r.ours.split.map { String(format: "%@ %.3f", $0.0, $0.1 / outputSeconds) }.joined(separator: ", ")
            + ".\n\n"
        body +=
            "The compositor thread by stage (CPU-s per second of output, `CLOCK_THREAD_CPUTIME_ID` around each): "
            + r.ours.stages.map { String(format: "%@ %.3f", $0.0, $0.1 / outputSeconds) }.joined(separator: ", ")
            + ".\n\n"
        if !r.presets.isEmpty {
            body +=
                "The same room at other libx264 presets, ours and the anchor both at that preset (CPU-s per second of output):\n\n"
            body += "| preset | ours | of which libx264 | anchor | ours ÷ anchor |\n|---|---|---|---|---|\n"
            body += String(
                format: "| %@ (the default) | %.3f | %.3f | %.3f | %.2f× |\n", CompositeBenchmark.preset,
                r.oursPerOutputSecond, r.ours.encodePerOutputSecond,
                r.ffmpegPerOutputSecond, r.ratio)
            for row in r.presets {
                body += String(
                    format: "| %@ | %.3f | %.3f | %.3f | %.2f× |\n", row.preset, row.ours, row.encode, row.anchor,
                    row.ratio)
            }
            body += "\n"
        }
        body += String(
            format:
                "Tiles with no new picture at their frame: %d of %d tile-frames (%.1f %%).\n\n",
            r.ours.tilesUnchanged, r.ours.tilesShown,
            100 * Double(r.ours.tilesUnchanged) / Double(max(1, r.ours.tilesShown)))
        body += """
            Method: four publishers, each a `PeerConnection` sending three simulcast encodings (RIDs q, h,
            f: 320x180 at 200 kbit/s, 640x360 at 700 kbit/s, 1280x720 at 2.5 Mbit/s, as Chromium sends a
            720p camera; VP8 made once by ffmpeg/libvpx realtime from `testsrc2` in four hues, 60-frame
            GOP, looped) through a real `SFU` over loopback DTLS-SRTP to one subscriber connection, whose
            frames go to a `Compositor` (1280x720, 30 fps, grid, names drawn, libx264 `\(CompositeBenchmark.preset)`
            `zerolatency` 2.5 Mbit/s, fragmented MP4). Each tile's size goes to the SFU as the consumer's
            viewport (`setViewportOnLoop`, what the agent's `setViewPort` does), so the layer each tile
            receives is the SFU's own choice (reported from its stats). After every consumer forwards the
            layer it aims at, ours is this process's CPU time over \(Int(r.seconds)) s less the SFU's and the
            publishers' loop threads (`/proc/self/task`), per second of video encoded in that window: the
            subscriber's receive path (SRTP, jitter buffer, frame assembly), decode, scale, encode and
            write. The anchor is what an ffmpeg pipeline fed by a relay or WHEP must do: it gets the top
            layer, so it decodes the four 1280x720 files (libvpx, one thread each), scales each to the
            tile (bilinear, the cheapest `scale` that matches libyuv's filter) and `xstack`s them (one
            filter thread), with the same libx264 settings, timed by its utime + stime.


            """
        return body
    }

    /// The RID forwarded to each consumer ("-": none yet).
    private static func currentLayers(_ sfu: SFU, _ producers: [String]) async -> [String] {
        let stats = await sfu.stats()
        return producers.map { id in
            stats.consumers.first { $0.producerID == id && $0.subscriberID == subscriber }?.currentRID ?? "-"
        }
    }

    /// Whether every consumer forwards the layer it aims at.
    private static func settled(_ sfu: SFU, _ producers: [String]) async -> Bool {
        let stats = await sfu.stats()
        return producers.allSatisfy { id in
            guard let c = stats.consumers.first(where: { $0.producerID == id && $0.subscriberID == subscriber })
            else { return false }
            return c.currentRID != nil && c.currentRID == c.targetRID
        }
    }

    /// One publisher's three layers (320x180, 640x360, 1280x720 VP8, libvpx realtime, 2 s GOP), made once.
    private static func makeLayers(publisher: Int, seconds: Double, directory: String) throws -> [String] {
        let paths = layers.map { "\(directory)/p\(publisher)-\($0.rid).ivf" }
        var args = [
            "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
            "testsrc2=s=1280x720:r=30:d=\(Int(seconds.rounded(.up)))", "-filter_complex",
            "[0:v]hue=h=\(publisher * 90),split=3[f][a][b];[a]scale=640:360[h];[b]scale=320:180[q]",
        ]
        for (layer, path) in zip(layers, paths) {
            args += [
                "-map", "[\(layer.rid)]", "-c:v", "libvpx", "-b:v", layer.bitrate, "-deadline", "realtime",
                "-cpu-used", "8", "-g", "60", path,
            ]
        }
        try CompositeBenchmark.runTool(args)
        return paths
    }
}

/// Sends three pre-encoded layers at 30 fps on the publisher's loop thread, looping the files.
// Safe: confined to the publisher's loop thread (a ticker there); Sendable only to be handed to it.
final class LayerFileSource: EventLoopTicker, @unchecked Sendable {
    let connection: PeerConnection
    let transceiver: RTPTransceiver
    let layers: [[[UInt8]]]
    var start: UInt64?
    var sent = 0

    init(connection: PeerConnection, transceiver: RTPTransceiver, layers: [[[UInt8]]]) {
        self.connection = connection
        self.transceiver = transceiver
        self.layers = layers
    }

    func tick(now: UInt64) {
        if start == nil { start = now }
        let due = Int((now - (start ?? now)) / 33_333_333)
        while sent <= due {
            for (layer, frames) in layers.enumerated() where !frames.isEmpty {
                let data = frames[sent % frames.count]
                let frame = EncodedFrame(
                    codec: .vp8, data: data, timestamp: UInt32(truncatingIfNeeded: sent &* 3000),
                    isKeyframe: data.first.map { $0 & 1 == 0 } ?? false, duration: 3000)
                connection.send(frame, on: transceiver, layer: layer)
            }
            sent += 1
        }
    }

    func loopStopped() {}
}

/// Moves a value that is used on one loop thread only across the hop to it.
struct UncheckedSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
