import Egress
import Foundation
import Media
import RTCWire

#if canImport(Glibc)
    import Glibc
#endif

/// The composite cost row (issue 37): a 4-participant 1280x720/30 fps H.264 composite by our
/// ``Compositor`` against an ffmpeg pipeline doing the same (libvpx decode of the four streams,
/// `xstack`, libx264 at the same preset), CPU seconds per second of output, in one run.
enum CompositeBenchmark {
    struct Result {
        var seconds: Double
        var streams: Int
        var preset: String
        /// Our whole process's CPU over the composite's run, and the frame times it output (encoded, or
        /// an unchanged canvas's previous frame lasting longer).
        var oursCPUSeconds: Double
        var oursFrames: Int
        var oursSkipped: Int
        /// ffmpeg's CPU (its process, all threads) and the frames it wrote.
        var ffmpegCPUSeconds: Double
        var ffmpegFrames: Int
        var ffmpegWallSeconds: Double

        /// CPU seconds per second of output (30 frames).
        var oursPerOutputSecond: Double { oursCPUSeconds / (Double(max(1, oursFrames)) / 30) }
        var ffmpegPerOutputSecond: Double { ffmpegCPUSeconds / (Double(max(1, ffmpegFrames)) / 30) }
        var ratio: Double { oursPerOutputSecond / max(1e-9, ffmpegPerOutputSecond) }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// LiveKit Egress's published CPU reservation for one room-composite job.
    static let liveKitReservedCPUs = 4.0
    /// The compositor's default libx264 preset; the anchor runs at the same one.
    static let preset = Compositor.Options().preset
    static let bitrate = 2_500_000

    static func run(seconds: Double, directory: String, progress: @Sendable (String) -> Void) async throws -> Result {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Four VP8 640x360 streams (what a 640x360 tile consumes), distinct pictures, made once by ffmpeg.
        var inputs: [String] = []
        for i in 0..<4 {
            let path = directory + "/in\(i).ivf"
            try runTool([
                "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                "testsrc2=s=640x360:r=30:d=\(Int(seconds.rounded(.up)) + 1)", "-vf", "hue=h=\(i * 90)", "-c:v",
                "libvpx", "-b:v", "800k", "-deadline", "realtime", "-cpu-used", "8", "-g", "60", path,
            ])
            inputs.append(path)
        }
        let streams = try inputs.map { try IVFReader(path: $0).frames }
        let frameCount = Int(seconds * 30)
        guard streams.allSatisfy({ $0.count >= frameCount }) else { throw Failure(description: "short input files") }

        // Ours: the compositor in real time, fed the frames at 30 fps.
        progress("bench:   composite: ours, \(Int(seconds)) s at 1280x720/30 fps H.264 \(preset)")
        var options = Compositor.Options()
        options.preset = preset
        options.bitrate = bitrate
        options.labels = true
        let output = try CompositeOutputs.make(destination: directory + "/ours.mp4")
        let cpu0 = processCPUNanoseconds()
        let compositor = try Compositor(options: options, outputs: [output])
        let slots = (0..<4).map { compositor.videoSlot(participantId: "p\($0)") }
        compositor.setStage((0..<4).map { Compositor.StageMember(id: "p\($0)", name: "Participant \($0)") })
        let start = Date()
        for n in 0..<frameCount {
            for (i, slot) in slots.enumerated() {
                let f = streams[i][n]
                slot.write(
                    EncodedFrame(
                        codec: .vp8, data: f.data, timestamp: UInt32(n * 3000),
                        isKeyframe: f.data.first.map { $0 & 1 == 0 } ?? false,
                        duration: 3000))
            }
            let wait = start.addingTimeInterval(Double(n + 1) / 30).timeIntervalSinceNow
            if wait > 0 { try await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
        }
        let results = await withCheckedContinuation { (c: CheckedContinuation<[Compositor.OutputResult], Never>) in
            DispatchQueue.global().async { c.resume(returning: compositor.stop()) }
        }
        let oursCPU = Double(processCPUNanoseconds() - cpu0) / 1e9
        if let error = results.compactMap(\.error).first { throw Failure(description: "our output: \(error)") }
        let stats = compositor.stats

        // The anchor: ffmpeg, one thread per codec and filter as ours, as fast as it goes.
        progress("bench:   composite: ffmpeg libvpx + xstack + libx264 \(preset), same streams")
        var args = ["-nostdin", "-v", "error", "-y"]
        for path in inputs { args += ["-threads", "1", "-c:v", "libvpx", "-i", path] }
        args += [
            "-filter_complex", "[0:v][1:v][2:v][3:v]xstack=inputs=4:layout=0_0|w0_0|0_h0|w0_h0[v]", "-filter_threads",
            "1", "-map", "[v]", "-frames:v", "\(frameCount)",
        ]
        args += x264Arguments(preset: preset) + [directory + "/ffmpeg.mp4"]
        let (ffmpegCPU, ffmpegWall) = try timeFFmpeg(args)
        return Result(
            seconds: seconds, streams: 4, preset: preset, oursCPUSeconds: oursCPU,
            oursFrames: stats.frames + stats.unchanged,
            oursSkipped: stats.skipped, ffmpegCPUSeconds: ffmpegCPU, ffmpegFrames: frameCount,
            ffmpegWallSeconds: ffmpegWall)
    }

    /// The report's section.
    static func markdown(_ r: Result, verdict: String) -> String {
        var body = "## Composite: 4 participants, 1280x720/30 fps H.264, ours ÷ an ffmpeg pipeline\n\n"
        body += "| pipeline | CPU per second of output | frames | note |\n|---|---|---|---|\n"
        body += String(
            format:
                "| ours: `Compositor` (libavcodec VP8 decode, libyuv scale, libx264 %@), whole process | %.3f CPU-s/s | %d (%d skipped) | real time, %.0f s |\n",
            r.preset, r.oursPerOutputSecond, r.oursFrames, r.oursSkipped, r.seconds)
        body += String(
            format:
                "| ffmpeg: libvpx decode ×4, `xstack`, libx264 %@ (anchor) | %.3f CPU-s/s | %d | as fast as it goes: %.1f s wall |\n",
            r.preset, r.ffmpegPerOutputSecond, r.ffmpegFrames, r.ffmpegWallSeconds)
        body += String(
            format:
                "| LiveKit Egress room composite (headless Chrome + GStreamer) | %.1f CPUs reserved per job (published) | | not run here |\n",
            liveKitReservedCPUs)
        body += String(format: "| **ours ÷ ffmpeg** (target ≤ 0.5×) | **%.2f×** — %@ | | |\n\n", r.ratio, verdict)
        body += """
            Method: four VP8 640x360 streams at 30 fps (ffmpeg `testsrc2` with four hues, libvpx realtime at
            800 kbit/s, 60-frame GOP) are made once and read by both pipelines. Ours: a `Compositor` at
            1280x720, 30 fps, grid layout (four 640x360 tiles, names drawn), libx264 `\(r.preset)` with
            `zerolatency` at 2.5 Mbit/s, writing a fragmented MP4; the frames are handed to its slots in
            real time, as the packet loop would, and the cost is this whole process's CPU time
            (`CLOCK_PROCESS_CPUTIME_ID`) from before the compositor opens to after its file is finished,
            divided by the seconds of video it output. The anchor: one `ffmpeg` process decoding the
            same four files with libvpx (one thread each), `xstack` into a 2x2 grid (one filter thread),
            libx264 with the same preset, tune, profile, bitrate and GOP (one thread), to MP4, timed
            by its utime + stime (`getrusage(RUSAGE_CHILDREN)`); it runs as fast as it can, which costs
            no more CPU per frame than real time. No audio in either. LiveKit's figure is the CPU
            reservation its documentation publishes for a room-composite egress, not a measurement.


            """
        return body
    }

    /// The anchor's encoder: libx264 with ours' settings (``Compositor/Options``) at `preset`: tune,
    /// profile, ABR with a half-second VBV, 60-frame GOP, one thread.
    static func x264Arguments(preset: String) -> [String] {
        [
            "-c:v", "libx264", "-preset", preset, "-tune", "zerolatency", "-profile:v", "baseline", "-b:v",
            "\(bitrate / 1000)k", "-maxrate", "\(bitrate / 1000)k", "-bufsize", "\(bitrate / 2000)k", "-g", "60",
            "-threads", "1",
        ]
    }

    /// Runs ffmpeg with `arguments`; its CPU seconds (user + system) and wall seconds.
    static func timeFFmpeg(_ arguments: [String]) throws -> (cpu: Double, wall: Double) {
        let before = childrenCPUSeconds()
        let t0 = Date()
        try runTool(arguments)
        return (childrenCPUSeconds() - before, Date().timeIntervalSince(t0))
    }

    static func runTool(_ arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = arguments
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw Failure(description: "ffmpeg exited \(p.terminationStatus): \(text.suffix(400))")
        }
    }

    /// CPU seconds (user + system) of every child process waited for so far.
    private static func childrenCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(-1), &usage)  // RUSAGE_CHILDREN
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
