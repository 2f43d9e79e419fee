import Foundation
import Media
import RTC
import RTCWire

/// How many 1 Mbit/s streams one core can record: `streams` video + Opus participants, each
/// received by its own `PeerConnection` on one receiving loop and written to its own file; and, with
/// several codecs at once, what each codec's stream costs beside the others'.
///
/// Method: the 1 Mbit/s loop of ``RecordingBenchmark`` is encoded once per codec (several codecs:
/// each calibrated to within 0.5 % of the bitrate); `streams` sending
/// `PeerConnection`s per codec (spread over two loops) play it in real time with a ``MediaPump``
/// each, with staggered starts. Each codec's streams are received on a receiving loop of their own,
/// where each connection's frames go to a `Recording` (VP8: WebM; H.264: Matroska), whose disk
/// writes run on the shared `DiskWriter` thread. The figure is each receiving loop thread's CPU over
/// the same window (`CLOCK_THREAD_CPUTIME_ID`: recvmmsg, SRTP, RTP, frame assembly, container
/// writing into buffers), per stream; streams per core is its inverse. The writer thread's CPU is
/// not in it.
public enum ConcurrentRecordingBenchmark {
    public struct Result: Sendable {
        /// The video codec of these streams.
        public var codec: MediaCodec
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

    /// Runs `streams` recorded VP8 streams for `seconds` of measured time (after a warm-up).
    public static func run(
        streams: Int, seconds: Double, bitrate: Int = 1_000_000, directory: String,
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> Result {
        try await run(
            codecs: [.vp8], streams: streams, seconds: seconds, bitrate: bitrate, directory: directory,
            progress: progress)[0]
    }

    /// One codec's side of a run: its receiving loop and its streams.
    private struct Side {
        var codec: MediaCodec
        var media: SyntheticMedia
        var rxLoop: EventLoop
        var receivers: [PeerConnection] = []
        var senders: [PeerConnection] = []
        var pumps: [MediaPump] = []
        var recordings: [Recording] = []
        var paths: [String] = []
    }

    /// Runs `streams` recorded streams of each of `codecs` at once, each codec on its own receiving
    /// loop, all measured over the same `seconds` (after a warm-up); one result per codec, in order.
    public static func run(
        codecs: [MediaCodec], streams: Int, seconds: Double, bitrate: Int = 1_000_000, directory: String,
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> [Result] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let txLoops = [EventLoop(name: "bench-crec-tx1"), EventLoop(name: "bench-crec-tx2")]
        var sides: [Side] = []
        defer {
            for side in sides { side.rxLoop.shutdown() }
            for l in txLoops { l.shutdown() }
        }
        for codec in codecs {
            // One codec alone keeps the row's stream as it was; codecs compared carry the same bytes.
            let media =
                codecs.count > 1
                ? try RecordingBenchmark.calibratedStream(width: 640, height: 360, bitrate: bitrate, codec: codec)
                : try RecordingBenchmark.stream(width: 640, height: 360, bitrate: bitrate, codec: codec)
            var side = Side(codec: codec, media: media, rxLoop: EventLoop(name: "bench-crec-rx-\(codec.rawValue)"))
            let fileExtension = codec == .vp8 || codec == .vp9 || codec == .av1 ? "webm" : "mkv"
            for i in 0..<streams {
                let path = (directory as NSString).appendingPathComponent("\(codec.rawValue)-\(i).\(fileExtension)")
                let recording = try Recording(path: path, opusChannels: media.audioChannels)
                let (tx, pump) = try await RecordingBenchmark.sender(on: txLoops[i % txLoops.count], media: media)
                let rx = try await RecordingBenchmark.recordingReceiver(
                    for: tx, on: side.rxLoop, recording: recording)
                side.receivers.append(rx)
                side.senders.append(tx)
                side.pumps.append(pump)
                side.recordings.append(recording)
                side.paths.append(path)
            }
            sides.append(side)
        }
        for side in sides {
            for rx in side.receivers { try await rx.waitUntilConnected(timeout: 30) }
        }
        progress("bench:   concurrent recording: \(streams) connections up per codec (\(codecs.map(\.rawValue)))")
        // Staggered starts, so keyframes and clusters do not all fall on the same tick; the codecs
        // take turns.
        let total = streams * sides.count
        for i in 0..<streams {
            for side in sides {
                let pump = side.pumps[i]
                await side.senders[i].loop.submit { pump.attach() }
                try await Task.sleep(nanoseconds: 1_000_000_000 / UInt64(max(1, total)))
            }
        }
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let count: @Sendable ([Recording]) -> Int = { $0.reduce(0) { $0 + $1.videoFrames + $1.audioFrames } }
        var starts: [(UInt64, Int)] = []
        for side in sides {
            let recs = side.recordings
            starts.append(await side.rxLoop.submit { (threadCPUNanoseconds(), count(recs)) })
        }
        let wallStart = EventLoop.now()
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
        var ends: [(UInt64, Int)] = []
        for side in sides {
            let recs = side.recordings
            ends.append(await side.rxLoop.submit { (threadCPUNanoseconds(), count(recs)) })
        }
        let wall = Double(EventLoop.now() - wallStart)
        var results: [Result] = []
        for (k, side) in sides.enumerated() {
            for (i, pump) in side.pumps.enumerated() { await side.senders[i].loop.submit { pump.detach() } }
            for rx in side.receivers { await side.rxLoop.submit { rx.onFrame = nil } }
            var dropped = 0
            var bytes = 0
            for (i, recording) in side.recordings.enumerated() {
                dropped += recording.droppedFrames
                try recording.close()
                let path = recording.path
                bytes += ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
                try? FileManager.default.removeItem(atPath: path)
                if path != side.paths[i] { try? FileManager.default.removeItem(atPath: side.paths[i]) }
            }
            for rx in side.receivers { await side.rxLoop.submit { rx.close() } }
            for tx in side.senders { await tx.loop.submit { tx.close() } }
            let framesPerSecond = Double(side.media.fps + 50)
            results.append(
                Result(
                    codec: side.codec, streams: streams, seconds: wall / 1e9,
                    streamBitsPerSecond: RecordingBenchmark.bitsPerSecond(side.media),
                    loopCoreShare: Double(ends[k].0 - starts[k].0) / wall, framesWritten: ends[k].1 - starts[k].1,
                    framesExpected: Int(framesPerSecond * wall / 1e9) * streams, framesDroppedForDisk: dropped,
                    bytesOnDisk: bytes))
        }
        return results
    }
}
