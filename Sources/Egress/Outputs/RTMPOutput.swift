import Foundation
import Media
public import RTCWire

/// An `rtmp://host[:port]/app/stream` destination, parsed.
struct RTMPURL: Equatable {
    var host: String
    var port: Int
    /// The application (the first path component), what `connect` names.
    var app: String
    /// The stream key (the rest of the path, query included), what `publish` names.
    var stream: String
    /// The URL of the application, `connect`'s `tcUrl`.
    var tcURL: String { "rtmp://\(host.contains(":") ? "[\(host)]" : host):\(port)/\(app)" }

    /// Parses `url`; throws ``RTMPOutput/Failure/invalidURL(_:)`` saying what is wrong.
    init(_ url: String) throws {
        func bad(_ why: String) -> RTMPOutput.Failure { .invalidURL("'\(url)': \(why)") }
        guard url.lowercased().hasPrefix("rtmp://") else {
            throw bad(url.lowercased().hasPrefix("rtmps://") ? "rtmps (TLS) is not supported" : "not an rtmp:// URL")
        }
        let rest = url.dropFirst("rtmp://".count)
        guard let slash = rest.firstIndex(of: "/") else { throw bad("no /app/stream path") }
        var authority = String(rest[..<slash])
        let path = rest[rest.index(after: slash)...]
        guard !authority.contains("@") else { throw bad("credentials in the URL are not supported") }
        var port = 1935
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw bad("unclosed [ in the host") }
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()) else { throw bad("port '\(after.dropFirst())'") }
                port = p
            } else if !after.isEmpty {
                throw bad("text after the host")
            }
            authority = String(authority[authority.index(after: authority.startIndex)..<close])
        } else if let colon = authority.lastIndex(of: ":") {
            guard let p = Int(authority[authority.index(after: colon)...]) else {
                throw bad("port '\(authority[authority.index(after: colon)...])'")
            }
            port = p
            authority = String(authority[..<colon])
        }
        guard !authority.isEmpty else { throw bad("no host") }
        guard (1...65_535).contains(port) else { throw bad("port \(port) out of range") }
        guard let split = path.firstIndex(of: "/") else { throw bad("no stream key after the application") }
        let app = String(path[..<split])
        let stream = String(path[path.index(after: split)...])
        guard !app.isEmpty else { throw bad("empty application name") }
        guard !stream.isEmpty else { throw bad("empty stream key") }
        host = authority
        self.port = port
        self.app = app
        self.stream = stream
    }
}

/// Pushes a composite to an RTMP server (a streaming service's ingest, nginx-rtmp, `ffmpeg -listen 1`):
/// FLV tags over its own RTMP client, H.264 video and AAC-LC audio (encoded here from the mixed PCM,
/// mono 48 kHz, announced in the AudioSpecificConfig).
///
/// The composite's thread only builds tags and queues them; a thread of the output's own connects,
/// publishes and sends, so a slow or dead server never blocks the composite. The queue is bounded
/// (``Options/maxQueuedBytes``): when it is full, everything queued is dropped and sending resumes at the
/// next video keyframe (whole GOPs dropped, counted in ``Stats``).
///
/// A lost connection (the server gone, a reset, a malformed answer) does not end the output: the thread
/// reconnects with exponential backoff (``Options/reconnectDelay`` doubling up to
/// ``Options/maxReconnectDelay``), publishes again, sends the metadata and both sequence headers again,
/// and restarts at the newest queued keyframe with timestamps from 0 (a new stream for the server).
/// ``stats`` says how it goes; ``finish()`` sends what is queued (for up to ``Options/finishTimeout``),
/// unpublishes and closes.
///
/// The `write` methods and ``finish()`` are for one thread (the composite's); ``stats`` is read from any.
// Safe: the shared state (queue, stats) is guarded by `condition`; the rest is the composite thread's.
public final class RTMPOutput: KeyframePacedOutput, @unchecked Sendable {
    /// Settings of an RTMP output.
    public struct Options: Sendable {
        /// The most bytes of tags waiting for the server before whole GOPs are dropped.
        public var maxQueuedBytes: Int
        /// AAC bitrate, bits per second.
        public var aacBitrate: Int
        /// The first wait before reconnecting, seconds; it doubles at each failure.
        public var reconnectDelay: Double
        /// The longest wait between reconnection attempts, seconds.
        public var maxReconnectDelay: Double
        /// How long connect, the handshake, publish and each send may take, seconds.
        public var ioTimeout: Double
        /// How long ``finish()`` waits for the queue to drain, seconds.
        public var finishTimeout: Double
        /// The keyframe interval the composite should use, seconds (the longest a reconnect waits for video).
        public var keyframeIntervalSeconds: Double

        /// Creates options; see the properties for the meaning and the defaults.
        public init(
            maxQueuedBytes: Int = 8 << 20, aacBitrate: Int = 128_000, reconnectDelay: Double = 0.25,
            maxReconnectDelay: Double = 8, ioTimeout: Double = 10, finishTimeout: Double = 10,
            keyframeIntervalSeconds: Double = 2
        ) {
            self.maxQueuedBytes = maxQueuedBytes
            self.aacBitrate = aacBitrate
            self.reconnectDelay = reconnectDelay
            self.maxReconnectDelay = maxReconnectDelay
            self.ioTimeout = ioTimeout
            self.finishTimeout = finishTimeout
            self.keyframeIntervalSeconds = keyframeIntervalSeconds
        }
    }

    /// Errors of an RTMP output: thrown by ``init(destination:options:)`` and the `write` methods for bad
    /// input, and recorded in ``Stats/lastError`` for what happened on the connection.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The destination is not a usable `rtmp://host[:port]/app/stream` URL.
        case invalidURL(String)
        /// The TCP connection could not be made.
        case connectFailed(String)
        /// The connection broke (closed, reset, a send that timed out).
        case connectionLost(String)
        /// The server sent bytes that are not RTMP (in the handshake or the chunk stream).
        case protocolError(String)
        /// The server refused (an `_error` or an `onStatus` of level error).
        case rejected(String)
        /// The server did not answer in time.
        case timedOut(String)
        /// A frame the output cannot carry (not H.264).
        case unsupported(String)

        public var description: String {
            switch self {
            case .invalidURL(let why): return "RTMP output: invalid URL \(why)"
            case .connectFailed(let why): return "RTMP output: cannot connect to \(why)"
            case .connectionLost(let why): return "RTMP output: connection lost: \(why)"
            case .protocolError(let why): return "RTMP output: malformed server data: \(why)"
            case .rejected(let why): return "RTMP output: the server refused: \(why)"
            case .timedOut(let why): return "RTMP output: timed out: \(why)"
            case .unsupported(let why): return "RTMP output: \(why)"
            }
        }
    }

    /// What the output did so far.
    public struct Stats: Sendable, Equatable {
        /// Publishes that reached NetStream.Publish.Start.
        public var connections = 0
        /// Connection attempts that failed, and connections lost after publishing.
        public var failures = 0
        /// Whether a connection is publishing now.
        public var publishing = false
        /// Video and audio tags sent.
        public var sentVideoFrames = 0
        public var sentAudioFrames = 0
        /// Tags dropped: a full queue, or waiting for a keyframe after a drop or a reconnect.
        public var droppedFrames = 0
        /// Times a full queue was emptied (each drops the GOPs it held).
        public var queueOverflows = 0
        /// The last error on the connection, for logs (nil while all went well).
        public var lastError: Failure?
    }

    public let destination: String
    /// The options it runs with.
    public let options: Options
    public var keyframeIntervalSeconds: Double { options.keyframeIntervalSeconds }

    /// Everything the threads share, guarded by `condition`.
    private struct Item {
        var video: Bool
        var keyframe: Bool
        var millis: Int64
        var payload: [UInt8]
        /// A keyframe's AVC sequence header and picture size.
        var header: [UInt8]?
        var size: (width: Int, height: Int)?
    }
    private let condition = NSCondition()
    private var queue: [Item] = []
    private var queueHead = 0
    private var queuedBytes = 0
    private var freeBuffers: [[UInt8]] = []
    private var finishing = false
    private var done = false
    private var shared = Stats()

    private let log: @Sendable (String) -> Void
    // The composite thread's.
    private let url: RTMPURL
    private let aac: AACEncoder
    private var producerSkipping = false
    private var audioStartMicros: Int64?
    private var finished = false

    /// Parses `destination` and starts the sender thread, which connects at once (and keeps trying).
    /// `log` hears, on that thread, each publish that starts and each failure with the wait before the
    /// next attempt. The thread keeps the output alive until ``finish()``, which every output gets. Throws ``Failure/invalidURL(_:)`` for a bad URL, `MediaError` when the AAC encoder
    /// does not open.
    public init(
        destination: String, options: Options = Options(), log: @escaping @Sendable (String) -> Void = { _ in }
    ) throws {
        url = try RTMPURL(destination)
        guard options.maxQueuedBytes >= 64 << 10, options.reconnectDelay > 0, options.ioTimeout > 0 else {
            throw Failure.invalidURL("'\(destination)': options out of range")
        }
        self.destination = destination
        self.options = options
        self.log = log
        aac = try AACEncoder(bitrate: options.aacBitrate)
        queue.reserveCapacity(1024)
        let thread = Thread { [self] in run() }
        thread.name = "understudy-rtmp"
        thread.start()
    }

    /// A snapshot of the counters.
    public var stats: Stats { condition.withLock { shared } }

    public func writeVideo(_ frame: EncodedFrame, ptsMicros: Int64) throws {
        guard !finished else { throw MediaError.closed }
        guard frame.codec == .h264 else {
            throw Failure.unsupported("RTMP carries H.264 video, got \(frame.codec.rawValue)")
        }
        var header: [UInt8]?
        if frame.isKeyframe {
            var h: [UInt8] = []
            if FLVTags.avcSequenceHeader(keyframe: frame, into: &h) { header = h }
        }
        var payload = takeBuffer()
        FLVTags.avcFrame(frame, into: &payload)
        enqueue(
            Item(
                video: true, keyframe: header != nil, millis: ptsMicros / 1_000, payload: payload, header: header,
                size: frame.keyframePictureSize))
    }

    public func writeAudio(_ opus: EncodedFrame, pcm: UnsafeBufferPointer<Int16>, ptsMicros: Int64) throws {
        guard !finished else { throw MediaError.closed }
        let start = audioStartMicros ?? ptsMicros
        if audioStartMicros == nil { audioStartMicros = ptsMicros }
        try aac.encode(pcm) { bytes, samples in enqueueAAC(bytes, micros: start + samples * 1_000_000 / 48_000) }
    }

    /// Sends what is queued (waiting up to ``Options/finishTimeout``), unpublishes and closes. Safe to call twice.
    public func finish() throws {
        guard !finished else { return }
        finished = true
        let start = audioStartMicros ?? 0
        try aac.flush { bytes, samples in enqueueAAC(bytes, micros: start + samples * 1_000_000 / 48_000) }
        let deadline = Date().addingTimeInterval(options.finishTimeout)
        condition.withLock {
            finishing = true
            condition.broadcast()
            while !done && condition.wait(until: deadline) {}
            // Past the deadline the thread stops at its next look at the queue.
            done = true
            condition.broadcast()
        }
    }

    private func enqueueAAC(_ bytes: UnsafeRawBufferPointer, micros: Int64) {
        var payload = takeBuffer()
        FLVTags.aacFrame(bytes, into: &payload)
        enqueue(Item(video: false, keyframe: false, millis: micros / 1_000, payload: payload))
    }

    private func takeBuffer() -> [UInt8] {
        condition.withLock { freeBuffers.popLast() }
            ?? {
                var b = [UInt8]()
                b.reserveCapacity(1 << 14)
                return b
            }()
    }

    /// Queues a tag, or drops: everything queued when it would overflow, then all until a keyframe.
    private func enqueue(_ item: Item) {
        condition.withLock {
            if producerSkipping && !item.keyframe {
                shared.droppedFrames += 1
                return
            }
            producerSkipping = false
            if queuedBytes + item.payload.count > options.maxQueuedBytes {
                shared.droppedFrames += queue.count - queueHead
                shared.queueOverflows += 1
                for i in queueHead..<queue.count { recycle(&queue[i].payload) }
                queue.removeAll(keepingCapacity: true)
                queueHead = 0
                queuedBytes = 0
                guard item.keyframe else {
                    producerSkipping = true
                    shared.droppedFrames += 1
                    return
                }
            }
            queuedBytes += item.payload.count
            queue.append(item)
            condition.signal()
        }
    }

    /// Returns a sent tag's buffer to the pool (under the lock).
    private func recycle(_ buffer: inout [UInt8]) {
        guard freeBuffers.count < 256 else { return }
        var b: [UInt8] = []
        swap(&b, &buffer)
        b.removeAll(keepingCapacity: true)
        freeBuffers.append(b)
    }

    // MARK: - Sender thread

    private func run() {
        var delay = options.reconnectDelay
        var session: RTMPSession?
        var base: Int64 = 0
        var waitingForKeyframe = true
        var videoHeader: [UInt8]?
        var payload: [UInt8] = []
        while true {
            if session == nil {
                if condition.withLock({ done || (finishing && shared.connections == 0 && shared.failures > 0) }) {
                    break
                }
                do {
                    let s = try RTMPSession(url: url, timeoutSeconds: options.ioTimeout)
                    try s.publish(deadline: Date().addingTimeInterval(options.ioTimeout))
                    session = s
                    delay = options.reconnectDelay
                    waitingForKeyframe = true
                    videoHeader = nil
                    let count = condition.withLock {
                        shared.connections += 1
                        shared.publishing = true
                        startAtNewestKeyframe()
                        return shared.connections
                    }
                    log(
                        "RTMP output: publishing to \(url.host):\(url.port)/\(url.app)"
                            + (count > 1 ? " again (\(count))" : ""))
                } catch {
                    let failure = error as? Failure ?? .connectionLost("\(error)")
                    log("\(failure); next attempt in \(delay) s")
                    let stop: Bool = condition.withLock {
                        shared.failures += 1
                        shared.lastError = failure
                        // Wait before the next attempt, unless finishing (then one more try only).
                        if !finishing { _ = condition.wait(until: Date().addingTimeInterval(delay)) }
                        return done || finishing
                    }
                    if stop { break }
                    delay = min(delay * 2, options.maxReconnectDelay)
                    continue
                }
            }
            guard let s = session else { continue }
            // The next tag, or the end.
            var item: Item?
            let ending: Bool = condition.withLock {
                if queueHead == queue.count && !finishing && !done {
                    _ = condition.wait(until: Date().addingTimeInterval(0.1))
                }
                if queueHead < queue.count {
                    item = queue[queueHead]
                    queue[queueHead].payload = []
                    queueHead += 1
                    queuedBytes -= item!.payload.count
                    if queueHead == queue.count {
                        queue.removeAll(keepingCapacity: true)
                        queueHead = 0
                    }
                }
                return item == nil && (finishing || done)
            }
            do {
                try s.service()
                if ending {
                    s.unpublish()
                    session = nil
                    break
                }
                guard var tag = item else { continue }
                defer { condition.withLock { recycle(&tag.payload) } }
                if waitingForKeyframe {
                    guard tag.keyframe, tag.video else {
                        condition.withLock { shared.droppedFrames += 1 }
                        continue
                    }
                    waitingForKeyframe = false
                    base = tag.millis
                    try sendMetadata(s, size: tag.size)
                    payload.removeAll(keepingCapacity: true)
                    FLVTags.aacSequenceHeader(aac.audioSpecificConfig, into: &payload)
                    try s.sendMessage(
                        channel: RTMPSession.Channel.audio, type: RTMPMessageType.audio,
                        streamID: s.streamID, timestamp: 0, payload[...])
                }
                if tag.video, let header = tag.header, header != videoHeader {
                    videoHeader = header
                    try s.sendMessage(
                        channel: RTMPSession.Channel.video, type: RTMPMessageType.video,
                        streamID: s.streamID, timestamp: UInt32(clamping: max(0, tag.millis - base)), header[...])
                }
                guard tag.millis >= base else {
                    condition.withLock { shared.droppedFrames += 1 }
                    continue
                }
                try s.sendMessage(
                    channel: tag.video ? RTMPSession.Channel.video : RTMPSession.Channel.audio,
                    type: tag.video ? RTMPMessageType.video : RTMPMessageType.audio,
                    streamID: s.streamID, timestamp: UInt32(clamping: tag.millis - base), tag.payload[...])
                condition.withLock {
                    if tag.video { shared.sentVideoFrames += 1 } else { shared.sentAudioFrames += 1 }
                }
            } catch {
                session = nil
                log("\(error as? Failure ?? .connectionLost("\(error)")); reconnecting")
                condition.withLock {
                    shared.failures += 1
                    shared.publishing = false
                    shared.lastError = error as? Failure ?? .connectionLost("\(error)")
                }
            }
        }
        condition.withLock {
            shared.publishing = false
            done = true
            condition.broadcast()
        }
    }

    /// After a (re)connect: drops the tags queued before the newest keyframe (under the lock), so the new
    /// stream starts as live as it can.
    private func startAtNewestKeyframe() {
        guard let newest = queue[queueHead...].lastIndex(where: { $0.keyframe }) else { return }
        for i in queueHead..<newest {
            queuedBytes -= queue[i].payload.count
            recycle(&queue[i].payload)
        }
        shared.droppedFrames += newest - queueHead
        queueHead = newest
    }

    /// `@setDataFrame onMetaData`: what the stream holds, for servers and players that look.
    private func sendMetadata(_ s: RTMPSession, size: (width: Int, height: Int)?) throws {
        var b: [UInt8] = []
        AMF0.append(.string("@setDataFrame"), to: &b)
        AMF0.append(.string("onMetaData"), to: &b)
        var fields: [(String, AMF0.Value)] = [
            ("videocodecid", .number(7)), ("audiocodecid", .number(10)),
            ("audiosamplerate", .number(Double(aac.sampleRate))), ("audiosamplesize", .number(16)),
            ("stereo", .boolean(false)), ("encoder", .string("understudy")),
        ]
        if let size { fields += [("width", .number(Double(size.width))), ("height", .number(Double(size.height)))] }
        AMF0.appendECMAArray(fields, to: &b)
        try s.sendMessage(
            channel: RTMPSession.Channel.data, type: RTMPMessageType.dataAMF0, streamID: s.streamID,
            timestamp: 0, b[...])
    }
}
