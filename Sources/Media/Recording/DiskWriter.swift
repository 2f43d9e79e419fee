import Foundation
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
public final class DiskWriter: @unchecked Sendable {
    /// The process-wide writer thread.
    public static let shared = DiskWriter(name: "understudy-disk")

    /// A writer without a thread: every write happens at once on the caller's thread. For a process
    /// that cannot have threads (a forked child) or a tool that writes one file and exits.
    public static let inline = DiskWriter()

    enum Operation {
        case append(FileTarget, [UInt8])
        case patch(FileTarget, Int64, [UInt8])
        case close(FileTarget, DispatchSemaphore?)
        /// Signals once everything queued before it is done.
        case barrier(DispatchSemaphore)
    }

    private let threaded: Bool

    private let condition = NSCondition()
    // Guarded by `condition`.
    private var operations: [Operation] = []
    private var head = 0
    private var freeBuffers: [[UInt8]] = []
    /// Time the writer waits before each write, in nanoseconds: a deliberately slow disk for tests.
    private let delayPerWrite: UInt64

    /// Starts a writer thread. `delayPerWrite` (nanoseconds) makes every write that much slower; it
    /// exists to test what a slow disk does, and is zero otherwise.
    public init(name: String, delayPerWrite: UInt64 = 0) {
        self.delayPerWrite = delayPerWrite
        threaded = true
        operations.reserveCapacity(256)
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    private init() {
        delayPerWrite = 0
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
        if delayPerWrite > 0, case .append = operation { usleep(UInt32(min(delayPerWrite / 1000, UInt64(UInt32.max)))) }
        switch operation {
        case .append(let target, var bytes):
            target.append(bytes)
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
        }
    }
}

/// One open file as the writer thread sees it: its descriptor, the bytes done and the first error.
final class FileTarget: @unchecked Sendable {
    let path: String
    /// Touched by the writer thread only (and by `init`).
    private var fd: Int32
    /// Bytes the writer thread has appended to the file.
    let completedBytes = Atomic<Int>(0)
    private let errorLock = NSLock()
    private var firstError: MediaError?

    init(path: String) throws {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw MediaError.cannotOpen(path: path, errno: errno) }
    }

    /// The first write error, if any.
    var error: MediaError? { errorLock.withLock { firstError } }

    private func fail(_ e: MediaError) { errorLock.withLock { if firstError == nil { firstError = e } } }

    func append(_ bytes: [UInt8]) {
        defer { completedBytes.add(bytes.count, ordering: .releasing) }
        guard fd >= 0, error == nil else { return }
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                fail(.writeFailed(path: path, errno: errno))
                return
            }
            done += n
        }
    }

    func patch(at offset: Int64, _ bytes: [UInt8]) {
        guard fd >= 0, error == nil else { return }
        let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
        if n != bytes.count { fail(.writeFailed(path: path, errno: errno)) }
    }

    func close() {
        guard fd >= 0 else { return }
        _ = Glibc.close(fd)
        fd = -1
    }
}
