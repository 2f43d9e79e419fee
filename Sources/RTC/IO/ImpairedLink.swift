import RTCWire

/// One direction of an ``Impairment`` at work: decides each datagram's fate and holds delayed
/// datagrams in a ring allocated once (on the first held datagram), until ``release(now:_:)`` hands
/// them on. Driven by the caller's clock, so tests run it on a synthetic one. One thread only (the
/// socket's loop).
///
/// Held datagrams sit in arrival order in an entry ring whose bytes live in a byte ring; a datagram
/// released early (reordering) is marked done and its room is reused once the older ones are gone.
public final class ImpairedLink {
    /// What ``admit(_:to:now:)`` decided.
    public enum Verdict: Equatable, Sendable {
        /// Pass it on now, unchanged.
        case pass
        /// Lost (random, burst, a full rate-limiter queue or a full ring).
        case drop
        /// Copied into the ring; ``release(now:_:)`` hands it on later.
        case held
    }

    /// The settings.
    public let settings: LinkImpairment

    /// Datagrams lost at random or in a burst.
    public private(set) var lost: UInt64 = 0
    /// Datagrams dropped because the rate limiter's queue was full.
    public private(set) var queueDrops: UInt64 = 0
    /// Datagrams dropped because the ring was full (more in flight than it holds).
    public private(set) var ringDrops: UInt64 = 0
    /// Extra copies made by duplication.
    public private(set) var duplicated: UInt64 = 0
    /// Datagrams held back to be overtaken.
    public private(set) var reordered: UInt64 = 0
    /// Datagrams waiting in the ring.
    public var pending: Int { count }
    /// When the earliest held datagram is due (`UInt64.max`: none).
    public private(set) var nextRelease: UInt64 = .max

    private var random: SplitMix64
    private var bad = false
    /// Theoretical arrival time of the rate limiter (GCRA): when the bucket is next empty.
    private var bucketTime: UInt64 = 0
    /// Release time of the last datagram that may not be overtaken.
    private var lastRelease: UInt64 = 0
    private let nanosPerByte: Double
    private let bucketNanos: UInt64
    private let queueNanos: UInt64
    private let ordered: Bool

    private struct Entry {
        var release: UInt64
        var offset: Int
        var length: Int
        var address: SocketAddress
        var done: Bool
    }
    private var entries: UnsafeMutablePointer<Entry>?
    private var bytes: UnsafeMutableRawPointer?
    private let entryCapacity: Int
    private let byteCapacity: Int
    private var head = 0
    private var count = 0
    private var readOffset = 0
    private var writeOffset = 0

    /// Creates a link from its settings and seed. `ringBytes` overrides the ring size (tests).
    public init(_ settings: LinkImpairment, seed: UInt64, ringBytes: Int? = nil) {
        self.settings = settings
        random = SplitMix64(seed: seed)
        nanosPerByte = settings.rateKbps > 0 ? 8_000_000 / settings.rateKbps : 0
        bucketNanos = UInt64(Double(max(settings.bucketBytes, 0)) * nanosPerByte)
        queueNanos = UInt64(max(settings.queueMs, 0) * 1_000_000)
        ordered = !settings.jitterReorders && settings.reorder <= 0
        // Room for what can be in flight: the rate over the longest hold when limited, else
        // 2 Mbit/s over it; at least 64 KB, at most 4 MB.
        let bitsPerSecond = settings.rateKbps > 0 ? settings.rateKbps * 1000 : 2_000_000
        let inFlight = bitsPerSecond / 8 * Double(settings.longestHold) / 1e9 * 1.5
        byteCapacity = ringBytes ?? min(max(Int(inFlight) + 16_384, 65_536), 4 << 20)
        entryCapacity = max(256, byteCapacity / 128)
    }

    deinit {
        entries?.deallocate()
        bytes?.deallocate()
    }

    /// Decides the fate of a datagram arriving at `now` (ns). On ``Verdict/held`` its bytes were
    /// copied (with a duplicate, twice) and ``nextRelease`` tells when to call ``release(now:_:)``.
    public func admit(_ datagram: UnsafeRawBufferPointer, to address: SocketAddress, now: UInt64) -> Verdict {
        if settings.loss > 0, random.nextUnit() < settings.loss {
            lost &+= 1
            return .drop
        }
        if let burst = settings.burst {
            bad = bad ? random.nextUnit() >= burst.r : random.nextUnit() < burst.p
            let lossHere = bad ? burst.lossBad : burst.lossGood
            if lossHere > 0, random.nextUnit() < lossHere {
                lost &+= 1
                return .drop
            }
        }
        guard settings.holds else { return .pass }
        let copies = settings.duplicate > 0 && random.nextUnit() < settings.duplicate ? 2 : 1
        var held = false
        for copy in 0..<copies {
            if hold(datagram, to: address, now: now) {
                held = true
                if copy == 1 { duplicated &+= 1 }
            }
        }
        return held ? .held : .drop
    }

    /// Shapes one copy and stores it; false when a queue or the ring is full.
    private func hold(_ datagram: UnsafeRawBufferPointer, to address: SocketAddress, now: UInt64) -> Bool {
        var due = now
        if nanosPerByte > 0 {
            // GCRA as a shaper: leave when the bucket has room, i.e. at bucketTime - depth.
            let start = max(bucketTime, now)
            let leave = start > now &+ bucketNanos ? start - bucketNanos : now
            guard leave - now <= queueNanos else {
                queueDrops &+= 1
                return false
            }
            bucketTime = start &+ UInt64(Double(datagram.count) * nanosPerByte)
            due = leave
        }
        var delay = settings.delayMs
        if settings.jitterMs > 0 { delay += (random.nextUnit() * 2 - 1) * settings.jitterMs }
        due &+= UInt64(max(delay, 0) * 1_000_000)
        var overtaken = false
        if settings.reorder > 0, random.nextUnit() < settings.reorder {
            due &+= UInt64(settings.reorderMs * 1_000_000)
            overtaken = true
        }
        if !overtaken && !settings.jitterReorders {
            due = max(due, lastRelease)
            lastRelease = due
        }
        guard store(datagram, to: address, release: due) else {
            ringDrops &+= 1
            return false
        }
        if overtaken { reordered &+= 1 }
        return true
    }

    private func store(_ datagram: UnsafeRawBufferPointer, to address: SocketAddress, release: UInt64) -> Bool {
        if entries == nil {
            entries = .allocate(capacity: entryCapacity)
            bytes = .allocate(byteCount: byteCapacity, alignment: 16)
        }
        let length = datagram.count
        guard count < entryCapacity, length <= byteCapacity else { return false }
        var offset: Int
        if count == 0 {
            readOffset = 0
            offset = 0
        } else if writeOffset >= readOffset {
            if writeOffset + length <= byteCapacity {
                offset = writeOffset
            } else if length < readOffset {
                offset = 0
            } else {
                return false
            }
        } else if writeOffset + length < readOffset {
            offset = writeOffset
        } else {
            return false
        }
        if length > 0 { (bytes! + offset).copyMemory(from: datagram.baseAddress!, byteCount: length) }
        writeOffset = offset + length
        entries![(head + count) % entryCapacity] = Entry(
            release: release, offset: offset, length: length, address: address, done: false)
        count += 1
        if release < nextRelease { nextRelease = release }
        return true
    }

    /// Hands every held datagram due at `now` to `body` (its bytes may be modified in place but not
    /// kept), in arrival order, and frees their room. Call it again at ``nextRelease``.
    public func release(now: UInt64, _ body: (UnsafeMutableRawBufferPointer, SocketAddress) -> Void) {
        guard now >= nextRelease, let entries, let bytes else { return }
        // `body` may admit more datagrams (a reply): only the entries present now are visited.
        let visiting = count
        for i in 0..<visiting {
            let index = (head + i) % entryCapacity
            if entries[index].done { continue }
            let entry = entries[index]
            if entry.release > now {
                if ordered { break }
                continue
            }
            entries[index].done = true
            body(UnsafeMutableRawBufferPointer(start: bytes + entry.offset, count: entry.length), entry.address)
        }
        while count > 0 && entries[head].done {
            head = (head + 1) % entryCapacity
            count -= 1
        }
        if count == 0 {
            readOffset = 0
            writeOffset = 0
            nextRelease = .max
            return
        }
        readOffset = entries[head].offset
        var earliest = UInt64.max
        for i in 0..<count {
            let entry = entries[(head + i) % entryCapacity]
            if !entry.done && entry.release < earliest { earliest = entry.release }
            if ordered && !entry.done { break }
        }
        nextRelease = earliest
    }
}

/// Both directions of a socket's ``Impairment``. The loop keeps it in its list of links with held
/// datagrams and releases them at their time; one replaced by a new impairment stays there until
/// it has handed on what it holds.
final class SocketImpairment {
    let impairment: Impairment
    /// What the socket receives.
    let down: ImpairedLink?
    /// What the socket sends.
    let up: ImpairedLink?
    weak var socket: UDPSocket?
    /// In the loop's list of links to release.
    var scheduled = false

    init(_ impairment: Impairment, socket: UDPSocket) {
        self.impairment = impairment
        // Each direction its own sequence, both from the one seed.
        down = impairment.down.isNone ? nil : ImpairedLink(impairment.down, seed: impairment.seed)
        up = impairment.up.isNone ? nil : ImpairedLink(impairment.up, seed: impairment.seed ^ 0x5555_AAAA_5555_AAAA)
        self.socket = socket
    }

    var nextRelease: UInt64 { min(down?.nextRelease ?? .max, up?.nextRelease ?? .max) }
}
