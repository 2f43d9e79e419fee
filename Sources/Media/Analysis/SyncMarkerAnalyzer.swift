public import RTCWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What ``SyncMarkerAnalyzer`` measured in one recording. Times are milliseconds of media time.
public struct SyncReport: Sendable, Equatable {
    /// A video flash matched with the nearest beep onset.
    public struct Pair: Sendable, Equatable {
        /// Flash frame time (ms).
        public var flashMs: Double
        /// Beep onset time (ms).
        public var beepMs: Double
        /// `beepMs − flashMs`: positive when the audio is late.
        public var offsetMs: Double { beepMs - flashMs }
    }

    /// Times of frames whose mean luma crossed above the flash threshold (ms).
    public var flashTimesMs: [Double]
    /// Onset times of the 1 kHz beeps (ms), after removing the Opus CodecDelay / pre-skip.
    public var beepOnsetsMs: [Double]
    /// Each flash paired with the nearest beep within ``SyncMarkerAnalyzer/maxPairDistanceMs``.
    public var matched: [Pair]
    /// Median of beep − flash over the pairs (ms); nil when nothing paired.
    public var offsetMilliseconds: Double?
    /// Number of pairs.
    public var pairs: Int { matched.count }
}

/// Measures audio/video sync in a WebM recording of the synthetic media (``TestPatternSource``
/// flashes full white and ``ToneSource`` beeps at 1 kHz at the same media instants).
///
/// Time convention: a video frame's time is its block timestamp. Decoded Opus sample `k` of a block
/// with timestamp `T` is at `T + k/48 kHz − CodecDelay` (CodecDelay from the track, or the OpusHead
/// pre-skip when CodecDelay is absent), which is how Matroska players map samples; it puts the
/// encoder's input sample `s` of a packet sent at `pts = s/48 kHz` back at `s/48 kHz`.
public enum SyncMarkerAnalyzer {
    /// Mean luma above which a frame counts as a flash (the flash is Y=235, the pattern ~100).
    public static let flashLumaThreshold = 200.0
    /// Goertzel window (5 ms at 48 kHz).
    public static let windowSamples = 240
    /// Hop between windows (1 ms), which sets the onset resolution.
    public static let hopSamples = 48
    /// Flashes and beeps further apart than this are not paired (markers are 2 s apart).
    public static let maxPairDistanceMs = 1_000.0

    /// Why the analysis could not run.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The recording has no VP8 video track or no Opus audio track.
        case missingTrack(MediaKind)
        public var description: String {
            switch self {
            case .missingTrack(let kind): return "recording has no \(kind) track to analyse"
            }
        }
    }

    /// Reads `path`, finds flashes and beeps, and pairs them.
    ///
    /// Throws ``WebMReaderError`` for an unreadable file, ``Failure`` when a track is missing, and
    /// ``MediaError`` when a decoder cannot be created. Frames that fail to decode are skipped.
    public static func analyze(path: String) throws -> SyncReport {
        try analyze(reader: WebMReader(path: path))
    }

    /// Analyses an already-read recording.
    public static func analyze(reader: WebMReader) throws -> SyncReport {
        guard let videoTrack = reader.tracks.first(where: { $0.codec == .vp8 }) else {
            throw Failure.missingTrack(.video)
        }
        guard let audioTrack = reader.tracks.first(where: { $0.codec == .opus }) else {
            throw Failure.missingTrack(.audio)
        }
        let flashes = try flashTimes(reader.frames(track: videoTrack.number))
        let beeps = try beepOnsets(reader.frames(track: audioTrack.number), track: audioTrack)
        let matched = pair(flashes: flashes, beeps: beeps)
        return SyncReport(
            flashTimesMs: flashes, beepOnsetsMs: beeps, matched: matched,
            offsetMilliseconds: median(matched.map(\.offsetMs)))
    }

    /// Times (ms) of frames whose mean luma is above the threshold after a frame that was not.
    static func flashTimes(_ frames: [WebMReader.Frame]) throws -> [Double] {
        let decoder = try VP8Decoder()
        var previousWasFlash = false
        var out: [Double] = []
        for frame in frames where !frame.data.isEmpty {
            // A damaged frame (e.g. from a lossy recording) is skipped rather than ending the analysis.
            guard let picture = try? decoder.decode(frame.data) else { continue }
            let isFlash = picture.meanLuma > flashLumaThreshold
            if isFlash && !previousWasFlash { out.append(Double(frame.timestampNanoseconds) / 1e6) }
            previousWasFlash = isFlash
        }
        return out
    }

    /// Onset times (ms) of 1 kHz beeps in the decoded audio.
    static func beepOnsets(_ frames: [WebMReader.Frame], track: WebMReader.Track) throws -> [Double] {
        let head = track.codecPrivate
        let channels =
            head.count >= 10 && head.hasBytes(0, Array("OpusHead".utf8)) ? Int(head[9]) : max(1, track.channels)
        var delayNs = track.codecDelayNanoseconds
        if delayNs == 0, let preSkip = head.le16(10) { delayNs = Int64(preSkip) * 1_000_000_000 / 48_000 }
        let decoder = try OpusDecoder(channels: channels == 2 ? 2 : 1)

        // Mono samples on a timeline whose sample 0 is at `segmentStartNs`; short gaps stay silent.
        // A gap longer than `maxGapSamples` (or a jump backwards) starts a new segment, so a long
        // silence or a bogus timestamp cannot make us allocate hours of samples.
        let maxGapSamples = 10 * 48_000
        var onsetsMs: [Double] = []
        var pcm: [Float] = []
        pcm.reserveCapacity(frames.count * 960)
        var segmentStartNs: Int64 = frames.first?.timestampNanoseconds ?? 0
        func finishSegment() {
            let originMs = (Double(segmentStartNs) - Double(delayNs)) / 1e6  // both come from the file: no Int64 overflow
            onsetsMs += detectBeeps(pcm).map { originMs + Double($0) / 48.0 }
            pcm.removeAll(keepingCapacity: true)
        }
        for frame in frames {
            guard let decoded = try? decoder.decode(frame.data) else { continue }
            let count = decoded.count / decoder.channels
            var position = Int((Double(frame.timestampNanoseconds &- segmentStartNs) * 48_000 / 1e9).rounded())
            if position < 0 || position - pcm.count > maxGapSamples {
                finishSegment()
                segmentStartNs = frame.timestampNanoseconds
                position = 0
            }
            if pcm.count < position + count {
                pcm.append(contentsOf: repeatElement(0, count: position + count - pcm.count))
            }
            for i in 0..<count {
                var sum: Float = 0
                for c in 0..<decoder.channels { sum += Float(decoded[i * decoder.channels + c]) }
                pcm[position + i] = sum / Float(decoder.channels * 32_768)
            }
        }
        finishSegment()
        return onsetsMs
    }

    /// Sample positions of beep onsets: the centre of the first window whose 1 kHz amplitude
    /// reaches half of that beep's peak, for beeps where 1 kHz dominates 440 Hz.
    static func detectBeeps(_ pcm: [Float]) -> [Int] {
        let n = windowSamples
        guard pcm.count >= n else { return [] }
        let windows = (pcm.count - n) / hopSamples + 1
        var beep = [Double](repeating: 0, count: windows)
        var tone = [Double](repeating: 0, count: windows)
        pcm.withUnsafeBufferPointer { p in
            for w in 0..<windows {
                let slice = UnsafeBufferPointer(rebasing: p[(w * hopSamples)..<(w * hopSamples + n)])
                beep[w] = goertzelAmplitude(slice, frequency: 1_000)
                tone[w] = goertzelAmplitude(slice, frequency: 440)
            }
        }
        // A window is "in a beep" when 1 kHz is well above both the 440 Hz level and the noise.
        func inBeep(_ w: Int) -> Bool { beep[w] > 0.05 && beep[w] > 2 * tone[w] }
        let refractory = 500  // windows (ms): one onset per beep even if the beep flickers
        var onsets: [Int] = []
        var lastOnset = -refractory
        var w = 1
        while w < windows {
            if inBeep(w), !inBeep(w - 1), w - lastOnset >= refractory {
                let peakEnd = min(windows, w + 100)
                let peak = beep[w..<peakEnd].max() ?? beep[w]
                var first = w
                while first > max(0, w - 10), beep[first - 1] >= peak / 2 { first -= 1 }
                while first < peakEnd - 1, beep[first] < peak / 2 { first += 1 }
                onsets.append(first * hopSamples + n / 2)
                lastOnset = w
            }
            w += 1
        }
        return onsets
    }

    /// Amplitude of `frequency` in `x` (a full-scale sine of amplitude A gives about A).
    static func goertzelAmplitude(_ x: UnsafeBufferPointer<Float>, frequency: Double) -> Double {
        let omega = 2 * Double.pi * frequency / 48_000
        let coefficient = 2 * cos(omega)
        var s1 = 0.0
        var s2 = 0.0
        for sample in x {
            let s0 = Double(sample) + coefficient * s1 - s2
            s2 = s1
            s1 = s0
        }
        let power = s1 * s1 + s2 * s2 - coefficient * s1 * s2
        return 2 * max(0, power).squareRoot() / Double(max(1, x.count))
    }

    /// Pairs each flash with the nearest beep within ``maxPairDistanceMs``.
    static func pair(flashes: [Double], beeps: [Double]) -> [SyncReport.Pair] {
        flashes.compactMap { flash in
            guard let nearest = beeps.min(by: { abs($0 - flash) < abs($1 - flash) }),
                abs(nearest - flash) <= maxPairDistanceMs
            else { return nil }
            return SyncReport.Pair(flashMs: flash, beepMs: nearest)
        }
    }

    static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let mid = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
    }
}
