import Foundation
import Testing

@testable import Signaling

@Suite("HTTPServer")
struct HTTPServerTests {
    func makeServer(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in }) throws -> HTTPServer {
        var config = HTTPServerConfiguration()
        configure(&config)
        let server = HTTPServer(host: "127.0.0.1", port: 0, configuration: config)
        server.route(method: "GET", path: "/hello") { request in
            .text("hello \(request.query("name") ?? "nobody")")
        }
        server.route(method: "POST", path: "/echo") { request in
            HTTPResponse(status: 201, headers: HTTPHeaders([("X-Length", "\(request.body.count)")]), body: request.body)
        }
        server.route(method: "GET", path: "/async") { (request: HTTPRequest) async -> HTTPResponse in
            try? await Task.sleep(nanoseconds: 5_000_000)
            return .json(#"{"path":"\#(request.path)"}"#)
        }
        server.route(method: "GET", path: "/later") { (_: HTTPRequest, responder: HTTPResponder) in
            Thread { responder.respond(.text("from another thread")) }.start()
        }
        try server.start()
        return server
    }

    @Test func portZeroBindsAnEphemeralPort() throws {
        let server = try makeServer()
        defer { server.stop() }
        #expect(server.port != 0)
    }

    @Test func routesWithDecodedQuery() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let r = try await HTTPClient.request(
            "GET", HTTPURL("http://127.0.0.1:\(server.port)/hello?name=J%C3%BCrgen+X&other=1"))
        #expect(r.status == 200)
        #expect(r.text == "hello Jürgen X")
    }

    @Test func postBodyAndCustomStatus() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let body = Array((0..<100_000).map { UInt8(truncatingIfNeeded: $0) })
        let r = try await HTTPClient.request("POST", HTTPURL("http://127.0.0.1:\(server.port)/echo"), body: body)
        #expect(r.status == 201)
        #expect(r.headers["X-Length"] == "100000")
        #expect(r.body == body)
    }

    @Test func asyncAndResponderHandlers() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let a = try await HTTPClient.request("GET", HTTPURL("http://127.0.0.1:\(server.port)/async"))
        #expect(a.status == 200)
        #expect(a.text == #"{"path":"/async"}"#)
        #expect(a.headers["Content-Type"] == "application/json")
        let b = try await HTTPClient.request("GET", HTTPURL("http://127.0.0.1:\(server.port)/later"))
        #expect(b.text == "from another thread")
    }

    @Test func prefixRoutesMatchLongestPrefixAfterExactRoutes() async throws {
        let server = try makeServer()
        defer { server.stop() }
        server.route(method: "POST", pathPrefix: "/v1/rooms/") { .text("rooms:\($0.path.dropFirst(10))") }
        server.route(method: "POST", pathPrefix: "/v1/rooms/special/") { _ in .text("special") }
        server.route(method: "POST", path: "/v1/rooms/exact") { _ in .text("exact") }
        let base = "http://127.0.0.1:\(server.port)"
        #expect(try await HTTPClient.request("POST", HTTPURL(base + "/v1/rooms/abc/end")).text == "rooms:abc/end")
        #expect(try await HTTPClient.request("POST", HTTPURL(base + "/v1/rooms/special/x")).text == "special")
        #expect(try await HTTPClient.request("POST", HTTPURL(base + "/v1/rooms/exact")).text == "exact")
        #expect(try await HTTPClient.request("GET", HTTPURL(base + "/v1/rooms/abc")).status == 405)
        #expect(try await HTTPClient.request("POST", HTTPURL(base + "/v1/other")).status == 404)
    }

    @Test func notFoundAndMethodNotAllowed() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let a = try await HTTPClient.request("GET", HTTPURL("http://127.0.0.1:\(server.port)/missing"))
        #expect(a.status == 404)
        let b = try await HTTPClient.request("DELETE", HTTPURL("http://127.0.0.1:\(server.port)/hello"))
        #expect(b.status == 405)
        #expect(b.headers["Allow"] == "GET")
    }

    @Test func keepAliveServesPipelinedRequestsInOrder() throws {
        let server = try makeServer()
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        try raw.send(
            "GET /hello?name=a HTTP/1.1\r\nHost: x\r\n\r\n" + "GET /async HTTP/1.1\r\nHost: x\r\n\r\n"
                + "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz"
                + "GET /hello?name=b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let all = String(decoding: raw.readToEnd(), as: UTF8.self)
        let statuses = all.components(separatedBy: "HTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
        #expect(statuses == ["200", "200", "201", "200"])
        let a = all.range(of: "hello a")
        let path = all.range(of: "/async\"}")
        let xyz = all.range(of: "xyz")
        let b = all.range(of: "hello b")
        #expect(a != nil && path != nil && xyz != nil && b != nil)
        if let a, let path, let xyz, let b {
            #expect(
                a.upperBound <= path.lowerBound && path.upperBound <= xyz.lowerBound && xyz.upperBound <= b.lowerBound)
        }
        #expect(all.contains("Connection: close"))
    }

    @Test func thousandsOfPipelinedRequestsAllGetAnswers() throws {
        let server = try makeServer()
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        let count = 3000
        var burst = ""
        for i in 0..<count { burst += "GET /hello?name=\(i) HTTP/1.1\r\nHost: x\r\n\r\n" }
        burst += "GET /hello?name=last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        // Write from another thread: the server stops reading while it answers, so a blocking
        // writer and reader on one thread could deadlock on full socket buffers.
        let bytes = Array(burst.utf8)
        let sender = Thread { try? raw.send(bytes) }
        sender.start()
        let all = String(decoding: raw.readToEnd(), as: UTF8.self)
        #expect(all.components(separatedBy: "HTTP/1.1 200 OK").count - 1 == count + 1)
        #expect(all.hasSuffix("hello last"))
    }

    @Test func chunkedRequestBody() throws {
        let server = try makeServer()
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        try raw.send(
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"
        )
        let reply = String(decoding: raw.readToEnd(), as: UTF8.self)
        #expect(reply.hasPrefix("HTTP/1.1 201"))
        #expect(reply.hasSuffix("\r\n\r\nhello world"))
    }

    @Test func oversizeHeadGets431() throws {
        let server = try makeServer()
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        try raw.send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 17 * 1024))\r\n\r\n")
        #expect(String(decoding: raw.readToEnd(), as: UTF8.self).hasPrefix("HTTP/1.1 431"))
    }

    @Test func oversizeBodyGets413() throws {
        let server = try makeServer { $0.maxBodyBytes = 1000 }
        defer { server.stop() }
        let raw = try RawSocket(port: server.port)
        try raw.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n")
        #expect(String(decoding: raw.readToEnd(), as: UTF8.self).hasPrefix("HTTP/1.1 413"))
        let chunked = try RawSocket(port: server.port)
        try chunked.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n")
        #expect(String(decoding: chunked.readToEnd(), as: UTF8.self).hasPrefix("HTTP/1.1 413"))
    }

    @Test func malformedRequestsGet400() throws {
        let server = try makeServer()
        defer { server.stop() }
        for request in [
            "GARBAGE\r\n\r\n", "GET /hello HTTP/2.0\r\n\r\n", "GET hello HTTP/1.1\r\n\r\n",
            "GET /hello HTTP/1.1\r\nNoColon\r\n\r\n", "POST /echo HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
            "POST /echo HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ] {
            let raw = try RawSocket(port: server.port)
            try raw.send(request)
            let reply = String(decoding: raw.readToEnd(), as: UTF8.self)
            #expect(reply.hasPrefix("HTTP/1.1 400"), "for \(request.debugDescription)")
        }
    }

    @Test func requestParserHandlesSplitInput() throws {
        var parser = HTTPRequestParser()
        let text = Array(
            "POST /a%20b?x=1&y=%E2%9C%93&flag HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbodyGET / HTTP/1.0\r\n\r\n"
                .utf8)
        var requests: [HTTPRequest] = []
        for byte in text {
            parser.append([byte])
            while let r = try parser.next() { requests.append(r) }
        }
        #expect(requests.count == 2)
        #expect(requests.first?.path == "/a b")
        #expect(requests.first?.query("y") == "✓")
        #expect(requests.first?.query("flag") == "")
        #expect(requests.first?.text == "body")
        #expect(requests.first?.keepAlive == true)
        #expect(requests.last?.keepAlive == false)
    }
}

@Suite("HTTPServer timeouts")
struct HTTPServerTimeoutTests {
    @Test func idleConnectionGets408() throws {
        var config = HTTPServerConfiguration()
        config.requestTimeoutMilliseconds = 200
        let server = HTTPServer(host: "127.0.0.1", port: 0, configuration: config)
        try server.start()
        defer { server.stop() }
        do {
            let raw = try RawSocket(port: server.port)
            try raw.send("GET /partial HTTP/1.1\r\nHost: x\r\n")  // never finishes the head
            #expect(String(decoding: raw.readToEnd(), as: UTF8.self).hasPrefix("HTTP/1.1 408"))
        }
        // Once the client has gone too, the server holds nothing for it.
        var polls = 0
        while server.connectionCount() > 0, polls < 500 {
            usleep(10_000)
            polls += 1
        }
        #expect(server.connectionCount() == 0)
    }
}
