/// WebSocket opcodes (RFC 6455 §5.2).
public enum WebSocketOpcode: UInt8, Sendable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    var isControl: Bool { rawValue & 0x8 != 0 }
}

/// WebSocket close status codes used by this implementation (RFC 6455 §7.4.1).
public enum WebSocketCloseCode {
    public static let normal: UInt16 = 1000
    public static let goingAway: UInt16 = 1001
    public static let protocolError: UInt16 = 1002
    public static let unsupportedData: UInt16 = 1003
    /// Reported locally when the peer's close frame had no status code; never sent.
    public static let noStatus: UInt16 = 1005
    /// Reported locally when the connection dropped without a close handshake; never sent.
    public static let abnormal: UInt16 = 1006
    public static let invalidPayload: UInt16 = 1007
    public static let policyViolation: UInt16 = 1008
    public static let messageTooBig: UInt16 = 1009
    public static let internalError: UInt16 = 1011
    /// The server is restarting (or, in a cluster, the node that held the room went away): reconnect.
    public static let serviceRestart: UInt16 = 1012

    /// Whether a code may appear in a close frame on the wire.
    public static func isValidOnWire(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1011: return true
        case 3000...4999: return true
        default: return false
        }
    }
}

/// One decoded frame header plus its (unmasked) payload.
struct WebSocketFrame {
    var fin: Bool
    var opcode: WebSocketOpcode
    var payload: [UInt8]
}

/// Why the incoming byte stream violates RFC 6455; carries the close code to fail with.
struct WebSocketProtocolViolation: Error {
    var code: UInt16
    var reason: String
}

/// Frame encoding and incremental decoding.
enum WebSocketFrameCodec {
    /// Encodes one frame. Clients pass a `maskKey` (RFC 6455 §5.3: client frames MUST be masked).
    static func encode(opcode: WebSocketOpcode, payload: some Collection<UInt8>, fin: Bool = true, maskKey: UInt32?)
        -> [UInt8]
    {
        var out: [UInt8] = []
        let count = payload.count
        out.reserveCapacity(count + 14)
        out.append((fin ? 0x80 : 0) | opcode.rawValue)
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        if count < 126 {
            out.append(maskBit | UInt8(count))
        } else if count <= 0xFFFF {
            out.append(maskBit | 126)
            out.append(UInt8(count >> 8))
            out.append(UInt8(count & 0xFF))
        } else {
            out.append(maskBit | 127)
            let length = UInt64(count)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((length >> UInt64(shift)) & 0xFF)) }
        }
        if let key = maskKey {
            let k: [UInt8] = [UInt8(key >> 24), UInt8((key >> 16) & 0xFF), UInt8((key >> 8) & 0xFF), UInt8(key & 0xFF)]
            out.append(contentsOf: k)
            var i = 0
            for byte in payload {
                out.append(byte ^ k[i & 3])
                i += 1
            }
        } else {
            out.append(contentsOf: payload)
        }
        return out
    }

    /// Close frame payload: a 2-byte code and a UTF-8 reason cut to fit in 125 bytes.
    static func closePayload(code: UInt16, reason: String) -> [UInt8] {
        var out: [UInt8] = [UInt8(code >> 8), UInt8(code & 0xFF)]
        var reasonBytes = Array(reason.utf8)
        if reasonBytes.count > 123 {
            reasonBytes = Array(reasonBytes[0..<123])
            // Do not cut a multi-byte character in half.
            while !reasonBytes.isEmpty, String(validating: reasonBytes, as: UTF8.self) == nil {
                reasonBytes.removeLast()
            }
        }
        out.append(contentsOf: reasonBytes)
        return out
    }

    /// Decodes one frame from the front of `buffer[offset...]`. Returns the frame and the bytes it
    /// used, or nil when more bytes are needed. Enforces masking direction, reserved bits, control
    /// frame rules and the payload size limit before buffering the payload.
    static func decode(
        _ buffer: UnsafeRawBufferPointer, expectMasked: Bool, maxPayload: Int
    ) throws(WebSocketProtocolViolation) -> (WebSocketFrame, Int)? {
        guard buffer.count >= 2 else { return nil }
        let b0 = buffer[0]
        let b1 = buffer[1]
        guard b0 & 0x70 == 0 else { throw WebSocketProtocolViolation(code: 1002, reason: "reserved bits set") }
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else {
            throw WebSocketProtocolViolation(code: 1002, reason: "unknown opcode")
        }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        guard masked == expectMasked else {
            throw WebSocketProtocolViolation(
                code: 1002, reason: expectMasked ? "client frame not masked" : "server frame masked")
        }
        var headerLength = 2
        var length = UInt64(b1 & 0x7F)
        if length == 126 {
            guard buffer.count >= 4 else { return nil }
            length = UInt64(buffer[2]) << 8 | UInt64(buffer[3])
            headerLength = 4
            guard length >= 126 else { throw WebSocketProtocolViolation(code: 1002, reason: "non-minimal length") }
        } else if length == 127 {
            guard buffer.count >= 10 else { return nil }
            length = 0
            for i in 2..<10 { length = length << 8 | UInt64(buffer[i]) }
            headerLength = 10
            guard length >> 63 == 0 else { throw WebSocketProtocolViolation(code: 1002, reason: "length high bit set") }
            guard length > 0xFFFF else { throw WebSocketProtocolViolation(code: 1002, reason: "non-minimal length") }
        }
        if opcode.isControl {
            guard fin else { throw WebSocketProtocolViolation(code: 1002, reason: "fragmented control frame") }
            guard length <= 125 else { throw WebSocketProtocolViolation(code: 1002, reason: "control frame too long") }
        }
        guard length <= UInt64(maxPayload) else {
            throw WebSocketProtocolViolation(code: 1009, reason: "message too big")
        }
        let payloadLength = Int(length)
        var key: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
        if masked {
            guard buffer.count >= headerLength + 4 else { return nil }
            key = (buffer[headerLength], buffer[headerLength + 1], buffer[headerLength + 2], buffer[headerLength + 3])
            headerLength += 4
        }
        guard buffer.count - headerLength >= payloadLength else { return nil }
        var payload = [UInt8](repeating: 0, count: payloadLength)
        if masked {
            let k = [key.0, key.1, key.2, key.3]
            payload.withUnsafeMutableBytes { out in
                for i in 0..<payloadLength { out[i] = buffer[headerLength + i] ^ k[i & 3] }
            }
        } else if payloadLength > 0 {
            payload.withUnsafeMutableBytes { out in
                out.copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: buffer[headerLength..<(headerLength + payloadLength)]))
            }
        }
        return (WebSocketFrame(fin: fin, opcode: opcode, payload: payload), headerLength + payloadLength)
    }
}

/// What a received frame means for the connection, after reassembly and validation.
enum WebSocketEvent: Equatable {
    case text(String)
    case binary([UInt8])
    case ping([UInt8])
    case pong([UInt8])
    /// The peer's close frame: its code (1005 when it carried none) and reason.
    case close(code: UInt16, reason: String)
}

/// Turns received bytes into ``WebSocketEvent``s: decodes frames, reassembles fragmented messages
/// and applies every RFC 6455 rule that concerns peer input (§5.4 fragmentation, §5.5 control
/// frames, §5.5.1 close payloads, §8.1 UTF-8). Pure, so the fuzzer drives exactly what a
/// ``WebSocketConnection`` runs.
struct WebSocketMessageAssembler {
    /// Largest message after reassembly; a bigger one fails with 1009 before it is buffered.
    let maxMessageBytes: Int
    /// True on the server: client frames must be masked and server frames must not.
    let expectMasked: Bool
    private var fragmentOpcode: WebSocketOpcode?
    private var fragments: [UInt8] = []

    init(maxMessageBytes: Int, expectMasked: Bool) {
        self.maxMessageBytes = maxMessageBytes
        self.expectMasked = expectMasked
    }

    /// Decodes one frame from the front of `buffer`. Returns nil when more bytes are needed,
    /// otherwise the bytes used and the event the frame completes (nil for a non-final fragment).
    mutating func next(_ buffer: UnsafeRawBufferPointer) throws(WebSocketProtocolViolation) -> (
        event: WebSocketEvent?, length: Int
    )? {
        let allowance = maxMessageBytes - (fragmentOpcode == nil ? 0 : fragments.count)
        guard
            let (frame, length) = try WebSocketFrameCodec.decode(
                buffer, expectMasked: expectMasked, maxPayload: max(0, allowance))
        else { return nil }
        return (try handle(frame), length)
    }

    private mutating func handle(_ frame: WebSocketFrame) throws(WebSocketProtocolViolation) -> WebSocketEvent? {
        switch frame.opcode {
        case .text, .binary:
            guard fragmentOpcode == nil else {
                throw WebSocketProtocolViolation(code: 1002, reason: "new message inside a fragmented one")
            }
            if frame.fin { return try message(frame.opcode, frame.payload) }
            fragmentOpcode = frame.opcode
            fragments = frame.payload
            return nil
        case .continuation:
            guard let opcode = fragmentOpcode else {
                throw WebSocketProtocolViolation(code: 1002, reason: "continuation without a message")
            }
            fragments.append(contentsOf: frame.payload)
            guard frame.fin else { return nil }
            let payload = fragments
            fragments = []
            fragmentOpcode = nil
            return try message(opcode, payload)
        case .ping: return .ping(frame.payload)
        case .pong: return .pong(frame.payload)
        case .close: return try close(frame.payload)
        }
    }

    private func message(_ opcode: WebSocketOpcode, _ payload: [UInt8]) throws(WebSocketProtocolViolation)
        -> WebSocketEvent
    {
        guard opcode == .text else { return .binary(payload) }
        guard let text = String(validating: payload, as: UTF8.self) else {
            throw WebSocketProtocolViolation(code: 1007, reason: "text message is not valid UTF-8")
        }
        return .text(text)
    }

    private func close(_ payload: [UInt8]) throws(WebSocketProtocolViolation) -> WebSocketEvent {
        if payload.isEmpty { return .close(code: WebSocketCloseCode.noStatus, reason: "") }
        guard payload.count >= 2 else {
            throw WebSocketProtocolViolation(code: 1002, reason: "close payload of one byte")
        }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        guard WebSocketCloseCode.isValidOnWire(code) else {
            throw WebSocketProtocolViolation(code: 1002, reason: "invalid close code")
        }
        guard let reason = String(validating: payload[2...], as: UTF8.self) else {
            throw WebSocketProtocolViolation(code: 1007, reason: "close reason is not valid UTF-8")
        }
        return .close(code: code, reason: reason)
    }
}
