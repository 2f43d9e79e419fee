import Foundation
import Media
import RTC
import RTCWire

/// How many 1 Mbit/s streams one core can record: `streams` VP8 + Opus participants, each received
/// by its own `PeerConnection` on one receiving loop and written to its own WebM file.
///
/// Method: the 1 Mbit/s loop of ``RecordingBenchmark`` is encoded once; `streams` sending
/// `PeerConnection`s (spread over two loops) play it in real time with a ``MediaPump`` each, with
/// staggered starts. On the receiving loop each connection's frames go to a `Recording` (WebM), whose
/// disk writes run on the shared `DiskWriter` thread. The figure is the receiving loop thread's CPU
/// over the window (`CLOCK_THREAD_CPUTIME_ID`: recvmmsg, SRTP, RTP, frame assembly, container
/// writing into buffers), per stream; streams per core is its inverse. The writer thread's CPU is
/// not in it (it is reported beside it from the process total minus the loops).
public enum ConcurrentRecordingBenchmark {
    public struct Result: Sendable {
        public var streams: Int
        public var seconds: Double
        public var streamBitsPerSecond: Double
        /// The receiving loop thread's CPU over the window, as a share of one core.
        public var loopCoreShare: Double
        /// Frames written over the window, all streams.
        public var framesWritten: Int
        /// Frames expected over the window from the stream's frame rate (video + audio), all streams.
        public var framesExpected: Int
        /// Frames dropped because the disk writer was behind, all streams, whole run.
        public var framesDroppedForDisk: Int
        public var bytesOnDisk: Int
        /// The packet loop's CPU per recorded stream, as a share of one core.
        public var loopSharePerStream: Double { loopCoreShare / Double(max(1, streams)) }
        /// Streams one core's packet loop could record at this cost.
        public var streamsPerCore: Double { 1 / max(1e-9, loopSharePerStream) }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs `streams` recorded streams for `seconds` of measured time (after a warm-up).
    public static func run(
        streams: Int, seconds: Double, bitrate: Int = 1_000_000, directory: String,
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> Result {
        let media = try RecordingBenchmark.stream(width: 640, height: 360, bitrate: bitrate)
        let streamBits = RecordingBenchmark.bitsPerSecond(media)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

        let rxLoop = EventLoop(name: "bench-crec-rx")
        let txLoops = [EventLoop(name: "bench-crec-tx1"), EventLoop(name: "bench-crec-tx2")]
        defer {
            rxLoop.shutdown()
            for l in txLoops { l.shutdown() }
        }
        var receivers: [PeerConnection] = []
        var senders: [PeerConnection] = []
        var pumps: [MediaPump] = []
        var recordings: [Recording] = []
        for i in 0..<streams {
            let path = (directory as NSString).appendingPathComponent("stream-\(i).webm")
            let recording = try Recording(path: path, opusChannels: media.audioChannels)
            let (tx, pump) = try await RecordingBenchmark.sender(on: txLoops[i % txLoops.count], media: media)
            let rx = try await RecordingBenchmark.recordingReceiver(for: tx, on: rxLoop, recording: recording)
            receivers.append(rx)
            senders.append(tx)
            pumps.append(pump)
            recordings.append(recording)
        }
        for rx in receivers { try await rx.waitUntilConnected(timeout: 30) }
        progress("bench:   concurrent recording: \(streams) connections up")
        // Staggered starts, so keyframes and clusters do not all fall on the same tick.
        for (i, pump) in pumps.enumerated() {
            await senders[i].loop.submit { pump.attach() }
            try await Task.sleep(nanoseconds: 1_000_000_000 / UInt64(max(1, streams)))
        }
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let count: @Sendable ([Recording]) -> Int = { $0.reduce(0) { $0 + $1.videoFrames + $1.audioFrames } }
        let recs = recordings
        let start = await rxLoop.submit { (threadCPUNanoseconds(), count(recs)) }
        let wallStart = EventLoop.now()
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
        let end = await rxLoop.submit { (threadCPUNanoseconds(), count(recs)) }
        let wall = Double(EventLoop.now() - wallStart)
        for (i, pump) in pumps.enumerated() { await senders[i].loop.submit { pump.detach() } }
        for rx in receivers { await rxLoop.submit { rx.onFrame = nil } }
        var dropped = 0
        var bytes = 0
        for (i, recording) in recordings.enumerated() {
            dropped += recording.droppedFrames
            try recording.close()
            let path = (directory as NSString).appendingPathComponent("stream-\(i).webm")
            bytes += ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
            try? FileManager.default.removeItem(atPath: path)
        }
        for rx in receivers { await rxLoop.submit { rx.close() } }
        for tx in senders { await tx.loop.submit { tx.close() } }
        let framesPerSecond = Double(media.fps + 50)
        return Result(
            streams: streams, seconds: wall / 1e9, streamBitsPerSecond: streamBits,
            loopCoreShare: Double(end.0 - start.0) / wall, framesWritten: end.1 - start.1,
            framesExpected: Int(framesPerSecond * wall / 1e9) * streams, framesDroppedForDisk: dropped,
            bytesOnDisk: bytes)
    }
}
