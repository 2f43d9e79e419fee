import Dispatch
import Foundation
import Media
import RTCWire

/// `--analyze`: the full-reference checks of `understudy analyze` (``VideoQualityAnalyzer``), run live
/// on every consumed webcam as it arrives, off the media loop.
///
/// The loop only appends each video frame to its webcam's pending list (a lock and an append, no
/// decoding) and, when the list was empty, schedules a drain on the monitor's serial queue, where the
/// frames are decoded and analysed. Pictures are on screen from their arrival, so a frame that comes
/// late shows as a freeze; the frame sequence follows RTP time. A webcam more than
/// ``maxPending`` frames behind (the machine cannot decode that fast) has its pending frames
/// discarded; analysis resumes at its next key frame, without counting the gap as dropped. Both the
/// discarded frames and those passed over until that key frame are ``Reading/framesNotAnalysed``.
///
/// PSNR and SSIM, most of the cost, are sampled (``compareEvery``); every picture is decoded and
/// checked for its number, freezes and black.
///
/// Readings go to the manifest (`analysis`, at most every ``manifestInterval`` and at close) and to
/// `/metrics` (``render(into:)``).
// Safe: `streams` and their pending lists are guarded by `lock`; the analysis state is confined to `queue`.
final class LiveQualityMonitor: @unchecked Sendable {
    /// Frames a webcam may have waiting for the decoder (10 s at 30 fps): above a burst of frames
    /// released together after a long NACK repair, which must be analysed (its lateness is a freeze).
    static let maxPending = 300
    /// One numbered picture in this many is compared with the source (PSNR/SSIM): three a second at 30 fps.
    static let compareEvery = 10
    /// Nanoseconds between manifest updates.
    static let manifestInterval: UInt64 = 2_000_000_000

    /// One webcam's latest reading.
    struct Reading: Sendable {
        var report: VideoQualityReport
        var framesNotAnalysed: Int
    }

    // Safe: the fields marked "under the lock" are guarded by the monitor's lock, the rest confined to its queue.
    private final class Stream: @unchecked Sendable {
        // Under the monitor's lock.
        var pending: [(EncodedFrame, UInt64)] = []
        var draining = false
        var discarded = 0
        var reading: Reading?
        // On the queue.
        var decoder: VideoDecoder?
        var analyzer = VideoQualityAnalyzer(compareEvery: LiveQualityMonitor.compareEvery)
        var waitForKeyframe = true
        var lastTimestamp: UInt32 = 0
        var mediaTime: Int64 = 0
        var started = false
        var lastReport: UInt64 = 0
        var discardedSeen = 0
        /// Frames passed over while waiting for a key frame after a discard (not at the start).
        var skippedWaiting = 0
    }

    private let lock = NSLock()
    private var streams: [String: Stream] = [:]
    private let queue = DispatchQueue(label: "understudy.agent.analyze")
    private let publish: @Sendable (String, Reading) -> Void

    /// `publish` gets each webcam's reading on the monitor's queue (for the manifest).
    init(publish: @escaping @Sendable (String, Reading) -> Void) { self.publish = publish }

    /// Media loop: one received frame of `participantId`'s webcam.
    func submit(_ participantId: String, _ frame: EncodedFrame, arrival: UInt64) {
        guard frame.codec.kind == .video else { return }
        let (stream, schedule) = lock.withLock { () -> (Stream, Bool) in
            let stream = streams[participantId] ?? Stream()
            streams[participantId] = stream
            if stream.pending.count >= Self.maxPending {
                stream.discarded += stream.pending.count
                stream.pending.removeAll(keepingCapacity: true)
            }
            stream.pending.append((frame, arrival))
            let schedule = !stream.draining
            stream.draining = true
            return (stream, schedule)
        }
        if schedule { queue.async { self.drain(participantId, stream) } }
    }

    /// Queue: analyses what waits, until nothing does.
    private func drain(_ participantId: String, _ stream: Stream) {
        while true {
            let (batch, discarded) = lock.withLock { () -> ([(EncodedFrame, UInt64)], Int) in
                let batch = stream.pending
                stream.pending = []
                if batch.isEmpty { stream.draining = false }
                return (batch, stream.discarded)
            }
            if batch.isEmpty { break }
            if discarded > stream.discardedSeen {
                // Frames were thrown away since the last drain: start again at a key frame.
                stream.discardedSeen = discarded
                stream.waitForKeyframe = true
            }
            for (frame, arrival) in batch { analyse(frame, arrival: arrival, stream) }
            let now = DispatchTime.now().uptimeNanoseconds
            if now &- stream.lastReport >= Self.manifestInterval {
                stream.lastReport = now
                report(participantId, stream)
            }
        }
    }

    private func analyse(_ frame: EncodedFrame, arrival: UInt64, _ stream: Stream) {
        if stream.waitForKeyframe {
            guard frame.isKeyframe else {
                stream.skippedWaiting += 1
                return
            }
            stream.waitForKeyframe = false
            stream.analyzer.resynchronize()
            stream.decoder = nil
        }
        if stream.decoder?.codec != frame.codec { stream.decoder = try? VideoDecoder(codec: frame.codec) }
        // RTP time, unwrapped, in ns: the sequence's clock.
        if stream.started {
            stream.mediaTime += Int64(Int32(bitPattern: frame.timestamp &- stream.lastTimestamp))
        }
        stream.started = true
        stream.lastTimestamp = frame.timestamp
        guard let decoder = stream.decoder else { return }
        do {
            guard let picture = try decoder.decode(frame.data) else { return }
            stream.analyzer.add(
                picture, ptsNanoseconds: stream.mediaTime * 1_000_000_000 / Int64(frame.codec.clockRate),
                arrivalNanoseconds: Int64(arrival))
        } catch {
            stream.analyzer.addUndecodable()
        }
    }

    private func report(_ participantId: String, _ stream: Stream) {
        let reading = Reading(
            report: stream.analyzer.report(),
            framesNotAnalysed: lock.withLock { stream.discarded } + stream.skippedWaiting)
        lock.withLock { stream.reading = reading }
        publish(participantId, reading)
    }

    /// Analyses what is still pending and publishes every webcam's final reading; returns when done.
    func finish() async {
        let all = lock.withLock { streams }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queue.async {
                for (id, stream) in all {
                    self.drain(id, stream)
                    self.report(id, stream)
                }
                done.resume()
            }
        }
    }

    /// The latest readings by participant id.
    var readings: [String: Reading] {
        lock.withLock { streams.compactMapValues(\.reading) }
    }

    /// `/metrics`: the latest reading of each analysed webcam.
    func render(into out: inout PrometheusText) {
        let readings = self.readings.sorted { $0.key < $1.key }
        guard !readings.isEmpty else { return }
        let counters: [(String, String, (Reading) -> Double)] = [
            (
                "understudy_agent_analyzed_frames_total", "Pictures decoded and analysed (--analyze).",
                { Double($0.report.frames) }
            ),
            (
                "understudy_agent_analyzed_dropped_frames_total", "Source frames sent but never shown.",
                { Double($0.report.dropped) }
            ),
            (
                "understudy_agent_analyzed_skipped_frames_total", "Source frames the sender skipped.",
                { Double($0.report.skipped) }
            ),
            (
                "understudy_agent_analyzed_repeated_frames_total", "Pictures repeating the previous frame number.",
                { Double($0.report.repeated) }
            ),
            ("understudy_agent_analyzed_freezes_total", "Frozen-picture spans.", { Double($0.report.freezes.count) }),
            (
                "understudy_agent_analyzed_frozen_seconds_total", "Time in frozen pictures.",
                { $0.report.frozenMs / 1000 }
            ),
            ("understudy_agent_analyzed_black_seconds_total", "Time in black pictures.", { $0.report.blackMs / 1000 }),
            (
                "understudy_agent_analyzed_frames_not_analysed_total",
                "Frames discarded because the decoder fell behind.", { Double($0.framesNotAnalysed) }
            ),
        ]
        for (name, help, value) in counters {
            out.family(name, "counter", help)
            for (id, reading) in readings { out.sample(name, labels: ["participant": id], value(reading)) }
        }
        for (name, help, stats) in [
            (
                "understudy_agent_analyzed_psnr_db", "Luma PSNR against the source frame (mean, min, p5).",
                \VideoQualityReport.psnr
            ),
            (
                "understudy_agent_analyzed_ssim", "Luma SSIM against the source frame (mean, min, p5).",
                \VideoQualityReport.ssim
            ),
        ] {
            out.family(name, "gauge", help)
            for (id, reading) in readings {
                guard let s = reading.report[keyPath: stats] else { continue }
                for (stat, value) in [("mean", s.mean), ("min", s.min), ("p5", s.p5)] {
                    out.sample(name, labels: ["participant": id, "stat": stat], value)
                }
            }
        }
    }
}
