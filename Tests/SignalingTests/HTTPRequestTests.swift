import Foundation
import Testing

@testable import Signaling

/// Hostile numbers in HTTP framing (issue 10): each case once trapped or was accepted when it must
/// not be. They must end in the documented status (400/413) or a typed client error, never a crash.
@Suite("Hostile HTTP framing")
struct HTTPRequestTests {
    /// Parses `text` as one request; returns the request or the error.
    func parse(_ text: String, maxBodyBytes: Int = 1024 * 1024) -> Result<HTTPRequest?, HTTPRequestError> {
        var parser = HTTPRequestParser(maxBodyBytes: maxBodyBytes)
        parser.append(Array(text.utf8))
        do throws(HTTPRequestError) { return .success(try parser.next()) } catch { return .failure(error) }
    }

    @Test func negativeChunkSizeIs400NotACrash() {
        // The 80-byte request of issue 10: `Int("-2", radix: 16)` is -2 and built a backwards range.
        let request = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\nabcdefgh\r\n0\r\n\r\n"
        #expect(parse(request).failure == .malformed("bad chunk size"))
    }

    @Test func signedOrPaddedChunkSizesAre400() {
        for size in ["+4", "-0", "0x4", " -1", "4 4", "", "g"] {
            let request = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\nabcd\r\n0\r\n\r\n"
            #expect(parse(request).failure == .malformed("bad chunk size"), "chunk size \(size.debugDescription)")
        }
    }

    @Test func hugeChunkSizesAre413() {
        for size in ["ffffffff", "7fffffffffffffff", "ffffffffffffffffffffffff", String(repeating: "f", count: 200)] {
            let request = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n\(size)\r\n"
            #expect(parse(request).failure == .bodyTooLarge, "chunk size \(size.prefix(20))")
        }
        // Leading zeros are still a small size.
        let padded = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000000004\r\nabcd\r\n0\r\n\r\n"
        #expect(parse(padded).success??.text == "abcd")
    }

    /// The 1 KiB limit on a chunk-size line holds whether the line arrives whole or in pieces
    /// (the http fuzz target checks that both give the same requests).
    @Test func longChunkSizeLineIs400EvenWhenItArrivesWhole() {
        let line = String(repeating: "0", count: 1100) + "4"
        let request = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\(line)\r\nabcd\r\n0\r\n\r\n"
        #expect(parse(request).failure == .malformed("chunk size line too long"))
    }

    @Test func signedOrHugeContentLength() {
        #expect(parse("POST /x HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc").failure == .malformed("bad Content-Length"))
        #expect(parse("POST /x HTTP/1.1\r\nContent-Length: -0\r\n\r\n").failure == .malformed("bad Content-Length"))
        #expect(
            parse("POST /x HTTP/1.1\r\nContent-Length: 99999999999999999999999999\r\n\r\n").failure == .bodyTooLarge)
        #expect(parse("POST /x HTTP/1.1\r\nContent-Length: 003\r\n\r\nabc").success??.text == "abc")
    }

    @Test func responseParserRejectsHugeAndSignedChunks() {
        // After one byte of body, a chunk of Int.max made `out.count + size` overflow.
        for size in ["7fffffffffffffff", "ffffffffffffffffff"] {
            var parser = HTTPResponseParser()
            let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n\(size)\r\n"
            #expect(throws: HTTPError.messageTooLarge) { try parser.append(Array(text.utf8)) }
        }
        for size in ["-2", "+2"] {
            var parser = HTTPResponseParser()
            let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\nab\r\n0\r\n\r\n"
            #expect(throws: HTTPError.malformedResponse("bad chunk size")) { try parser.append(Array(text.utf8)) }
        }
        var signed = HTTPResponseParser()
        #expect(throws: HTTPError.malformedResponse("bad Content-Length")) {
            try signed.append(Array("HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nab".utf8))
        }
    }

    /// A chunked body that trickles in is decoded once, resuming where it stopped (it used to be
    /// decoded from its start on every read); also across the buffer compaction that follows a
    /// pipelined request.
    @Test func chunkedBodyInPiecesAfterAPipelinedRequest() throws {
        let first = "GET /first HTTP/1.1\r\nHost: a\r\nX-Padding: \(String(repeating: "p", count: 200))\r\n\r\n"
        var chunks = ""
        var expected = ""
        for i in 0..<300 {
            let data = String(repeating: Character(UnicodeScalar(UInt8(65 + i % 26))), count: 1 + i % 7)
            chunks += String(data.utf8.count, radix: 16) + (i % 5 == 0 ? ";ext=\(i)" : "") + "\r\n" + data + "\r\n"
            expected += data
        }
        let second =
            "POST /second HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\nX-Trailer: t\r\n\r\n"
        let bytes = Array((first + second).utf8)
        let split = first.utf8.count + 70  // the second head and the first chunks arrive with the first request
        var parser = HTTPRequestParser()
        parser.append(bytes[..<split])
        #expect(try parser.next()?.path == "/first")
        #expect(try parser.next() == nil)
        var requests: [HTTPRequest] = []
        for byte in bytes[split...] {
            parser.append([byte])
            if let request = try parser.next() { requests.append(request) }
        }
        #expect(requests.count == 1)
        #expect(requests.first?.path == "/second")
        #expect(requests.first?.text == expected)
        #expect(parser.bufferedCount == 0)
    }

    /// A response's chunked body goes through the same decoder as a request's: byte by byte, with
    /// extensions and a trailer, complete only at the empty line that ends the trailer; a chunk
    /// without its CRLF is refused.
    @Test func responseChunkedBodyInPieces() throws {
        let text =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n"
        let bytes = Array(text.utf8)
        var parser = HTTPResponseParser()
        for byte in bytes.dropLast() {
            try parser.append([byte])
            #expect(!parser.isComplete)
        }
        try parser.append([bytes.last ?? 0])
        #expect(parser.isComplete)
        #expect(parser.body == Array("abcde".utf8))
        var unterminated = HTTPResponseParser()
        #expect(throws: HTTPError.malformedResponse("chunk not terminated by CRLF")) {
            try unterminated.append(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n".utf8))
        }
    }

    /// The server answers the crashing request with 400 and keeps serving.
    @Test func serverSurvivesTheNegativeChunk() throws {
        let server = HTTPServer(host: "127.0.0.1", port: 0)
        server.route(method: "POST", path: "/x") { .text("got \($0.body.count)") }
        server.route(method: "GET", path: "/alive") { _ in .text("yes") }
        try server.start()
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        try raw.send("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\nabcdefgh\r\n0\r\n\r\n")
        #expect(String(decoding: raw.readToEnd(), as: UTF8.self).hasPrefix("HTTP/1.1 400"))
        let again = try RawSocket(port: server.port)
        try again.send("GET /alive HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        #expect(String(decoding: again.readToEnd(), as: UTF8.self).hasSuffix("\r\n\r\nyes"))
    }
}

extension Result {
    var failure: Failure? { if case .failure(let e) = self { return e } else { return nil } }
    var success: Success? { if case .success(let v) = self { return v } else { return nil } }
}

/// Random and mutated input must produce results or typed errors, never a trap.
@Suite("HTTP request robustness")
struct HTTPrequestrobustnessTests {
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
}
