import RTCWire

/// Plays the frames of a file in real time by their own timestamps, looping at the end.
///
/// Output timestamps keep increasing across loops and keyframe jumps: each pass continues where the
/// last frame of the previous one ended, and a jump keeps the media clock on the wall clock while the
/// content moves ahead. Confined to the loop thread like the source that owns it.
final class LoopingPlayback {
    let frames: [EncodedFrame]
    /// Start of each frame in clock ticks from the first frame; strictly increasing.
    let starts: [Int64]
    /// Duration of each frame in clock ticks (at least 1).
    let durations: [Int64]
    let clockRate: UInt64
    /// Next frame to send.
    private var index = 0
    /// Output timestamp of frame `i` is `starts[i] + offset`.
    private var offset: Int64 = 0
    /// Completed passes over the file.
    private(set) var loops = 0
    /// Times a keyframe request moved the content forward.
    private(set) var keyframeJumps = 0
    private var keyframeWanted = false

    /// `timesTicks` are the frames' start times (any origin, in `clockRate` ticks); times that do not
    /// increase are nudged forward by one tick so the output is always monotonic.
    init(frames: [EncodedFrame], timesTicks: [Int64], clockRate: UInt64, defaultDuration: Int64) {
        self.frames = frames
        self.clockRate = clockRate
        var starts: [Int64] = []
        starts.reserveCapacity(frames.count)
        let origin = timesTicks.first ?? 0
        for t in timesTicks {
            let relative = t &- origin
            if let previous = starts.last, relative <= previous {
                starts.append(previous + 1)
            } else {
                starts.append(max(0, relative))
            }
        }
        var durations: [Int64] = []
        durations.reserveCapacity(frames.count)
        for i in starts.indices {
            if i + 1 < starts.count {
                durations.append(starts[i + 1] - starts[i])
            } else if let last = frames.last, last.duration > 0 {
                durations.append(Int64(last.duration))
            } else if starts.count > 1 {
                durations.append(max(1, starts[i] - starts[i - 1]))
            } else {
                durations.append(max(1, defaultDuration))
            }
        }
        self.starts = starts
        self.durations = durations
    }

    /// Frames in one pass of the file.
    var count: Int { frames.count }

    /// Asks for the next emitted frame to be a keyframe (video).
    func requestKeyframe() { keyframeWanted = true }

    /// Emits every frame due by `elapsedNanos`, at most 256 per call so a stalled loop catches up
    /// over a few ticks rather than in one burst.
    func pull(elapsedNanos: UInt64, emit: (EncodedFrame) -> Void) {
        guard !frames.isEmpty else { return }
        let product = elapsedNanos.multipliedFullWidth(by: clockRate)
        let elapsedTicks = UInt64(1_000_000_000).dividingFullWidth(product).quotient
        var emitted = 0
        while emitted < 256 {
            if keyframeWanted { jumpToKeyframe() }
            let timestamp = starts[index] &+ offset
            guard timestamp <= Int64(clamping: elapsedTicks) else { return }
            var frame = frames[index]
            frame.timestamp = UInt32(truncatingIfNeeded: timestamp)
            frame.duration = UInt32(clamping: durations[index])
            emit(frame)
            emitted += 1
            if index + 1 < frames.count {
                index += 1
            } else {
                // The next pass starts right where this last frame ends.
                let next = timestamp &+ durations[index]
                index = 0
                offset = next &- starts[0]
                loops += 1
            }
        }
    }

    private func jumpToKeyframe() {
        keyframeWanted = false
        guard !frames[index].isKeyframe else { return }
        let n = frames.count
        for step in 1..<max(1, n) {
            let k = (index + step) % n
            if frames[k].isKeyframe {
                let timestamp = starts[index] &+ offset
                index = k
                offset = timestamp &- starts[k]
                keyframeJumps += 1
                return
            }
        }
    }
}
