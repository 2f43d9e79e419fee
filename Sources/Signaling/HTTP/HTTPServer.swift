import Foundation
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// Limits for ``HTTPServer``.
public struct HTTPServerConfiguration: Sendable {
    /// Request line plus headers; larger heads get 431.
    public var maxHeadBytes: Int = 16 * 1024
    /// Request bodies; larger bodies get 413.
    public var maxBodyBytes: Int = 1024 * 1024
    /// Unsent response bytes per connection before the client is dropped as stuck.
    public var maxWriteBufferBytes: Int = 16 * 1024 * 1024
    /// Simultaneous connections (HTTP and WebSocket); further accepts are closed at once.
    public var maxConnections: Int = 10_000
    /// Time a connection may take to deliver a complete request (from accept, or from the previous
    /// response on a keep-alive connection) before it gets 408 and is closed; stops idle or
    /// slow-drip clients from holding sockets.
    public var requestTimeoutMilliseconds: UInt64 = 30_000
    /// Settings for upgraded WebSocket connections.
    public var webSocket = WebSocketConfiguration()

    public init() {}
}

/// Answers one request, from any thread, exactly once (later calls are ignored).
// Safe: the answered flag is guarded by `lock`; the reply hops to the reactor thread.
public final class HTTPResponder: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    private let deliver: (HTTPResponse) -> Void

    init(deliver: @escaping (HTTPResponse) -> Void) {
        self.deliver = deliver
    }

    /// Sends the response.
    public func respond(_ response: HTTPResponse) {
        lock.lock()
        let first = !done
        done = true
        lock.unlock()
        if first { deliver(response) }
    }
}

/// An HTTP/1.1 server on one epoll ``Reactor`` thread, with WebSocket upgrades.
///
/// Connections are non-blocking sockets owned by the reactor: request parsing with size limits,
/// keep-alive and pipelining, bounded write buffers. Handlers run in three flavours:
/// - ``route(method:path:handler:)``: synchronous, runs on the reactor thread, so it must be quick;
/// - ``route(method:path:asyncHandler:)``: an `async` handler, run on the server's own executor (not
///   the cooperative pool, which callers may be blocking);
/// - ``route(method:path:responder:)``: completion-based; call ``HTTPResponder/respond(_:)`` from
///   any thread when ready.
/// While a request is being answered the connection stops reading, which bounds per-connection
/// memory and keeps pipelined responses in order.
// Safe: connection state lives on the reactor thread; shared tables are guarded by `lock`.
public final class HTTPServer: @unchecked Sendable {
    public typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse
    public typealias AsyncHandler = @Sendable (HTTPRequest) async -> HTTPResponse
    public typealias ResponderHandler = @Sendable (HTTPRequest, HTTPResponder) -> Void
    public typealias UpgradeHandler = @Sendable (HTTPRequest) -> WebSocketUpgradeDecision

    public let host: String
    public let configuration: HTTPServerConfiguration
    let reactor: Reactor
    private let ownsReactor: Bool
    private let asyncExecutor = DispatchTaskExecutor(label: "http.handlers", concurrent: true)
    private let lock = NSLock()
    private var routes: [String: [String: ResponderHandler]] = [:]
    private var upgradeRoutes: [String: UpgradeHandler] = [:]
    private var prefixRoutes: [String: [String: ResponderHandler]] = [:]
    private var boundPort: UInt16
    private var stopped = false

    // Reactor-thread state.
    private var listener: Listener?
    private var channels: [Int32: StreamChannel] = [:]
    private var webSockets: [Int32: WebSocketConnection] = [:]

    /// Creates a server; nothing listens until ``start()``.
    /// - Parameters:
    ///   - port: TCP port; 0 picks an ephemeral one (read ``port`` after ``start()``).
    ///   - reactor: the reactor to run on; by default the server starts and owns its own.
    public init(
        host: String = "127.0.0.1", port: UInt16 = 7880,
        configuration: HTTPServerConfiguration = HTTPServerConfiguration(), reactor: Reactor? = nil
    ) {
        self.host = host
        self.boundPort = port
        self.configuration = configuration
        self.reactor = reactor ?? Reactor(name: "http-server")
        self.ownsReactor = reactor == nil
    }

    deinit {
        // Without stop() the owned reactor would keep running with the listening socket.
        if ownsReactor { reactor.shutdown() }
    }

    /// The bound port (the ephemeral one when created with port 0).
    public var port: UInt16 {
        lock.lock()
        defer { lock.unlock() }
        return boundPort
    }

    // MARK: Routing

    /// Registers a synchronous handler for `method` and exact `path`. It runs on the reactor
    /// thread: it must not block.
    public func route(method: String, path: String, handler: @escaping Handler) {
        route(method: method, path: path, responder: { request, responder in responder.respond(handler(request)) })
    }

    /// Registers an `async` handler; it runs off the reactor thread.
    public func route(method: String, path: String, asyncHandler: @escaping AsyncHandler) {
        let executor = asyncExecutor
        route(
            method: method, path: path,
            responder: { request, responder in
                Task(executorPreference: executor) { responder.respond(await asyncHandler(request)) }
            })
    }

    /// Registers a completion-based handler: it is called on the reactor thread and must return
    /// quickly, but may answer later from any thread through the responder.
    public func route(method: String, path: String, responder: @escaping ResponderHandler) {
        lock.lock()
        routes[path, default: [:]][method.uppercased()] = responder
        lock.unlock()
    }

    /// Registers a synchronous handler for every path that starts with `pathPrefix` (e.g.
    /// `/v1/rooms/` for `/v1/rooms/{id}/end`) and has no exact route; the longest prefix wins.
    /// The handler reads the rest from ``HTTPRequest/path``. Runs on the reactor thread.
    public func route(method: String, pathPrefix: String, handler: @escaping Handler) {
        lock.lock()
        prefixRoutes[pathPrefix, default: [:]][method.uppercased()] = { request, responder in
            responder.respond(handler(request))
        }
        lock.unlock()
    }

    /// The `async` form of ``route(method:pathPrefix:handler:)``; it runs off the reactor thread.
    public func route(method: String, pathPrefix: String, asyncHandler: @escaping AsyncHandler) {
        let executor = asyncExecutor
        lock.lock()
        prefixRoutes[pathPrefix, default: [:]][method.uppercased()] = { request, responder in
            Task(executorPreference: executor) { responder.respond(await asyncHandler(request)) }
        }
        lock.unlock()
    }

    /// Accepts WebSocket upgrades at `path` (any query). The handler runs on the reactor thread
    /// after the handshake headers were validated and decides to accept or refuse. Non-upgrade
    /// requests to this path get 426.
    public func webSocket(path: String, handler: @escaping UpgradeHandler) {
        lock.lock()
        upgradeRoutes[path] = handler
        lock.unlock()
    }

    // MARK: Lifecycle

    /// Binds and starts accepting connections.
    public func start() throws(HTTPError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var res: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &res)
        guard rc == 0, let ai = res else {
            throw .connectFailed("cannot resolve \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(res) }
        let fd = socket(
            ai.pointee.ai_family, ai.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), ai.pointee.ai_protocol)
        guard fd >= 0 else { throw .connectFailed("socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, ai.pointee.ai_addr, ai.pointee.ai_addrlen) == 0, listen(fd, 1024) == 0 else {
            let why = String(cString: strerror(errno))
            close(fd)
            throw .connectFailed("bind/listen \(host):\(port): \(why)")
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let actual: UInt16 = withUnsafeMutablePointer(to: &storage) { ptr in
            _ = ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            if Int32(ptr.pointee.ss_family) == AF_INET6 {
                return ptr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    UInt16(bigEndian: $0.pointee.sin6_port)
                }
            }
            return ptr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        let flags = fcntl(fd, F_GETFL, 0)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        lock.lock()
        boundPort = actual
        lock.unlock()
        let ready = DispatchSemaphore(value: 0)
        reactor.enqueue { [self] in
            let listener = Listener(fd: fd, server: self)
            self.listener = listener
            reactor.register(fd: fd, events: SystemConstants.epollIn, channel: listener)
            ready.signal()
        }
        ready.wait()
    }

    /// Stops listening and closes every connection (WebSockets get a 1001 close frame first).
    public func stop() {
        lock.lock()
        let already = stopped
        stopped = true
        lock.unlock()
        guard !already else { return }
        let done = DispatchSemaphore(value: 0)
        let onReactor = reactor.isReactorThread
        let work = { [self] in
            if let l = listener {
                reactor.unregister(fd: l.fd)
                close(l.fd)
                listener = nil
            }
            for ws in Array(webSockets.values) {
                ws.channel.write(
                    WebSocketFrameCodec.encode(
                        opcode: .close,
                        payload: WebSocketFrameCodec.closePayload(
                            code: WebSocketCloseCode.goingAway, reason: "server stopping"),
                        maskKey: nil))
            }
            for channel in Array(channels.values) { channel.forceClose() }
            done.signal()
        }
        if onReactor {
            work()
        } else {
            reactor.enqueue(work)
            done.wait()
        }
        if ownsReactor { reactor.shutdown() }
    }

    /// Number of open connections (HTTP and WebSocket); for tests and metrics.
    public func connectionCount() -> Int {
        if reactor.isReactorThread { return channels.count }
        let result = LockedBox(0)
        let done = DispatchSemaphore(value: 0)
        reactor.enqueue { [self] in
            result.value = channels.count
            done.signal()
        }
        done.wait()
        return result.value
    }

    // MARK: Reactor thread

    /// How long the listener rests after `accept` failed for lack of descriptors or memory.
    static let acceptBackoffMilliseconds: UInt64 = 100
    private var acceptPaused = false
    /// Times the accept loop backed off (EMFILE and friends); for tests and logs.
    private(set) var acceptBackoffs = 0

    fileprivate func accept(on listenFD: Int32) {
        for _ in 0..<64 {
            let fd = Glibc.accept(listenFD, nil, nil)
            if fd < 0 {
                let error = errno
                // Out of descriptors (or memory): the pending connection stays readable, so a
                // level-triggered loop would spin. Stop watching the listener for a moment.
                if error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM {
                    pauseAccepting(listenFD)
                }
                return
            }
            guard channels.count < configuration.maxConnections else {
                close(fd)
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            configureStreamSocket(fd)
            let channel = StreamChannel(fd: fd, reactor: reactor, maxWriteBuffer: configuration.maxWriteBufferBytes)
            let connection = HTTPServerConnection(server: self, channel: channel)
            channels[fd] = channel
            channel.start(delegate: connection)
            connection.armRequestTimer()
        }
    }

    private func pauseAccepting(_ listenFD: Int32) {
        guard !acceptPaused else { return }
        acceptPaused = true
        acceptBackoffs += 1
        reactor.modify(fd: listenFD, events: 0)
        reactor.schedule(afterMilliseconds: Self.acceptBackoffMilliseconds) { [weak self] in
            guard let self else { return }
            self.acceptPaused = false
            guard let listener = self.listener, listener.fd == listenFD else { return }
            self.reactor.modify(fd: listenFD, events: SystemConstants.epollIn)
        }
    }

    fileprivate func connectionClosed(_ channel: StreamChannel) {
        channels[channel.fd] = nil
        webSockets[channel.fd] = nil
    }

    fileprivate func handlers(for path: String) -> (routes: [String: ResponderHandler]?, upgrade: UpgradeHandler?) {
        lock.lock()
        defer { lock.unlock() }
        if let exact = routes[path] { return (exact, nil) }
        if let upgrade = upgradeRoutes[path] { return (nil, upgrade) }
        let prefix = prefixRoutes.keys.filter { path.hasPrefix($0) }.max { $0.count < $1.count }
        return (prefix.flatMap { prefixRoutes[$0] }, nil)
    }

    fileprivate func upgraded(_ ws: WebSocketConnection) {
        webSockets[ws.channel.fd] = ws
        let fd = ws.channel.fd
        ws.onChannelClosed = { [weak self] in
            self?.channels[fd] = nil
            self?.webSockets[fd] = nil
        }
    }
}

/// A small mutable box for handing a value back from the reactor thread.
// Safe: the value is guarded by `lock`.
final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: T
    init(_ value: T) { stored = value }
    var value: T {
        get {
            lock.lock()
            defer { lock.unlock() }
            return stored
        }
        set {
            lock.lock()
            stored = newValue
            lock.unlock()
        }
    }
}

private final class Listener: ReactorChannel, ClosableChannel {
    let fd: Int32
    weak var server: HTTPServer?
    init(fd: Int32, server: HTTPServer) {
        self.fd = fd
        self.server = server
    }
    func handleEvents(_ events: UInt32) { server?.accept(on: fd) }
    func forceClose() { close(fd) }
}

/// One HTTP connection until it closes or upgrades. Reactor-thread only.
private final class HTTPServerConnection: StreamChannelDelegate {
    /// Weak so that a server released without ``HTTPServer/stop()`` does not leave dangling references.
    weak var server: HTTPServer?
    let reactor: Reactor
    let configuration: HTTPServerConfiguration
    let channel: StreamChannel
    private var parser: HTTPRequestParser
    private var inFlight = false
    private var done = false
    private var requestTimer: UInt64?

    init(server: HTTPServer, channel: StreamChannel) {
        self.server = server
        self.reactor = server.reactor
        self.configuration = server.configuration
        self.channel = channel
        parser = HTTPRequestParser(
            maxHeadBytes: server.configuration.maxHeadBytes, maxBodyBytes: server.configuration.maxBodyBytes)
    }

    func channel(_ channel: StreamChannel, received bytes: UnsafeRawBufferPointer) {
        parser.append(bytes)
        processRequests()
    }

    func channelClosed(_ channel: StreamChannel) {
        done = true
        disarmRequestTimer()
        server?.connectionClosed(channel)
    }

    func armRequestTimer() {
        disarmRequestTimer()
        requestTimer = reactor.schedule(afterMilliseconds: configuration.requestTimeoutMilliseconds) { [weak self] in
            guard let self, !self.done, !self.inFlight else { return }
            self.requestTimer = nil
            self.fail(status: 408, message: "request timeout")
        }
    }

    private func disarmRequestTimer() {
        if let t = requestTimer { reactor.cancelTimer(t) }
        requestTimer = nil
    }

    private func processRequests() {
        while !inFlight, !done, !channel.isClosed {
            let request: HTTPRequest?
            do {
                request = try parser.next()
            } catch {
                fail(status: error.status, message: "\(error)")
                return
            }
            guard let request else {
                // Bound what an idle pipelining client can make us hold.
                if parser.bufferedCount > configuration.maxHeadBytes + configuration.maxBodyBytes {
                    fail(status: 413, message: "too much buffered data")
                }
                return
            }
            dispatch(request)
        }
    }

    private func fail(status: Int, message: String) {
        done = true
        channel.write(HTTPResponse.text(message + "\n", status: status).serialized(keepAlive: false))
        channel.finish()
    }

    private func dispatch(_ request: HTTPRequest) {
        disarmRequestTimer()
        guard let server else { return answer(HTTPResponse.text("server stopping\n", status: 503), to: request) }
        let (routes, upgrade) = server.handlers(for: request.path)
        if let upgrade {
            handleUpgrade(request, upgrade)
            return
        }
        guard let routes else { return answer(HTTPResponse.text("not found\n", status: 404), to: request) }
        var handler = routes[request.method]
        if handler == nil, request.method == "HEAD" { handler = routes["GET"] }
        guard let handler else {
            var response = HTTPResponse.text("method not allowed\n", status: 405)
            response.headers.add("Allow", routes.keys.sorted().joined(separator: ", "))
            return answer(response, to: request)
        }
        inFlight = true
        channel.setReading(false)
        let reactor = reactor
        // Always answer through the queue, even from the reactor thread: answering inline would
        // recurse once per pipelined request.
        let responder = HTTPResponder { [self] response in
            reactor.enqueue { self.answer(response, to: request) }
        }
        handler(request, responder)
    }

    private func answer(_ response: HTTPResponse, to request: HTTPRequest) {
        inFlight = false
        guard !channel.isClosed else { return }
        let keepAlive = request.keepAlive && !done
        channel.write(response.serialized(keepAlive: keepAlive, isHeadRequest: request.method == "HEAD"))
        if keepAlive {
            channel.setReading(true)
            armRequestTimer()
            processRequests()
        } else {
            done = true
            channel.finish()
        }
    }

    private func handleUpgrade(_ request: HTTPRequest, _ upgrade: HTTPServer.UpgradeHandler) {
        let accept: String
        switch WebSocketHandshake.validate(request) {
        case .failure(let rejection):
            done = true
            channel.write(rejection.response.serialized(keepAlive: false))
            channel.finish()
            return
        case .success(let value):
            accept = value
        }
        switch upgrade(request) {
        case .reject(let response):
            answer(response, to: request)
        case .accept(let extraHeaders, let onOpen):
            done = true
            var headers = HTTPHeaders([
                ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", accept),
            ])
            for (name, value) in extraHeaders { headers.add(name, value) }
            channel.write(HTTPResponse(status: 101, headers: headers).serialized(keepAlive: true))
            let ws = WebSocketConnection(
                channel: channel, reactor: reactor, isClient: false, requestTarget: request.target,
                configuration: configuration.webSocket)
            channel.setDelegate(ws)
            server?.upgraded(ws)
            ws.runOnCallbackQueue { onOpen(ws) }
            ws.start()
            ws.attach(initialBytes: parser.takeBuffered())
        }
    }
}
