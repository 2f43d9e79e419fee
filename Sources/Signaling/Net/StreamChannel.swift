import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// Receives the bytes and the end of a ``StreamChannel``. Called on the reactor thread only.
protocol StreamChannelDelegate: AnyObject {
    /// New bytes; the buffer is only valid for the duration of the call.
    func channel(_ channel: StreamChannel, received bytes: UnsafeRawBufferPointer)
    /// The connection is gone (peer close, error, or our own close). Called once.
    func channelClosed(_ channel: StreamChannel)
}

/// A non-blocking TCP connection owned by a ``Reactor``: buffered writes with a bound, reads that
/// can be paused (backpressure), and a graceful "flush, half-close, drain, close" ending so that a
/// final message (an HTTP error, a WebSocket close frame) reaches a peer that is still sending.
final class StreamChannel: ReactorChannel, ClosableChannel {
    let fd: Int32
    unowned let reactor: Reactor
    weak var delegate: StreamChannelDelegate?
    /// Keeps the delegate alive while the channel is open (released on close to break the cycle).
    private var delegateOwner: AnyObject?
    /// The largest amount of unsent data tolerated before the peer is considered stuck.
    var maxWriteBuffer: Int
    /// Called instead of closing at once when a write would pass ``maxWriteBuffer`` (the WebSocket
    /// layer sends a close frame with a documented code first). The write itself is dropped.
    var onWriteOverflow: (() -> Void)?

    /// Bytes the socket did not take yet. Empty (no storage) while the socket keeps up: a write to
    /// an idle channel goes straight from the caller's bytes, and a drained buffer is released, since
    /// a server holds thousands of channels.
    private var writeBuffer: [UInt8] = []
    private var writeOffset = 0
    /// End offset in ``writeBuffer`` of each queued `write` (from `unitHead` on), so that unsent
    /// whole units (WebSocket frames) can be discarded without cutting one in half.
    private var unitEnds: [Int] = []
    private var unitHead = 0
    private var readingEnabled = true
    private var writeInterest = false
    private var finishing = false
    private var halfClosed = false
    private(set) var isClosed = false
    private var drainTimer: UInt64?
    /// Called once the write queue is empty (or the channel closed); see ``whenDrained(_:)``.
    private var drainWaiters: [() -> Void] = []

    init(fd: Int32, reactor: Reactor, maxWriteBuffer: Int) {
        self.fd = fd
        self.reactor = reactor
        self.maxWriteBuffer = maxWriteBuffer
    }

    /// Registers with the reactor and starts reading. `delegate` is retained until close.
    func start(delegate: StreamChannelDelegate & AnyObject) {
        setDelegate(delegate)
        let mask = currentInterest()
        registeredInterest = mask
        reactor.register(fd: fd, events: mask, channel: self)
    }

    /// Hands the connection to another delegate (HTTP → WebSocket upgrade).
    func setDelegate(_ delegate: StreamChannelDelegate & AnyObject) {
        self.delegate = delegate
        delegateOwner = delegate
    }

    var pendingWriteBytes: Int { writeBuffer.count - writeOffset }

    /// Queues bytes and writes as much as the socket takes now. Returns false (and closes, or calls
    /// ``onWriteOverflow``) when unsent data is queued already and this write would take it past
    /// its bound; `exceedingLimit` lets a final small frame (a close) through anyway.
    @discardableResult
    func write(_ bytes: [UInt8], exceedingLimit: Bool = false) -> Bool {
        guard !isClosed, !halfClosed else { return false }
        // A single write larger than the bound is accepted onto an empty queue (a big response to
        // a reading peer); otherwise the queue may not grow past the bound.
        if !exceedingLimit, pendingWriteBytes > 0, pendingWriteBytes + bytes.count > maxWriteBuffer {
            if let overflow = onWriteOverflow {
                onWriteOverflow = nil
                overflow()
            } else {
                forceClose()
            }
            return false
        }
        if writeOffset == writeBuffer.count {
            writeBuffer = []
            writeOffset = 0
            unitEnds.removeAll(keepingCapacity: true)
            unitHead = 0
            // Nothing queued: send from the caller's bytes and queue only what the socket refuses.
            let sent = sendAvailable(bytes, from: 0)
            if isClosed { return false }
            if sent == bytes.count {
                flush()  // ends a finishing channel, updates interest
                return !isClosed
            }
            // The socket is full: queue the rest and wait for it to drain (no second try now).
            writeBuffer.append(contentsOf: bytes[sent...])
            unitEnds.append(writeBuffer.count)
            updateInterest()
            return true
        }
        writeBuffer.append(contentsOf: bytes)
        dropSentUnits()
        unitEnds.append(writeBuffer.count)
        flush()
        return !isClosed
    }

    private func dropSentUnits() {
        while unitHead < unitEnds.count, unitEnds[unitHead] <= writeOffset { unitHead += 1 }
        if unitHead > 1024, unitHead * 2 > unitEnds.count {
            unitEnds.removeFirst(unitHead)
            unitHead = 0
        }
    }

    /// Drops the queued writes after the one in flight (which is kept whole, so the stream stays
    /// well-formed), so that a final message can follow at once and the memory is freed.
    func discardUnsentWrites() {
        dropSentUnits()
        guard unitHead < unitEnds.count else { return }
        let keep = unitEnds[unitHead]
        writeBuffer.removeSubrange(keep...)
        unitEnds = [keep]
        unitHead = 0
    }

    /// Runs `body` once every byte written so far has been handed to the socket, or the channel
    /// closed: at once when nothing waits. Lets a long transfer (a PubSub history replay) go out
    /// at the pace the peer reads, with the write queue as the bound.
    func whenDrained(_ body: @escaping () -> Void) {
        if isClosed || pendingWriteBytes == 0 {
            body()
        } else {
            drainWaiters.append(body)
        }
    }

    private func runDrainWaiters() {
        guard !drainWaiters.isEmpty else { return }
        let waiters = drainWaiters
        drainWaiters = []
        for body in waiters { body() }
    }

    /// Stops or resumes reading (the peer then sees TCP flow control).
    func setReading(_ enabled: Bool) {
        guard readingEnabled != enabled else { return }
        readingEnabled = enabled
        updateInterest()
    }

    /// Sends what is queued, half-closes, discards whatever the peer still sends, then closes.
    func finish(drainTimeoutMS: UInt64 = 2000) {
        guard !isClosed, !finishing else { return }
        finishing = true
        readingEnabled = true
        drainTimer = reactor.schedule(afterMilliseconds: drainTimeoutMS) { [weak self] in self?.forceClose() }
        flush()
    }

    /// Closes now, dropping unsent data.
    func forceClose() {
        guard !isClosed else { return }
        isClosed = true
        if let t = drainTimer { reactor.cancelTimer(t) }
        reactor.unregister(fd: fd)
        Glibc.close(fd)
        writeBuffer = []
        let d = delegate
        delegateOwner = nil
        d?.channelClosed(self)
        runDrainWaiters()
    }

    func handleEvents(_ events: UInt32) {
        if events & SystemConstants.epollOut != 0 { flush() }
        if isClosed { return }
        if events & (SystemConstants.epollHup | SystemConstants.epollErr) != 0, !(readingEnabled || finishing) {
            forceClose()
            return
        }
        if events
            & (SystemConstants.epollIn | SystemConstants.epollHup | SystemConstants.epollErr
                | SystemConstants.epollReadHangup)
            != 0
        {
            readAvailable()
        }
    }

    private func readAvailable() {
        // A bounded number of reads per wakeup keeps one busy peer from starving the others.
        for _ in 0..<4 {
            guard !isClosed, readingEnabled || finishing else { return }
            let scratch = reactor.readScratch
            let n = recv(fd, scratch.baseAddress, scratch.count, 0)
            if n > 0 {
                if !finishing {
                    delegate?.channel(self, received: UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
                }
                if n < scratch.count { return }
            } else if n == 0 {
                forceClose()
                return
            } else {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                forceClose()
                return
            }
        }
    }

    /// Sends `bytes` from `offset` on as far as the socket takes them now; returns the offset reached
    /// (closes the channel on a hard error).
    private func sendAvailable(_ bytes: [UInt8], from offset: Int) -> Int {
        var sent = offset
        guard !isClosed else { return sent }
        if bytes.withUnsafeBytes({ SystemCalls.sendAvailable(fd: fd, $0, offset: &sent) }) != nil { forceClose() }
        return sent
    }

    private func flush() {
        writeOffset = sendAvailable(writeBuffer, from: writeOffset)
        if isClosed {
            writeOffset = 0  // forceClose dropped the buffer
            return
        }
        if writeOffset == writeBuffer.count, writeBuffer.capacity > 0 {
            // Drained: give the memory back now, not at the next write.
            writeBuffer = []
            writeOffset = 0
            unitEnds.removeAll(keepingCapacity: true)
            unitHead = 0
        }
        if writeOffset == writeBuffer.count, finishing, !halfClosed {
            halfClosed = true
            Glibc.shutdown(fd, Int32(SHUT_WR))
        }
        updateInterest()
        if writeOffset == writeBuffer.count { runDrainWaiters() }
    }

    private func currentInterest() -> UInt32 {
        var mask: UInt32 = 0
        if readingEnabled || finishing { mask |= SystemConstants.epollIn | SystemConstants.epollReadHangup }
        if writeOffset < writeBuffer.count { mask |= SystemConstants.epollOut }
        return mask
    }

    private var registeredInterest: UInt32?

    private func updateInterest() {
        guard !isClosed else { return }
        let mask = currentInterest()
        if mask != registeredInterest {
            registeredInterest = mask
            reactor.modify(fd: fd, events: mask)
        }
    }
}

/// Puts a descriptor into non-blocking mode and disables Nagle (signalling messages are small
/// and latency-sensitive).
func configureStreamSocket(_ fd: Int32) {
    let flags = fcntl(fd, F_GETFL, 0)
    _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
}
