/// Full-reference quality of one received video stream of ``TestPatternSource`` pictures, fed one
/// decoded picture at a time: the frame numbers read from each picture (``FrameNumberReader``) give
/// dropped, repeated and out-of-order frames and, with arrival times, frame-accurate delay; each
/// numbered picture is compared with the source frame redrawn at its size (``PictureQuality``); and
/// every picture is checked for black and for a frozen picture. ``report()`` summarises.
///
/// Definitions (also in `docs/load-testing.md`, "Full-reference checks"):
/// - **dropped**: frame numbers skipped between two numbered pictures, less the pictures between them
///   whose number could not be read (shown, if damaged or black). Numbers are modulo
///   ``FrameCode/modulus``; a step backwards (a looping source restarting) is resolved with the
///   presentation times: `round(Δpts · fps) − 1` frames were dropped across it.
/// - **skipped**: frame numbers the sender skipped: the number advanced by more than the
///   presentation time did (`Δn > round(Δpts · fps)`; the excess). A pre-encoded source jumps to its
///   next key frame when a receiver asks for one; the media clock, and so the pts, does not jump.
///   The rest of the step counts towards dropped.
/// - **repeated**: a picture whose number equals the previous numbered picture's.
/// - **freeze**: one picture on screen (from its arrival when arrival times are given, else from its
///   pts), repeated or waiting for the next, for at least
///   `max(3·T, T + 150 ms)` with `T = 1/fps` (the W3C freeze rule with the source's frame interval).
///   "The same picture" is the same frame number, or, for pictures without one, fewer than
///   ``changedFraction`` of the luma samples differing by more than ``changedLuma``.
/// - **black**: at least 98 % of the luma samples at or below ``blackLuma`` (ffmpeg's `blackdetect`
///   defaults); a span lasts from its first black picture to the next picture that is not.
/// - **delay**: `arrival − (start + pts)` of each numbered picture, pts being the sender's media
///   time (RTP time; a key-frame jump moves the content, not the clock); `start` is when media time 0
///   was captured, on the arrival clock, when known, else chosen so the least-delayed frame has delay
///   0 (then delay is relative).
///
/// Not thread-safe; it allocates only when the picture size changes (reference redraw buffers).
public struct VideoQualityAnalyzer: Sendable {
    /// A time span of the stream, in milliseconds of presentation time.
    public struct Span: Sendable, Equatable, Codable {
        /// Start (ms).
        public var startMs: Double
        /// Length (ms).
        public var durationMs: Double
    }

    /// Luma at or below which a sample counts as black (16 + 10 % of the video range).
    public static let blackLuma: UInt8 = 38
    /// Share of black samples that makes a picture black.
    public static let blackFraction = 0.98
    /// A luma difference above this marks a sample as changed between two pictures.
    public static let changedLuma = 24
    /// Two pictures without frame numbers are the same picture when fewer samples than this share changed.
    public static let changedFraction = 0.001

    /// Frames per second of the source (sets the reference's motion and the freeze threshold).
    public let fps: Int
    /// The source's first frame capture time on the arrival clock (ns), when known.
    public let captureStartNanoseconds: Int64?
    /// One numbered picture in this many is compared with the source.
    public let compareEvery: Int
    private let frameInterval: Int64
    private let freezeThreshold: Int64

    // Counters.
    private var frames = 0
    private var undecodable = 0
    private var numbered = 0
    private var dropped = 0
    private var repeated = 0
    private var skipped = 0
    private var outOfOrder = 0
    private var firstNumber: Int?
    private var lastNumber: Int?
    private var sizes: [String] = []

    // Sequence state.
    private var previousNumber: Int?
    private var previousNumberedPts: Int64 = 0
    /// Pictures without a readable number since the last numbered one.
    private var unnumberedSince = 0

    // Per-frame quality values.
    private var psnrValues: [Double] = []
    private var ssimValues: [Double] = []
    /// `arrival − k·T` per numbered frame with an arrival time (ns).
    private var delayOffsets: [Int64] = []

    // Freeze and black state.
    private var previousLuma: [UInt8] = []
    private var previousSize = (width: 0, height: 0)
    private var shownSincePts: Int64?
    /// Arrival time minus pts of the first picture with an arrival time: puts arrivals on the pts scale.
    private var arrivalOrigin: Int64?
    private var lastPts: Int64?
    private var freezes: [Span] = []
    private var blackStartPts: Int64?
    private var blackSpans: [Span] = []
    private var flashTimes: [Double] = []
    private var previousWasFlash = false

    // Reference redraw.
    private var pattern: TestPatternSource?
    private var reference = I420Image(width: 0, height: 0)

    /// - Parameters:
    ///   - fps: the source's frame rate (the synthetic media's is 30).
    ///   - captureStartNanoseconds: when media time 0 was captured, on the clock of the arrival times
    ///     given to ``add(_:ptsNanoseconds:arrivalNanoseconds:)``; nil makes delay relative.
    ///   - compareEvery: compare one numbered picture in this many with the source (PSNR/SSIM cost
    ///     most of the analysis; a live receiver samples them). Every other check sees every picture.
    public init(fps: Int = 30, captureStartNanoseconds: Int64? = nil, compareEvery: Int = 1) {
        self.fps = max(1, fps)
        self.compareEvery = max(1, compareEvery)
        self.captureStartNanoseconds = captureStartNanoseconds
        frameInterval = 1_000_000_000 / Int64(max(1, fps))
        freezeThreshold = max(3 * frameInterval, frameInterval + 150_000_000)
    }

    /// Forgets the previous picture, so that the next one starts a new sequence: for a receiver that
    /// left frames out on purpose (it fell behind), which must count neither as dropped nor as a freeze.
    public mutating func resynchronize() {
        previousNumber = nil
        unnumberedSince = 0
        previousSize = (0, 0)
        shownSincePts = nil
        arrivalOrigin = nil
    }

    /// A frame that arrived but did not decode: counted, otherwise ignored (the picture on screen stays).
    public mutating func addUndecodable() { undecodable += 1 }

    /// Analyses one decoded picture shown at `ptsNanoseconds` (non-decreasing), which arrived at
    /// `arrivalNanoseconds` when known.
    public mutating func add(_ picture: I420Image, ptsNanoseconds pts: Int64, arrivalNanoseconds: Int64? = nil) {
        guard picture.isConsistent else {
            undecodable += 1
            return
        }
        frames += 1
        let size = "\(picture.width)x\(picture.height)"
        if !sizes.contains(size) { sizes.append(size) }

        let luma = picture.meanLuma
        let isFlash = luma > SyncMarkerAnalyzer.flashLumaThreshold
        if isFlash && !previousWasFlash { flashTimes.append(Double(pts) / 1e6) }
        previousWasFlash = isFlash

        let number = FrameNumberReader.read(picture)
        let samePicture: Bool
        if let number {
            samePicture = number == previousNumber
            sequence(number, pts: pts, arrival: arrivalNanoseconds)
            if (numbered - 1) % compareEvery == 0 { compare(picture, number: number) }
        } else {
            unnumberedSince += 1
            samePicture = looksUnchanged(picture)
        }
        // On screen from its arrival when known (a live receiver), else from its pts (a file).
        var shown = pts
        if let arrivalNanoseconds {
            if arrivalOrigin == nil { arrivalOrigin = arrivalNanoseconds - pts }
            shown = arrivalNanoseconds - (arrivalOrigin ?? 0)
        }
        freezeAndBlack(picture, pts: shown, samePicture: samePicture, black: luma <= 64 && isBlack(picture))
        keepLuma(picture)
    }

    private mutating func sequence(_ number: Int, pts: Int64, arrival: Int64?) {
        numbered += 1
        if firstNumber == nil { firstNumber = number }
        lastNumber = number
        guard let previous = previousNumber else {
            previousNumber = number
            previousNumberedPts = pts
            noteDelay(arrival, pts: pts)
            return
        }
        let step = (number - previous + FrameCode.modulus) % FrameCode.modulus
        if step == 0 {
            repeated += 1
            return
        }
        var advance = Int64(step)
        let elapsed = max(1, ((pts - previousNumberedPts) + frameInterval / 2) / frameInterval)
        if step >= FrameCode.modulus / 2 {
            // Backwards: a looping source restarted, or a frame came out of order. The times decide.
            guard pts - previousNumberedPts >= frameInterval / 2 else {
                outOfOrder += 1
                return
            }
            advance = elapsed
        } else if advance > elapsed {
            // The content ran ahead of the media clock: the sender skipped frames it never sent.
            skipped += Int(advance - elapsed)
            advance = elapsed
        }
        // Pictures shown since the last numbered one, without a readable number, filled some of the gap.
        dropped += max(0, Int(advance - 1) - unnumberedSince)
        unnumberedSince = 0
        previousNumber = number
        previousNumberedPts = pts
        noteDelay(arrival, pts: pts)
    }

    private mutating func noteDelay(_ arrival: Int64?, pts: Int64) {
        guard let arrival else { return }
        delayOffsets.append(arrival - pts)
    }

    private mutating func compare(_ picture: I420Image, number: Int) {
        if pattern?.width != picture.width || pattern?.height != picture.height {
            pattern = TestPatternSource(width: picture.width, height: picture.height, fps: fps)
            reference = I420Image(width: picture.width, height: picture.height)
        }
        // TestPatternSource draws even sizes only: an odd-sized picture has no reference.
        guard let pattern, pattern.width == picture.width, pattern.height == picture.height else { return }
        pattern.render(number, into: &reference)
        guard let psnr = try? PictureQuality.psnr(picture, reference: reference),
            let ssim = try? PictureQuality.ssim(picture, reference: reference)
        else { return }
        psnrValues.append(psnr.y)
        ssimValues.append(ssim)
    }

    /// True when `picture` has the previous picture's size and almost none of its luma changed.
    private func looksUnchanged(_ picture: I420Image) -> Bool {
        guard previousSize == (picture.width, picture.height), !previousLuma.isEmpty else { return false }
        let limit = Int(Double(picture.width * picture.height) * Self.changedFraction)
        var changed = 0
        for row in 0..<picture.height {
            let a = row * picture.strideY
            let b = row * picture.width
            for col in 0..<picture.width
            where abs(Int(picture.y[a + col]) - Int(previousLuma[b + col])) > Self.changedLuma {
                changed += 1
                if changed > limit { return false }
            }
        }
        return true
    }

    private mutating func keepLuma(_ picture: I420Image) {
        if previousSize != (picture.width, picture.height) {
            previousSize = (picture.width, picture.height)
            previousLuma = [UInt8](repeating: 0, count: picture.width * picture.height)
        }
        previousLuma.withUnsafeMutableBufferPointer { dst in
            picture.y.withUnsafeBufferPointer { src in
                for row in 0..<picture.height {
                    (dst.baseAddress! + row * picture.width).update(
                        from: src.baseAddress! + row * picture.strideY, count: picture.width)
                }
            }
        }
    }

    private func isBlack(_ picture: I420Image) -> Bool {
        let needed = Int((Double(picture.width * picture.height) * Self.blackFraction).rounded(.up))
        var dark = 0
        for row in 0..<picture.height {
            let start = row * picture.strideY
            for i in start..<(start + picture.width) where picture.y[i] <= Self.blackLuma { dark += 1 }
        }
        return dark >= needed
    }

    private mutating func freezeAndBlack(_ picture: I420Image, pts: Int64, samePicture: Bool, black: Bool) {
        if !samePicture {
            if let since = shownSincePts { noteFreeze(from: since, to: pts) }
            shownSincePts = pts
        }
        if black {
            if blackStartPts == nil { blackStartPts = pts }
        } else if let start = blackStartPts {
            blackSpans.append(Span(startMs: Double(start) / 1e6, durationMs: Double(pts - start) / 1e6))
            blackStartPts = nil
        }
        lastPts = pts
    }

    private mutating func noteFreeze(from start: Int64, to end: Int64) {
        if end - start >= freezeThreshold {
            freezes.append(Span(startMs: Double(start) / 1e6, durationMs: Double(end - start) / 1e6))
        }
    }

    /// The summary so far. The last picture is taken to stay one frame interval.
    public func report() -> VideoQualityReport {
        var freezes = freezes
        var blackSpans = blackSpans
        if let last = lastPts {
            let end = last + frameInterval
            if let since = shownSincePts, end - since >= freezeThreshold {
                freezes.append(Span(startMs: Double(since) / 1e6, durationMs: Double(end - since) / 1e6))
            }
            if let start = blackStartPts {
                blackSpans.append(Span(startMs: Double(start) / 1e6, durationMs: Double(end - start) / 1e6))
            }
        }
        var delay: VideoQualityReport.Stats?
        if let least = delayOffsets.min() {
            let origin = captureStartNanoseconds ?? least
            delay = .init(delayOffsets.map { Double($0 - origin) / 1e6 })
        }
        return VideoQualityReport(
            fps: fps, frames: frames, undecodable: undecodable, numbered: numbered, firstFrameNumber: firstNumber,
            lastFrameNumber: lastNumber, dropped: dropped, skipped: skipped, repeated: repeated, outOfOrder: outOfOrder,
            sizes: sizes,
            psnr: .init(psnrValues), ssim: .init(ssimValues), freezes: freezes, blackSpans: blackSpans,
            flashTimesMs: flashTimes, delayMs: delay, delayIsRelative: captureStartNanoseconds == nil)
    }
}

/// What ``VideoQualityAnalyzer`` measured over a stream (definitions there).
public struct VideoQualityReport: Sendable, Equatable, Codable {
    /// Mean, minimum and 5th percentile of per-frame values.
    public struct Stats: Sendable, Equatable, Codable {
        /// Values summarised.
        public var count: Int
        public var mean: Double
        public var min: Double
        /// The 5th percentile: the value at rank `⌊0.05·(count − 1)⌋` in ascending order.
        public var p5: Double
        /// The largest value.
        public var max: Double

        /// Summarises `values`; nil when empty.
        public init?(_ values: [Double]) {
            guard !values.isEmpty else { return nil }
            let sorted = values.sorted()
            count = values.count
            mean = values.reduce(0, +) / Double(values.count)
            min = sorted[0]
            p5 = sorted[Int(0.05 * Double(sorted.count - 1))]
            max = sorted[sorted.count - 1]
        }
    }

    /// The source frame rate the analysis assumed.
    public var fps: Int
    /// Pictures analysed.
    public var frames: Int
    /// Frames that did not decode.
    public var undecodable: Int
    /// Pictures whose frame number was read.
    public var numbered: Int
    /// First and last frame numbers read.
    public var firstFrameNumber: Int?
    public var lastFrameNumber: Int?
    /// Source frames sent but never shown.
    public var dropped: Int
    /// Source frames the sender skipped (its content jumped ahead of its clock).
    public var skipped: Int
    /// Pictures repeating the previous frame number.
    public var repeated: Int
    /// Pictures whose number went backwards in time.
    public var outOfOrder: Int
    /// Picture sizes seen, in order of first appearance (`640x360`).
    public var sizes: [String]
    /// Luma PSNR (dB) of numbered pictures against the source.
    public var psnr: Stats?
    /// Luma SSIM of numbered pictures against the source.
    public var ssim: Stats?
    /// Frozen-picture spans.
    public var freezes: [VideoQualityAnalyzer.Span]
    /// Black-picture spans.
    public var blackSpans: [VideoQualityAnalyzer.Span]
    /// Presentation times (ms) where a flash (sync marker) starts.
    public var flashTimesMs: [Double]
    /// Frame delay (ms), when arrival times were given.
    public var delayMs: Stats?
    /// True when ``delayMs`` is relative to the least-delayed frame (no capture start known).
    public var delayIsRelative: Bool

    /// Total frozen time (ms).
    public var frozenMs: Double { freezes.reduce(0) { $0 + $1.durationMs } }
    /// Total black time (ms).
    public var blackMs: Double { blackSpans.reduce(0) { $0 + $1.durationMs } }
}
