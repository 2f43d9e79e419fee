import Foundation
import Media
import RTC
import RTCWire

#if canImport(Glibc)
    import Glibc
#endif

/// CPU to record one VP8 + Opus participant to WebM: ours against aiortc's `MediaRecorder`.
///
/// Method: one synthetic VP8 + Opus loop is encoded once at the requested bitrate. Two sending
/// ``PeerConnection``s on one loop each play it in real time with a ``MediaPump``: one to our
/// receiving ``PeerConnection`` that writes every frame with ``Recording`` (WebM), one to an aiortc
/// process (`scripts/bench/aiortc_recorder.py`) that records with
/// `aiortc.contrib.media.MediaRecorder` to WebM. Both record at the same time, over the same
/// window. Our cost is the receiving loop thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`); aiortc's
/// is its process's utime + stime from `/proc/PID/stat`.
public enum RecordingBenchmark {
    public struct Result: Sendable {
        /// Measured window, seconds.
        public var seconds: Double
        public var width: Int
        public var height: Int
        /// Actual bits per second of the encoded loop (video + audio).
        public var streamBitsPerSecond: Double
        /// Our receiving loop thread's CPU over the window, as a share of one core.
        public var oursCoreShare: Double
        /// The same thread's CPU with no media flowing, as a share of one core (timers, RTCP).
        public var oursIdleCoreShare: Double
        /// aiortc process CPU over the window, as a share of one core.
        public var aiortcCoreShare: Double
        /// Video frames each recorder handled inside the measured window.
        public var oursWindowVideoFrames: Int
        public var aiortcWindowVideoFrames: Int
        public var oursVideoFrames: Int
        public var oursAudioFrames: Int
        public var aiortcVideoFrames: Int
        public var aiortcAudioFrames: Int
        public var oursFileBytes: Int
        public var aiortcFileBytes: Int
        /// aiortc's CPU divided by ours over the same window.
        public var cpuRatio: Double { aiortcCoreShare / max(1e-9, oursCoreShare) }
        /// aiortc's CPU per video frame recorded divided by ours: the same as ``cpuRatio`` when both
        /// keep up with the stream, and still the cost of recording it when one falls behind.
        public var ratio: Double {
            cpuRatio * Double(max(1, oursWindowVideoFrames)) / Double(max(1, aiortcWindowVideoFrames))
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs both recorders for `seconds` of measured time (after a warm-up).
    /// - Parameters:
    ///   - python: the interpreter with aiortc installed; `scriptPath` is `aiortc_recorder.py`.
    public static func run(
        seconds: Double, width: Int = 640, height: Int = 360, bitrate: Int = 1_000_000,
        python: String, scriptPath: String, directory: String,
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> Result {
        let media = try stream(width: width, height: height, bitrate: bitrate)
        let streamBits = bitsPerSecond(media)

        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let oursPath = (directory as NSString).appendingPathComponent("ours.webm")
        let aiortcPath = (directory as NSString).appendingPathComponent("aiortc.webm")
        try? FileManager.default.removeItem(atPath: oursPath)
        try? FileManager.default.removeItem(atPath: aiortcPath)

        let txLoop = EventLoop(name: "bench-rec-tx")
        let rxLoop = EventLoop(name: "bench-rec-rx")
        defer {
            rxLoop.shutdown()
            txLoop.shutdown()
        }
        let aiortc = try LineProcess(executable: python, arguments: [scriptPath, "--out", aiortcPath])
        defer { aiortc.terminate() }
        guard (try aiortc.readJSON(timeout: 30))["ready"] as? Bool == true else {
            throw Failure(description: "aiortc_recorder.py did not start: \(aiortc.stderrText())")
        }

        // Our receiver.
        let recording = try Recording(path: oursPath, opusChannels: media.audioChannels)
        let (txOurs, pumpOurs) = try await sender(on: txLoop, media: media)
        let (txAiortc, pumpAiortc) = try await sender(on: txLoop, media: media)
        let rx = try await recordingReceiver(for: txOurs, on: rxLoop, recording: recording)

        let offerB = try await txLoop.submit {
            let o = try txAiortc.createOffer()
            try txAiortc.setLocalDescription(o)
            return o
        }
        try aiortc.writeJSON(["offer": offerB.serialize()])
        guard let answerText = (try aiortc.readJSON(timeout: 30))["answer"] as? String else {
            throw Failure(description: "aiortc_recorder.py sent no answer: \(aiortc.stderrText())")
        }
        let answerB = try SessionDescription.parse(answerText)
        try await txLoop.submit { try txAiortc.setRemoteDescription(answerB, type: .answer) }
        try await txOurs.waitUntilConnected(timeout: 15)
        try await rx.waitUntilConnected(timeout: 15)
        try await txAiortc.waitUntilConnected(timeout: 15)
        progress("bench:   recording: both receivers connected")

        // Idle cost of our receiving thread (timers, ICE keepalives) before media flows.
        let idleWindow = min(2.0, seconds / 4)
        let idleStart = await rxLoop.submit { threadCPUNanoseconds() }
        let idleWall = EventLoop.now()
        try await Task.sleep(nanoseconds: UInt64(idleWindow * 1e9))
        let idleEnd = await rxLoop.submit { threadCPUNanoseconds() }
        let idleShare = Double(idleEnd - idleStart) / Double(EventLoop.now() - idleWall)

        await txLoop.submit {
            pumpOurs.attach()
            pumpAiortc.attach()
        }
        // Warm-up: both pipelines open their files and settle (aiortc sets up its encoders).
        try await Task.sleep(nanoseconds: UInt64(min(3.0, max(1.0, seconds / 5)) * 1e9))
        let oursStart = await rxLoop.submit { (threadCPUNanoseconds(), recording.videoFrames) }
        let aiortcStart = try processCPUNanoseconds(pid: aiortc.pid)
        let aiortcFramesStart = try aiortc.videoFramesPulled()
        let wallStart = EventLoop.now()
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
        let oursEnd = await rxLoop.submit { (threadCPUNanoseconds(), recording.videoFrames) }
        let aiortcEnd = try processCPUNanoseconds(pid: aiortc.pid)
        let aiortcFramesEnd = try aiortc.videoFramesPulled()
        let wall = Double(EventLoop.now() - wallStart)

        await txLoop.submit {
            pumpOurs.detach()
            pumpAiortc.detach()
        }
        await rxLoop.submit { rx.onFrame = nil }
        // Counted after close: the counts are of what reached the file, the last cluster at close.
        try recording.close()
        let (videoFrames, audioFrames) = (recording.videoFrames, recording.audioFrames)
        try aiortc.writeJSON(["stop": true])
        let stopped = try aiortc.readJSON(timeout: 30)
        let counts = stopped["frames"] as? [String: Any] ?? [:]
        await rxLoop.submit { rx.close() }
        await txLoop.submit {
            txOurs.close()
            txAiortc.close()
        }
        func size(_ path: String) -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
        }
        return Result(
            seconds: wall / 1e9, width: width, height: height, streamBitsPerSecond: streamBits,
            oursCoreShare: Double(oursEnd.0 - oursStart.0) / wall, oursIdleCoreShare: idleShare,
            aiortcCoreShare: Double(aiortcEnd - aiortcStart) / wall,
            oursWindowVideoFrames: oursEnd.1 - oursStart.1,
            aiortcWindowVideoFrames: aiortcFramesEnd - aiortcFramesStart,
            oursVideoFrames: videoFrames,
            oursAudioFrames: audioFrames, aiortcVideoFrames: counts["video_frames_decoded"] as? Int ?? 0,
            aiortcAudioFrames: counts["audio_frames_decoded"] as? Int ?? 0, oursFileBytes: size(oursPath),
            aiortcFileBytes: size(aiortcPath))
    }

    /// The bit rate of `media`'s loop (video layer 0 and audio), in bits per second.
    static func bitsPerSecond(_ media: SyntheticMedia) -> Double {
        let videoBytes = media.videoFrames[0].reduce(0) { $0 + $1.data.count }
        let audioBytes = media.audioFrames.reduce(0) { $0 + $1.data.count }
        return Double((videoBytes + audioBytes) * 8) / Double(media.loopSeconds)
    }

    /// A send-only video + Opus connection on `loop` with a pump that plays `media` once attached;
    /// its video m-line offers the loop's codec only.
    static func sender(on loop: EventLoop, media: SyntheticMedia) async throws -> (PeerConnection, MediaPump) {
        let tx = try PeerConnection(loop: loop)
        let codec = media.videoCodec
        let pump = await loop.submit {
            let v = tx.addTransceiver(kind: .video, direction: .sendonly)
            v.setCodecPreferences([codec])
            let a = tx.addTransceiver(kind: .audio, direction: .sendonly)
            return MediaPump(connection: tx, video: v, audio: a, sources: media.source)
        }
        return (tx, pump)
    }

    /// A receiving connection on `loop`, negotiated with `sender` (which offers), whose frames go to
    /// `recording`.
    static func recordingReceiver(for sender: PeerConnection, on loop: EventLoop, recording: Recording) async throws
        -> PeerConnection
    {
        let rx = try PeerConnection(loop: loop)
        let offer = try await sender.loop.submit {
            let o = try sender.createOffer()
            try sender.setLocalDescription(o)
            return o
        }
        let answer = try await loop.submit {
            rx.onFrame = { _, _, frame, timing in recording.write(frame, arrival: timing.arrivalTime) }
            try rx.setRemoteDescription(offer, type: .offer)
            let a = try rx.createAnswer()
            try rx.setLocalDescription(a)
            return a
        }
        try await sender.loop.submit { try sender.setRemoteDescription(answer, type: .answer) }
        return rx
    }

    /// A 10 s loop of `codec` video (VP8 by default; at `bitrate` minus the audio, key frames every
    /// 2 s) and 32 kbit/s Opus.
    ///
    /// The test pattern alone compresses to a fraction of a real camera's bitrate, so film-grain-like
    /// noise is added to the luma: the encoder then spends its whole budget, as with a camera.
    ///
    /// `videoBitrate` overrides the encoder's target (``calibratedStream(width:height:bitrate:codec:)``).
    static func stream(
        width: Int, height: Int, bitrate: Int, codec: MediaCodec = .vp8, videoBitrate: Int? = nil
    ) throws -> SyntheticMedia {
        let audioBitrate = 32_000
        let fps = 30
        let frameCount = 10 * fps
        let encoder = try VideoEncoders.make(
            codec: codec, width: width, height: height, fps: fps, bitrate: videoBitrate ?? bitrate - audioBitrate,
            keyframeInterval: 2 * fps)
        let pattern = TestPatternSource(width: width, height: height, fps: fps)
        var picture = I420Image(width: width, height: height)
        var seed: UInt32 = 0x2545_F491
        var frames: [EncodedFrame] = []
        frames.reserveCapacity(frameCount)
        for i in 0..<frameCount {
            if i % (2 * fps) == 0 { encoder.forceKeyframe() }
            pattern.render(i, into: &picture)
            picture.y.withUnsafeMutableBufferPointer { luma in
                for j in luma.indices {
                    seed = seed &* 1_664_525 &+ 1_013_904_223
                    let grain = Int(seed >> 27) - 16  // −16…15
                    luma[j] = UInt8(clamping: Int(luma[j]) + grain)
                }
            }
            for var frame in try encoder.encode(i420: picture) {
                frame.timestamp = UInt32(frames.count * (90_000 / fps))
                frames.append(frame)
            }
        }
        // The synthetic tone (with its markers) from the shared generator; its tiny video is unused.
        let audio = try SyntheticMedia(
            seconds: 10, layers: 1, width: 64, height: 64, fps: fps, topBitrate: 30_000, audioBitrate: audioBitrate)
        return SyntheticMedia(
            videoLayers: [frames], audio: audio.audioFrames, fps: fps, audioChannels: audio.audioChannels,
            audioPreSkip: audio.audioPreSkip)
    }

    /// ``stream(width:height:bitrate:codec:videoBitrate:)`` whose loop (video and audio) comes within
    /// 0.5 % of `bitrate`: encoders miss a target by a few percent, each its own way (libx264 over,
    /// libvpx under), and codecs compared "at the same bitrate" must carry the same bytes. The
    /// encoder's target is scaled by the miss and the loop encoded again, at most four times;
    /// throws when it never comes within 1 %.
    static func calibratedStream(width: Int, height: Int, bitrate: Int, codec: MediaCodec) throws -> SyntheticMedia {
        var target = bitrate - 32_000
        var media = try stream(width: width, height: height, bitrate: bitrate, codec: codec, videoBitrate: target)
        for _ in 0..<4 {
            let miss = bitsPerSecond(media) / Double(bitrate)
            if abs(miss - 1) <= 0.005 { return media }
            let audio = bitsPerSecond(media) - videoBitsPerSecond(media)
            target = Int(Double(target) * (Double(bitrate) - audio) / max(1, videoBitsPerSecond(media)))
            media = try stream(width: width, height: height, bitrate: bitrate, codec: codec, videoBitrate: target)
        }
        let miss = bitsPerSecond(media) / Double(bitrate)
        guard abs(miss - 1) <= 0.01 else {
            throw Failure(
                description: String(
                    format: "%@ loop at %.0f bit/s, not within 1 %% of %d", codec.rawValue,
                    bitsPerSecond(media), bitrate))
        }
        return media
    }

    /// The video part of ``bitsPerSecond(_:)``.
    static func videoBitsPerSecond(_ media: SyntheticMedia) -> Double {
        Double(media.videoFrames[0].reduce(0) { $0 + $1.data.count } * 8) / Double(media.loopSeconds)
    }

    /// utime + stime of process `pid` (all its threads) from `/proc/PID/stat`, in nanoseconds.
    static func processCPUNanoseconds(pid: Int32) throws -> UInt64 {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { throw Failure(description: "cannot read /proc/\(pid)/stat") }
        // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let utime = UInt64(fields[11]), let stime = UInt64(fields[12]) else {
            throw Failure(description: "unexpected /proc/\(pid)/stat")
        }
        let ticks = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
        return (utime + stime) * 1_000_000_000 / ticks
    }
}

/// A child process spoken to in JSON lines over stdin/stdout.
// Safe: the pipes and pending lines are guarded by `lock`.
final class LineProcess: @unchecked Sendable {
    let process = Process()
    let stdinPipe = Pipe()
    let stdoutPipe = Pipe()
    let stderrPipe = Pipe()
    private let lock = NSLock()
    private var lines: [String] = []
    private var buffer = Data()
    private var stderrData = Data()
    private let available = DispatchSemaphore(value: 0)

    var pid: Int32 { process.processIdentifier }

    init(executable: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        stdoutPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            self?.received(handle.availableData)
        }
        stderrPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            self?.lock.withLock { self?.stderrData.append(data) }
        }
        // A child that dies must surface as a write error, not kill the benchmark with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        try process.run()
    }

    private func received(_ data: Data) {
        var complete = 0
        lock.withLock {
            buffer.append(data)
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                buffer.removeSubrange(buffer.startIndex...newline)
                complete += 1
            }
        }
        for _ in 0..<complete { available.signal() }
    }

    func stderrText() -> String { lock.withLock { String(decoding: stderrData.suffix(2000), as: UTF8.self) } }

    /// The next JSON object line, waiting up to `timeout` seconds.
    func readJSON(timeout: Double) throws -> [String: Any] {
        guard available.wait(timeout: .now() + timeout) == .success else {
            throw RecordingBenchmark.Failure(description: "no reply within \(Int(timeout)) s: \(stderrText())")
        }
        let line: String = lock.withLock { lines.removeFirst() }
        guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw RecordingBenchmark.Failure(description: "not a JSON object: \(line)")
        }
        return object
    }

    func writeJSON(_ object: [String: Any]) throws {
        var data = try JSONSerialization.data(withJSONObject: object)
        data.append(UInt8(ascii: "\n"))
        try stdinPipe.fileHandleForWriting.write(contentsOf: data)
    }

    /// Video frames aiortc's recorder has pulled so far.
    func videoFramesPulled() throws -> Int {
        try writeJSON(["stats": true])
        let frames = (try readJSON(timeout: 30))["frames"] as? [String: Any] ?? [:]
        return frames["video_frames_decoded"] as? Int ?? 0
    }

    func terminate() {
        stdoutPipe.fileHandleForReading.readabilityHandler = nil
        stderrPipe.fileHandleForReading.readabilityHandler = nil
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}
