import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Hands memory that the process freed back to the kernel, every ``interval`` seconds: what
/// `understudy serve` runs beside its ``RoomServer`` (a process-wide matter, so not the library's:
/// a test process with many servers does not trim).
///
/// glibc keeps freed memory in its arenas, one per thread that allocated: when a live stream's
/// guests come and go, the buffers of their tracks are freed on the SFU loop, the signalling
/// threads' arenas keep what their requests freed, and the resident size only grows. `malloc_trim`
/// returns the free pages of every arena (measured: an idle server after 150 members left went
/// from 75 MB to 57 MB). It is looked up at run time: Swift's Glibc module does not declare it,
/// and another C library may not have it (then nothing is trimmed).
// Safe: its timer runs on its own serial DispatchQueue; the rest is immutable.
public final class MemoryTrim: @unchecked Sendable {
    /// Seconds between trims: rare enough to cost nothing (a trim walks the arenas in about a
    /// millisecond), often enough that a departure shows in the resident size within a minute.
    public static let interval: Double = 30

    private typealias Trim = @convention(c) (Int) -> Int32
    private static let trim: Trim? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: Trim.self)
    }()

    private let timer: DispatchSourceTimer

    /// Starts trimming on a background queue; ``cancel()`` stops it.
    public init(interval: Double = MemoryTrim.interval) {
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .seconds(1))
        timer.setEventHandler { _ = MemoryTrim.trimNow() }
        timer.resume()
    }

    private typealias SetOption = @convention(c) (Int32, Int32) -> Int32
    private static let setOption: SetOption? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return nil }
        return unsafeBitCast(symbol, to: SetOption.self)
    }()

    /// glibc's `M_ARENA_MAX` (malloc.h), which Swift's Glibc module does not declare.
    private static let arenaMaxOption: Int32 = -8

    /// Caps glibc's malloc arenas at `count` (default: one per core), for a server process: call it
    /// before the threads start. glibc gives each allocating thread an arena, up to eight per core,
    /// and memory freed on a thread other than the one that took it stays in its arena: with a live
    /// stream's guests coming and going, the server's resident size kept rising while its heap in
    /// use did not. `MALLOC_ARENA_MAX` in the environment wins. Returns true when the cap was set.
    @discardableResult
    public static func limitArenas(
        to count: Int = ProcessInfo.processInfo.activeProcessorCount,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> Bool {
        guard environment["MALLOC_ARENA_MAX"] == nil, let setOption else { return false }
        return setOption(arenaMaxOption, Int32(clamping: max(1, count))) == 1
    }

    /// What the C library's allocator holds, in bytes: ``inUse`` by live allocations (mmapped ones
    /// included) and ``arenas``, the size of its arenas (used and free). RSS rising while `inUse`
    /// stays level is fragmentation, not a leak.
    public struct HeapUsage: Sendable, Equatable {
        public var inUse: Int
        public var arenas: Int
    }

    private typealias Info = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
    private static let info: Info? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_info") else { return nil }
        return unsafeBitCast(symbol, to: Info.self)
    }()

    /// The allocator's totals from glibc's `malloc_info` (nil without it). It walks every arena under
    /// its lock: fine for a metrics scrape, not for a hot path.
    public static func heapUsage() -> HeapUsage? {
        guard let info else { return nil }
        var buffer: UnsafeMutablePointer<CChar>?
        var length = 0
        guard let stream = open_memstream(&buffer, &length) else { return nil }
        let written = info(0, stream)
        fclose(stream)
        guard let buffer else { return nil }
        defer { free(buffer) }
        guard written == 0 else { return nil }
        return parseTotals(String(cString: buffer))
    }

    /// The process-wide totals of `malloc_info`'s XML: the elements after the last `</heap>`.
    static func parseTotals(_ xml: String) -> HeapUsage? {
        guard
            let end = xml.range(of: "</heap>", options: .backwards)?.upperBound ?? xml.range(of: "<malloc")?.upperBound
        else { return nil }
        var sizes: [String: Int] = [:]
        for line in xml[end...].split(separator: "\n") {
            guard let kind = attribute("type", in: line), let size = attribute("size", in: line).flatMap(Int.init)
            else { continue }
            let element = line.drop { $0 == " " || $0 == "<" }.prefix { $0 != " " }
            sizes["\(element).\(kind)"] = size
        }
        guard let current = sizes["system.current"], let fast = sizes["total.fast"], let rest = sizes["total.rest"]
        else { return nil }
        return HeapUsage(inUse: max(0, current - fast - rest) + (sizes["total.mmap"] ?? 0), arenas: current)
    }

    private static func attribute(_ name: String, in line: Substring) -> String? {
        guard let start = line.range(of: " \(name)=\"")?.upperBound,
            let close = line[start...].firstIndex(of: "\"")
        else { return nil }
        return String(line[start..<close])
    }

    /// Trims now, on the calling thread; false when this C library has no `malloc_trim` or there was nothing to return.
    @discardableResult
    public static func trimNow() -> Bool { (trim?(0) ?? 0) == 1 }

    /// Stops the timer.
    public func cancel() { timer.cancel() }
}
