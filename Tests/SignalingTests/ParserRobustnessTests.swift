import Testing

@testable import Signaling

/// Random and mutated input must produce results or typed errors, never a trap.
@Suite("Parser robustness")
struct ParserRobustnessTests {
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test func mutatedHTTPRequestsNeverTrap() {
        var rng = SplitMix(state: 42)
        let seed = Array(
            "POST /a?b=%41&c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\nGET / HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz"
                .utf8)
        var outcomes = (requests: 0, errors: 0)
        for _ in 0..<3000 {
            var input = seed
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let i = Int.random(in: 0..<input.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: input[i] = UInt8.random(in: 0...255, using: &rng)
                case 1: input.remove(at: i)
                default: input.insert(UInt8.random(in: 0...255, using: &rng), at: i)
                }
            }
            var parser = HTTPRequestParser(maxHeadBytes: 256, maxBodyBytes: 64)
            parser.append(input)
            do {
                while try parser.next() != nil { outcomes.requests += 1 }
            } catch {
                outcomes.errors += 1
            }
        }
        #expect(outcomes.requests > 0)
        #expect(outcomes.errors > 0)
    }

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
