/// RTMP message type ids (the chunk stream's and the messages' own).
enum RTMPMessageType {
    static let setChunkSize: UInt8 = 1
    static let abort: UInt8 = 2
    static let acknowledgement: UInt8 = 3
    static let userControl: UInt8 = 4
    static let windowAckSize: UInt8 = 5
    static let setPeerBandwidth: UInt8 = 6
    static let audio: UInt8 = 8
    static let video: UInt8 = 9
    static let dataAMF0: UInt8 = 18
    static let commandAMF0: UInt8 = 20
}

/// The inbound half of an RTMP chunk stream (what the server sends after the handshake), without a
/// socket: bytes in, whole messages out, the protocol control messages applied here. ``RTMPSession``
/// feeds it what it reads; the `rtmp` fuzz target feeds it anything (Fuzz/Targets/rtmp.swift).
struct RTMPChunkReader {
    /// Bytes that are no chunk stream (the session reports it as a protocol error).
    struct Malformed: Error, Equatable { let reason: String }

    /// What ``next()`` gives: a message for the session, or a ping request it must answer.
    enum Item: Equatable {
        case message(type: UInt8, payload: [UInt8])
        /// User control event 6 (ping request) with its time: answer with event 7 and the same time.
        case ping(UInt32)
    }

    /// The largest message a server may send us (its commands are small; this bounds a hostile length).
    static let maxMessage = 1 << 20

    /// The server's chunk size (Set Chunk Size), 128 until it says otherwise.
    private(set) var chunkSize = 128
    /// The server's acknowledgement window (Window Acknowledgement Size).
    private(set) var windowAckSize: UInt64 = 2_500_000

    /// Per inbound chunk stream: the last message header.
    private struct Stream {
        var timestamp: UInt32 = 0
        var delta: UInt32 = 0
        var length = 0
        var type: UInt8 = 0
        var streamID: UInt32 = 0
        var extended = false
    }
    private var streams: [UInt32: Stream] = [:]
    /// Per inbound chunk stream, the message being assembled. Kept apart from `streams` and appended
    /// in place: a copy of the header must not share it, or every chunk would copy the whole message
    /// so far (a hostile server's 1 MiB message in 1-byte chunks would cost 10^12 byte copies).
    private var payloads: [UInt32: [UInt8]] = [:]
    private var inbound: [UInt8] = []
    private var start = 0

    /// Adds bytes read from the server (what was parsed is dropped first, now and then).
    mutating func append(_ bytes: ArraySlice<UInt8>) {
        if start > 0 && (start == inbound.count || start >= 1 << 16) {
            inbound.removeSubrange(0..<start)
            start = 0
        }
        inbound.append(contentsOf: bytes)
    }

    /// The next whole message or ping in the bytes added; nil when more bytes are needed.
    mutating func next() throws(Malformed) -> Item? {
        while true {
            var i = start
            let b = inbound
            func available(_ n: Int) -> Bool { b.count - i >= n }
            guard available(1) else { return nil }
            let fmt = b[i] >> 6
            var channel = UInt32(b[i] & 0x3F)
            i += 1
            if channel == 0 {
                guard available(1) else { return nil }
                channel = 64 + UInt32(b[i])
                i += 1
            } else if channel == 1 {
                guard available(2) else { return nil }
                channel = 64 + UInt32(b[i]) + UInt32(b[i + 1]) * 256
                i += 2
            }
            let known = streams[channel]
            if known == nil && fmt != 0 {
                throw Malformed(
                    reason: "chunk of type \(fmt) on chunk stream \(channel), which never had a type 0 header")
            }
            var s = known ?? Stream()
            let headerSize = [11, 7, 3, 0][Int(fmt)]
            guard available(headerSize) else { return nil }
            let assembled = payloads[channel]?.count ?? 0
            let starting = assembled == 0
            if fmt <= 2 {
                let field = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2])
                s.extended = field == 0xFF_FFFF
                if fmt <= 1 {
                    s.length = Int(b[i + 3]) << 16 | Int(b[i + 4]) << 8 | Int(b[i + 5])
                    s.type = b[i + 6]
                }
                if fmt == 0 {
                    s.streamID =
                        UInt32(b[i + 7]) | UInt32(b[i + 8]) << 8 | UInt32(b[i + 9]) << 16 | UInt32(b[i + 10]) << 24
                    s.timestamp = field
                    s.delta = 0
                } else {
                    s.delta = field
                }
                i += headerSize
            }
            if s.extended {
                guard available(4) else { return nil }
                let value = UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
                if fmt == 0 { s.timestamp = value } else if fmt <= 2 { s.delta = value }
                i += 4
            }
            guard s.length <= Self.maxMessage else {
                throw Malformed(reason: "server message of \(s.length) bytes (more than 1 MiB)")
            }
            if !starting && fmt <= 1 && s.length < assembled {
                throw Malformed(reason: "a new header shortens a message being assembled on chunk stream \(channel)")
            }
            if starting && fmt != 0 { s.timestamp &+= s.delta }
            let take = min(chunkSize, s.length - assembled)
            guard available(take) else { return nil }
            payloads[channel, default: []].append(contentsOf: b[i..<i + take])
            i += take
            start = i
            streams[channel] = s
            guard assembled + take >= s.length else { continue }
            let type = s.type
            let payload = payloads.removeValue(forKey: channel) ?? []
            if let item = try control(type, payload) {
                if case .ping = item { return item }
                continue
            }
            return .message(type: type, payload: payload)
        }
    }

    /// Applies a protocol control message: nil when it was not one, else what the session must do
    /// (`.ping`) or a message of no further use (returned as itself and skipped by ``next()``).
    private mutating func control(_ type: UInt8, _ p: [UInt8]) throws(Malformed) -> Item? {
        func be32(_ at: Int) -> UInt32 {
            UInt32(p[at]) << 24 | UInt32(p[at + 1]) << 16 | UInt32(p[at + 2]) << 8 | UInt32(p[at + 3])
        }
        switch type {
        case RTMPMessageType.setChunkSize:
            guard p.count >= 4 else { throw Malformed(reason: "short Set Chunk Size") }
            let size = Int(be32(0) & 0x7FFF_FFFF)
            guard (1...0xFF_FFFF).contains(size) else { throw Malformed(reason: "Set Chunk Size \(size)") }
            chunkSize = size
        case RTMPMessageType.abort:
            if p.count >= 4 { payloads[be32(0)] = nil }
        case RTMPMessageType.windowAckSize:
            if p.count >= 4 { windowAckSize = UInt64(max(1, be32(0))) }
        case RTMPMessageType.userControl:
            if p.count >= 6, p[0] == 0, p[1] == 6 { return .ping(be32(2)) }
        case RTMPMessageType.acknowledgement, RTMPMessageType.setPeerBandwidth: break
        default: return nil
        }
        return .message(type: type, payload: [])
    }
}
