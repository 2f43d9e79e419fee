import Foundation
public import RTCWire
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A thread that does the recorders' disk writes, so that a slow disk never stalls a packet loop.
///
/// The writers (`WebMWriter`, `OggOpusWriter`, `IVFWriter`) build their bytes on the caller's thread
/// and hand each finished chunk (a WebM cluster, an Ogg page, an IVF frame) to this thread through a
/// queue, in order per file; patches of earlier bytes and the final close go through the same queue.
/// The queue is bounded by its users: ``FileSink/backlogBytes`` says how much of a file is still
/// waiting, and `Recording` stops feeding a file whose backlog passes its limit (see
/// `Recording.backlogLimit`). Chunk buffers are recycled, so the steady state allocates nothing.
///
/// One shared writer (``shared``) serves the whole process by default.
// Safe: jobs reach its writer thread through its queue; files' shared counters are locked (FileTarget).
public final class DiskWriter: @unchecked Sendable {
    /// The process-wide writer thread.
    public static let shared = DiskWriter(name: "understudy-disk")

    /// A writer without a thread: every write happens at once on the caller's thread. For a process
    /// that cannot have threads (a forked child) or a tool that writes one file and exits.
    public static let inline = DiskWriter()

    enum Operation {
        /// Bytes to append, and the frames whose every byte they complete (counted once written).
        case append(FileTarget, [UInt8], RecordedFrames)
        case patch(FileTarget, Int64, [UInt8])
        case close(FileTarget, DispatchSemaphore?)
        /// Signals once everything queued before it is done.
        case barrier(DispatchSemaphore)
        /// Any other file work, run in its turn (``submit(_:)``).
        case job(@Sendable () -> Void)
    }

    private let threaded: Bool

    private let condition = NSCondition()
    // Guarded by `condition`.
    private var operations: [Operation] = []
    private var head = 0
    private var freeBuffers: [[UInt8]] = []
    /// Time the writer waits before each write, in nanoseconds: a deliberately slow disk for tests.
    private let delayPerWrite: UInt64
    /// A file size past which writes fail as with RLIMIT_FSIZE (EFBIG): a full disk for tests.
    private let fileSizeLimit: Int64?

    /// Starts a writer thread. `delayPerWrite` (nanoseconds) makes every write that much slower, and
    /// `fileSizeLimit` makes writes past that many bytes of a file fail (EFBIG, as a file size limit
    /// does); both exist to test what a slow or full disk does, and are off otherwise.
    public init(name: String, delayPerWrite: UInt64 = 0, fileSizeLimit: Int64? = nil) {
        self.delayPerWrite = delayPerWrite
        self.fileSizeLimit = fileSizeLimit
        threaded = true
        operations.reserveCapacity(256)
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    private init() {
        delayPerWrite = 0
        fileSizeLimit = nil
        threaded = false
    }

    /// Operations queued and not yet done (all files).
    public var queuedOperations: Int { condition.withLock { operations.count - head } }

    func enqueue(_ operation: Operation) {
        guard threaded else { return perform(operation) }
        condition.withLock {
            operations.append(operation)
            condition.signal()
        }
    }

    /// Runs `job` on the writer thread once everything queued before it is done: for writers whose
    /// files are not one append-only stream (HLS segments, playlists replaced by a rename). The job
    /// counts as a write for the slow-disk delay. Jobs must not wait for this writer.
    public func submit(_ job: @escaping @Sendable () -> Void) { enqueue(.job(job)) }

    /// Waits until everything queued so far is done (at once for ``inline``).
    public func waitForQueued() {
        guard threaded else { return }
        let done = DispatchSemaphore(value: 0)
        enqueue(.barrier(done))
        done.wait()
    }

    /// An empty buffer with capacity, taken from the ones the thread has finished with.
    func recycledBuffer() -> [UInt8] {
        condition.withLock { freeBuffers.popLast() }
            ?? {
                var b: [UInt8] = []
                b.reserveCapacity(1 << 16)
                return b
            }()
    }

    private func run() {
        while true {
            condition.lock()
            while head == operations.count { condition.wait() }
            let operation = operations[head]
            head += 1
            if head == operations.count || head >= 1024 {
                // Compact: keep the array small without shifting on every take.
                operations.removeFirst(head)
                head = 0
            }
            condition.unlock()
            perform(operation)
        }
    }

    private func perform(_ operation: Operation) {
        if delayPerWrite > 0 {
            switch operation {
            case .append, .job: usleep(UInt32(min(delayPerWrite / 1000, UInt64(UInt32.max))))
            default: break
            }
        }
        switch operation {
        case .append(let target, var bytes, let frames):
            target.append(bytes, frames: frames, sizeLimit: fileSizeLimit)
            bytes.removeAll(keepingCapacity: true)
            let buffer = bytes
            condition.withLock { if freeBuffers.count < 64 { freeBuffers.append(buffer) } }
        case .patch(let target, let offset, let bytes):
            target.patch(at: offset, bytes)
        case .close(let target, let done):
            target.close()
            done?.signal()
        case .barrier(let done):
            done.signal()
        case .job(let job):
            job()
        }
    }
}

/// Frames counted by a recorder: how many of each kind, keyframes, and their payload bytes.
public struct RecordedFrames: Sendable, Equatable {
    /// Video frames.
    public var video = 0
    /// Audio frames.
    public var audio = 0
    /// Video keyframes (also counted in ``video``).
    public var keyframes = 0
    /// Payload bytes of the video frames.
    public var videoBytes = 0
    /// Payload bytes of the audio frames.
    public var audioBytes = 0

    /// No frames.
    public init() {}

    /// Every frame, both kinds.
    public var total: Int { video + audio }
    var isEmpty: Bool { video == 0 && audio == 0 }

    /// Counts one frame.
    public mutating func add(_ frame: EncodedFrame) {
        if frame.codec.kind == .video {
            video += 1
            videoBytes += frame.data.count
            if frame.isKeyframe { keyframes += 1 }
        } else {
            audio += 1
            audioBytes += frame.data.count
        }
    }

    /// Adds the counts of `rhs` to `lhs`.
    public static func += (lhs: inout RecordedFrames, rhs: RecordedFrames) {
        lhs.video += rhs.video
        lhs.audio += rhs.audio
        lhs.keyframes += rhs.keyframes
        lhs.videoBytes += rhs.videoBytes
        lhs.audioBytes += rhs.audioBytes
    }
}

/// Who hears, on the disk writer thread, what happened to a file: frames that reached it, and the
/// first write error, at once (not at close). The callbacks run on that thread: they must not wait
/// for anything that may itself wait for the disk (a lock held around `Recording.close()`), so hand
/// such work to another queue.
public struct DiskEvents: Sendable {
    /// Frames whose bytes were all written to the file.
    public var written: (@Sendable (RecordedFrames) -> Void)?
    /// The first write error, with the frames the file holds at that moment (it is cut back to the
    /// last whole chunk, so no frame in it is partial). Nothing is written to the file afterwards.
    public var failed: (@Sendable (MediaError, RecordedFrames) -> Void)?

    /// Listeners for either event (or both).
    public init(
        written: (@Sendable (RecordedFrames) -> Void)? = nil,
        failed: (@Sendable (MediaError, RecordedFrames) -> Void)? = nil
    ) {
        self.written = written
        self.failed = failed
    }
}

/// One open file as the writer thread sees it: its descriptor, the bytes done and the first error.
// Safe: shared counters are atomics or guarded by `lock`; the descriptor is the writer thread's.
final class FileTarget: @unchecked Sendable {
    let path: String
    /// Touched by the writer thread only (and by `init`).
    private var fd: Int32
    /// Bytes the writer thread has taken from the queue (written, or given up after an error).
    let completedBytes = Atomic<Int>(0)
    /// Whether a write failed (read per frame by the recorder, without a lock).
    let failed = Atomic<Bool>(false)
    /// Length of the file: the end of the last chunk written whole (writer thread only).
    private var fileLength: Int64 = 0
    private let stateLock = NSLock()
    private var firstError: MediaError?
    private var writtenFrames = RecordedFrames()
    private var events = DiskEvents()

    init(path: String) throws {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw MediaError.cannotOpen(path: path, errno: errno) }
    }

    /// The first write error, if any.
    var error: MediaError? { stateLock.withLock { firstError } }
    /// Frames whose bytes are all in the file.
    var written: RecordedFrames { stateLock.withLock { writtenFrames } }

    /// Sets who hears of written frames and of the first error (see ``DiskEvents``).
    func observe(_ events: DiskEvents) { stateLock.withLock { self.events = events } }

    private func fail(_ e: MediaError) {
        let (report, frames) = stateLock.withLock {
            () -> ((@Sendable (MediaError, RecordedFrames) -> Void)?, RecordedFrames) in
            guard firstError == nil else { return (nil, writtenFrames) }
            firstError = e
            return (events.failed, writtenFrames)
        }
        failed.store(true, ordering: .releasing)
        report?(e, frames)
    }

    /// Appends `bytes`, which complete `frames`. A write that fails (a full disk, a file size limit)
    /// cuts the file back to the end of the last whole chunk, so the file never holds a partial
    /// frame, and the frames of this chunk are not counted.
    func append(_ bytes: [UInt8], frames: RecordedFrames, sizeLimit: Int64? = nil) {
        defer { completedBytes.add(bytes.count, ordering: .releasing) }
        guard fd >= 0, !failed.load(ordering: .acquiring) else { return }
        var done = 0
        while done < bytes.count {
            var length = bytes.count - done
            if let sizeLimit {
                // The test seam: behave as write(2) under RLIMIT_FSIZE (part, then EFBIG).
                let room = Int(max(0, sizeLimit - fileLength - Int64(done)))
                guard room > 0 else { return failWrite(EFBIG) }
                length = min(length, room)
            }
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, length) }
            if n < 0 {
                if errno == EINTR { continue }
                return failWrite(errno)
            }
            done += n
        }
        fileLength += Int64(bytes.count)
        guard !frames.isEmpty else { return }
        let report = stateLock.withLock { () -> (@Sendable (RecordedFrames) -> Void)? in
            writtenFrames += frames
            return events.written
        }
        report?(frames)
    }

    /// A write failed with `code`: drop the part of the chunk that got in, then report.
    private func failWrite(_ code: Int32) {
        if ftruncate(fd, off_t(fileLength)) == 0 { _ = lseek(fd, off_t(fileLength), SEEK_SET) }
        fail(.writeFailed(path: path, errno: code))
    }

    func patch(at offset: Int64, _ bytes: [UInt8]) {
        guard fd >= 0, !failed.load(ordering: .acquiring) else { return }
        let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
        if n != bytes.count { fail(.writeFailed(path: path, errno: n < 0 ? errno : EIO)) }
    }

    func close() {
        guard fd >= 0 else { return }
        _ = Glibc.close(fd)
        fd = -1
    }
}
