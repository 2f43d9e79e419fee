import Dispatch
import Foundation
import Media
import RTC
import RTCWire
import Synchronization

/// The agent's audio outputs: one mixed Opus file of every consumed mic (`--mix-audio FILE`) and each
/// consumed participant's decoded audio pushed to a WebSocket for transcription (`--transcribe URL`).
///
/// Threading: the media loop only hands frames to a ``Slot`` (an append under a lock, no decode); all
/// decoding, mixing, encoding and sending run on the egress's own serial queue, every 20 ms.
///
/// The room timeline starts when the egress starts (``startedAt``): position 0 of the mix, and the
/// origin of every timestamp sent to the transcription socket. A frame's position is its RTP
/// timestamp counted from its track's first frame, placed where that first frame arrived (the same
/// anchoring the per-participant recordings use); a stream whose timestamps stray from its arrivals
/// by more than ``lateLimit`` (a new sender, a clock drift) is anchored again. A frame the agent can
/// place by its sender's clock (``Slot/write(_:arrival:synced:)``: beside the webcam picture of the
/// same instant, from the sender reports) is placed there instead: the stream is anchored on that
/// time, and again whenever its timestamps stray from it by more than ``syncTolerance``. Lost packets (a gap of
/// at most 100 ms) are concealed by Opus PLC; a longer gap (a mute, DTX, a leave) is silence. The mix
/// is made ``mixDelay`` behind real time so that jitter never makes a frame late, and at stop it is
/// made up to the stop, so the file lasts as long as the egress ran.
// Safe: `slots` and `stopped` are guarded by `lock`; the decode and mix state is confined to `queue`.
public final class AudioEgress: @unchecked Sendable {
    /// What to produce.
    public struct Options: Sendable, Equatable {
        /// The mixed file: `.ogg`/`.opus` (Ogg Opus), `.webm`/`.mkv` or `.mp4`; nil mixes nothing.
        public var mixPath: String?
        /// `ws://HOST:PORT/PATH` to push per-speaker PCM to; nil sends nothing.
        public var transcribeURL: String?
        /// The PCM rate sent: 16 000 (libopus decodes at 16 kHz directly) or 48 000.
        public var transcribeRate: Int = 16_000

        public init(mixPath: String? = nil, transcribeURL: String? = nil, transcribeRate: Int = 16_000) {
            self.mixPath = mixPath
            self.transcribeURL = transcribeURL
            self.transcribeRate = transcribeRate
        }

        /// Whether anything is produced.
        public var isEmpty: Bool { mixPath == nil && transcribeURL == nil }
    }

    /// Where the loop hands one track's frames. Loop side: ``write(_:arrival:)``; the queue drains.
    ///
    /// One uncontended `Mutex` per 20 ms audio frame (not per packet; as ``EncodedAudioRing``), into
    /// an array whose capacity is kept: the frame's bytes are not copied, and nothing is allocated
    /// once the array has grown to a tick's worth of frames.
    public final class Slot: Sendable {
        let participantId: String
        let name: String?
        private struct State {
            var pending: [(EncodedFrame, UInt64, UInt64)] = []
            var ended = false
            var dropped = 0
        }
        private let state: Mutex<State>
        /// Frames held at most (10 s of 20 ms frames): a stalled queue costs bounded memory.
        static let limit = 500

        init(participantId: String, name: String?) {
            self.participantId = participantId
            self.name = name
            var s = State()
            s.pending.reserveCapacity(64)
            state = Mutex(s)
        }

        /// Frames dropped because the queue fell more than ``limit`` frames behind.
        var dropped: Int { state.withLock { $0.dropped } }

        /// Media loop: one Opus frame (anything else is ignored) that arrived at `arrival`; `synced`
        /// (0: unknown) is where its sender's clock puts it, both on the monotonic clock in nanoseconds.
        public func write(_ frame: EncodedFrame, arrival: UInt64, synced: UInt64 = 0) {
            guard frame.codec == .opus else { return }
            state.withLock { s in
                if s.ended || s.pending.count >= Self.limit {
                    s.dropped += 1
                } else {
                    s.pending.append((frame, arrival, synced))
                }
            }
        }

        /// Media loop: the track ended; after its last frames the participant stops contributing.
        public func end() { state.withLock { $0.ended = true } }

        /// Queue: takes the frames so far into `buffer` (swapped, so both arrays keep their
        /// capacity) and tells whether the track has ended.
        fileprivate func drain(into buffer: inout [(EncodedFrame, UInt64, UInt64)]) -> Bool {
            buffer.removeAll(keepingCapacity: true)
            return state.withLock { s in
                swap(&s.pending, &buffer)
                return s.ended
            }
        }
    }

    /// A participant's decoding state (queue-confined).
    private final class Speaker {
        let id: String
        var name: String?
        var decoder: OpusDecoder
        /// At the transcription rate when it is not 48 kHz.
        var lowDecoder: OpusDecoder?
        var anchor: (position: Int64, timestamp: UInt32)?
        /// The anchor came from the sender's clock (not from an arrival).
        var synced = false
        var next: Int64?
        var activity = SpeakerActivity()
        /// The track being decoded; a new one (after a leave, a mode change) starts a new anchor.
        var slot: Slot?

        init(id: String, name: String?, lowRate: Int?) throws {
            self.id = id
            self.name = name
            decoder = try OpusDecoder(channels: 1)
            lowDecoder = try lowRate.map { try OpusDecoder(channels: 1, sampleRate: $0) }
        }
    }

    public let options: Options
    /// How far behind real time the mix is made (covers network jitter), in 48 kHz samples: 400 ms.
    public static let mixDelay: Int64 = 400 * 48
    /// A frame whose timestamp puts it this far before its arrival is anchored again: 200 ms.
    public static let lateLimit: Int64 = 200 * 48
    /// A stream placed by its sender's clock is anchored again when its timestamps stray from that
    /// clock by more than this (its mapping changed: the webcam's first sender report, a new clock): 20 ms.
    public static let syncTolerance: Int64 = 20 * 48
    /// The longest gap concealed by PLC (longer ones are silence): 100 ms.
    public static let concealLimit: Int64 = 100 * 48
    /// Wall-clock time of the timeline's origin (ISO 8601).
    public let startedAt: String
    /// Monotonic time (`EventLoop.now()`) of the timeline's origin.
    public let origin: UInt64
    private let queue = DispatchQueue(label: "understudy.audio-egress")
    private let log: @Sendable (String) -> Void
    private let recorder: ParticipantRecorder
    private let lock = NSLock()
    private var slots: [Slot] = []
    private var stopped = false
    // Queue-confined.
    private var timer: DispatchSourceTimer?
    private var mixer = AudioMixer()
    private var encoder: OpusEncoder?
    private var output: Recording?
    /// Takes each mixed block too (the room composite's audio); nil: none.
    private let mixTap: (@Sendable (EncodedFrame, [Int16], Int64) -> Void)?
    private var block = [Int16](repeating: 0, count: AudioMixer.blockSamples)
    /// The frames of one slot being processed (its capacity reused tick after tick).
    private var drained: [(EncodedFrame, UInt64, UInt64)] = []
    private var blocksWritten: Int64 = 0
    private var speakers: [String: Speaker] = [:]
    private var turns: [RecordingManifest.SpeakerTurn] = []
    private var socket: TranscribeSocket?
    private var decodeErrors = 0
    /// Seconds of mix written, for the metrics (written on the queue, read anywhere).
    private let mixedBlocks = Atomic<Int>(0)

    /// Opens the mixed file (when asked for) and starts the timeline and the transcription socket.
    /// `mixTap` (the room composite) is handed every mixed block: its Opus packet, its PCM and its
    /// time in microseconds from ``origin``, on the egress queue (it must not block); with a tap the
    /// mix is made even without a file. Throws when the file cannot be created.
    public init(
        options: Options, recorder: ParticipantRecorder, log: @escaping @Sendable (String) -> Void,
        mixTap: (@Sendable (EncodedFrame, [Int16], Int64) -> Void)? = nil
    ) throws {
        self.options = options
        self.recorder = recorder
        self.log = log
        self.mixTap = mixTap
        if options.mixPath != nil || mixTap != nil {
            encoder = try OpusEncoder(channels: 1, bitrate: 64_000, application: .audio)
        }
        if let path = options.mixPath { output = try Recording(path: path, opusChannels: 1) }
        origin = EventLoop.now()
        startedAt = RecordingManifest.timestamp()
        if let url = options.transcribeURL {
            socket = TranscribeSocket(url: url, queue: queue, log: log) { [weak self] in self?.socketOpened() }
        }
        if let path = output?.path {
            let format = (path as NSString).pathExtension.lowercased()
            recorder.update {
                $0.mixedAudio = RecordingManifest.MixedAudio(
                    path: path, format: format, startedAt: startedAt, sampleRate: AudioMixer.sampleRate,
                    rule: "sum, then a soft knee (tanh) above -6 dBFS: never clips")
                $0.speakers = []
            }
            log("mixing audio -> \(path)")
        }
        socket?.start()
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .milliseconds(20), repeating: .milliseconds(20), leeway: .milliseconds(5))
        timer.setEventHandler { [weak self] in self?.tick(final: false) }
        self.timer = timer
        timer.resume()
    }

    /// Media loop (any thread): a new slot for one consumed audio track of `participantId`.
    public func slot(participantId: String, name: String?) -> Slot {
        let slot = Slot(participantId: participantId, name: name)
        lock.withLock { if !stopped { slots.append(slot) } }
        return slot
    }

    /// Mixes up to now, closes the file, ends the speaker turns and closes the socket. Call once the
    /// loop delivers no more frames. Safe to call twice.
    public func stop() async {
        let first = lock.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            queue.async { [self] in
                timer?.cancel()
                timer = nil
                tick(final: true)
                finish()
                c.resume()
            }
        }
    }

    /// What the agent's `/metrics` shows: seconds of mix written, and the transcription socket's
    /// frames sent, frames dropped while it was down and connections opened (nil without `--transcribe`).
    public var metrics: (mixedSeconds: Double, transcribe: (sent: Int, dropped: Int, connects: Int)?) {
        (Double(mixedBlocks.load(ordering: .relaxed)) * 0.02, socket?.counts)
    }

    // MARK: Queue

    private func samples(at time: UInt64) -> Int64 {
        // Signed: a time before the origin gives a negative position, not a trap.
        Int64(bitPattern: time &- origin) * 48 / 1_000_000
    }

    private func tick(final: Bool) {
        let now = samples(at: EventLoop.now())
        let current = lock.withLock { slots }
        var ended: [Slot] = []
        for slot in current {
            let done = slot.drain(into: &drained)
            for (frame, arrival, synced) in drained { receive(frame, arrival: arrival, synced: synced, slot: slot) }
            if done { ended.append(slot) }
        }
        if !ended.isEmpty {
            lock.withLock { slots.removeAll { s in ended.contains { $0 === s } } }
            for slot in ended { slotEnded(slot, at: now) }
        }
        for speaker in speakers.values {
            if let change = speaker.activity.idle(until: now - Self.lateLimit) { noteActivity(speaker, change) }
        }
        guard let encoder else { return }
        let target = final ? now : now - Self.mixDelay
        while mixer.position + Int64(AudioMixer.blockSamples) <= target {
            mixer.mixBlock(into: &block)
            do {
                let packet = try encoder.encode(pcm: block)
                let frame = EncodedFrame(
                    codec: .opus, data: packet, timestamp: UInt32(truncatingIfNeeded: blocksWritten * 960),
                    isKeyframe: true, duration: 960)
                output?.write(frame, arrival: origin &+ UInt64(blocksWritten) * 20_000_000)
                mixTap?(frame, block, blocksWritten * 20_000)
            } catch {
                decodeErrors += 1
            }
            blocksWritten += 1
        }
        mixedBlocks.store(Int(blocksWritten), ordering: .relaxed)
    }

    private func speaker(for slot: Slot) -> Speaker? {
        if let s = speakers[slot.participantId] { return s }
        let low = socket != nil && options.transcribeRate != 48_000 ? options.transcribeRate : nil
        guard let s = try? Speaker(id: slot.participantId, name: slot.name, lowRate: low) else { return nil }
        speakers[slot.participantId] = s
        return s
    }

    private func receive(_ frame: EncodedFrame, arrival: UInt64, synced: UInt64, slot: Slot) {
        guard let s = speaker(for: slot) else { return }
        if s.slot !== slot {
            // A new track (the first, or one after a leave or a mode change): its timestamps start anew.
            let joining = s.slot == nil
            s.slot = slot
            s.anchor = nil
            s.synced = false
            s.next = nil
            if let name = slot.name { s.name = name }
            if joining { socket?.send(event: event("join", s, at: samples(at: arrival))) }
        }
        guard let count = OpusDecoder.sampleCount(of: frame.data) else { return }
        let arrived = samples(at: arrival)
        // The sender's clock, when known and neither too late to be mixed nor implausibly early.
        let clock = synced == 0 ? nil : samples(at: synced)
        let target = clock.flatMap {
            $0 >= arrived - Self.lateLimit && $0 <= arrived + AudioMixer.maxLeadSamples / 2 ? $0 : nil
        }
        var position: Int64
        if let anchor = s.anchor {
            position = anchor.position + Int64(Int32(bitPattern: frame.timestamp &- anchor.timestamp))
            if let target {
                if !s.synced || abs(position - target) > Self.syncTolerance {
                    position = target
                    s.anchor = (position, frame.timestamp)
                    s.synced = true
                }
            } else if position < arrived - Self.lateLimit || position > arrived + AudioMixer.maxLeadSamples / 2 {
                position = max(arrived, s.next ?? arrived)
                s.anchor = (position, frame.timestamp)
                s.synced = false
            }
        } else {
            position = target ?? arrived
            s.anchor = (position, frame.timestamp)
            s.synced = target != nil
        }
        if let next = s.next {
            // A repeat or a frame overtaken by its successor: already played.
            if position + Int64(count) <= next { return }
            let gap = position - next
            if gap > 0 && gap <= Self.concealLimit {
                var at = next
                while at < position {
                    let chunk = min(position - at, 5760)
                    deliver(s, at: at, packet: nil, lost: Int(chunk))
                    at += chunk
                }
            }
        }
        deliver(s, at: position, packet: frame.data, lost: count)
        s.next = position + Int64(count)
    }

    /// Decodes one packet (nil: conceals `lost` samples) into the mix, the speaker's activity and the socket.
    private func deliver(_ s: Speaker, at position: Int64, packet: [UInt8]?, lost: Int) {
        guard let pcm = try? s.decoder.decode(packet, lostSamples: lost) else {
            decodeErrors += 1
            return
        }
        if encoder != nil { mixer.write(source: s.id, at: position, pcm) }
        let level = pcm.withUnsafeBufferPointer { AudioMixer.levelDBFS($0) }
        if let change = s.activity.frame(at: position, samples: pcm.count, level: level) { noteActivity(s, change) }
        guard let socket else { return }
        let rate = options.transcribeRate
        let out: [Int16]
        if let low = s.lowDecoder {
            guard let pcm = try? low.decode(packet, lostSamples: lost * rate / 48_000) else { return }
            out = pcm
        } else {
            out = pcm
        }
        guard position >= 0 else { return }
        guard socket.isConnected else { return socket.dropFrame() }
        socket.send(
            binary: SpeakerPCMFrame(
                participantId: s.id, timestampMs: UInt64(position / 48), sampleRate: UInt32(rate), samples: out
            ).encoded())
    }

    private func slotEnded(_ slot: Slot, at now: Int64) {
        guard let s = speakers[slot.participantId], s.slot === slot else { return }
        s.slot = nil
        if let change = s.activity.finish() { noteActivity(s, change) }
        socket?.send(event: event("leave", s, at: s.next ?? now))
        // What it wrote is still mixed (the mixer keeps it); a rejoin gets a new decoder.
        speakers[s.id] = nil
    }

    private func noteActivity(_ s: Speaker, _ change: SpeakerActivity.Change) {
        switch change {
        case .started(let at):
            var e = event("speaking", s, at: at)
            e["speaking"] = true
            socket?.send(event: e)
        case .stopped(let start, let end):
            var e = event("speaking", s, at: end)
            e["speaking"] = false
            socket?.send(event: e)
            let turn = RecordingManifest.SpeakerTurn(
                participantId: s.id, start: Double(start) / 48_000, end: Double(end) / 48_000)
            turns.append(turn)
            recorder.update { $0.speakers = ($0.speakers ?? []) + [turn] }
        }
    }

    private func event(_ type: String, _ s: Speaker, at position: Int64) -> [String: Any] {
        var e: [String: Any] = ["type": type, "participantId": s.id, "timestampMs": max(0, position / 48)]
        if let name = s.name { e["name"] = name }
        return e
    }

    /// Queue: a (re)connected socket hears the timeline's origin and who is present.
    private func socketOpened() {
        socket?.send(event: [
            "type": "start", "version": 1, "startedAt": startedAt, "sampleRate": options.transcribeRate,
            "channels": 1, "format": "s16le",
        ])
        let now = samples(at: EventLoop.now())
        for s in speakers.values.sorted(by: { $0.id < $1.id }) where s.slot != nil {
            socket?.send(event: event("join", s, at: now))
            if s.activity.speaking {
                var e = event("speaking", s, at: s.activity.startedAt)
                e["speaking"] = true
                socket?.send(event: e)
            }
        }
    }

    private func finish() {
        let now = samples(at: EventLoop.now())
        for s in speakers.values.sorted(by: { $0.id < $1.id }) {
            if let change = s.activity.finish() { noteActivity(s, change) }
            if s.slot != nil { socket?.send(event: event("leave", s, at: s.next ?? now)) }
        }
        socket?.send(event: ["type": "end", "timestampMs": max(0, now / 48)])
        socket?.close()
        guard let output else { return }
        var failure: String?
        do { try output.close() } catch {
            failure = error.description
            log("cannot finish the mixed audio \(output.path): \(error)")
        }
        let seconds = Double(blocksWritten) * 0.02
        let (late, early) = (mixer.lateSamples, mixer.earlySamples)
        recorder.update {
            $0.mixedAudio?.durationSeconds = seconds
            $0.mixedAudio?.lateSamples = late + early
            $0.mixedAudio?.error = failure ?? output.diskError?.description
            $0.mixedAudio?.complete = failure == nil && output.diskError == nil
        }
        log("mixed audio: \(String(format: "%.2f", seconds)) s -> \(output.path)")
    }
}
