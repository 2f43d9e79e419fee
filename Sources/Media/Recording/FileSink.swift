#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An append-only file with a reusable write buffer and in-place patching of earlier bytes.
///
/// Bytes reach the kernel on `flush()` with `write(2)`; once there they survive a SIGKILL of
/// the process, which is what makes the recorders' files playable after a crash.
final class FileSink {
    let path: String
    private var fd: Int32
    /// Pending bytes not yet written. Writers append here directly to avoid temporary arrays.
    var buffer: [UInt8] = []
    /// Bytes already handed to the kernel.
    private(set) var flushedLength: Int64 = 0

    /// Absolute file offset of the next appended byte.
    var offset: Int64 { flushedLength + Int64(buffer.count) }

    init(path: String) throws {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw MediaError.cannotOpen(path: path, errno: errno) }
        buffer.reserveCapacity(1 << 16)
    }

    deinit {
        // Abandoned without close(): keep what is on disk, exactly as a kill would.
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    var isOpen: Bool { fd >= 0 }

    func flush() throws {
        guard fd >= 0 else { throw MediaError.closed }
        var done = 0
        while done < buffer.count {
            let n = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw MediaError.writeFailed(path: path, errno: errno)
            }
            done += n
        }
        flushedLength += Int64(done)
        buffer.removeAll(keepingCapacity: true)
    }

    /// Overwrites bytes already written at `at` (flushes first if they are still buffered).
    func patch(at: Int64, _ bytes: [UInt8]) throws {
        guard fd >= 0 else { throw MediaError.closed }
        if at + Int64(bytes.count) > flushedLength { try flush() }
        let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(at)) }
        guard n == bytes.count else { throw MediaError.writeFailed(path: path, errno: errno) }
    }

    func close() throws {
        guard fd >= 0 else { return }
        defer {
            _ = Glibc.close(fd)
            fd = -1
        }
        try flush()
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
