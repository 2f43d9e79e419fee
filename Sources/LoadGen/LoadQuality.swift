import Foundation
import Media
import RTCWire

extension LoadReport {
    /// A distribution over tracks: the low tail matters for fps and MOS, the high one for freezes.
    public struct Spread: Sendable, Codable, Equatable {
        public var count: Int
        public var min: Double?
        public var p05: Double?
        public var p50: Double?
        public var p95: Double?
        public var max: Double?
        public var mean: Double?

        static func of(_ values: [Double]) -> Spread {
            guard !values.isEmpty else { return Spread(count: 0) }
            let sorted = values.sorted()
            func at(_ q: Double) -> Double { nearestRank(q, ofSorted: sorted) }
            return Spread(
                count: sorted.count, min: sorted.first, p05: at(0.05), p50: at(0.5), p95: at(0.95), max: sorted.last,
                mean: sorted.reduce(0, +) / Double(sorted.count))
        }
    }

    /// One of the worst tracks of a run: which bot received it from whom, and the value that put it there.
    public struct WorstTrack: Sendable, Codable, Equatable {
        public var subscriber: String
        public var publisher: String
        public var kind: String
        public var value: Double
        /// The track's other numbers, for a reader who wants to know why.
        public var detail: String
    }

    /// Received quality over every track that got frames (``ReceiveQualitySnapshot``, measured by
    /// each bot's receivers without decoding): distributions across the bots' tracks and the worst
    /// tracks by name. Definitions: `docs/load-testing.md`.
    public struct QualitySummary: Sendable, Codable, Equatable {
        public var videoTracks: Int
        public var audioTracks: Int
        /// Video tracks with at least one freeze.
        public var tracksWithFreezes: Int
        public var freezeCount: Spread
        public var freezesDurationMs: Spread
        public var framesPerSecond: Spread
        public var videoJitterBufferDelayMs: Spread
        public var layerSwitches: Spread
        public var concealmentPercent: Spread
        public var audioJitterBufferDelayMs: Spread
        public var mos: Spread
        /// End-to-end latency per track (mean of the track's frames), where the sender stamps it.
        public var latencyMs: Spread
        /// Up to five video tracks with the most freezes (then the longest frozen), none without a freeze.
        public var worstFreezes: [WorstTrack]
        /// The five video tracks with the lowest frame rate.
        public var worstFramesPerSecond: [WorstTrack]
        /// The five audio tracks with the lowest MOS.
        public var worstMOS: [WorstTrack]

        static let worstCount = 5

        /// The summary of `tracks` (nil when none has a quality reading with frames).
        static func of(_ tracks: [TrackResult]) -> QualitySummary? {
            let measured = tracks.compactMap { t in t.quality.flatMap { $0.frames > 0 ? (t, $0) : nil } }
            guard !measured.isEmpty else { return nil }
            let video = measured.filter { $0.1.kind == "video" }
            let audio = measured.filter { $0.1.kind == "audio" }
            func worst(_ rows: [(TrackResult, ReceiveQualitySnapshot)], _ value: (ReceiveQualitySnapshot) -> Double)
                -> [WorstTrack]
            {
                rows.prefix(worstCount).map { t, q in
                    WorstTrack(
                        subscriber: t.subscriber, publisher: t.publisher, kind: t.kind, value: value(q),
                        detail: q.reading)
                }
            }
            let byFreezes = video.filter { $0.1.freezeCount > 0 }.sorted {
                ($0.1.freezeCount, $0.1.totalFreezesDurationMs) > ($1.1.freezeCount, $1.1.totalFreezesDurationMs)
            }
            let byFPS = video.sorted { $0.1.framesPerSecond < $1.1.framesPerSecond }
            let byMOS = audio.sorted { ($0.1.mos ?? 5) < ($1.1.mos ?? 5) }
            return QualitySummary(
                videoTracks: video.count, audioTracks: audio.count, tracksWithFreezes: byFreezes.count,
                freezeCount: .of(video.map { Double($0.1.freezeCount) }),
                freezesDurationMs: .of(video.map(\.1.totalFreezesDurationMs)),
                framesPerSecond: .of(video.map(\.1.framesPerSecond)),
                videoJitterBufferDelayMs: .of(video.map(\.1.jitterBufferDelayMs)),
                layerSwitches: .of(video.map { Double($0.1.layerSwitches ?? 0) }),
                concealmentPercent: .of(audio.compactMap(\.1.concealmentPercent)),
                audioJitterBufferDelayMs: .of(audio.map(\.1.jitterBufferDelayMs)), mos: .of(audio.compactMap(\.1.mos)),
                latencyMs: .of(measured.compactMap(\.1.latencyMs)),
                worstFreezes: worst(byFreezes) { Double($0.freezeCount) },
                worstFramesPerSecond: worst(byFPS, \.framesPerSecond),
                worstMOS: worst(byMOS) { $0.mos ?? 0 })
        }

        /// The summary's lines of ``LoadReport/table()``; a worst track that crossed a link of
        /// `impairedBots` is marked.
        func table(impairedBots: Set<String> = []) -> String {
            func mark(_ w: WorstTrack) -> String {
                impairedBots.contains(w.subscriber) || impairedBots.contains(w.publisher) ? " (impaired)" : ""
            }
            func v(_ x: Double?, _ format: String = "%.1f") -> String { x.map { String(format: format, $0) } ?? "-" }
            var out = ""
            if videoTracks > 0 {
                out +=
                    "video quality \(videoTracks) tracks: fps p50 \(v(framesPerSecond.p50)) p05 \(v(framesPerSecond.p05)); freezes p50 \(v(freezeCount.p50, "%.0f")) p95 \(v(freezeCount.p95, "%.0f")) max \(v(freezeCount.max, "%.0f")) (\(tracksWithFreezes) tracks froze, p95 \(v(freezesDurationMs.p95, "%.0f")) ms frozen); buffer p50 \(v(videoJitterBufferDelayMs.p50)) ms\n"
            }
            if audioTracks > 0 {
                out +=
                    "audio quality \(audioTracks) tracks: MOS p50 \(v(mos.p50, "%.2f")) p05 \(v(mos.p05, "%.2f")) min \(v(mos.min, "%.2f")); concealed p95 \(v(concealmentPercent.p95, "%.2f"))%; buffer p50 \(v(audioJitterBufferDelayMs.p50)) ms\n"
            }
            for w in worstFreezes {
                out += "  most freezes  \(w.subscriber) ← \(w.publisher) \(w.kind)\(mark(w)): \(w.detail)\n"
            }
            for w in worstMOS.prefix(3) where (w.value) < 4.0 {
                out += "  lowest MOS    \(w.subscriber) ← \(w.publisher) \(w.kind)\(mark(w)): \(w.detail)\n"
            }
            return out
        }
    }

    /// The quality of the tracks that crossed an impaired link (their subscriber or publisher was
    /// impaired) beside the others', so a report shows what the link did and whether it spread.
    public struct QualitySplit: Sendable, Codable, Equatable {
        public var impaired: QualitySummary?
        public var others: QualitySummary?

        static func of(_ tracks: [TrackResult], impairedBots: Set<String>) -> QualitySplit? {
            guard !impairedBots.isEmpty else { return nil }
            let crossed = tracks.filter { impairedBots.contains($0.subscriber) || impairedBots.contains($0.publisher) }
            let rest = tracks.filter { !impairedBots.contains($0.subscriber) && !impairedBots.contains($0.publisher) }
            let split = QualitySplit(impaired: .of(crossed), others: .of(rest))
            return split.impaired == nil && split.others == nil ? nil : split
        }

        /// Two lines of ``LoadReport/table()``: the impaired tracks, then the others.
        func table() -> String {
            func line(_ label: String, _ q: QualitySummary?) -> String {
                guard let q else { return "" }
                func v(_ x: Double?, _ format: String) -> String { x.map { String(format: format, $0) } ?? "-" }
                var parts: [String] = []
                if q.videoTracks > 0 {
                    parts.append(
                        "\(q.videoTracks) video tracks, \(q.tracksWithFreezes) froze (p50 \(v(q.freezeCount.p50, "%.0f")), max \(v(q.freezeCount.max, "%.0f"))), fps p05 \(v(q.framesPerSecond.p05, "%.1f"))"
                    )
                }
                if q.audioTracks > 0 {
                    parts.append(
                        "\(q.audioTracks) audio tracks, MOS p50 \(v(q.mos.p50, "%.2f")) min \(v(q.mos.min, "%.2f")), concealed p95 \(v(q.concealmentPercent.p95, "%.2f"))%"
                    )
                }
                return "  \(label)\(parts.joined(separator: "; "))\n"
            }
            return line("impaired      ", impaired) + line("not impaired  ", others)
        }
    }
}
