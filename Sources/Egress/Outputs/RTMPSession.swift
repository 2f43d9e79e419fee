import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One RTMP connection of a publisher (Adobe RTMP 1.0 specification): the TCP socket, the simple
/// handshake (C0–C2 / S0–S2), the chunk stream both ways, the protocol control messages, and the AMF0
/// commands of publishing (connect, releaseStream, FCPublish, createStream, publish). Blocking I/O with
/// timeouts, on the output's sender thread only.
final class RTMPSession {
    /// Chunk stream ids: protocol control, commands, audio, metadata, video (as common publishers use them).
    enum Channel {
        static let control: UInt32 = 2
        static let command: UInt32 = 3
        static let audio: UInt32 = 4
        static let data: UInt32 = 5
        static let video: UInt32 = 6
    }
    /// The chunk size this side sends with (announced right after the handshake).
    static let outChunkSize = 4096

    private let fd: Int32
    private let url: RTMPURL
    /// What the server sends, parsed.
    private var reader = RTMPChunkReader()
    private var bytesReceived: UInt64 = 0
    private var lastAcknowledged: UInt64 = 0
    private var out: [UInt8] = []
    /// What one `recv` reads into (kept, so reading allocates nothing).
    private var readBuffer = [UInt8](repeating: 0, count: 16_384)
    private var command: [UInt8] = []
    /// The message stream the server created for the publish.
    private(set) var streamID: UInt32 = 0
    private var nextTransaction = 1.0

    /// Connects and does the handshake. Throws ``RTMPOutput/Failure``.
    init(url: RTMPURL, timeoutSeconds: Double) throws {
        self.url = url
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(url.host, String(url.port), &hints, &list)
        guard resolved == 0, let first = list else {
            throw RTMPOutput.Failure.connectFailed(
                "cannot resolve \(url.host): \(String(cString: gai_strerror(resolved)))")
        }
        defer { freeaddrinfo(list) }
        var lastError: Int32 = 0
        var connected: Int32 = -1
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let a = entry {
            let s = socket(
                a.pointee.ai_family, a.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), a.pointee.ai_protocol)
            if s >= 0 {
                // Linux's connect, send and recv all honour these: no call blocks longer than the timeout.
                var tv = timeval(
                    tv_sec: Int(timeoutSeconds), tv_usec: Int((timeoutSeconds.truncatingRemainder(dividingBy: 1)) * 1e6)
                )
                setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                var one: Int32 = 1
                setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                if Glibc.connect(s, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 {
                    connected = s
                    break
                }
                lastError = errno
                close(s)
            } else {
                lastError = errno
            }
            entry = a.pointee.ai_next
        }
        guard connected >= 0 else {
            throw RTMPOutput.Failure.connectFailed(
                "\(url.host):\(url.port): \(String(cString: strerror(lastError))) (errno \(lastError))")
        }
        fd = connected
        out.reserveCapacity(1 << 16)
        do { try handshake() } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    // MARK: - Handshake

    private func handshake() throws {
        // C0 (version 3) and C1: time 0, zero, 1528 random bytes.
        var c0c1: [UInt8] = [3]
        c0c1.append(contentsOf: [UInt8](repeating: 0, count: 8))
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<1528 { c0c1.append(UInt8.random(in: 0...255, using: &rng)) }
        try sendAll(c0c1[...])
        let s0s1 = try receive(exactly: 1 + 1536)
        guard s0s1[0] == 3 else {
            throw RTMPOutput.Failure.protocolError("handshake: server speaks RTMP version \(s0s1[0]), not 3")
        }
        // C2 echoes S1; S2 (which should echo C1) is read and not checked, as servers vary.
        try sendAll(s0s1[1...])
        _ = try receive(exactly: 1536)
        var size: [UInt8] = []
        size.appendBE32(UInt32(Self.outChunkSize))
        try sendMessage(
            channel: Channel.control, type: RTMPMessageType.setChunkSize, streamID: 0, timestamp: 0, size[...])
    }

    // MARK: - Publishing

    /// connect, releaseStream, FCPublish, createStream and publish, waiting for the server's answers.
    /// Throws ``RTMPOutput/Failure/rejected(_:)`` when the server refuses, ``RTMPOutput/Failure/timedOut(_:)``.
    func publish(deadline: Date) throws {
        let connectID = try sendCommand(
            "connect",
            .object([
                ("app", .string(url.app)), ("type", .string("nonprivate")),
                ("flashVer", .string("FMLE/3.0 (compatible; understudy)")), ("tcUrl", .string(url.tcURL)),
            ]))
        try waitFor(deadline: deadline, what: "the answer to connect") { values in
            try self.result(values, connectID) != nil
        }
        _ = try sendCommand("releaseStream", .null, .string(url.stream))
        _ = try sendCommand("FCPublish", .null, .string(url.stream))
        let createID = try sendCommand("createStream", .null)
        try waitFor(deadline: deadline, what: "the answer to createStream") { values in
            guard let answer = try self.result(values, createID) else { return false }
            guard let id = answer.count > 3 ? answer[3].number : nil, id >= 0, id < Double(UInt32.max) else {
                throw RTMPOutput.Failure.protocolError("createStream answered without a stream id")
            }
            self.streamID = UInt32(id)
            return true
        }
        _ = try sendCommand("publish", .null, .string(url.stream), .string("live"), streamID: streamID)
        try waitFor(deadline: deadline, what: "NetStream.Publish.Start") { values in
            guard values.first?.string == "onStatus", values.count > 3 else {
                _ = try self.result(values, nil)
                return false
            }
            let info = values[3]
            if info["level"]?.string == "error" {
                throw RTMPOutput.Failure.rejected(
                    (info["code"]?.string ?? "error") + ": " + (info["description"]?.string ?? ""))
            }
            return info["code"]?.string == "NetStream.Publish.Start"
        }
    }

    /// Tells the server the stream ends (FCUnpublish, deleteStream); errors are of no interest any more.
    func unpublish() {
        _ = try? sendCommand("FCUnpublish", .null, .string(url.stream))
        _ = try? sendCommand("deleteStream", .null, .number(Double(streamID)))
    }

    /// The values of a `_result` for `transaction` (nil for another message); throws for an `_error`.
    private func result(_ values: [AMF0.Value], _ transaction: Double?) throws -> [AMF0.Value]? {
        let name = values.first?.string
        if name == "_error" {
            let info = values.count > 3 ? values[3] : .null
            throw RTMPOutput.Failure.rejected(
                (info["code"]?.string ?? "_error") + ": " + (info["description"]?.string ?? ""))
        }
        guard name == "_result", let transaction, values.count > 1, values[1].number == transaction else { return nil }
        return values
    }

    private func sendCommand(_ name: String, _ arguments: AMF0.Value..., streamID: UInt32 = 0) throws -> Double {
        let id = nextTransaction
        nextTransaction += 1
        command.removeAll(keepingCapacity: true)
        AMF0.append(.string(name), to: &command)
        AMF0.append(.number(id), to: &command)
        for argument in arguments { AMF0.append(argument, to: &command) }
        try sendMessage(
            channel: Channel.command, type: RTMPMessageType.commandAMF0, streamID: streamID, timestamp: 0, command[...])
        return id
    }

    /// Reads messages until `done` says so for a command (or throws), or the deadline passes.
    private func waitFor(deadline: Date, what: String, _ done: ([AMF0.Value]) throws -> Bool) throws {
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw RTMPOutput.Failure.timedOut("no \(what) from the server") }
            guard try fill(timeoutMillis: Int32(min(left, 1) * 1_000)) else { continue }
            while let message = try nextMessage() {
                guard message.type == RTMPMessageType.commandAMF0 else { continue }
                let values: [AMF0.Value]
                do { values = try AMF0.decode(message.payload[...]) } catch let malformed as AMF0.Malformed {
                    throw RTMPOutput.Failure.protocolError(malformed.reason)
                }
                if try done(values) { return }
            }
        }
    }

    /// Handles what the server sent meanwhile (acknowledgements, pings, errors) without waiting; throws
    /// when it closed the connection or sent something malformed.
    func service() throws {
        while try fill(timeoutMillis: 0) {
            while let message = try nextMessage() {
                if message.type == RTMPMessageType.commandAMF0, let values = try? AMF0.decode(message.payload[...]),
                    values.first?.string == "onStatus", values.count > 3, values[3]["level"]?.string == "error"
                {
                    throw RTMPOutput.Failure.rejected(values[3]["code"]?.string ?? "onStatus error")
                }
            }
        }
    }

    // MARK: - Chunk stream, outbound

    /// Sends one message in chunks: a type 0 header, then type 3 headers for the rest.
    func sendMessage(channel: UInt32, type: UInt8, streamID: UInt32, timestamp: UInt32, _ payload: ArraySlice<UInt8>)
        throws
    {
        out.removeAll(keepingCapacity: true)
        let extended = timestamp >= 0xFF_FFFF
        out.append(UInt8(channel))  // fmt 0; channels here are < 64
        out.appendBE24(extended ? 0xFF_FFFF : timestamp)
        out.appendBE24(UInt32(payload.count))
        out.append(type)
        out.append(contentsOf: [
            UInt8(streamID & 0xFF), UInt8(streamID >> 8 & 0xFF), UInt8(streamID >> 16 & 0xFF), UInt8(streamID >> 24),
        ])
        if extended { out.appendBE32(timestamp) }
        var index = payload.startIndex
        while true {
            let end = min(payload.endIndex, index + Self.outChunkSize)
            out.append(contentsOf: payload[index..<end])
            index = end
            if index >= payload.endIndex { break }
            out.append(0xC0 | UInt8(channel))
            if extended { out.appendBE32(timestamp) }
        }
        try sendAll(out[...])
    }

    private func sendAll(_ bytes: ArraySlice<UInt8>) throws {
        try bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = send(fd, raw.baseAddress! + done, raw.count - done, Int32(MSG_NOSIGNAL))
                if n < 0 {
                    if errno == EINTR { continue }
                    let e = errno
                    throw RTMPOutput.Failure.connectionLost(
                        e == EAGAIN ? "send timed out" : "send: \(String(cString: strerror(e))) (errno \(e))")
                }
                done += n
            }
        }
    }

    // MARK: - Chunk stream, inbound

    /// Reads what the socket has, waiting up to `timeoutMillis` for the first byte; false when nothing came.
    private func fill(timeoutMillis: Int32) throws -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&p, 1, timeoutMillis)
        if ready < 0 && errno != EINTR {
            throw RTMPOutput.Failure.connectionLost("poll: errno \(errno)")
        }
        guard ready > 0 else { return false }
        let n = readBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n == 0 { throw RTMPOutput.Failure.connectionLost("the server closed the connection") }
        if n < 0 {
            if errno == EINTR || errno == EAGAIN { return false }
            throw RTMPOutput.Failure.connectionLost("recv: \(String(cString: strerror(errno))) (errno \(errno))")
        }
        reader.append(readBuffer[0..<n])
        bytesReceived += UInt64(n)
        if bytesReceived - lastAcknowledged >= reader.windowAckSize {
            lastAcknowledged = bytesReceived
            var ack: [UInt8] = []
            ack.appendBE32(UInt32(truncatingIfNeeded: bytesReceived))
            try sendMessage(
                channel: Channel.control, type: RTMPMessageType.acknowledgement, streamID: 0, timestamp: 0, ack[...])
        }
        return true
    }

    private func receive(exactly count: Int) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + done, count - done, 0) }
            if n == 0 { throw RTMPOutput.Failure.connectionLost("the server closed the connection in the handshake") }
            if n < 0 {
                if errno == EINTR { continue }
                throw RTMPOutput.Failure.timedOut("handshake: \(String(cString: strerror(errno))) (errno \(errno))")
            }
            done += n
        }
        return buffer
    }

    /// The next whole message in the bytes read (protocol control messages applied, pings answered); nil
    /// when more bytes are needed. Throws ``RTMPOutput/Failure/protocolError(_:)`` for bytes that are no
    /// chunk stream.
    private func nextMessage() throws -> (type: UInt8, payload: [UInt8])? {
        while true {
            let item: RTMPChunkReader.Item?
            do { item = try reader.next() } catch { throw RTMPOutput.Failure.protocolError(error.reason) }
            switch item {
            case nil: return nil
            case .message(let type, let payload): return (type, payload)
            case .ping(let time):
                // Ping request (event 6): answered with a ping response (event 7) of the same time.
                var pong: [UInt8] = [0, 7]
                pong.appendBE32(time)
                try sendMessage(
                    channel: Channel.control, type: RTMPMessageType.userControl, streamID: 0, timestamp: 0, pong[...])
            }
        }
    }
}

extension Array where Element == UInt8 {
    mutating func appendBE24(_ v: UInt32) {
        append(UInt8(v >> 16 & 0xFF))
        append(UInt8(v >> 8 & 0xFF))
        append(UInt8(v & 0xFF))
    }
    mutating func appendBE32(_ v: UInt32) {
        append(UInt8(v >> 24))
        appendBE24(v)
    }
}
