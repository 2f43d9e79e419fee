import Dispatch

/// An append-only file with a reusable write buffer and in-place patching of earlier bytes.
///
/// Writers append to ``buffer`` on their own thread; `flush()` hands the buffered bytes to a
/// ``DiskWriter`` thread, which writes them with `write(2)`. Once in the kernel they survive a SIGKILL
/// of the process, which is what makes the recorders' files playable after a crash. Only `close()`
/// waits for the disk (for this file's queued bytes).
final class FileSink {
    let path: String
    private let target: FileTarget
    private let writer: DiskWriter
    private var closed = false
    /// Pending bytes not yet handed over. Writers append here directly to avoid temporary arrays.
    var buffer: [UInt8] = []
    /// Frames whose last byte is in ``buffer``: counted as recorded once the writer thread has
    /// written the whole chunk (writers add to it when they append a frame's last byte).
    var pendingFrames = RecordedFrames()
    /// Bytes handed to the writer thread (done or queued).
    private(set) var flushedLength: Int64 = 0

    /// Absolute file offset of the next appended byte.
    var offset: Int64 { flushedLength + Int64(buffer.count) }

    /// Bytes handed over that the writer thread has not written yet.
    var backlogBytes: Int { Int(flushedLength) - target.completedBytes.load(ordering: .acquiring) }

    /// Frames whose bytes are all in the file (written by the writer thread).
    var writtenFrames: RecordedFrames { target.written }
    /// The first write error of the writer thread, as soon as it happened.
    var writeError: MediaError? { target.error }
    /// Whether a write failed (cheap: no lock).
    var hasFailed: Bool { target.failed.load(ordering: .acquiring) }
    /// Sets who hears of written frames and of the first write error, on the writer thread.
    func observe(_ events: DiskEvents) { target.observe(events) }

    init(path: String, writer: DiskWriter = .shared) throws {
        self.path = path
        self.writer = writer
        target = try FileTarget(path: path)
        buffer.reserveCapacity(1 << 16)
    }

    deinit {
        // Abandoned without close(): keep what is handed over, exactly as a kill would.
        if !closed { writer.enqueue(.close(target, nil)) }
    }

    var isOpen: Bool { !closed }

    func flush() throws {
        guard !closed else { throw MediaError.closed }
        if let e = target.error { throw e }
        guard !buffer.isEmpty else { return }
        flushedLength += Int64(buffer.count)
        let chunk = buffer
        let frames = pendingFrames
        pendingFrames = RecordedFrames()
        buffer = writer.recycledBuffer()
        writer.enqueue(.append(target, chunk, frames))
    }

    /// Overwrites bytes already written at `at` (after everything appended before this call).
    func patch(at: Int64, _ bytes: [UInt8]) throws {
        try flush()
        writer.enqueue(.patch(target, at, bytes))
    }

    /// Hands over the buffered bytes and waits until the writer thread has written them.
    func sync() throws {
        try flush()
        let done = DispatchSemaphore(value: 0)
        writer.enqueue(.barrier(done))
        done.wait()
        if let e = target.error { throw e }
    }

    /// Hands over the rest and waits until the writer thread has written and closed the file.
    func close() throws {
        guard !closed else { return }
        try? flush()
        closed = true
        let done = DispatchSemaphore(value: 0)
        writer.enqueue(.close(target, done))
        done.wait()
        if let e = target.error { throw e }
    }
}

extension Array where Element == UInt8 {
    mutating func appendLE16(_ v: UInt16) {
        append(UInt8(v & 0xFF))
        append(UInt8(v >> 8))
    }
    mutating func appendLE32(_ v: UInt32) {
        appendLE16(UInt16(v & 0xFFFF))
        appendLE16(UInt16(v >> 16))
    }
    mutating func appendLE64(_ v: UInt64) {
        appendLE32(UInt32(v & 0xFFFF_FFFF))
        appendLE32(UInt32(v >> 32))
    }
}
