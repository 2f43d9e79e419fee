import Foundation

/// Limits and timeouts for one WebSocket connection.
public struct WebSocketConfiguration: Sendable {
    /// Largest message (after reassembling fragments) accepted; bigger ones close with 1009.
    public var maxMessageBytes: Int
    /// Largest amount of unsent outgoing data before the peer is considered stuck and dropped.
    public var maxWriteBufferBytes: Int
    /// How long to wait for the peer's close frame after sending ours.
    public var closeTimeoutMilliseconds: UInt64
    /// Received message bytes waiting for their callbacks before the connection stops reading
    /// (TCP flow control then slows the peer); reading resumes below half of it.
    public var maxUndeliveredBytes: Int
    /// When set, a ping is sent after this many seconds without traffic from the peer, and the
    /// connection is dropped (1006) if nothing arrives within another interval.
    public var idlePingSeconds: Double?
    /// When set, a peer whose unsent data passes ``maxWriteBufferBytes`` loses the queued messages
    /// that have not started to go out, is sent a close frame with this code instead, and is dropped
    /// 2 s later; nil drops it at once (1006).
    public var writeOverflowCloseCode: UInt16?

    public init(
        maxMessageBytes: Int = 1024 * 1024, maxWriteBufferBytes: Int = 16 * 1024 * 1024,
        closeTimeoutMilliseconds: UInt64 = 5000, idlePingSeconds: Double? = nil,
        maxUndeliveredBytes: Int = 8 * 1024 * 1024
    ) {
        self.maxUndeliveredBytes = maxUndeliveredBytes
        self.maxMessageBytes = maxMessageBytes
        self.maxWriteBufferBytes = maxWriteBufferBytes
        self.closeTimeoutMilliseconds = closeTimeoutMilliseconds
        self.idlePingSeconds = idlePingSeconds
    }
}

/// One WebSocket connection (RFC 6455), server or client side.
///
/// The socket, the frame parser and all protocol state live on a ``Reactor`` thread. The public
/// methods may be called from any thread: frames are encoded on the caller's thread and queued to
/// the reactor in call order. Callbacks run on a per-connection serial queue, so for one
/// connection they never overlap, and they arrive in wire order. ``onClose`` is called exactly once.
///
/// Delivery starts when ``start()`` is called; the server calls it for you right after the
/// upgrade's `onOpen`. A client sets its callbacks and then calls ``start()``, so no message can
/// arrive before a callback exists.
// Safe: its state is guarded by `lock`; callbacks run on its serial queue.
public final class WebSocketConnection: @unchecked Sendable {
    /// True for the connecting side (which masks its frames).
    public let isClient: Bool
    /// The handshake request's target (path and query), e.g. `/v1/rtc?token=…`.
    public let requestTarget: String
    public let configuration: WebSocketConfiguration

    private let stateLock = NSLock()
    private var textHandler: (@Sendable (String) -> Void)?
    private var binaryHandler: (@Sendable ([UInt8]) -> Void)?
    private var closeHandler: (@Sendable (UInt16, String) -> Void)?
    private var pongHandler: (@Sendable ([UInt8]) -> Void)?
    private var started = false
    private var closeRequested = false
    private var open = true
    private var undeliveredBytes = 0
    private var readingPaused = false
    private var pauses = 0
    /// How many times reading was paused for slow callbacks (for tests and metrics).
    public var readPauseCount: Int { locked { pauses } }
    private let callbackQueue: DispatchQueue

    // Reactor-confined state.
    let reactor: Reactor
    let channel: StreamChannel
    private var readBuffer: [UInt8] = []
    private var assembler: WebSocketMessageAssembler
    private var closeSent = false
    private var closeReceived = false
    private var failed = false
    private var reportedClose = false
    private var peerCloseCode: UInt16?
    private var peerCloseReason = ""
    private var localCloseCode: UInt16?
    private var localCloseReason = ""
    private var closeTimer: UInt64?
    private var pingTimer: UInt64?
    private var lastReceiveMS = Reactor.nowMS()
    private var awaitingKeepalivePong = false
    /// Called on the reactor thread when the socket closes (the server untracks the connection).
    var onChannelClosed: (() -> Void)?

    init(
        channel: StreamChannel, reactor: Reactor, isClient: Bool, requestTarget: String,
        configuration: WebSocketConfiguration
    ) {
        self.channel = channel
        self.reactor = reactor
        self.isClient = isClient
        self.requestTarget = requestTarget
        self.configuration = configuration
        callbackQueue = DispatchQueue(label: "websocket", attributes: .initiallyInactive)
        assembler = WebSocketMessageAssembler(maxMessageBytes: configuration.maxMessageBytes, expectMasked: !isClient)
        channel.maxWriteBuffer = configuration.maxWriteBufferBytes
        if let code = configuration.writeOverflowCloseCode {
            channel.onWriteOverflow = { [weak self] in
                // Unsent messages are dropped so that the close frame is next in line.
                self?.channel.discardUnsentWrites()
                self?.fail(code: code, reason: "peer does not read: output queue over its limit")
            }
        }
    }

    // MARK: Callbacks

    /// Called with each complete text message.
    public var onText: (@Sendable (String) -> Void)? {
        get { locked { textHandler } }
        set { locked { textHandler = newValue } }
    }

    /// Called with each complete binary message.
    public var onBinary: (@Sendable ([UInt8]) -> Void)? {
        get { locked { binaryHandler } }
        set { locked { binaryHandler = newValue } }
    }

    /// Called once when the connection is gone, with the peer's close code (1005 when its close
    /// frame had none, 1006 when the TCP connection dropped without a close handshake, or the code
    /// we failed the connection with) and reason.
    public var onClose: (@Sendable (UInt16, String) -> Void)? {
        get { locked { closeHandler } }
        set { locked { closeHandler = newValue } }
    }

    /// Called with the payload of each pong (ours are answered automatically to pings).
    public var onPong: (@Sendable ([UInt8]) -> Void)? {
        get { locked { pongHandler } }
        set { locked { pongHandler = newValue } }
    }

    /// Begins delivering callbacks. Idempotent.
    public func start() {
        let first: Bool = locked {
            defer { started = true }
            return !started
        }
        if first { callbackQueue.activate() }
    }

    /// True until a close has been sent or received, or the socket dropped.
    public var isOpen: Bool { locked { open && !closeRequested } }

    // MARK: Sending

    /// Sends a text message.
    public func send(text: String) {
        sendData(opcode: .text, payload: Array(text.utf8))
    }

    /// Sends a text message encoded once for many connections (``PreparedTextMessage``): a server
    /// connection queues the shared frame bytes as they are; a client connection masks its own copy.
    public func send(prepared message: PreparedTextMessage) {
        guard locked({ !closeRequested }) else { return }
        queueFrames([isClient ? encode(.text, message.payload) : message.serverFrame])
    }

    /// Sends a binary message.
    public func send(binary: [UInt8]) {
        sendData(opcode: .binary, payload: binary)
    }

    /// Runs `body` once everything sent before this call has been handed to the socket (the
    /// output queue is empty), or the connection is gone. For output paced by the peer's reading
    /// (a long PubSub history replay): send a piece, wait for the drain, send the next. `body`
    /// runs on the reactor thread and must only hand work on (e.g. `queue.async`).
    public func whenOutputDrained(_ body: @escaping @Sendable () -> Void) {
        reactor.enqueue { [self] in channel.whenDrained(body) }
    }

    /// Sends a ping (payload at most 125 bytes; longer payloads are cut).
    public func sendPing(_ payload: [UInt8] = []) {
        let frame = encode(.ping, payload.prefix(125))
        reactor.enqueue { [self] in
            guard !closeSent, !channel.isClosed else { return }
            channel.write(frame)
        }
    }

    /// Sends a message as several frames (a first frame and continuations); for tests and for
    /// streaming large payloads.
    public func sendFragmented(text: String, fragmentSize: Int) {
        let bytes = Array(text.utf8)
        let size = max(1, fragmentSize)
        var frames: [[UInt8]] = []
        var offset = 0
        repeat {
            let end = min(bytes.count, offset + size)
            frames.append(encode(offset == 0 ? .text : .continuation, bytes[offset..<end], fin: end == bytes.count))
            offset = end
        } while offset < bytes.count
        queueFrames(frames)
    }

    /// Starts the closing handshake. Further sends are dropped; ``onClose`` follows when the peer
    /// answers (or after the close timeout).
    public func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "") {
        let proceed: Bool = locked {
            defer { closeRequested = true }
            return !closeRequested
        }
        guard proceed else { return }
        reactor.enqueue { [self] in initiateClose(code: code, reason: reason) }
    }

    private func sendData(opcode: WebSocketOpcode, payload: [UInt8]) {
        guard locked({ !closeRequested }) else { return }
        queueFrames([encode(opcode, payload)])
    }

    private func queueFrames(_ frames: [[UInt8]]) {
        reactor.enqueue { [self] in
            guard !closeSent, !channel.isClosed else { return }
            for frame in frames where !channel.write(frame) { return }
        }
    }

    private func encode(_ opcode: WebSocketOpcode, _ payload: some Collection<UInt8>, fin: Bool = true) -> [UInt8] {
        WebSocketFrameCodec.encode(
            opcode: opcode, payload: payload, fin: fin, maskKey: isClient ? UInt32.random(in: 0...UInt32.max) : nil)
    }

    private func locked<T>(_ body: () -> T) -> T {
        stateLock.lock()
        defer { stateLock.unlock() }
        return body()
    }

    // MARK: Reactor thread

    /// Takes over the channel, processing bytes that arrived together with the handshake.
    func attach(initialBytes: [UInt8]) {
        schedulePing()
        if !initialBytes.isEmpty {
            readBuffer = initialBytes
            processFrames()
        }
    }

    private func initiateClose(code: UInt16, reason: String) {
        guard !channel.isClosed, !closeSent else { return }
        closeSent = true
        localCloseCode = code
        localCloseReason = reason
        channel.write(encode(.close, WebSocketFrameCodec.closePayload(code: code, reason: reason)))
        if closeReceived {
            channel.finish()
        } else {
            closeTimer = reactor.schedule(afterMilliseconds: configuration.closeTimeoutMilliseconds) { [weak self] in
                self?.channel.forceClose()
            }
        }
    }

    /// Fails the connection (RFC 6455 §7.1.7): send a close with `code`, stop reading frames, close.
    private func fail(code: UInt16, reason: String) {
        guard !failed else { return }
        failed = true
        locked { closeRequested = true }
        if !closeSent {
            closeSent = true
            localCloseCode = code
            localCloseReason = reason
            channel.write(
                encode(.close, WebSocketFrameCodec.closePayload(code: code, reason: reason)), exceedingLimit: true)
        }
        channel.finish()
    }

    fileprivate func received(_ bytes: UnsafeRawBufferPointer) {
        guard !failed, !closeReceived else { return }
        lastReceiveMS = Reactor.nowMS()
        awaitingKeepalivePong = false
        readBuffer.append(contentsOf: bytes)
        processFrames()
        let pause: Bool = locked {
            guard !readingPaused, undeliveredBytes > configuration.maxUndeliveredBytes else { return false }
            readingPaused = true
            pauses += 1
            return true
        }
        if pause { channel.setReading(false) }
    }

    /// Called on the callback queue after a message callback ran.
    private func delivered(_ count: Int) {
        let resume: Bool = locked {
            undeliveredBytes -= count
            guard readingPaused, undeliveredBytes <= configuration.maxUndeliveredBytes / 2 else { return false }
            readingPaused = false
            return true
        }
        if resume { reactor.enqueue { [self] in channel.setReading(true) } }
    }

    private func processFrames() {
        var consumed = 0
        defer {
            if consumed > 0 {
                if consumed >= readBuffer.count {
                    // Nothing partial left: give the memory back (a server holds thousands of idle
                    // connections; the next read allocates what it needs).
                    readBuffer = []
                } else {
                    readBuffer.removeFirst(consumed)
                }
            }
        }
        while !failed, !closeReceived, !channel.isClosed {
            let result: Result<(event: WebSocketEvent?, length: Int)?, WebSocketProtocolViolation> =
                readBuffer.withUnsafeBytes { raw in
                    do throws(WebSocketProtocolViolation) {
                        return .success(try assembler.next(UnsafeRawBufferPointer(rebasing: raw[consumed...])))
                    } catch {
                        return .failure(error)
                    }
                }
            switch result {
            case .success(nil): return
            case .success(let (event, length)?):
                consumed += length
                if let event { handle(event) }
            case .failure(let violation):
                fail(code: violation.code, reason: violation.reason)
                return
            }
        }
    }

    private func handle(_ event: WebSocketEvent) {
        switch event {
        case .text(let text):
            let count = text.utf8.count
            deliver(bytes: count) { $0.textHandler.map { handler in { handler(text) } } }
        case .binary(let payload):
            deliver(bytes: payload.count) { $0.binaryHandler.map { handler in { handler(payload) } } }
        case .ping(let payload):
            if !closeSent { channel.write(encode(.pong, payload)) }
        case .pong(let payload):
            deliver { $0.pongHandler.map { handler in { handler(payload) } } }
        case .close(let code, let reason):
            handleClose(code: code, reason: reason)
        }
    }

    private func handleClose(code: UInt16, reason: String) {
        closeReceived = true
        peerCloseCode = code
        peerCloseReason = reason
        locked { closeRequested = true }
        if !closeSent {
            // Echo the peer's code (RFC 6455 §5.5.1).
            closeSent = true
            let echo =
                code == WebSocketCloseCode.noStatus ? [] : WebSocketFrameCodec.closePayload(code: code, reason: "")
            channel.write(encode(.close, echo))
        }
        if let t = closeTimer { reactor.cancelTimer(t) }
        channel.finish()
    }

    fileprivate func channelClosed() {
        if let t = closeTimer { reactor.cancelTimer(t) }
        if let t = pingTimer { reactor.cancelTimer(t) }
        guard !reportedClose else { return }
        reportedClose = true
        locked { open = false }
        let code = peerCloseCode ?? (failed ? localCloseCode : nil) ?? WebSocketCloseCode.abnormal
        let reason = peerCloseCode != nil ? peerCloseReason : (failed ? localCloseReason : "")
        deliver { $0.closeHandler.map { handler in { handler(code, reason) } } }
        onChannelClosed?()
        onChannelClosed = nil
    }

    /// Queues a callback on the serial queue; the handler is read when it runs, so one installed
    /// in `onOpen` sees every message.
    private func deliver(bytes: Int = 0, _ pick: @escaping @Sendable (WebSocketConnection) -> (() -> Void)?) {
        if bytes > 0 { locked { undeliveredBytes += bytes } }
        callbackQueue.async { [self] in
            let action = locked { pick(self) }
            action?()
            if bytes > 0 { delivered(bytes) }
        }
    }

    /// Runs `body` on the callback queue ahead of any message (used for the server's `onOpen`).
    func runOnCallbackQueue(_ body: @escaping @Sendable () -> Void) {
        callbackQueue.async(execute: body)
    }

    private func schedulePing() {
        guard let seconds = configuration.idlePingSeconds, seconds > 0 else { return }
        let interval = UInt64(seconds * 1000)
        pingTimer = reactor.schedule(afterMilliseconds: interval) { [weak self] in
            guard let self, !self.channel.isClosed else { return }
            if Reactor.nowMS() - self.lastReceiveMS >= interval {
                if self.awaitingKeepalivePong {
                    self.channel.forceClose()
                    return
                }
                self.awaitingKeepalivePong = true
                if !self.closeSent { self.channel.write(self.encode(.ping, [UInt8]())) }
            }
            self.schedulePing()
        }
    }
}

extension WebSocketConnection: StreamChannelDelegate {
    func channel(_ channel: StreamChannel, received bytes: UnsafeRawBufferPointer) {
        received(bytes)
    }

    func channelClosed(_ channel: StreamChannel) {
        channelClosed()
    }
}

/// A text message framed once and sent to many connections (a room's broadcast): the frame bytes of
/// an unmasked (server-to-client) frame are built here, and every ``WebSocketConnection/send(prepared:)``
/// shares them instead of copying and framing the text again.
public struct PreparedTextMessage: Sendable {
    /// The UTF-8 text.
    public let payload: [UInt8]
    /// The complete unmasked frame.
    let serverFrame: [UInt8]

    /// Frames `text` once.
    public init(_ text: String) {
        payload = Array(text.utf8)
        serverFrame = WebSocketFrameCodec.encode(opcode: .text, payload: payload, maskKey: nil)
    }

    /// Size of the text in bytes.
    public var byteCount: Int { payload.count }
}
