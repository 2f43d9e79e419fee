import Glibc

/// Receives datagrams from a `UDPSocket`, on the loop thread.
public protocol DatagramHandler: AnyObject {
    /// Handles one datagram. `data` points into the loop's receive ring: it may be modified in
    /// place (SRTP unprotects in place) but must not be kept after returning.
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket)
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

    /// Deterministic receive loss; setting it restarts its random sequence from the seed.
    public var impairment: Impairment? {
        didSet { random = ImpairmentRandom(seed: impairment?.seed ?? 0) }
    }
    var random = ImpairmentRandom(seed: 0)

    let fd: Int32
    let id: UInt64
    public private(set) var isClosed = false

    init(fd: Int32, id: UInt64, localAddress: SocketAddress, loop: EventLoop, handler: any DatagramHandler) {
        self.fd = fd
        self.id = id
        self.localAddress = localAddress
        self.loop = loop
        self.handler = handler
    }

    /// Queues a datagram. Loop thread only. The bytes are copied into the loop's preallocated send
    /// batch, which is flushed with `sendmmsg` at the end of the loop iteration or when full.
    public func send(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress) {
        assert(loop.isInLoop, "UDPSocket.send must be called on its loop thread")
        guard !isClosed else { return }
        loop.enqueueSend(self, bytes, to: address)
    }

    /// Queues a datagram from an array (convenience for control-path packets such as STUN).
    public func send(_ bytes: [UInt8], to address: SocketAddress) {
        bytes.withUnsafeBytes { send($0, to: address) }
    }

    /// Closes the socket: pending sends are flushed, the fd is closed and the handler released.
    /// Callable from any thread; the work happens on the loop thread.
    public func close() {
        if loop.isInLoop {
            loop.closeSocket(self)
        } else {
            loop.execute { [self] in loop.closeSocket(self) }
        }
    }

    /// Decides, from the impairment's seeded sequence, whether to drop the next received datagram.
    @inline(__always)
    func shouldDropOnReceive() -> Bool {
        guard let impairment, impairment.receiveDropRate > 0 else { return false }
        if random.nextUnit() < impairment.receiveDropRate {
            droppedByImpairment &+= 1
            return true
        }
        return false
    }

    func markClosed() {
        isClosed = true
        handler = nil
    }
}
