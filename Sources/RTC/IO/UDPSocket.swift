import Glibc
import RTCWire

/// Receives datagrams from a `UDPSocket`, on the loop thread.
public protocol DatagramHandler: AnyObject {
    /// Handles one datagram. `data` points into the loop's receive ring: it may be modified in
    /// place (SRTP unprotects in place) but must not be kept after returning.
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket)
    /// The same, with `now` (``EventLoop/now()``): when the loop started handling this datagram, so
    /// that a handler need not read the clock itself. Default: the form without `now`.
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64)
}

extension DatagramHandler {
    public func handleDatagram(
        _ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64
    ) {
        handleDatagram(data, from: from, socket: socket)
    }
}

/// Carries the datagrams of a relayed socket (a TURN allocation) instead of a kernel socket.
public protocol RelayedSocketTransport: AnyObject {
    /// Sends `bytes` to `peer` through the relay. Loop thread only.
    func sendRelayed(_ bytes: UnsafeRawBufferPointer, to peer: SocketAddress)
    /// The relayed socket was closed: release the relay. Loop thread only.
    func relayedSocketClosed()
}

/// Errors from socket setup.
public enum SocketError: Error, Equatable, Sendable {
    /// A system call failed with this `errno`.
    case system(call: String, errno: Int32)
    /// The loop has been shut down.
    case loopClosed
}

/// A nonblocking UDP socket owned by an `EventLoop`. Everything but `localAddress` is confined to
/// the loop thread.
// Safe: `localAddress` is immutable; everything else is loop-thread state (send asserts it).
public final class UDPSocket: @unchecked Sendable {
    /// The bound address (with the real port when bound to port 0).
    public let localAddress: SocketAddress
    /// The loop that owns the socket.
    public let loop: EventLoop
    /// Receives the datagrams; released by `close()`.
    public var handler: (any DatagramHandler)?

    /// Datagrams handed to the handler.
    public internal(set) var packetsReceived: UInt64 = 0
    /// Bytes handed to the handler.
    public internal(set) var bytesReceived: UInt64 = 0
    /// Datagrams accepted by the kernel.
    public internal(set) var packetsSent: UInt64 = 0
    /// Bytes accepted by the kernel.
    public internal(set) var bytesSent: UInt64 = 0
    /// Datagrams the kernel refused (full buffer, unreachable, …).
    public internal(set) var sendErrors: UInt64 = 0
    /// Datagrams dropped on receive by the impairment hook.
    public internal(set) var droppedByImpairment: UInt64 = 0
    /// Datagrams larger than a receive slot, dropped.
    public internal(set) var droppedTruncated: UInt64 = 0
    /// Messages the kernel coalesced from several received datagrams (UDP GRO), split again here.
    public internal(set) var coalescedMessages: UInt64 = 0
    /// Datagrams that arrived inside those messages (counted in ``packetsReceived`` too).
    public internal(set) var coalescedDatagrams: UInt64 = 0

    // Receive queueing (only with ``measureReceiveQueue(shedMediaOlderThan:)``).

    /// Whether the kernel stamps each received datagram with its arrival time (`SO_TIMESTAMPNS`):
    /// on for every socket the loop opens, so that ``kernelArrival`` is known.
    public internal(set) var stampsArrivals = false
    /// Loop-clock time (``EventLoop/now()``) at which the kernel received the datagram being handed
    /// to the handler now; 0 when unknown (a relayed or impaired datagram, or no kernel stamp).
    ///
    /// Bandwidth estimation takes arrivals from here, not from the loop's read time: a receiver
    /// whose thread was busy would otherwise report its own scheduling delay as the network's, and
    /// its sender would lower the video for a path that is not congested.
    public internal(set) var kernelArrival: UInt64 = 0
    /// Whether the loop measures how long datagrams wait in the receive queue and reports the
    /// socket's drop count (`SO_RXQ_OVFL`; see ``measureReceiveQueue(shedMediaOlderThan:)``).
    public private(set) var measuresReceiveQueue = false
    /// SRTP and SRTCP datagrams that waited in the kernel's receive queue longer than this are
    /// dropped unread (0: never). STUN and DTLS always go through.
    public private(set) var staleMediaAfter: UInt64 = 0
    /// Datagrams the kernel dropped because the socket's receive buffer was full (its
    /// `SO_RXQ_OVFL` count, as of the last datagram read).
    public internal(set) var kernelDrops: UInt64 = 0
    /// SRTP/SRTCP datagrams dropped unread because they waited longer than ``staleMediaAfter``.
    public internal(set) var droppedStale: UInt64 = 0
    /// Sum and count of the time datagrams waited in the kernel's receive queue, in nanoseconds.
    public internal(set) var queueDelaySum: UInt64 = 0
    public internal(set) var queueDelayCount: UInt64 = 0
    /// Datagrams that waited at least 100 ms, and at least 1 s.
    public internal(set) var queueDelayedOver100ms: UInt64 = 0
    public internal(set) var queueDelayedOver1s: UInt64 = 0
    /// The longest wait of a STUN datagram (a connectivity check) since ``takeLongestSTUNWait()``.
    public internal(set) var longestSTUNWait: UInt64 = 0
    /// The longest wait of any datagram since ``takeLongestWait()``.
    public internal(set) var longestWait: UInt64 = 0

    /// The link this socket's datagrams cross in both directions (loss, rate, delay, …; see
    /// ``Impairment``), or nil for none. Setting it starts the seeded sequences afresh; datagrams the
    /// previous one holds are still handed on at their time. Loop thread only, once registered.
    public var impairment: Impairment? {
        get { impaired?.impairment }
        set { impaired = newValue.flatMap { $0.isNone ? nil : SocketImpairment($0, socket: self) } }
    }
    /// The working form of ``impairment``: the one check the unimpaired path pays.
    var impaired: SocketImpairment?
    /// Datagrams the impairment dropped on send.
    public internal(set) var sendDroppedByImpairment: UInt64 = 0

    /// Whether runs of equal-sized datagrams to one destination go out as one UDP GSO message.
    /// On for new sockets when the kernel supports `UDP_SEGMENT` (unless `UNDERSTUDY_UDP_GSO=0`);
    /// turned off for good when the kernel refuses a GSO message on this socket. Setting it true
    /// has no effect where the kernel lacks `UDP_SEGMENT`. Loop thread only.
    public var segmentationOffload = false {
        didSet {
            if segmentationOffload && !UDPSendBatch.kernelSupportsSegmentation(fd: fd) { segmentationOffload = false }
        }
    }

    let fd: Int32
    let id: UInt64
    public private(set) var isClosed = false
    /// Set for a relayed socket (a TURN relayed candidate): it has no descriptor of its own, its
    /// sends go through the relay and its relay delivers received datagrams to `handler`.
    public private(set) var relay: (any RelayedSocketTransport)?

    init(fd: Int32, id: UInt64, localAddress: SocketAddress, loop: EventLoop, handler: any DatagramHandler) {
        self.fd = fd
        self.id = id
        self.localAddress = localAddress
        self.loop = loop
        self.handler = handler
        self.relay = nil
    }

    /// Creates a relayed socket whose address is `relayedAddress` (the TURN server's relayed
    /// transport address). It is not registered with the loop's epoll.
    public init(relay: any RelayedSocketTransport, relayedAddress: SocketAddress, loop: EventLoop) {
        self.fd = -1
        self.id = 0
        self.localAddress = relayedAddress
        self.loop = loop
        self.handler = nil
        self.relay = relay
    }

    /// Replaces the relay of a relayed socket (for transports that need the socket to exist before
    /// they do).
    func replaceRelay(_ relay: any RelayedSocketTransport) {
        guard self.relay != nil else { return }
        self.relay = relay
    }

    /// Hands a datagram that arrived through the relay to `handler`, counted like a received one.
    /// Loop thread only.
    public func deliverRelayed(_ data: UnsafeMutableRawBufferPointer, from peer: SocketAddress) {
        loop.assertInLoop()
        guard !isClosed, let handler else { return }
        packetsReceived &+= 1
        bytesReceived &+= UInt64(data.count)
        handler.handleDatagram(data, from: peer, socket: self)
    }

    /// Queues a datagram. Loop thread only. The bytes are copied into the loop's preallocated send
    /// batch, which is flushed with `sendmmsg` at the end of the loop iteration or when full; runs
    /// of equal-sized datagrams to one destination go out as one GSO message (``UDPSendBatch``).
    public func send(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress) {
        loop.assertInLoop()
        guard !isClosed else { return }
        if let impaired, let up = impaired.up {
            switch up.admit(bytes, to: address, now: EventLoop.now()) {
            case .pass: break
            case .drop:
                sendDroppedByImpairment &+= 1
                return
            case .held:
                loop.scheduleImpairment(impaired, at: up.nextRelease)
                return
            }
        }
        transmit(bytes, to: address)
    }

    /// Sends without impairment (a datagram the impairment has released).
    func transmit(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress) {
        guard !isClosed else { return }
        if let relay {
            packetsSent &+= 1
            bytesSent &+= UInt64(bytes.count)
            relay.sendRelayed(bytes, to: address)
            return
        }
        loop.enqueueSend(self, bytes, to: address)
    }

    /// Queues a datagram from an array (convenience for control-path packets such as STUN).
    public func send(_ bytes: [UInt8], to address: SocketAddress) {
        bytes.withUnsafeBytes { send($0, to: address) }
    }

    /// Closes the socket: pending sends are flushed, the fd is closed and the handler released.
    /// Callable from any thread; the work happens on the loop thread.
    public func close() {
        if relay != nil {
            if loop.isInLoop { closeRelayed() } else { loop.execute { [self] in closeRelayed() } }
            return
        }
        if loop.isInLoop {
            loop.closeSocket(self)
        } else {
            loop.execute { [self] in loop.closeSocket(self) }
        }
    }

    private func closeRelayed() {
        guard !isClosed else { return }
        markClosed()
        relay?.relayedSocketClosed()
    }

    /// Asks the kernel to stamp each received datagram with its arrival time and to report the
    /// socket's drops, so that the loop measures how long datagrams wait in the receive queue; and,
    /// with `shedMediaOlderThan` > 0, drops SRTP and SRTCP that waited longer than that unread.
    ///
    /// A server that falls behind (a CPU-starved SFU loop fanning out every publisher packet)
    /// otherwise works through a full receive buffer, seconds of media in first-in first-out
    /// order, while the kernel drops whatever arrives at the full buffer's tail, connectivity
    /// checks and DTLS handshakes included. Media that old is of no use to a real-time receiver;
    /// reading it costs a system call's share, forwarding it a fan-out. Loop thread only.
    public func measureReceiveQueue(shedMediaOlderThan limit: UInt64 = 0) {
        loop.assertInLoop()
        guard relay == nil, !isClosed else { return }
        var on: Int32 = 1
        let stamped = setsockopt(fd, SOL_SOCKET, UDPSocket.soTimestampNS, &on, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(fd, SOL_SOCKET, UDPSocket.soRXQOverflow, &on, socklen_t(MemoryLayout<Int32>.size))
        if stamped == 0 { stampsArrivals = true }
        measuresReceiveQueue = stamped == 0
        staleMediaAfter = stamped == 0 ? limit : 0
    }

    /// `SO_TIMESTAMPNS` (`SO_TIMESTAMPNS_OLD`: a `struct timespec` of CLOCK_REALTIME) and
    /// `SO_RXQ_OVFL`, the same numbers on x86-64 and arm64 (asm-generic).
    static let soTimestampNS: Int32 = 35
    static let soRXQOverflow: Int32 = 40

    /// Counts one datagram's wait in the receive queue (loop thread).
    @inline(__always)
    func noteQueueDelay(_ wait: UInt64, stun: Bool) {
        queueDelaySum &+= wait
        queueDelayCount &+= 1
        if wait >= 100_000_000 {
            queueDelayedOver100ms &+= 1
            if wait >= 1_000_000_000 { queueDelayedOver1s &+= 1 }
        }
        if wait > longestWait { longestWait = wait }
        if stun, wait > longestSTUNWait { longestSTUNWait = wait }
    }

    /// The longest waits (any datagram, STUN) since the last call, which starts a new interval.
    public func takeLongestWaits() -> (any: UInt64, stun: UInt64) {
        defer {
            longestWait = 0
            longestSTUNWait = 0
        }
        return (longestWait, longestSTUNWait)
    }

    /// Decides the fate of a received datagram under ``impaired``: true to deliver it now; false
    /// when it was dropped (counted) or held for later.
    @inline(__always)
    func admitReceived(
        _ impaired: SocketImpairment, _ data: UnsafeMutableRawBufferPointer, from: SocketAddress, now: UInt64
    ) -> Bool {
        guard let down = impaired.down else { return true }
        switch down.admit(UnsafeRawBufferPointer(data), to: from, now: now) {
        case .pass: return true
        case .drop:
            droppedByImpairment &+= 1
            return false
        case .held:
            loop.scheduleImpairment(impaired, at: down.nextRelease)
            return false
        }
    }

    /// Counts one datagram the kernel accepted (`sent`) or refused.
    @inline(__always)
    func recordSend(sent: Bool, bytes: Int) {
        if sent {
            packetsSent &+= 1
            bytesSent &+= UInt64(bytes)
        } else {
            sendErrors &+= 1
        }
    }

    func markClosed() {
        isClosed = true
        handler = nil
    }
}
