import Foundation
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// Something the reactor delivers readiness events to. Only ever called on the reactor thread.
protocol ReactorChannel: AnyObject {
    func handleEvents(_ events: UInt32)
}

/// A single epoll thread that owns non-blocking TCP sockets for the signalling layer.
///
/// Every socket, parser and buffer registered with a reactor is confined to its thread, so none of
/// them take locks. Other threads hand work over with ``execute(_:)``; the only shared state is the
/// pending-work queue, guarded by a lock and signalled through an eventfd. One reactor comfortably
/// drives thousands of mostly-idle WebSocket connections, which a thread per connection would not.
// Safe: the pending-work queue is guarded by a lock (see above); the rest is reactor-thread state.
public final class Reactor: @unchecked Sendable {
    /// A process-wide reactor for client connections, started on first use.
    public static let shared = Reactor(name: "signaling-reactor")

    public let name: String
    private let epollFD: Int32
    private let wakeFD: Int32
    private let lock = NSLock()
    private var pending: [() -> Void] = []
    private var stopping = false
    private var thread: Thread?
    private var threadID: pthread_t?

    // Reactor-thread state.
    private var channels: [Int32: ReactorChannel] = [:]
    private var timers = TimerHeap()
    private var nextTimerID: UInt64 = 1
    /// Scratch buffer every read lands in before a channel copies out what it keeps.
    let readScratch: UnsafeMutableRawBufferPointer

    private static let maxEvents = 256
    private let events: UnsafeMutableRawPointer
    private let finished = DispatchSemaphore(value: 0)

    /// Creates the reactor and starts its thread.
    public init(name: String) {
        self.name = name
        epollFD = sys_epoll_create1(SystemConstants.epollCloexec)
        wakeFD = sys_eventfd(0, SystemConstants.eventfdNonblock | SystemConstants.eventfdCloexec)
        precondition(epollFD >= 0 && wakeFD >= 0, "epoll/eventfd creation failed: errno \(errno)")
        readScratch = .allocate(byteCount: 64 * 1024, alignment: 16)
        events = .allocate(byteCount: Self.maxEvents * EpollEvent.size, alignment: 8)
        var wake = (UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &wake) { raw in
            EpollEvent.write(raw.baseAddress!, events: SystemConstants.epollIn, data: UInt64(UInt32.max))
        }
        _ = sys_epoll_ctl(epollFD, SystemConstants.epollCtlAdd, wakeFD, &wake)
        let thread = Thread { [self] in self.run() }
        thread.name = name
        self.thread = thread
        thread.start()
    }

    deinit {
        readScratch.deallocate()
        events.deallocate()
        close(epollFD)
        close(wakeFD)
    }

    /// Monotonic clock in milliseconds.
    static func nowMS() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
    }

    /// True when called on this reactor's thread.
    public var isReactorThread: Bool {
        lock.lock()
        defer { lock.unlock() }
        guard let id = threadID else { return false }
        return pthread_equal(id, pthread_self()) != 0
    }

    /// Runs `work` on the reactor thread, after the work queued before it.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        enqueue(work)
    }

    /// Like ``execute(_:)`` for closures that capture reactor-confined objects.
    func enqueue(_ work: @escaping () -> Void) {
        lock.lock()
        if stopping {
            lock.unlock()
            return
        }
        let wasEmpty = pending.isEmpty
        pending.append(work)
        lock.unlock()
        if wasEmpty {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
    }

    /// Stops the thread after closing every registered channel. Waits for it unless called on it.
    public func shutdown() {
        let onThread = isReactorThread
        lock.lock()
        if stopping {
            lock.unlock()
            return
        }
        stopping = true
        lock.unlock()
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
        if !onThread { finished.wait() }
    }

    // MARK: Reactor thread

    func register(fd: Int32, events: UInt32, channel: ReactorChannel) {
        channels[fd] = channel
        var event = makeEvent(fd: fd, events: events)
        _ = sys_epoll_ctl(epollFD, SystemConstants.epollCtlAdd, fd, &event)
    }

    func modify(fd: Int32, events: UInt32) {
        var event = makeEvent(fd: fd, events: events)
        _ = sys_epoll_ctl(epollFD, SystemConstants.epollCtlMod, fd, &event)
    }

    func unregister(fd: Int32) {
        _ = sys_epoll_ctl(epollFD, SystemConstants.epollCtlDel, fd, nil)
        channels[fd] = nil
    }

    /// Schedules `action` on the reactor thread after `milliseconds`; returns an id for ``cancelTimer(_:)``.
    @discardableResult
    func schedule(afterMilliseconds milliseconds: UInt64, _ action: @escaping () -> Void) -> UInt64 {
        let id = nextTimerID
        nextTimerID += 1
        timers.insert(deadline: Self.nowMS() + milliseconds, id: id, action: action)
        return id
    }

    func cancelTimer(_ id: UInt64) {
        timers.cancel(id)
    }

    private func makeEvent(fd: Int32, events: UInt32) -> (UInt64, UInt64) {
        var event = (UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &event) { raw in
            EpollEvent.write(raw.baseAddress!, events: events, data: UInt64(UInt32(bitPattern: fd)))
        }
        return event
    }

    private func run() {
        lock.lock()
        threadID = pthread_self()
        lock.unlock()
        while true {
            var timeout: Int32 = -1
            if let soonest = timers.nextDeadline {
                let now = Self.nowMS()
                timeout = soonest > now ? Int32(min(soonest - now, 60_000)) : 0
            }
            let count = sys_epoll_wait(epollFD, events, Int32(Self.maxEvents), timeout)
            if count > 0 {
                for i in 0..<Int(count) {
                    let mask = EpollEvent.events(events, index: i)
                    let data = EpollEvent.data(events, index: i)
                    if data == UInt64(UInt32.max) {
                        var value: UInt64 = 0
                        _ = read(wakeFD, &value, 8)
                    } else if let channel = channels[Int32(truncatingIfNeeded: data)] {
                        channel.handleEvents(mask)
                    }
                }
            }
            runTimers()
            lock.lock()
            let work = pending
            pending.removeAll(keepingCapacity: true)
            let stop = stopping
            lock.unlock()
            for item in work { item() }
            if stop { break }
        }
        // Close everything still registered; channels unregister themselves as they close.
        for channel in Array(channels.values) {
            (channel as? ClosableChannel)?.forceClose()
        }
        channels.removeAll()
        timers = TimerHeap()
        finished.signal()
    }

    private func runTimers() {
        let now = Self.nowMS()
        while let action = timers.popDue(now: now) { action() }
    }
}

/// A binary min-heap of timers by deadline; cancellation is lazy (a set of cancelled ids), so
/// thousands of connections arming and cancelling close/drain timers cost O(log n) each.
struct TimerHeap {
    private var heap: [(deadline: UInt64, id: UInt64, action: () -> Void)] = []
    private var cancelled: Set<UInt64> = []

    var nextDeadline: UInt64? {
        mutating get {
            dropCancelledTop()
            return heap.first?.deadline
        }
    }

    mutating func insert(deadline: UInt64, id: UInt64, action: @escaping () -> Void) {
        heap.append((deadline, id, action))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func cancel(_ id: UInt64) {
        cancelled.insert(id)
        // Bound the heap: when cancelled entries are the majority, rebuild without them, so
        // connections arming and cancelling far-off timers cannot grow it without limit.
        if cancelled.count > 64, cancelled.count * 2 > heap.count { compact() }
    }

    /// Entries in the heap, live and cancelled-but-not-yet-dropped (bounded by twice the live ones).
    var storedCount: Int { heap.count }

    private mutating func compact() {
        heap.removeAll { cancelled.contains($0.id) }
        cancelled.removeAll()
        // An array sorted by deadline satisfies the heap property.
        heap.sort { $0.deadline < $1.deadline }
    }

    /// Removes and returns the action of the earliest timer if it is due.
    mutating func popDue(now: UInt64) -> (() -> Void)? {
        dropCancelledTop()
        guard let top = heap.first, top.deadline <= now else { return nil }
        removeTop()
        return top.action
    }

    private mutating func dropCancelledTop() {
        while let top = heap.first, cancelled.contains(top.id) {
            cancelled.remove(top.id)
            removeTop()
        }
        if heap.isEmpty { cancelled.removeAll() }
    }

    private mutating func removeTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count, heap[right].deadline < heap[smallest].deadline { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}

/// A channel that can be torn down when its reactor stops.
protocol ClosableChannel: AnyObject {
    func forceClose()
}
