import Foundation
import Media
public import RTCWire
import Synchronization

/// Composes a room's videos into one picture at a fixed rate, encodes it once (H.264 with libx264
/// or VP8 with libvpx) and hands every frame, with the room's mixed audio, to each ``CompositeOutput``.
///
/// Threading: the compositor runs on a thread of its own. The media loop only appends a frame to a
/// participant's ``VideoSlot`` (a bounded hand-off under an uncontended lock; when the compositor
/// falls behind the oldest frame is dropped, counted, and that tile waits for a key frame); the
/// agent's event queue tells who is on stage (``setStage(_:)``) and who speaks
/// (``setActiveSpeaker(_:)``); the audio mixer hands over its encoded blocks (``writeAudio(_:pcm:ptsMicros:)``).
/// Every decode, scale, encode and output write happens on the compositor's thread.
///
/// Timing: frame `n` is composed at `origin + n / fps` (monotonic clock) and stamped `n / fps`
/// seconds, on the audio mix's timeline when both share `origin`. A compositor that falls behind
/// (a busy machine) skips the frames it missed instead of drifting, so the output's duration is the
/// wall time it ran.
///
/// Each tile shows its participant's newest decoded picture, scaled into the tile with its aspect
/// kept; a participant on stage without a picture yet (camera off, audio only, before its first key
/// frame) has a grey tile with the name. Only tiles whose picture changed are drawn again; the
/// canvas, tile buffers and decoders are reused frame after frame. A canvas that did not change
/// since the last frame (every tile a placeholder, a still screen share between its frames) is not
/// encoded again, for at most a second: the outputs' frames then last longer (their times stay
/// on the timeline), and key frames still come every ``Options/keyframeSeconds`` of output time.
// Safe: shared state is in Mutexes and an atomic; tiles, canvas and encoder are the compositor thread's.
public final class Compositor: @unchecked Sendable {
    /// What to compose and how to encode it (`--size`, `--fps`, `--layout`, `--composite-codec`,
    /// `--composite-bitrate`, `--composite-preset`, `--composite-labels`).
    public struct Options: Sendable, Equatable {
        /// Canvas width, even (default 1280).
        public var width = 1280
        /// Canvas height, even (default 720).
        public var height = 720
        /// Frames per second (default 30).
        public var fps = 30
        /// `.h264` (libx264, default) or `.vp8` (libvpx).
        public var codec: MediaCodec = .h264
        /// Target bits per second (default 2.5 Mb/s).
        public var bitrate = 2_500_000
        /// The libx264 speed preset (H.264 only). `superfast` by default: on camera-like tiles it
        /// costs about 45 % less than `veryfast` for 0.17 dB of PSNR at 2.5 Mb/s (docs/measurements.md,
        /// "Composite cost"), and the encoder is most of a composite's cost.
        public var preset = "superfast"
        /// Grid or speaker.
        public var layout: CompositeLayout.Kind = .grid
        /// Whether each tile shows its participant's name.
        public var labels = true
        /// Seconds between key frames (each starts an MP4 fragment, a WebM cluster, an HLS segment).
        public var keyframeSeconds = 2

        /// The defaults.
        public init() {}
    }

    /// One stage member as the agent knows it: its id and display name.
    public struct StageMember: Sendable, Equatable {
        public var id: String
        public var name: String?
        public init(id: String, name: String?) {
            self.id = id
            self.name = name
        }
    }

    /// Counters, readable from any thread.
    public struct Stats: Sendable, Equatable {
        /// Canvas frames encoded and handed to the outputs.
        public var frames = 0
        /// Frame times skipped because the compositor was behind.
        public var skipped = 0
        /// Frame times not encoded because the canvas had not changed (never more than a second in a row).
        public var unchanged = 0
        /// Received frames dropped by a full hand-off (the compositor was behind).
        public var droppedInput = 0
        /// Received frames the decoder refused.
        public var decodeErrors = 0
        /// Audio blocks handed to the outputs.
        public var audioBlocks = 0
        /// The compositor thread's CPU time (ns, `CLOCK_THREAD_CPUTIME_ID`) by stage: decoding the
        /// tiles' frames, drawing the canvas (scale, fill, labels), encoding it, and handing the
        /// encoded frames and the audio to the outputs (muxing, segmenting).
        public var decodeNanos: UInt64 = 0
        public var drawNanos: UInt64 = 0
        public var encodeNanos: UInt64 = 0
        public var outputNanos: UInt64 = 0
        /// Tiles on the canvas, summed over the frames encoded, and how many of those were drawn again
        /// for their frame (a new picture, a relayout); the others had nothing new.
        public var tilesShown = 0
        public var tilesRedrawn = 0
    }

    /// How one output ended.
    public struct OutputResult: Sendable, Equatable {
        public var destination: String
        /// Why it stopped early or could not be finished; nil when complete.
        public var error: String?
    }

    /// Where the media loop hands one consumed video track's frames (one per track).
    public final class VideoSlot: Sendable {
        /// The participant whose track this is.
        public let participantId: String
        /// A screen share (rather than a webcam).
        public let isScreen: Bool
        let requestKeyframe: @Sendable () -> Void
        private struct State {
            var pending: [EncodedFrame] = []
            var ended = false
            var dropped = 0
            /// A frame was dropped since the last drain: the decoder must restart at a key frame.
            var gap = false
        }
        private let state: Mutex<State>
        /// Frames held at most (about a second at 30 fps).
        static let limit = 32

        init(participantId: String, isScreen: Bool, requestKeyframe: @escaping @Sendable () -> Void) {
            self.participantId = participantId
            self.isScreen = isScreen
            self.requestKeyframe = requestKeyframe
            var s = State()
            s.pending.reserveCapacity(Self.limit)
            state = Mutex(s)
        }

        /// Media loop: one received video frame. When full, the oldest is dropped (counted).
        public func write(_ frame: EncodedFrame) {
            state.withLock { s in
                guard !s.ended else { return }
                if s.pending.count >= Self.limit {
                    s.pending.removeFirst()
                    s.dropped += 1
                    s.gap = true
                }
                s.pending.append(frame)
            }
        }

        /// Media loop: the track ended; its tile goes back to the placeholder.
        public func end() { state.withLock { $0.ended = true } }

        /// Compositor thread: takes the frames so far (arrays swapped, capacities kept).
        fileprivate func drain(into buffer: inout [EncodedFrame]) -> (ended: Bool, gap: Bool, dropped: Int) {
            buffer.removeAll(keepingCapacity: true)
            return state.withLock { s in
                swap(&s.pending, &buffer)
                defer {
                    s.gap = false
                    s.dropped = 0
                }
                return (s.ended, s.gap, s.dropped)
            }
        }
    }

    /// One tile's source (compositor thread).
    private final class Source {
        let key: TileKey
        var slot: VideoSlot?
        var decoder: VideoDecoder?
        /// The decoder holds a picture to draw (its own buffer, lent at draw time: no copy).
        var hasPicture = false
        /// A picture was decoded once (the log says so the first time).
        var hadPicture = false
        var changed = true
        var waitingForKeyframe = true
        var lastKeyframeRequest: UInt64 = 0
        init(key: TileKey) { self.key = key }
    }

    private struct TileKey: Hashable {
        var id: String
        var isScreen: Bool
    }

    private struct Shared {
        var slots: [VideoSlot] = []
        var stage: [StageMember] = []
        var speaker: String?
        var version = 0
        var audio: [(EncodedFrame, [Int16], Int64)] = []
        var audioDropped = 0
    }

    public let options: Options
    /// The timeline's origin on the monotonic clock (nanoseconds, `CLOCK_MONOTONIC`).
    public let origin: UInt64
    private let shared = Mutex(Shared())
    private let statsBox = Mutex(Stats())
    private let stopping = Atomic<Bool>(false)
    private let log: @Sendable (String) -> Void
    private let tileSize: @Sendable (String, Int, Int) -> Void
    private var thread: Thread?
    private let done = DispatchSemaphore(value: 0)
    private let stopLock = NSLock()
    private var results: [OutputResult]?

    // Compositor thread only.
    private var outputs: [any CompositeOutput]
    private var failed: [OutputResult] = []
    private let encoder: any VideoEncoder
    /// Tiles drawn since the last frame encoded (counted for ``Stats/tilesRedrawn``).
    private var tilesDrawn = 0
    private let canvas: CompositeCanvas
    private var sources: [TileKey: Source] = [:]
    private var tiles: [CompositeLayout.Tile] = []
    private var names: [String: String] = [:]
    private var seenVersion = -1
    private var sentSizes: [String: (Int, Int)] = [:]
    private var drained: [EncodedFrame] = []
    private var audioDrained: [(EncodedFrame, [Int16], Int64)] = []
    private var liveSlots: [VideoSlot] = []
    /// Output times (µs) of the last frame encoded and of the last key frame.
    private var lastEncoded: Int64?
    private var lastKeyframe: Int64?
    /// Output time between key frames, µs.
    private let keyframeMicros: Int64

    /// Opens the encoder and starts composing onto `outputs`.
    /// - Parameters:
    ///   - origin: the timeline's start (`CLOCK_MONOTONIC` nanoseconds); pass the audio mix's origin
    ///     so both tracks share it. Nil: now.
    ///   - tileSize: called (on the compositor thread; do not block) with a participant's tile size
    ///     when it changes, so the agent can ask for the simulcast layer that fits (`setViewPort`).
    /// - Throws: ``MediaError`` for a size, rate, codec or preset the encoder refuses.
    public init(
        options: Options, outputs: [any CompositeOutput], origin: UInt64? = nil,
        log: @escaping @Sendable (String) -> Void = { _ in },
        tileSize: @escaping @Sendable (String, Int, Int) -> Void = { _, _, _ in }
    ) throws {
        guard (1...60).contains(options.fps) else { throw MediaError.invalidArgument("composite fps \(options.fps)") }
        self.options = options
        self.outputs = outputs
        self.log = log
        self.tileSize = tileSize
        canvas = try CompositeCanvas(width: options.width, height: options.height)
        // An output that cuts or restarts at keyframes (HLS, RTMP) may want them more often.
        let paced = outputs.compactMap { ($0 as? any KeyframePacedOutput)?.keyframeIntervalSeconds }.min()
        let seconds = min(Double(options.keyframeSeconds), paced ?? .infinity)
        let keyInterval = max(1, Int((Double(options.fps) * seconds).rounded()))
        keyframeMicros = Int64(keyInterval) * 1_000_000 / Int64(options.fps)
        switch options.codec {
        case .h264:
            encoder = try H264Encoder(
                width: options.width, height: options.height, fps: options.fps, bitrate: options.bitrate,
                keyframeInterval: keyInterval, preset: options.preset)
        case .vp8:
            encoder = try VideoEncoders.make(
                codec: .vp8, width: options.width, height: options.height, fps: options.fps,
                bitrate: options.bitrate, keyframeInterval: keyInterval)
        default:
            throw MediaError.invalidArgument("composite codec \(options.codec.rawValue) (h264 or vp8)")
        }
        self.origin = origin ?? Self.now()
        // The thread keeps the compositor until stop() ends it.
        let thread = Thread {
            // Named from the thread itself with pthread_setname_np (Foundation's `Thread.name` did not
            // reach `/proc/PID/task/*/comm`): per-thread CPU (the bench's split, `top -H`) finds it by it.
            var name = Array(Self.threadName.utf8.prefix(15)).map { CChar(bitPattern: $0) }
            name.append(0)
            _ = compositorSetThreadName(pthread_self(), name)
            self.run()
        }
        self.thread = thread
        thread.start()
    }

    /// The compositor thread's name (Linux keeps 15 bytes).
    public static let threadName = "understudy-comp"

    /// Monotonic nanoseconds (`CLOCK_MONOTONIC`, the media loop's clock).
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// Any thread: a slot for one consumed video track. `requestKeyframe` asks the sender for a key
    /// frame (after a drop or a decode error; called at most once a second per tile).
    public func videoSlot(
        participantId: String, isScreen: Bool = false, requestKeyframe: @escaping @Sendable () -> Void = {}
    ) -> VideoSlot {
        let slot = VideoSlot(participantId: participantId, isScreen: isScreen, requestKeyframe: requestKeyframe)
        shared.withLock { s in
            s.slots.append(slot)
            s.version += 1
        }
        return slot
    }

    /// Any thread: who is on stage, in the order their tiles go (a screen share of one of them is
    /// added by its slot).
    public func setStage(_ members: [StageMember]) {
        shared.withLock { s in
            guard s.stage != members else { return }
            s.stage = members
            s.version += 1
        }
    }

    /// Any thread: the active speaker (large in the speaker layout).
    public func setActiveSpeaker(_ id: String?) {
        shared.withLock { s in
            guard s.speaker != id else { return }
            s.speaker = id
            s.version += 1
        }
    }

    /// Any thread: one 20 ms block of the mixed audio, stamped on the composite's timeline. Held
    /// (at most 5 s, then the oldest is dropped) until the compositor's next frame.
    public func writeAudio(_ opus: EncodedFrame, pcm: [Int16], ptsMicros: Int64) {
        shared.withLock { s in
            if s.audio.count >= 250 {
                s.audio.removeFirst()
                s.audioDropped += 1
            }
            s.audio.append((opus, pcm, ptsMicros))
        }
    }

    /// The counters so far.
    public var stats: Stats { statsBox.withLock { $0 } }

    /// The current tiles (for logs and tests).
    public var layout: [CompositeLayout.Tile] { tileSnapshot.withLock { $0 } }
    private let tileSnapshot = Mutex<[CompositeLayout.Tile]>([])

    /// Composes up to now, hands the last audio to the outputs, finishes them and stops the thread.
    /// Returns how each output ended. Blocks until done; safe to call twice (the second call
    /// returns the same results).
    @discardableResult
    public func stop() -> [OutputResult] {
        stopLock.lock()
        defer { stopLock.unlock() }
        if let results { return results }
        stopping.store(true, ordering: .releasing)
        done.wait()
        let r = results ?? []
        results = r
        return r
    }

    // MARK: Compositor thread

    private func run() {
        let interval = 1_000_000_000 / UInt64(options.fps)
        var index: UInt64 = 0
        while !stopping.load(ordering: .acquiring) {
            let due = origin &+ index &* interval
            Self.sleep(until: due)
            if stopping.load(ordering: .acquiring) { break }
            tick(pts: Int64(index &* 1_000_000 / UInt64(options.fps)))
            index += 1
            // Behind by more than a frame: skip to the frame due now rather than drift.
            let now = Self.now()
            if now > origin, (now - origin) / interval > index {
                let caughtUp = (now - origin) / interval
                statsBox.withLock { $0.skipped += Int(caughtUp - index) }
                index = caughtUp
            }
        }
        // The last frame, at the stop time, and whatever audio came before it.
        let now = Self.now()
        if now > origin {
            let last = (now - origin) / interval
            if last >= index { tick(pts: Int64(last &* 1_000_000 / UInt64(options.fps)), last: true) }
        }
        flushAudio()
        for output in outputs {
            do { try output.finish() } catch {
                log("composite output \(output.destination): cannot finish: \(error)")
                failed.append(OutputResult(destination: output.destination, error: "\(error)"))
                continue
            }
            failed.append(OutputResult(destination: output.destination, error: nil))
        }
        outputs.removeAll()
        results = failed
        done.signal()
    }

    private static func sleep(until deadline: UInt64) {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }

    /// Composes and encodes the frame at `pts`; `last`: the stop's frame, encoded even when unchanged
    /// so that the video lasts until the stop.
    private func tick(pts: Int64, last: Bool = false) {
        let start = Self.threadCPU()
        flushAudio()
        let afterAudio = Self.threadCPU()
        let (slots, stage, speaker, version) = shared.withLock { s -> ([VideoSlot], [StageMember], String?, Int) in
            (s.version != seenVersion ? s.slots : liveSlots, s.stage, s.speaker, s.version)
        }
        var relayout = false
        if version != seenVersion {
            liveSlots = slots
            seenVersion = version
            relayout = true
        }
        relayout = receiveVideo() || relayout
        if relayout { updateLayout(stage: stage, speaker: speaker) }
        let decoded = Self.threadCPU()
        let drew = draw(all: relayout)
        let drawn = Self.threadCPU()
        let (encodeNanos, outputNanos) = encode(pts: pts, changed: drew || last)
        statsBox.withLock {
            $0.decodeNanos &+= decoded &- afterAudio
            $0.drawNanos &+= drawn &- decoded
            $0.encodeNanos &+= encodeNanos
            $0.outputNanos &+= (afterAudio &- start) &+ outputNanos
        }
    }

    /// This thread's CPU time in nanoseconds (a stage's cost, read a few times per frame).
    static func threadCPU() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    private func flushAudio() {
        audioDrained.removeAll(keepingCapacity: true)
        let dropped = shared.withLock { s -> Int in
            swap(&s.audio, &audioDrained)
            defer { s.audioDropped = 0 }
            return s.audioDropped
        }
        guard !audioDrained.isEmpty else { return }
        for (opus, pcm, pts) in audioDrained {
            pcm.withUnsafeBufferPointer { samples in
                forEachOutput { try $0.writeAudio(opus, pcm: samples, ptsMicros: pts) }
            }
        }
        statsBox.withLock {
            $0.audioBlocks += audioDrained.count
            $0.droppedInput += dropped
        }
    }

    /// Drains every slot into its tile's decoder. Returns whether a slot ended or a new one started
    /// (the layout may change).
    private func receiveVideo() -> Bool {
        var changed = false
        var ended: [VideoSlot] = []
        var dropped = 0
        var errors = 0
        for slot in liveSlots {
            let key = TileKey(id: slot.participantId, isScreen: slot.isScreen)
            let source = sources[key] ?? Source(key: key)
            if sources[key] == nil {
                sources[key] = source
                changed = true
            }
            if source.slot !== slot {
                // A new track (first, or after a re-consume): its stream starts at a key frame.
                source.slot = slot
                source.waitingForKeyframe = true
            }
            let (isEnded, gap, lost) = slot.drain(into: &drained)
            dropped += lost
            if gap { source.waitingForKeyframe = true }
            for frame in drained { errors += decode(frame, into: source) }
            if source.waitingForKeyframe && !drained.isEmpty { askKeyframe(source) }
            if isEnded {
                ended.append(slot)
                if source.slot === slot {
                    source.slot = nil
                    source.hasPicture = false
                    source.changed = true
                    changed = true
                }
            }
        }
        if !ended.isEmpty {
            liveSlots.removeAll { s in ended.contains { $0 === s } }
            shared.withLock { s in s.slots.removeAll { slot in ended.contains { $0 === slot } } }
            // Forget sources with no track left (their decoders too).
            let live = Set(liveSlots.map { TileKey(id: $0.participantId, isScreen: $0.isScreen) })
            for key in sources.keys where !live.contains(key) { sources[key] = nil }
        }
        if dropped > 0 || errors > 0 {
            statsBox.withLock {
                $0.droppedInput += dropped
                $0.decodeErrors += errors
            }
        }
        return changed
    }

    /// Decodes one frame into `source`'s picture; returns 1 for a decode error, else 0.
    private func decode(_ frame: EncodedFrame, into source: Source) -> Int {
        guard frame.codec.kind == .video else { return 0 }
        if source.waitingForKeyframe {
            guard frame.isKeyframe else { return 0 }
            source.waitingForKeyframe = false
        }
        do {
            if source.decoder?.codec != frame.codec {
                source.decoder = try VideoDecoder(codec: frame.codec)
                source.hasPicture = false
            }
            if try source.decoder?.decodeInPlace(frame.data) == true {
                source.hasPicture = true
                source.changed = true
                if !source.hadPicture {
                    source.hadPicture = true
                    log("composite: first picture from \(source.key.id)\(source.key.isScreen ? "(screen)" : "")")
                }
            }
            return 0
        } catch {
            // The canvas keeps the tile's last picture until the next key frame (or a relayout).
            source.waitingForKeyframe = true
            source.decoder = nil
            source.hasPicture = false
            return 1
        }
    }

    private func askKeyframe(_ source: Source) {
        let now = Self.now()
        guard now &- source.lastKeyframeRequest >= 1_000_000_000 else { return }
        source.lastKeyframeRequest = now
        source.slot?.requestKeyframe()
    }

    private func updateLayout(stage: [StageMember], speaker: String?) {
        names.removeAll(keepingCapacity: true)
        var members: [CompositeLayout.Member] = []
        for m in stage {
            if let name = m.name { names[m.id] = name }
            members.append(CompositeLayout.Member(id: m.id))
        }
        // Screen shares of anyone consumed, in the order their tracks came.
        for slot in liveSlots where slot.isScreen {
            let member = CompositeLayout.Member(id: slot.participantId, isScreen: true)
            if !members.contains(member) { members.insert(member, at: 0) }
        }
        let next = CompositeLayout.tiles(
            options.layout, members: members, activeSpeaker: speaker, width: options.width, height: options.height)
        guard next != tiles else { return }
        tiles = next
        tileSnapshot.withLock { $0 = next }
        log(
            "composite layout: "
                + (next.isEmpty
                    ? "empty"
                    : next.map { "\($0.member.id)\($0.member.isScreen ? "(screen)" : "") \($0.rect)" }.joined(
                        separator: ", ")))
        for tile in next where !tile.member.isScreen {
            let size = (tile.rect.width, tile.rect.height)
            if let sent = sentSizes[tile.member.id], sent == size { continue }
            sentSizes[tile.member.id] = size
            tileSize(tile.member.id, size.0, size.1)
        }
    }

    /// Draws the tiles that changed (all of them after a relayout); returns whether any was drawn.
    @discardableResult
    private func draw(all: Bool) -> Bool {
        var drewAny = all
        if all {
            canvas.fill(
                PixelRect(x: 0, y: 0, width: options.width, height: options.height),
                color: CompositeCanvas.black)
        }
        for tile in tiles {
            let source = sources[TileKey(id: tile.member.id, isScreen: tile.member.isScreen)]
            guard all || source?.changed == true else { continue }
            source?.changed = false
            drewAny = true
            tilesDrawn += 1
            // Scaled straight from the decoder's buffer into the canvas.
            var drawn = false
            if let source, source.hasPicture, let decoder = source.decoder {
                drawn = (try? decoder.withPicture { try canvas.draw($0, in: tile.rect) }) != nil
            }
            if !drawn { canvas.fill(tile.rect, color: CompositeCanvas.placeholder) }
            if options.labels {
                let name = names[tile.member.id] ?? tile.member.id
                canvas.label(tile.member.isScreen ? "\(name) (screen)" : name, in: tile.rect)
            }
        }
        // Pictures of sources not on stage are decoded (to keep their reference frames) but not drawn.
        for source in sources.values where source.changed { source.changed = false }
        return drewAny
    }

    /// Encodes the canvas as the frame at `pts`, unless it did not change since the last frame encoded
    /// less than a second ago and no key frame is due (the outputs' previous frame then lasts longer).
    /// Returns the thread CPU time spent encoding and writing to the outputs (ns).
    private func encode(pts: Int64, changed: Bool) -> (encode: UInt64, output: UInt64) {
        // Key frames by output time: frames not encoded do not advance the encoder's own count.
        let halfFrame = 500_000 / Int64(options.fps)
        let keyframeDue = lastKeyframe.map { pts - $0 >= keyframeMicros - halfFrame } ?? false
        if !changed, !keyframeDue, let previous = lastEncoded, pts - previous < 1_000_000 {
            statsBox.withLock { $0.unchanged += 1 }
            return (0, 0)
        }
        if keyframeDue { encoder.forceKeyframe() }
        let start = Self.threadCPU()
        let frames: [EncodedFrame]
        do {
            frames = try encoder.encode(i420: canvas.image)
        } catch {
            log("composite encoder: \(error)")
            return (Self.threadCPU() &- start, 0)
        }
        let redrawn = min(tilesDrawn, tiles.count)
        tilesDrawn = 0
        let encoded = Self.threadCPU()
        lastEncoded = pts
        for frame in frames {
            if frame.isKeyframe { lastKeyframe = pts }
            forEachOutput { try $0.writeVideo(frame, ptsMicros: pts) }
        }
        statsBox.withLock {
            $0.frames += 1
            $0.tilesShown += tiles.count
            $0.tilesRedrawn += redrawn
        }
        return (encoded &- start, Self.threadCPU() &- encoded)
    }

    /// Runs `write` on every output; one that throws is finished and dropped (the others go on).
    private func forEachOutput(_ write: (any CompositeOutput) throws -> Void) {
        var broken: [Int] = []
        for (i, output) in outputs.enumerated() {
            do { try write(output) } catch {
                log("composite output \(output.destination) failed: \(error)")
                try? output.finish()
                failed.append(OutputResult(destination: output.destination, error: "\(error)"))
                broken.append(i)
            }
        }
        for i in broken.reversed() { outputs.remove(at: i) }
    }
}

// Glibc's Swift module leaves out the GNU `pthread_setname_np` (it needs _GNU_SOURCE): bound here as
// RTC's ThreadName.swift binds it (Egress does not depend on RTC).
@_silgen_name("pthread_setname_np")
private func compositorSetThreadName(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32
