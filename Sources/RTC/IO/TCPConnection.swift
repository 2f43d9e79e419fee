import Glibc
import SystemCalls

/// Something the loop watches besides its UDP sockets (a TCP connection or listener).
protocol EventLoopDescriptorWatcher: AnyObject {
    /// epoll reported `events` (EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP bits) for the descriptor.
    func handleEvents(_ events: UInt32)
    /// The loop is shutting down: close the descriptor.
    func loopClosing()
}

/// Receives the bytes of a ``TCPConnection`` on the loop thread.
public protocol TCPConnectionHandler: AnyObject {
    /// The connection is established (outgoing connections only).
    func tcpConnected(_ connection: TCPConnection)
    /// New bytes arrived; `buffer` holds every byte not consumed yet. Returns how many bytes of
    /// the front of `buffer` were consumed (complete frames); the rest is kept for the next call.
    /// The bytes may be modified in place but not kept.
    func tcpReceived(_ connection: TCPConnection, _ buffer: UnsafeMutableRawBufferPointer) -> Int
    /// The connection closed or failed (`error` is nil for an orderly close by the peer).
    func tcpClosed(_ connection: TCPConnection, error: String?)
}

/// A nonblocking TCP connection owned by an ``EventLoop``, confined to its thread (except
/// creation). Writes that the kernel cannot take at once wait in a bounded buffer.
// Safe: confined to its loop thread after creation (see above).
public final class TCPConnection: EventLoopDescriptorWatcher, @unchecked Sendable {
    /// Bytes buffered for a slow peer before further writes are dropped.
    public static let maxPendingOutput = 4 << 20
    /// Received bytes kept while waiting for the rest of a frame.
    static let receiveCapacity = 256 << 10

    public let loop: EventLoop
    public let remoteAddress: SocketAddress
    public private(set) var localAddress: SocketAddress?
    public weak var handler: (any TCPConnectionHandler)?
    public private(set) var isConnected = false
    public private(set) var isClosed = false
    /// Writes dropped because the output buffer was full.
    public private(set) var droppedWrites: UInt64 = 0

    let fd: Int32
    private var watchID: UInt64 = 0
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    private var wantsWrite = false
    private let input: UnsafeMutableRawBufferPointer
    private var inputCount = 0

    private init(fd: Int32, loop: EventLoop, remote: SocketAddress, connected: Bool) {
        self.fd = fd
        self.loop = loop
        self.remoteAddress = remote
        self.isConnected = connected
        input = .allocate(byteCount: Self.receiveCapacity, alignment: 16)
    }

    deinit { input.deallocate() }

    /// Starts connecting to `remote` from `bindTo` (nil: any address). Loop thread only; the
    /// handler hears `tcpConnected` or `tcpClosed`.
    public static func connect(
        to remote: SocketAddress, bindTo: SocketAddress? = nil, loop: EventLoop, handler: any TCPConnectionHandler
    ) throws(SocketError) -> TCPConnection {
        let family = remote.isIPv6 ? AF_INET6 : AF_INET
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let fd = socket(family, type, 0)
        guard fd >= 0 else { throw .system(call: "socket", errno: errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if let bindTo {
            guard bindTo.withSockAddr({ bind(fd, $0, $1) }) == 0 else {
                let error = errno
                Glibc.close(fd)
                throw .system(call: "bind", errno: error)
            }
        }
        let result = remote.withSockAddr { Glibc.connect(fd, $0, $1) }
        if result != 0 && errno != EINPROGRESS {
            let error = errno
            Glibc.close(fd)
            throw .system(call: "connect", errno: error)
        }
        let connection = TCPConnection(fd: fd, loop: loop, remote: remote, connected: false)
        connection.handler = handler
        connection.wantsWrite = true
        connection.watchID = loop.watch(
            fd: fd, events: SystemConstants.epollIn | SystemConstants.epollOut, watcher: connection)
        return connection
    }

    /// Adopts a descriptor accepted by a listener. Loop thread only.
    static func accepted(fd: Int32, remote: SocketAddress, loop: EventLoop) -> TCPConnection {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let connection = TCPConnection(fd: fd, loop: loop, remote: remote, connected: true)
        connection.localAddress = Self.localName(fd)
        connection.watchID = loop.watch(fd: fd, events: SystemConstants.epollIn, watcher: connection)
        return connection
    }

    static func localName(_ fd: Int32) -> SocketAddress? {
        var storage = sockaddr_in6()
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        let named = withUnsafeMutableBytes(of: &storage) {
            getsockname(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
        }
        guard named == 0 else { return nil }
        return withUnsafeBytes(of: &storage) { SocketAddress(raw: $0.baseAddress!, length: Int(length)) }
    }

    // MARK: Writing

    /// Writes `bytes` (all or nothing: when the buffer for a slow peer is full the write is dropped
    /// and counted, so a frame is never cut). Loop thread only.
    @discardableResult
    public func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        loop.assertInLoop()
        guard !isClosed else { return false }
        var offset = 0
        if pending.count == pendingOffset && isConnected {
            if let error = SystemCalls.sendAvailable(fd: fd, bytes, offset: &offset) {
                fail(error: "send: \(String(cString: strerror(error)))")
                return false
            }
            if offset == bytes.count { return true }
        }
        let remaining = bytes.count - offset
        guard pending.count - pendingOffset + remaining <= Self.maxPendingOutput else {
            droppedWrites &+= 1
            return offset > 0  // a partly written frame must still be completed
                ? appendPending(UnsafeRawBufferPointer(rebasing: bytes[offset...])) : false
        }
        return appendPending(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
    }

    private func appendPending(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if pendingOffset > 0 && pendingOffset == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingOffset = 0
        }
        pending.append(contentsOf: bytes)
        setWantsWrite(true)
        return true
    }

    private func setWantsWrite(_ on: Bool) {
        guard wantsWrite != on, !isClosed else { return }
        wantsWrite = on
        loop.modifyWatch(
            id: watchID, fd: fd, events: SystemConstants.epollIn | (on ? SystemConstants.epollOut : 0))
    }

    private func flushPending() {
        var offset = pendingOffset
        let error = pending.withUnsafeBytes { SystemCalls.sendAvailable(fd: fd, $0, offset: &offset) }
        pendingOffset = offset
        if let error {
            fail(error: "send: \(String(cString: strerror(error)))")
            return
        }
        guard pendingOffset == pending.count else { return }  // the socket is full; wait for EPOLLOUT
        pending.removeAll(keepingCapacity: true)
        pendingOffset = 0
        setWantsWrite(false)
    }

    // MARK: Events

    func handleEvents(_ events: UInt32) {
        guard !isClosed else { return }
        if !isConnected {
            guard events & (SystemConstants.epollOut | SystemConstants.epollErr | SystemConstants.epollHup) != 0 else {
                return
            }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0 else {
                fail(error: "connect to \(remoteAddress): \(String(cString: strerror(error)))")
                return
            }
            isConnected = true
            localAddress = Self.localName(fd)
            handler?.tcpConnected(self)
            if isClosed { return }
            if pending.count == pendingOffset { setWantsWrite(false) }
        }
        if events & SystemConstants.epollOut != 0 { flushPending() }
        if events & (SystemConstants.epollIn | SystemConstants.epollHup | SystemConstants.epollErr) != 0 {
            readAvailable()
        }
    }

    private func readAvailable() {
        // Bounded, so that one fast peer cannot starve the loop; epoll is level-triggered.
        for _ in 0..<16 {
            guard !isClosed else { return }
            let space = input.count - inputCount
            guard space > 0 else {
                fail(error: "a frame larger than \(input.count) bytes")
                return
            }
            let n = Glibc.recv(fd, input.baseAddress! + inputCount, space, 0)
            if n > 0 {
                inputCount += n
                deliver()
            } else if n == 0 {
                close(error: nil)
                return
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                return
            } else {
                fail(error: "recv: \(String(cString: strerror(errno)))")
                return
            }
        }
    }

    private func deliver() {
        guard let handler else {
            inputCount = 0
            return
        }
        let consumed = min(
            max(0, handler.tcpReceived(self, UnsafeMutableRawBufferPointer(rebasing: input[0..<inputCount]))),
            inputCount)
        guard !isClosed else { return }
        if consumed > 0 {
            let rest = inputCount - consumed
            if rest > 0 { (input.baseAddress!).copyMemory(from: input.baseAddress! + consumed, byteCount: rest) }
            inputCount = rest
        }
    }

    // MARK: Closing

    private func fail(error: String) {
        close(error: error)
    }

    private func close(error: String?) {
        guard !isClosed else { return }
        shutdownDescriptor()
        handler?.tcpClosed(self, error: error)
    }

    /// Closes the connection after trying once more to write what is buffered. Loop thread only;
    /// the handler is not called.
    public func close() {
        loop.assertInLoop()
        guard !isClosed else { return }
        if pending.count > pendingOffset && isConnected { flushPending() }
        shutdownDescriptor()
    }

    private func shutdownDescriptor() {
        isClosed = true
        loop.unwatch(id: watchID, fd: fd)
        Glibc.close(fd)
    }

    func loopClosing() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }
}
