import Glibc
import Synchronization
import SystemCalls

/// Something the loop calls about every 10 ms on its thread, to run its own deadlines.
public protocol EventLoopTicker: AnyObject {
    /// `now` is `EventLoop.now()`.
    func tick(now: UInt64)
    /// The loop is stopping (``EventLoop/shutdown()``): last call on the loop thread, so that a
    /// ticker can end what waits on it. Default: nothing.
    func loopStopped()
}

extension EventLoopTicker {
    public func loopStopped() {}
}

/// One I/O thread: epoll over UDP sockets, batched `recvmmsg`/`sendmmsg` (with UDP GSO, see
/// ``UDPSendBatch``), a work queue and tickers.
///
/// Every packet is handled to completion on this thread. Other threads only call `execute`,
/// `openUDP`, `addTicker`/`removeTicker` and `shutdown`, which hop onto the loop.
///
/// After ``shutdown()`` the loop runs the work it had accepted, then refuses more: ``execute(_:)``
/// returns false and the throwing ``submit(_:)-(()->T)`` throws ``EventLoopError/shutDown(name:)``,
/// so nobody waits for work that will never run.
// Safe: other threads only use execute/submit/openUDP/tickers/shutdown (Mutex, atomics); the rest is loop-thread state.
public final class EventLoop: @unchecked Sendable {
    /// Datagrams read per `recvmmsg` call.
    public static let receiveBatchSize = 32
    /// Datagrams held by the send batch before it is flushed early (see ``UDPSendBatch``).
    public static var sendBatchCapacity: Int { UDPSendBatch.capacity }
    /// The largest datagram received, and the largest the send batch takes; larger datagrams are
    /// dropped on receive and sent unbatched.
    public static let slotSize = 2048
    /// Whether new sockets ask the kernel to coalesce received datagrams (UDP GRO, `UDP_GRO`): on
    /// unless `UNDERSTUDY_UDP_GRO=0` (for A/B runs). A GSO message from a peer on the same host (an
    /// SFU's run of a frame's packets to one member) then crosses the receive path as one buffer
    /// instead of being cut up by the kernel, on the sender's time, one datagram at a time.
    public static let coalescingAllowed: Bool = {
        guard let value = getenv("UNDERSTUDY_UDP_GRO") else { return true }
        return String(cString: value) != "0"
    }()
    /// Bytes per receive slot: a coalesced message holds up to 64 KB of datagrams.
    static let receiveSlotSize = coalescingAllowed ? 65_536 : slotSize
    /// Tick period in nanoseconds.
    static let tickInterval: UInt64 = 10_000_000

    /// Name, for logs.
    public let name: String
    /// Impairment given to every socket this loop opens (default: `Impairment.fromEnvironment`).
    public var impairment: Impairment? = Impairment.fromEnvironment

    private let epollFD: Int32
    private let wakeFD: Int32
    private var thread = pthread_t()
    private let running = Atomic<Bool>(true)
    private let threadStarted = Atomic<Bool>(false)
    /// Set when the loop thread has run its last work: from then on nothing runs there, and the
    /// loop's objects may be touched by the late work of ``submit(_:)-(()->T)`` (one at a time).
    private let finished = Atomic<Bool>(false)
    private let pendingWork = Mutex(WorkQueue())
    /// Set when work is queued, so a long receive burst can run it between datagrams.
    private let workQueued = Atomic<Bool>(false)
    /// Serializes work run on callers' threads after the loop stopped (see ``submit(_:)-(()->T)``).
    private let lateWork = Mutex<Void>(())

    // Loop-thread state.
    private var sockets: [UInt64: UDPSocket] = [:]
    /// Other descriptors (TCP connections and listeners), by the id in their epoll data.
    private var watchers: [UInt64: any EventLoopDescriptorWatcher] = [:]
    private let nextSocketID = Atomic<UInt64>(1)
    private var tickers: [any EventLoopTicker] = []
    /// Impaired sockets holding datagrams, and when the earliest is due.
    private var impairedLinks: [SocketImpairment] = []
    private var impairmentDue: UInt64 = .max
    private var nextTick: UInt64 = 0

    // Receive ring, allocated once.
    private let receiveHeaders: UnsafeMutablePointer<MMsgHdr>
    private let receiveVectors: UnsafeMutablePointer<iovec>
    private let receiveNames: UnsafeMutableRawPointer
    private let receiveData: UnsafeMutableRawPointer
    /// One control-message slot per header, for the segment size of a coalesced message.
    private let receiveControl: UnsafeMutableRawPointer
    /// Headers whose name length the last `recvmmsg` overwrote (reset before the next call).
    private var receiveHeadersUsed = 0

    /// Datagrams queued by the loop's sockets, sent at the end of each iteration (with UDP GSO).
    private let sendBatch = UDPSendBatch()

    private static let nameSlot = 32
    /// Room for the control messages of one datagram on LP64 (each a 16-byte `cmsghdr` and its
    /// value, padded to 8): the GRO segment size (`int`, 24), the arrival time (`timespec`, 32)
    /// and the socket's drop count (`uint32`, 24).
    private static let controlSlot = 80
    private static let solUDP: Int32 = 17
    private static let udpGRO: Int32 = 104
    private static let epollBatch = 64
    private let events: UnsafeMutableRawPointer

    /// Creates the loop and starts its thread; traps when the process has no descriptors left.
    /// Servers use ``make(name:)``, which reports that as an error instead.
    public convenience init(name: String) {
        try! self.init(name: name, reportingFailure: ())
    }

    /// Creates the loop and starts its thread, or throws when its epoll/eventfd descriptors cannot
    /// be created (e.g. `EMFILE`: the process is out of file descriptors).
    public static func make(name: String) throws(EventLoopError) -> EventLoop {
        try EventLoop(name: name, reportingFailure: ())
    }

    private init(name: String, reportingFailure: Void) throws(EventLoopError) {
        self.name = name
        let epoll = sys_epoll_create1(SystemConstants.epollCloexec)
        let epollErrno = errno
        let wake = epoll >= 0 ? sys_eventfd(0, SystemConstants.eventfdNonblock | SystemConstants.eventfdCloexec) : -1
        guard epoll >= 0, wake >= 0 else {
            let code = epoll < 0 ? epollErrno : errno
            if epoll >= 0 { Glibc.close(epoll) }
            throw EventLoopError.cannotCreate(errno: code)
        }
        epollFD = epoll
        wakeFD = wake
        let n = Self.receiveBatchSize
        receiveHeaders = .allocate(capacity: n)
        receiveVectors = .allocate(capacity: n)
        receiveNames = .allocate(byteCount: n * Self.nameSlot, alignment: 8)
        receiveData = .allocate(byteCount: n * Self.receiveSlotSize, alignment: 16)
        receiveControl = .allocate(byteCount: n * Self.controlSlot, alignment: 8)
        events = .allocate(byteCount: Self.epollBatch * EpollEvent.size, alignment: 8)
        for i in 0..<n {
            receiveVectors[i] = iovec(
                iov_base: receiveData + i * Self.receiveSlotSize, iov_len: Self.receiveSlotSize)
            // Built once: `recvmmsg` writes back only the name length, the flags and the length.
            receiveHeaders[i] = MMsgHdr()
            receiveHeaders[i].msg_hdr.msg_name = receiveNames + i * Self.nameSlot
            receiveHeaders[i].msg_hdr.msg_namelen = socklen_t(Self.nameSlot)
            receiveHeaders[i].msg_hdr.msg_iov = receiveVectors + i
            receiveHeaders[i].msg_hdr.msg_iovlen = 1
            receiveHeaders[i].msg_hdr.msg_control = receiveControl + i * Self.controlSlot
            receiveHeaders[i].msg_hdr.msg_controllen = Self.controlSlot
        }

        var wakeEvent: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &wakeEvent) {
            EpollEvent.write($0.baseAddress!, events: SystemConstants.epollIn, data: 0)
        }
        _ = sys_epoll_ctl(epollFD, SystemConstants.epollCtlAdd, wakeFD, &wakeEvent)

        let box = Unmanaged.passRetained(self).toOpaque()
        let result = pthread_create(
            &thread, nil,
            { raw in
                let loop = Unmanaged<EventLoop>.fromOpaque(raw!).takeRetainedValue()
                loop.run()
                return nil
            }, box)
        precondition(result == 0, "pthread_create failed: \(result)")
        threadStarted.store(true, ordering: .releasing)
    }

    deinit {
        Glibc.close(epollFD)
        Glibc.close(wakeFD)
        receiveHeaders.deallocate()
        receiveVectors.deallocate()
        receiveNames.deallocate()
        receiveData.deallocate()
        receiveControl.deallocate()
        events.deallocate()
    }

    /// Monotonic clock in nanoseconds (CLOCK_MONOTONIC).
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// True when called on the loop thread.
    public var isInLoop: Bool {
        threadStarted.load(ordering: .acquiring) && pthread_equal(pthread_self(), thread) != 0
    }

    /// True where the loop's confined state may be touched: on the loop thread, or anywhere once
    /// the loop thread has finished for good (late work then runs one call at a time).
    public var isConfinedHere: Bool {
        isInLoop || finished.load(ordering: .acquiring)
    }

    /// Stops the process unless called where the loop's state may be touched (``isConfinedHere``),
    /// in every build: for ``LoopBound`` and other checks off the packet path.
    public func preconditionInLoop(file: StaticString = #fileID, line: UInt = #line) {
        if !isConfinedHere { confinementFailure(file: file, line: line) }
    }

    /// ``preconditionInLoop(file:line:)`` in debug builds; nothing at all in release builds, so
    /// the loop-only entry points of the packet path (``PeerConnection``, ``MediaTransport``,
    /// ``RTPSender``, ``RTPReceiver``, the SFU) can say so at no cost.
    @inlinable @inline(__always)
    public func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
            preconditionInLoop(file: file, line: line)
        #endif
    }

    @inline(never)
    private func confinementFailure(file: StaticString, line: UInt) -> Never {
        preconditionFailure(
            "called off event loop '\(name)' (on thread '\(currentThreadName())'): this is loop-only state",
            file: file, line: line)
    }

    /// Runs `work` on the loop thread, in submission order. Thread-safe.
    ///
    /// Returns false, and drops `work`, once the loop has shut down: work accepted before then
    /// always runs (the loop drains its queue before it stops accepting).
    @discardableResult
    public func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        let accepted = pendingWork.withLock { queue in
            guard queue.accepting else { return false }
            queue.jobs.append(work)
            return true
        }
        guard accepted else { return false }
        workQueued.store(true, ordering: .releasing)
        wake()
        return true
    }

    /// Runs `work` on the loop thread and returns its result to the caller.
    ///
    /// Throws what `work` throws, or ``EventLoopError/shutDown(name:)`` when the loop has shut down
    /// (then `work` does not run). Use this form wherever the loop may be gone.
    public func submit<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let accepted = execute { continuation.resume(with: Result { try work() }) }
            if !accepted { continuation.resume(throwing: EventLoopError.shutDown(name: name)) }
        }
    }

    /// Runs `work` on the loop thread and returns its result to the caller.
    ///
    /// After shutdown the loop's thread is gone and touches nothing any more, so `work` runs on the
    /// calling thread instead, one late call at a time: a read sees the final state (closed
    /// sockets send nothing). It never waits for a loop that will not run it. Code that must know
    /// whether the loop ran the work uses the throwing ``submit(_:)-(()->T)`` or ``submitIfRunning(_:)``.
    public func submit<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        if let result = await submitIfRunning(work) { return result }
        return lateWork.withLock { _ in work() }
    }

    /// Runs `work` on the loop thread and returns its result, or nil when the loop has shut down
    /// (then `work` does not run). For callers that may race the loop's shutdown.
    public func submitIfRunning<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T? {
        await withCheckedContinuation { continuation in
            let accepted = execute { continuation.resume(returning: work()) }
            if !accepted { continuation.resume(returning: nil) }
        }
    }

    /// Stops the loop once the work queued so far has run: `close` (which may queue final
    /// datagrams such as a DTLS close_notify) runs on the loop, its sends are flushed, and the loop
    /// ends. Returns at once; nothing waits on a timer.
    public func shutdown(after close: @escaping @Sendable () -> Void) {
        execute { [self] in
            close()
            shutdown()
        }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    /// Registers a ticker, called about every 10 ms on the loop thread until removed.
    public func addTicker(_ ticker: any EventLoopTicker) {
        if isInLoop {
            tickers.append(ticker)
        } else {
            let box = LoopBound(ticker, loop: self)
            execute { [self] in tickers.append(box.value) }
        }
    }

    /// Unregisters a ticker.
    public func removeTicker(_ ticker: any EventLoopTicker) {
        if isInLoop {
            tickers.removeAll { $0 === ticker }
        } else {
            let box = LoopBound(ticker, loop: self)
            execute { [self] in tickers.removeAll { $0 === box.value } }
        }
    }

    /// Opens a nonblocking UDP socket bound to `bindTo` (port 0 picks an ephemeral port) whose
    /// datagrams go to `handler` on the loop thread. Callable from any thread.
    public func openUDP(bindTo: SocketAddress, handler: any DatagramHandler) throws(SocketError) -> UDPSocket {
        guard running.load(ordering: .acquiring) else { throw .loopClosed }
        let family = bindTo.isIPv6 ? AF_INET6 : AF_INET
        let type = Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let fd = socket(family, type, 0)
        guard fd >= 0 else { throw .system(call: "socket", errno: errno) }
        var bufferSize: Int32 = 4 << 20
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufferSize, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufferSize, socklen_t(MemoryLayout<Int32>.size))
        let bound = bindTo.withSockAddr { bind(fd, $0, $1) }
        guard bound == 0 else {
            let error = errno
            Glibc.close(fd)
            throw .system(call: "bind", errno: error)
        }
        var storage = sockaddr_in6()
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        let named = withUnsafeMutableBytes(of: &storage) {
            getsockname(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
        }
        guard named == 0,
            let local = withUnsafeBytes(of: &storage, { SocketAddress(raw: $0.baseAddress!, length: Int(length)) })
        else {
            let error = errno
            Glibc.close(fd)
            throw .system(call: "getsockname", errno: error)
        }
        let id = nextSocketID.wrappingAdd(1, ordering: .relaxed).oldValue
        let udp = UDPSocket(fd: fd, id: id, localAddress: local, loop: self, handler: handler)
        udp.segmentationOffload = UDPSendBatch.segmentationAllowed
        var stamp: Int32 = 1
        udp.stampsArrivals =
            setsockopt(fd, SOL_SOCKET, UDPSocket.soTimestampNS, &stamp, socklen_t(MemoryLayout<Int32>.size)) == 0
        if Self.coalescingAllowed {
            // Refused by kernels before 5.0: datagrams then simply arrive one by one.
            var on: Int32 = 1
            _ = setsockopt(fd, Self.solUDP, Self.udpGRO, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        if let impairment { udp.impairment = impairment }
        if isInLoop {
            register(udp)
        } else if !execute({ [self] in register(udp) }) {
            Glibc.close(fd)
            throw .loopClosed
        }
        return udp
    }

    private func register(_ udp: UDPSocket) {
        guard !udp.isClosed else { return }
        // Opened while the loop was stopping: nothing would ever read or close it.
        guard running.load(ordering: .acquiring) else {
            udp.markClosed()
            Glibc.close(udp.fd)
            return
        }
        sockets[udp.id] = udp
        var event: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &event) {
            EpollEvent.write($0.baseAddress!, events: SystemConstants.epollIn, data: udp.id)
        }
        _ = sys_epoll_ctl(epollFD, SystemConstants.epollCtlAdd, udp.fd, &event)
    }

    func closeSocket(_ udp: UDPSocket) {
        assertInLoop()
        guard !udp.isClosed else { return }
        flushSends()
        udp.markClosed()
        sockets[udp.id] = nil
        _ = sys_epoll_ctl(epollFD, SystemConstants.epollCtlDel, udp.fd, nil)
        Glibc.close(udp.fd)
    }

    // MARK: Other descriptors (loop thread only)

    /// Registers `fd` with epoll for `events` (``EventLoopEvents``); its readiness goes to
    /// `watcher` on the loop thread. Returns the registration id for ``modifyWatch`` and ``unwatch``.
    func watch(fd: Int32, events: UInt32, watcher: any EventLoopDescriptorWatcher) -> UInt64 {
        assertInLoop()
        let id = nextSocketID.wrappingAdd(1, ordering: .relaxed).oldValue
        watchers[id] = watcher
        var event: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &event) { EpollEvent.write($0.baseAddress!, events: events, data: id) }
        _ = sys_epoll_ctl(epollFD, SystemConstants.epollCtlAdd, fd, &event)
        return id
    }

    /// Changes the events a watched descriptor waits for.
    func modifyWatch(id: UInt64, fd: Int32, events: UInt32) {
        assertInLoop()
        var event: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &event) { EpollEvent.write($0.baseAddress!, events: events, data: id) }
        _ = sys_epoll_ctl(epollFD, SystemConstants.epollCtlMod, fd, &event)
    }

    /// Stops watching a descriptor (the caller closes it).
    func unwatch(id: UInt64, fd: Int32) {
        assertInLoop()
        watchers[id] = nil
        _ = sys_epoll_ctl(epollFD, SystemConstants.epollCtlDel, fd, nil)
    }

    /// Stops the loop: pending work runs, sockets close, and the thread is joined (unless called
    /// on the loop thread itself, which only stops it).
    public func shutdown() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        wake()
        if isInLoop {
            // Nobody can join the thread from itself; let it clean up after itself instead.
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }

    // MARK: Loop thread

    private func run() {
        nameCurrentThread(name)
        nextTick = Self.now() &+ Self.tickInterval
        while running.load(ordering: .acquiring) {
            // Sleep at most until the next tick is due, so tickers run close to every 10 ms.
            let before = Self.now()
            var untilTick = nextTick > before ? min(nextTick - before, Self.tickInterval) : 0
            if impairmentDue < .max { untilTick = impairmentDue > before ? min(impairmentDue - before, untilTick) : 0 }
            let timeoutMS = Int32((untilTick + 999_999) / 1_000_000)
            let count = sys_epoll_wait(epollFD, events, Int32(Self.epollBatch), timeoutMS)
            if count > 0 {
                for i in 0..<Int(count) {
                    let id = EpollEvent.data(events, index: i)
                    if id == 0 {
                        var value: UInt64 = 0
                        _ = Glibc.read(wakeFD, &value, 8)
                    } else if let udp = sockets[id] {
                        receive(on: udp)
                    } else if let watcher = watchers[id] {
                        watcher.handleEvents(EpollEvent.events(events, index: i))
                    }
                }
            }
            runPendingWork()
            if impairmentDue < .max {
                var releaseTime = Self.now()
                if releaseTime >= impairmentDue { releaseImpaired(now: &releaseTime) }
            }
            // Read after the releases: handlers stamp what they receive with a fresh clock (ICE's
            // consent), and tickers must not see a time before that.
            let now = Self.now()
            if now >= nextTick {
                nextTick = now &+ Self.tickInterval
                for ticker in tickers {
                    ticker.tick(now: now)
                }
            }
            flushSends()
        }
        runPendingWork()
        // Tickers (peer connections) end first, while their sockets can still send a goodbye.
        let stopping = tickers
        tickers.removeAll()
        for ticker in stopping { ticker.loopStopped() }
        flushSends()
        for udp in Array(sockets.values) {
            closeSocket(udp)
        }
        for watcher in Array(watchers.values) {
            watcher.loopClosing()
        }
        watchers.removeAll()
        // Work accepted so far still runs (it may resume a caller's continuation); once the queue
        // is empty it closes, and later submissions fail instead of waiting forever.
        while true {
            let work = pendingWork.withLock { queue -> [@Sendable () -> Void] in
                if queue.jobs.isEmpty {
                    queue.accepting = false
                    // Under the queue's lock: the first refused submission already sees it.
                    finished.store(true, ordering: .releasing)
                }
                return queue.take()
            }
            if work.isEmpty { break }
            for job in work { job() }
            flushSends()
        }
    }

    private func runPendingWork() {
        // Work enqueued by work runs in the next iteration, so a self-rescheduling job cannot
        // starve I/O.
        workQueued.store(false, ordering: .relaxed)
        let work = pendingWork.withLock { $0.take() }
        for job in work {
            job()
        }
    }

    private func receive(on udp: UDPSocket) {
        let n = Self.receiveBatchSize
        // Bounded so that one busy socket cannot starve the others; epoll is level-triggered.
        for _ in 0..<8 {
            // Work run between datagrams may have closed this socket (its fd could even be reused).
            if udp.isClosed { return }
            for i in 0..<receiveHeadersUsed {
                receiveHeaders[i].msg_hdr.msg_namelen = socklen_t(Self.nameSlot)
                receiveHeaders[i].msg_hdr.msg_controllen = Self.controlSlot
            }
            let received = sys_recvmmsg(udp.fd, receiveHeaders, UInt32(n), Int32(MSG_DONTWAIT), nil)
            guard received > 0 else { return }
            receiveHeadersUsed = Int(received)
            // The batch's datagrams arrived before the call returned; each is handled at the time its
            // handling starts (``deliver`` reads the clock again after each).
            var now = Self.now()
            // The kernel stamps arrivals on the real-time clock; `batchStart` is the same instant on
            // the loop's clock.
            let batchStart = now
            let measured = udp.measuresReceiveQueue
            let arrivalClock = udp.stampsArrivals ? Self.realtimeNow() : 0
            for i in 0..<Int(received) {
                if udp.isClosed { return }
                let header = receiveHeaders[i]
                if header.msg_hdr.msg_flags & Int32(MSG_TRUNC) != 0 {
                    udp.droppedTruncated &+= 1
                    continue
                }
                guard
                    let from = SocketAddress(
                        raw: receiveNames + i * Self.nameSlot, length: Int(header.msg_hdr.msg_namelen))
                else { continue }
                let length = Int(header.msg_len)
                let start = receiveData + i * Self.receiveSlotSize
                let control = Self.controlMessages(header)
                // How long the datagram waited in the kernel's receive queue (0 when not measured).
                var wait: UInt64 = 0
                var arrival: UInt64 = 0
                if control.arrival > 0, arrivalClock >= control.arrival, batchStart > arrivalClock - control.arrival {
                    wait = arrivalClock - control.arrival
                    arrival = batchStart - wait
                }
                if measured, control.drops > udp.kernelDrops { udp.kernelDrops = control.drops }
                let segment = control.segment
                if segment == 0 || segment >= length {
                    guard length <= Self.slotSize else {
                        udp.droppedTruncated &+= 1
                        continue
                    }
                    if measured {
                        let first = start.load(as: UInt8.self)
                        udp.noteQueueDelay(wait, stun: first < 4)
                        if Self.isStale(first: first, wait: wait, on: udp) { continue }
                    }
                    if let impaired = udp.impaired,
                        !udp.admitReceived(
                            impaired, UnsafeMutableRawBufferPointer(start: start, count: length), from: from, now: now)
                    {
                        continue
                    }
                    deliver(
                        UnsafeMutableRawBufferPointer(start: start, count: length), from: from, on: udp, now: &now,
                        arrival: arrival)
                    continue
                }
                // A coalesced message: same-sized datagrams of one sender, the last maybe shorter.
                udp.coalescedMessages &+= 1
                var offset = 0
                while offset < length {
                    if udp.isClosed { return }
                    let size = min(segment, length - offset)
                    udp.coalescedDatagrams &+= 1
                    if measured {
                        let first = (start + offset).load(as: UInt8.self)
                        udp.noteQueueDelay(wait, stun: first < 4)
                        if Self.isStale(first: first, wait: wait, on: udp) {
                            offset += size
                            continue
                        }
                    }
                    let datagram = UnsafeMutableRawBufferPointer(start: start + offset, count: size)
                    if let impaired = udp.impaired {
                        if udp.admitReceived(impaired, datagram, from: from, now: now) {
                            deliver(datagram, from: from, on: udp, now: &now)
                        }
                    } else {
                        deliver(datagram, from: from, on: udp, now: &now, arrival: arrival)
                    }
                    offset += size
                }
            }
            if Int(received) < n { return }
        }
    }

    @inline(__always)
    private func deliver(
        _ data: UnsafeMutableRawBufferPointer, from: SocketAddress, on udp: UDPSocket, now: inout UInt64,
        arrival: UInt64 = 0
    ) {
        udp.kernelArrival = arrival
        udp.packetsReceived &+= 1
        udp.bytesReceived &+= UInt64(data.count)
        udp.handler?.handleDatagram(data, from: from, socket: udp, now: now)
        // One datagram can be costly (an SFU fans it out to every subscriber): queued control work
        // (a room's consume, an offer) should not wait for a whole burst.
        if workQueued.load(ordering: .acquiring) { runPendingWork() }
        // The next datagram's sends are stamped with this (transport-cc send times): with one time
        // per batch, a batch's fan-out of 32 datagrams to 500 subscribers made the last ones' stamps
        // tens of milliseconds early, a delay swing the subscribers' estimators read as congestion.
        now = Self.now()
    }

    /// Puts an impaired socket's link in the release list, to be released at `due` or later.
    func scheduleImpairment(_ link: SocketImpairment, at due: UInt64) {
        if !link.scheduled {
            link.scheduled = true
            impairedLinks.append(link)
        }
        if due < impairmentDue { impairmentDue = due }
    }

    /// Hands on the held datagrams that are due: received ones to their handler, sent ones to the
    /// send batch. Links with nothing left leave the list.
    private func releaseImpaired(now: inout UInt64) {
        impairmentDue = .max
        var i = 0
        // Index loop: a handler may schedule more links (they are appended) while this runs.
        while i < impairedLinks.count {
            let link = impairedLinks[i]
            if let udp = link.socket, !udp.isClosed {
                link.down?.release(now: now) { data, from in deliver(data, from: from, on: udp, now: &now) }
                link.up?.release(now: now) { data, to in udp.transmit(UnsafeRawBufferPointer(data), to: to) }
            } else {
                // Socket gone: what it held goes nowhere.
                link.down?.release(now: .max) { _, _ in }
                link.up?.release(now: .max) { _, _ in }
            }
            let due = link.nextRelease
            if due == .max {
                link.scheduled = false
                impairedLinks.remove(at: i)
                continue
            }
            if due < impairmentDue { impairmentDue = due }
            i += 1
        }
    }

    /// What the kernel said about one received message in its control messages: the segment size
    /// of a coalesced message (`UDP_GRO`; 0 for a single datagram), its arrival time (CLOCK_REALTIME
    /// nanoseconds, `SCM_TIMESTAMPNS`; 0 when not asked) and the socket's drop count (`SO_RXQ_OVFL`;
    /// present only once the socket has dropped something).
    @inline(__always)
    private static func controlMessages(_ header: MMsgHdr) -> (segment: Int, arrival: UInt64, drops: UInt64) {
        var result = (segment: 0, arrival: UInt64(0), drops: UInt64(0))
        guard let control = header.msg_hdr.msg_control else { return result }
        let total = Int(header.msg_hdr.msg_controllen)
        var offset = 0
        // CMSG_FIRSTHDR/CMSG_NXTHDR on LP64: a 16-byte header (size_t length, int level, int type).
        while offset + 16 <= total {
            let length = Int(control.load(fromByteOffset: offset, as: UInt64.self))
            guard length >= 16, offset + length <= total else { break }
            let level = control.load(fromByteOffset: offset + 8, as: Int32.self)
            let type = control.load(fromByteOffset: offset + 12, as: Int32.self)
            if level == solUDP, type == udpGRO, length >= 20 {
                result.segment = Int(control.load(fromByteOffset: offset + 16, as: Int32.self))
            } else if level == SOL_SOCKET, type == UDPSocket.soTimestampNS, length >= 32 {
                let seconds = control.loadUnaligned(fromByteOffset: offset + 16, as: Int64.self)
                let nanoseconds = control.loadUnaligned(fromByteOffset: offset + 24, as: Int64.self)
                if seconds > 0, nanoseconds >= 0 {
                    result.arrival = UInt64(seconds) &* 1_000_000_000 &+ UInt64(nanoseconds)
                }
            } else if level == SOL_SOCKET, type == UDPSocket.soRXQOverflow, length >= 20 {
                result.drops = UInt64(control.load(fromByteOffset: offset + 16, as: UInt32.self))
            }
            offset += (length + 7) & ~7
        }
        return result
    }

    /// SRTP or SRTCP (RFC 7983: first byte 128–191) that waited longer than the socket's limit.
    @inline(__always)
    private static func isStale(first: UInt8, wait: UInt64, on udp: UDPSocket) -> Bool {
        guard udp.staleMediaAfter > 0, wait > udp.staleMediaAfter, first >= 128, first <= 191 else { return false }
        udp.droppedStale &+= 1
        return true
    }

    /// CLOCK_REALTIME in nanoseconds: the clock of the kernel's receive timestamps.
    static func realtimeNow() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    @inline(__always)
    func enqueueSend(_ udp: UDPSocket, _ bytes: UnsafeRawBufferPointer, to address: SocketAddress) {
        sendBatch.enqueue(udp, bytes, to: address)
    }

    /// Sends the queued batch (see ``UDPSendBatch/flush()``).
    func flushSends() {
        sendBatch.flush()
    }

    /// What the loop's sockets have sent so far: system calls, messages, datagrams and GSO
    /// messages. Loop thread only; from elsewhere use ``sendStatistics()``.
    public var sendStatisticsOnLoop: EventLoopSendStatistics { sendBatch.statistics }

    /// What the loop's sockets have sent so far (read on the loop thread).
    public func sendStatistics() async -> EventLoopSendStatistics {
        await submit { [self] in sendBatch.statistics }
    }
}

/// The loop's queue of submitted work; `accepting` turns false for good when the loop has stopped.
private struct WorkQueue {
    var jobs: [@Sendable () -> Void] = []
    var accepting = true

    /// Takes every queued job, keeping the storage for the next ones.
    mutating func take() -> [@Sendable () -> Void] {
        if jobs.isEmpty { return [] }
        let taken = jobs
        jobs.removeAll(keepingCapacity: true)
        return taken
    }
}

/// Why an ``EventLoop`` could not be created.
public enum EventLoopError: Error, Sendable, Equatable, CustomStringConvertible {
    /// epoll or eventfd creation failed with this errno (EMFILE: out of file descriptors).
    case cannotCreate(errno: Int32)
    /// Work was submitted after the loop named `name` shut down; it did not run.
    case shutDown(name: String)

    public var description: String {
        switch self {
        case .cannotCreate(let code):
            return "cannot create an event loop: \(String(cString: strerror(code))) (errno \(code))"
        case .shutDown(let name):
            return "event loop '\(name)' has shut down"
        }
    }
}

extension EventLoop: LoopConfinement {}
