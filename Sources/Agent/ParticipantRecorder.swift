import Foundation
import Media
import RTCWire

/// The recordings of one participant core (room agent, Janus agent, scenario participant): names and
/// opens each participant's files and keeps ``RecordingManifest`` beside them.
///
/// Threading: every file operation (creating the directory, the exclusive create, the container's
/// open, the manifest's write) runs on the recorder's own serial queue, never on the caller's thread:
/// the media loop only asks, with ``slot(_:name:display:)``, and then writes frames to the
/// ``Slot``, which holds them until the file is open. The manifest is kept under a lock and written
/// from the queue, coalesced.
// Safe: hooks, slots and the manifest are guarded by `lock`; files are opened and written on `queue`.
public final class ParticipantRecorder: @unchecked Sendable {
    /// One recorded file: a participant's WebM (`kind` nil) or one kind of its media.
    public struct Key: Hashable, Sendable {
        public var participantId: String
        public var kind: MediaKind?

        public init(participantId: String, kind: MediaKind?) {
            self.participantId = participantId
            self.kind = kind
        }
    }

    /// Who hears of what happens to the files (called on the recorder's queue, or the disk writer's
    /// thread for ``written``). Set once, before the first slot (``observe(_:)``).
    public struct Hooks: Sendable {
        /// A file was opened (recorder queue).
        public var opened: @Sendable (Key, String) -> Void = { _, _ in }
        /// A file could not be opened (recorder queue); the slot drops its frames.
        public var cannotOpen: @Sendable (Key, any Error) -> Void = { _, _ in }
        /// Frames reached a file (disk writer thread).
        public var written: @Sendable (RecordedFrames) -> Void = { _ in }
        /// A file failed while written (recorder queue), holding these frames; it gets no more.
        public var diskFailed: @Sendable (Key, MediaError, RecordedFrames) -> Void = { _, _, _ in }
        /// A file could not be finished at close.
        public var closeFailed: @Sendable (Key, RecordingError) -> Void = { _, _ in }
        /// Last changes before each manifest write (recorder queue, no recorder lock held): fields the
        /// owner derives from live state (the agent's mode, the stage).
        public var beforeManifestWrite: @Sendable (inout RecordingManifest) -> Void = { _ in }

        public init() {}
    }

    /// Where a track's frames go: on the media loop's thread, which owns the fields below the lock.
    /// Frames wait in memory while the recorder's queue opens the file (milliseconds; at most
    /// ``bufferLimit`` frames, the rest dropped and counted).
    // Safe: `opened`, `failed` and `closed` are guarded by `lock`; the rest is the media loop's only.
    public final class Slot: @unchecked Sendable {
        /// Frames held while the file opens; above this many, frames are dropped.
        public static let bufferLimit = 2000
        public let key: Key
        private unowned let recorder: ParticipantRecorder
        private let lock = NSLock()
        /// Guarded by `lock`: set by the queue once the file is open, or once it cannot be.
        private var opened: Recording?
        private var failed = false
        private var closed = false
        // Loop-confined (or the closer's, once the loop delivers no more frames).
        private var recording: Recording?
        private var waiting: [(EncodedFrame, UInt64)] = []
        private var codecNoted = false
        /// Frames dropped while the file was opening (buffer full, or the open failed).
        public private(set) var droppedBeforeOpen = 0

        init(key: Key, recorder: ParticipantRecorder) {
            self.key = key
            self.recorder = recorder
        }

        /// Media loop: writes `frame`, or holds it until the file is open.
        public func write(_ frame: EncodedFrame, arrival: UInt64) {
            if let recording {
                put(recording, frame, arrival)
                return
            }
            let (rec, gone) = lock.withLock { (opened, failed || closed) }
            if let rec {
                recording = rec
                flushWaiting(into: rec)
                put(rec, frame, arrival)
            } else if gone || waiting.count >= Self.bufferLimit {
                droppedBeforeOpen += 1
            } else {
                if waiting.isEmpty { waiting.reserveCapacity(64) }
                waiting.append((frame, arrival))
            }
        }

        private func flushWaiting(into rec: Recording) {
            for (frame, arrival) in waiting { put(rec, frame, arrival) }
            waiting = []
        }

        private func put(_ rec: Recording, _ frame: EncodedFrame, _ arrival: UInt64) {
            if codecNoted || frame.codec.kind != .video { return rec.write(frame, arrival: arrival) }
            let path = rec.path
            rec.write(frame, arrival: arrival)
            if let codec = rec.videoCodec {
                codecNoted = true
                recorder.codecKnown(key, previousPath: path, path: rec.path, codec: codec)
            }
        }

        /// Queue: the file is open (nil: it cannot be).
        fileprivate func settle(_ rec: Recording?) {
            lock.withLock {
                opened = rec
                failed = rec == nil
            }
        }

        /// The closer, once the loop delivers no more frames: writes what waited and closes the file.
        fileprivate func close() -> Recording? {
            let rec = lock.withLock { () -> Recording? in
                if closed { return nil }
                closed = true
                return opened
            }
            if let rec { flushWaiting(into: rec) }
            waiting = []
            return rec
        }

        var isClosed: Bool { lock.withLock { closed } }

        /// The file, once open.
        var openRecording: Recording? { lock.withLock { opened } }
    }

    /// The directory (nil: nothing is recorded, the manifest is kept in memory only).
    public let directory: String?
    public let format: RoomAgent.RecordFormat
    /// Where `manifest.json` goes (nil: none is written).
    public let manifestPath: String?
    private let log: @Sendable (String) -> Void
    /// Every file operation runs here (internal: tests hold it to show the caller never waits for it).
    let queue = DispatchQueue(label: "understudy.participant-recorder")
    /// Marks ``queue`` (tests check where the files were opened).
    static let queueKey = DispatchSpecificKey<ObjectIdentifier>()
    private let lock = NSLock()
    private var hooks = Hooks()
    private var slots: [Key: Slot] = [:]
    private var _manifest: RecordingManifest
    private var writeScheduled = false

    /// - Parameters:
    ///   - directory: where the files go (created when the first one opens); nil records nothing.
    ///   - writesManifest: whether `manifest.json` is written there.
    ///   - manifest: the manifest to start from.
    public init(
        directory: String?, format: RoomAgent.RecordFormat, writesManifest: Bool, manifest: RecordingManifest,
        log: @escaping @Sendable (String) -> Void
    ) {
        self.directory = directory
        self.format = format
        manifestPath =
            writesManifest ? directory.map { ($0 as NSString).appendingPathComponent("manifest.json") } : nil
        _manifest = manifest
        self.log = log
        queue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(queue))
    }

    /// Sets who hears of the files; call before the first ``slot(_:name:display:)``.
    public func observe(_ hooks: Hooks) { lock.withLock { self.hooks = hooks } }

    /// The manifest as it stands.
    public var manifest: RecordingManifest { lock.withLock { _manifest } }

    /// Changes the manifest and writes it (soon, from the recorder's queue).
    public func update(_ change: (inout RecordingManifest) -> Void) {
        lock.withLock { change(&_manifest) }
        scheduleManifestWrite()
    }

    /// The key a track of `kind` records under in this recorder's format.
    public func key(participantId: String, kind: MediaKind) -> Key {
        Key(participantId: participantId, kind: format == .oggIVF ? kind : nil)
    }

    /// Any thread (the media loop): the slot for `key`, its file opened on the recorder's queue the
    /// first time; nil when not recording. `name` is escaped into the file name
    /// (``RecordingFiles/create(in:for:ext:)``); `display` goes into the manifest.
    public func slot(_ key: Key, name: String, display: String? = nil) -> Slot? {
        guard let directory else { return nil }
        let (slot, isNew) = lock.withLock { () -> (Slot, Bool) in
            // A closed slot (the participant left, a Janus feed was unpublished) gets a new file.
            if let existing = slots[key], !existing.isClosed { return (existing, false) }
            let slot = Slot(key: key, recorder: self)
            slots[key] = slot
            return (slot, true)
        }
        if isNew { queue.async { self.open(slot, in: directory, name: name, display: display) } }
        return slot
    }

    /// Recorder queue: opens `slot`'s file.
    private func open(_ slot: Slot, in directory: String, name: String, display: String?) {
        let key = slot.key
        let ext: String
        switch key.kind {
        case nil: ext = format == .mp4 ? "mp4" : "webm"
        case .audio?: ext = "ogg"
        case .video?: ext = "ivf"
        }
        let hooks = lock.withLock { self.hooks }
        let rec: Recording
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            rec = try Recording(path: RecordingFiles.create(in: directory, for: name, ext: ext))
        } catch {
            slot.settle(nil)
            log("cannot record \(key.participantId): \(error)")
            hooks.cannotOpen(key, error)
            return
        }
        let path = rec.path
        // What reached the file is counted by the disk writer, and a write error is reported when
        // it happens, not at close (issue 31 item 16), from this queue: the disk thread never waits
        // for a lock held by whoever waits in `close()` for it.
        rec.observeDisk(
            DiskEvents(
                written: hooks.written,
                failed: { [weak self] error, inFile in
                    guard let self else { return }
                    queue.async { self.diskFailed(key, path: path, error: error, inFile: inFile) }
                }))
        update {
            $0.files.append(
                RecordingManifest.File(
                    participantId: key.participantId, display: display, path: path, format: ext,
                    startedAt: RecordingManifest.timestamp(),
                    kinds: key.kind.map { [$0.rawValue] } ?? ["audio", "video"],
                    // Opus for audio at once; the video codec at the first keyframe.
                    audioCodec: key.kind == .video ? nil : "opus"))
        }
        slot.settle(rec)
        log("recording \(key.participantId)\(display.map { " (\($0))" } ?? "") -> \(path)")
        hooks.opened(key, path)
    }

    private func diskFailed(_ key: Key, path: String, error: MediaError, inFile: RecordedFrames) {
        log(
            "recording of \(key.participantId) failed: \(error); \(path) holds \(inFile.video) video, \(inFile.audio) audio frames and gets no more"
        )
        update {
            guard let i = $0.files.firstIndex(where: { $0.path == path }) else { return }
            $0.files[i].error = error.description
            $0.files[i].failedAt = RecordingManifest.timestamp()
            $0.files[i].videoFrames = inFile.video
            $0.files[i].audioFrames = inFile.audio
        }
        lock.withLock { hooks }.diskFailed(key, error, inFile)
    }

    /// Media loop: a file's video codec is known, and an H.264 file got its `.mkv` name.
    fileprivate func codecKnown(_ key: Key, previousPath: String, path: String, codec: MediaCodec) {
        if path != previousPath { log("recording \(previousPath) holds H.264 -> \(path)") }
        // The file's video starts here (its first key frame), later than the file opens (with the
        // first audio frame): what a publisher sent before this cannot be in the file.
        log("recording \(key.participantId): \(codec.rawValue) video from its first key frame")
        queue.async {
            self.update {
                guard let i = $0.files.firstIndex(where: { $0.path == previousPath }) else { return }
                $0.files[i].path = path
                if path != previousPath { $0.files[i].format = "mkv" }
                $0.files[i].videoCodec = codec.rawValue
            }
        }
    }

    /// The open files by key.
    public var recordings: [Key: Recording] {
        lock.withLock { slots.compactMapValues(\.openRecording) }
    }

    /// The open file of `key`.
    public func recording(_ key: Key) -> Recording? { lock.withLock { slots[key] }?.openRecording }

    /// Closes the files of `participantId` (every participant: nil) once the media loop delivers no
    /// more of their frames: writes what waited, finishes each file and puts what it holds in the
    /// manifest. Waits for files still opening. Returns the closed files.
    @discardableResult
    public func close(participantId: String? = nil) async -> [Key: Recording] {
        // Opens queued before now finish first.
        await onQueue {}
        // Closed slots stay listed (their paths and counts are still asked for); they take no frames.
        let closing = lock.withLock { slots.filter { participantId == nil || $0.key.participantId == participantId } }
        var closed: [Key: Recording] = [:]
        let hooks = lock.withLock { self.hooks }
        for (key, slot) in closing {
            guard let rec = slot.close() else { continue }
            do { try rec.close() } catch {
                log("closing recording of \(key.participantId) failed: \(error)")
                hooks.closeFailed(key, error)
            }
            closed[key] = rec
        }
        update { m in
            for rec in closed.values {
                guard let i = m.files.firstIndex(where: { $0.path == rec.path }) else { continue }
                // What the file holds, not what was received.
                m.files[i].videoFrames = rec.videoFrames
                m.files[i].audioFrames = rec.audioFrames
                m.files[i].droppedFrames = rec.droppedFrames
                m.files[i].framesNotWritten = rec.framesNotWritten
                if let failure = rec.diskError { m.files[i].error = failure.description }
                m.files[i].complete = rec.diskError == nil
            }
        }
        for (key, rec) in closed.sorted(by: { $0.value.path < $1.value.path }) {
            log(
                "recorded \(key.participantId): \(rec.videoFrames) video, \(rec.audioFrames) audio frames -> \(rec.path)"
            )
        }
        return closed
    }

    /// Waits until the manifest, as it stands now, is on disk.
    public func flush() async {
        scheduleManifestWrite()
        await onQueue {}
    }

    private func onQueue(_ work: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            queue.async {
                work()
                c.resume()
            }
        }
    }

    private func scheduleManifestWrite() {
        guard manifestPath != nil else { return }
        let first = lock.withLock { () -> Bool in
            defer { writeScheduled = true }
            return !writeScheduled
        }
        if first { queue.async { self.writeManifest() } }
    }

    /// Recorder queue: writes the manifest atomically (a reader never sees half a file); a failure is
    /// logged, not thrown (the recordings go on).
    private func writeManifest() {
        guard let manifestPath else { return }
        var (manifest, hooks) = lock.withLock { () -> (RecordingManifest, Hooks) in
            writeScheduled = false
            return (_manifest, self.hooks)
        }
        hooks.beforeManifestWrite(&manifest)
        do {
            try manifest.encoded().write(to: URL(fileURLWithPath: manifestPath), options: .atomic)
        } catch {
            log("cannot write manifest: \(error)")
        }
    }
}
