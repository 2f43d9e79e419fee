#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads a whole file into memory (source files are small: seconds of encoded media).
func readWholeFile(_ path: String) throws -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw MediaError.cannotOpen(path: path, errno: errno) }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw MediaError.malformedFile(path: path, reason: "read failed: errno \(errno)")
        }
        if n == 0 { break }
        out.append(contentsOf: chunk[0..<n])
    }
    return out
}

/// ``readWholeFile(_:)`` for a reader with errors of its own: a file that cannot be opened is
/// `cannotOpen(errno)`, and one that cannot be read `cannotOpen(0)`.
func readWholeFile<E: Error>(_ path: String, cannotOpen: (Int32) -> E) throws(E) -> [UInt8] {
    do {
        return try readWholeFile(path)
    } catch let MediaError.cannotOpen(_, errno) {
        throw cannotOpen(errno)
    } catch {
        throw cannotOpen(0)
    }
}

/// Little-endian readers that return nil instead of trapping when out of range.
extension Array where Element == UInt8 {
    func le16(_ at: Int) -> UInt16? {
        guard at >= 0, at <= count - 2 else { return nil }
        return UInt16(self[at]) | UInt16(self[at + 1]) << 8
    }
    func le32(_ at: Int) -> UInt32? {
        guard let lo = le16(at), let hi = le16(at + 2) else { return nil }
        return UInt32(lo) | UInt32(hi) << 16
    }
    func le64(_ at: Int) -> UInt64? {
        guard let lo = le32(at), let hi = le32(at + 4) else { return nil }
        return UInt64(lo) | UInt64(hi) << 32
    }
    func hasBytes(_ at: Int, _ expected: [UInt8]) -> Bool {
        guard at >= 0, at <= count - expected.count else { return false }
        return self[at..<(at + expected.count)].elementsEqual(expected)
    }
}
