import Testing

@testable import Signaling

/// Hostile WebSocket input at the level a connection processes it (issue 10): every violation
/// maps to its close code before anything is buffered, and nothing traps.
@Suite("Hostile WebSocket frames")
struct WebSocketFrameTests {
    /// Feeds `bytes` to a server-side assembler; returns the events, or the violation's close code.
    func run(_ bytes: [UInt8], maxMessageBytes: Int = 1024) -> (events: [WebSocketEvent], code: UInt16?) {
        var assembler = WebSocketMessageAssembler(maxMessageBytes: maxMessageBytes, expectMasked: true)
        var events: [WebSocketEvent] = []
        var at = 0
        while at < bytes.count {
            let result: Result<(event: WebSocketEvent?, length: Int)?, WebSocketProtocolViolation> =
                bytes.withUnsafeBytes { raw in
                    do throws(WebSocketProtocolViolation) {
                        return .success(try assembler.next(UnsafeRawBufferPointer(rebasing: raw[at...])))
                    } catch {
                        return .failure(error)
                    }
                }
            let step: (event: WebSocketEvent?, length: Int)?
            switch result {
            case .success(let value): step = value
            case .failure(let violation): return (events, violation.code)
            }
            guard let step else { break }
            if let event = step.event { events.append(event) }
            at += step.length
        }
        return (events, nil)
    }

    func frame(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
        WebSocketFrameCodec.encode(opcode: opcode, payload: payload, fin: fin, maskKey: 0x1234_5678)
    }

    /// A masked frame header declaring `length` with the 64-bit form, and no payload.
    func header64(_ length: UInt64) -> [UInt8] {
        [0x82, 0x80 | 127] + (0..<8).map { UInt8(truncatingIfNeeded: length >> (56 - 8 * UInt64($0))) } + [1, 2, 3, 4]
    }

    @Test func sixtyFourBitLengths() {
        #expect(run(header64(UInt64(Int.max))).code == 1009)  // fits the field, far over the limit
        #expect(run(header64(UInt64.max)).code == 1002)  // high bit set
        #expect(run(header64(1 << 63)).code == 1002)
        #expect(run(header64(200)).code == 1002)  // should have used the 16-bit form
    }

    @Test func fragmentationRules() {
        let hello = Array("hello".utf8)
        // A ping between fragments is allowed and delivered first.
        let interleaved = frame(.text, hello, fin: false) + frame(.ping, [9]) + frame(.continuation, hello)
        #expect(run(interleaved).events == [.ping([9]), .text("hellohello")])
        #expect(run(frame(.continuation, hello)).code == 1002)  // nothing to continue
        #expect(run(frame(.text, hello, fin: false) + frame(.binary, hello)).code == 1002)  // new message inside one
        #expect(run(frame(.ping, [], fin: false)).code == 1002)  // fragmented control frame
        #expect(run(frame(.ping, [UInt8](repeating: 0, count: 126))).code == 1002)  // control frame over 125
        // The reassembled size is checked before the next fragment is buffered.
        let big = [UInt8](repeating: 65, count: 600)
        #expect(run(frame(.text, big, fin: false) + frame(.continuation, big)).code == 1009)
        // UTF-8 is checked on the whole message, so a character split across fragments is fine.
        let check = Array("✓".utf8)
        #expect(
            run(frame(.text, [check[0]], fin: false) + frame(.continuation, Array(check[1...]))).events == [.text("✓")])
        #expect(run(frame(.text, [0xC3], fin: true)).code == 1007)
    }

    @Test func closePayloads() {
        #expect(run(frame(.close, [])).events == [.close(code: 1005, reason: "")])
        #expect(run(frame(.close, [0x03, 0xE8] + Array("bye".utf8))).events == [.close(code: 1000, reason: "bye")])
        #expect(run(frame(.close, [0x03])).code == 1002)  // one byte
        #expect(run(frame(.close, [0x03, 0xED])).code == 1002)  // 1005 may not be sent
        #expect(run(frame(.close, [0x03, 0xE8, 0xFF])).code == 1007)  // reason not UTF-8
    }

    @Test func unmaskedAndReservedBits() {
        let unmasked = WebSocketFrameCodec.encode(opcode: .text, payload: Array("x".utf8), maskKey: nil)
        #expect(run(unmasked).code == 1002)
        var reserved = frame(.text, Array("x".utf8))
        reserved[0] |= 0x40
        #expect(run(reserved).code == 1002)
        #expect(run([0x83, 0x80, 0, 0, 0, 0]).code == 1002)  // opcode 3 is reserved
    }
}

/// Random and mutated input must produce results or typed errors, never a trap.
@Suite("WebSocket frame robustness")
struct WebSocketframerobustnessTests {
    @Test func randomWebSocketBytesNeverTrap() {
        var rng = SplitMix(state: 7)
        var frames = 0
        var violations = 0
        for _ in 0..<5000 {
            let count = Int.random(in: 0...40, using: &rng)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if !bytes.isEmpty { bytes[0] = bytes[0] & 0x8F }  // mostly clear RSV so deeper paths run
            let masked = Bool.random(using: &rng)
            bytes.withUnsafeBytes { raw in
                do throws(WebSocketProtocolViolation) {
                    if try WebSocketFrameCodec.decode(raw, expectMasked: masked, maxPayload: 1 << 20) != nil {
                        frames += 1
                    }
                } catch {
                    violations += 1
                }
            }
        }
        #expect(frames > 0)
        #expect(violations > 0)
    }
}
