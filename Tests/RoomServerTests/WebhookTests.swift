import Foundation
import RoomProtocol
import RoomServer
import Signaling
import Testing

/// A real HTTP receiver on a loopback port that answers with `statuses` in turn (then 200) and
/// keeps every request.
final class WebhookReceiver: @unchecked Sendable {
    let server = HTTPServer(host: "127.0.0.1", port: 0)
    private let lock = NSLock()
    private var statuses: [Int]
    private var received: [HTTPRequest] = []

    init(statuses: [Int] = []) throws {
        self.statuses = statuses
        server.route(method: "POST", path: "/hook") { [self] (request: HTTPRequest) async -> HTTPResponse in
            let status: Int = lock.withLock {
                received.append(request)
                return self.statuses.isEmpty ? 200 : self.statuses.removeFirst()
            }
            return HTTPResponse.text("", status: status)
        }
        try server.start()
    }

    var url: String { "http://127.0.0.1:\(server.port)/hook" }
    var requests: [HTTPRequest] { lock.withLock { received } }

    /// Waits (30 s at most) until `condition` holds for the requests received.
    func wait(_ what: String, until condition: ([HTTPRequest]) -> Bool) async throws {
        let deadline = Date().addingTimeInterval(30)
        while !condition(requests) {
            guard Date() < deadline else { throw Timeout(what: what) }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }
}

extension HTTPRequest {
    var event: JSONValue? { try? JSONValue.parse(body) }
}

@Suite("Webhooks")
struct WebhookTests {
    /// The vector: `printf '{"id":"evt-1","event":"job_started"}' | openssl dgst -sha256 -hmac whsec-test`.
    @Test func signatureMatchesOpenSSL() {
        let body = Array(#"{"id":"evt-1","event":"job_started"}"#.utf8)
        let expected = "sha256=ae87b28603a867e34e673bc5480ec740f7182c8f9eeea4d5f8379e00a81848d0"
        #expect(WebhookSignature.sign(body: body, secret: "whsec-test") == expected)
        #expect(WebhookSignature.verify(body: body, secret: "whsec-test", signature: expected))
        #expect(!WebhookSignature.verify(body: body + [0x20], secret: "whsec-test", signature: expected))
        #expect(!WebhookSignature.verify(body: body, secret: "other", signature: expected))
    }

    @Test func backoffDoublesFromOneSecondToSixteen() {
        #expect((1...7).map { WebhookSender.retryDelay(afterTry: $0) } == [1, 2, 4, 8, 16, 16, 16])
        #expect(WebhookSender.defaultMaxTries == 6)
    }

    @Test func answersDecideBetweenDoneRetryAndRefused() {
        for status in [200, 201, 204, 299] { #expect(WebhookSender.outcome(status: status) == .delivered) }
        for status in [nil, 408, 429, 500, 502, 503] { #expect(WebhookSender.outcome(status: status) == .retry) }
        for status in [301, 400, 401, 403, 404, 410] { #expect(WebhookSender.outcome(status: status) == .refused) }
    }

    @Test func badURLsAndAMissingSecretAreRefused() {
        #expect(WebhookSender.problem(urls: [], secret: nil) == nil)
        #expect(WebhookSender.problem(urls: ["http://127.0.0.1:9/x"], secret: "s") == nil)
        for url in ["https://hooks.example/x", "ftp://h/x", "hooks.example/x", "http://"] {
            let problem = WebhookSender.problem(urls: [url], secret: "s")
            #expect(problem?.contains("is not an http:// URL") == true, "\(url): \(problem ?? "accepted")")
        }
        #expect(WebhookSender.problem(urls: ["http://h/x"], secret: nil) == "webhooks need a secret (--webhook-secret)")
        var configuration = RoomServerConfiguration()
        configuration.webhooks = ["https://h/x"]
        configuration.webhookSecret = "s"
        #expect(configuration.validationProblem()?.contains("not an http:// URL") == true)
    }

    /// A dead receiver keeps at most `queueLimit` events; the rest are dropped and counted.
    @Test func aDeadReceiverCostsABoundedQueue() async throws {
        // Port 9 on loopback: connection refused, so every try fails and is retried much later.
        let sender = try WebhookSender(
            urls: ["http://127.0.0.1:9/hook"], secret: "s", queueLimit: 3, timeout: 1, delayScale: 1000)
        defer { sender.stop() }
        for i in 0..<10 { sender.post("room_started", fields: ["roomId": .string("r\(i)")]) }
        #expect(sender.queued == 3)
        #expect(sender.counts.dropped == 7)
        #expect(sender.metricsText().contains(#"understudy_webhook_events_total{result="dropped"} 7"#))
    }

    /// 500, 500, then 200: the event arrives on the third try, the same signed body each time, and
    /// an event posted meanwhile is not held back by the retries.
    @Test func retriedUntilTheReceiverTakesIt() async throws {
        let receiver = try WebhookReceiver(statuses: [500, 500])
        defer { receiver.server.stop() }
        let sender = try WebhookSender(urls: [receiver.url], secret: "whsec", delayScale: 0.2)
        defer { sender.stop() }
        let id = sender.post("job_failed", fields: ["jobId": "j1", "reason": "disk full"])
        try await receiver.wait("three tries") { $0.filter { $0.event?["id"]?.stringValue == id }.count >= 3 }
        let tries = receiver.requests.filter { $0.event?["id"]?.stringValue == id }
        #expect(Set(tries.map(\.body)).count == 1)
        let request = try #require(tries.last)
        let signature = try #require(request.headers[WebhookSignature.header])
        #expect(WebhookSignature.verify(body: request.body, secret: "whsec", signature: signature))
        #expect(
            request.headers[WebhookSignature.timestampHeader] == request.event?["timestamp"]?.intValue.map(String.init))
        #expect(request.event?["event"]?.stringValue == "job_failed")
        #expect(request.event?["reason"]?.stringValue == "disk full")
        let deadline = Date().addingTimeInterval(30)
        while sender.counts.delivered < 1 && Date() < deadline { try await Task.sleep(nanoseconds: 20_000_000) }
        #expect(sender.counts.delivered == 1 && sender.counts.failed == 0)
    }

    @Test func aRefusingReceiverEndsTheEventAsFailed() async throws {
        let receiver = try WebhookReceiver(statuses: [400])
        defer { receiver.server.stop() }
        let sender = try WebhookSender(urls: [receiver.url], secret: "whsec", delayScale: 0.01)
        defer { sender.stop() }
        sender.post("room_started", fields: ["roomId": "r"])
        let deadline = Date().addingTimeInterval(30)
        while sender.counts.failed < 1 && Date() < deadline { try await Task.sleep(nanoseconds: 20_000_000) }
        #expect(sender.counts.failed == 1 && receiver.requests.count == 1 && sender.queued == 0)
    }

    @Test func roomEventsFollowTheFirstJoinAndTheLastLeave() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.server.stop() }
        let server = try startServer()
        defer { server.stop() }
        server.webhooks = try WebhookSender(urls: [receiver.url], secret: "whsec")
        let (alice, _) = try await TestClient.joined(server, room: "hooked", participant: "alice")
        try await receiver.wait("room_started") { $0.contains { $0.event?["event"]?.stringValue == "room_started" } }
        alice.close()
        try await receiver.wait("room_finished") { $0.contains { $0.event?["event"]?.stringValue == "room_finished" } }
        #expect(receiver.requests.map { $0.event?["roomId"]?.stringValue } == ["hooked", "hooked"])
    }

    @Test func jobRecordChangesBecomeEvents() throws {
        func record(_ state: String, attempts: [[String]], manifest: String? = nil, error: String? = nil) -> JSONValue {
            var object: [String: JSONValue] = [
                "spec": ["id": "j"], "state": .string(state),
                "attempts": .array(
                    attempts.map { files in
                        var a: [String: JSONValue] = ["files": .array(files.map(JSONValue.string))]
                        if let manifest { a["manifest"] = .string(manifest) }
                        return .object(a)
                    }),
            ]
            if let error { object["error"] = .string(error) }
            return .object(object)
        }
        func types(_ previous: JSONValue?, _ current: JSONValue) -> [String] {
            JobLifecycle.events(previous: previous, current: current).map(\.type)
        }
        let queued = record("queued", attempts: [])
        let running = record("running", attempts: [[]])
        let opened = record("running", attempts: [["a.webm"]])
        let manifest = record("running", attempts: [["a.webm"]], manifest: "{}")
        #expect(types(nil, queued) == [])
        #expect(types(queued, running) == ["job_started"])
        #expect(types(running, running) == [])
        #expect(types(running, opened) == ["job_updated"])
        #expect(types(opened, manifest) == ["job_updated"])
        #expect(types(manifest, record("queued", attempts: [["a.webm"]])) == ["job_updated"])
        #expect(types(opened, record("running", attempts: [["a.webm"], []])) == ["job_started"])
        #expect(types(opened, record("stopped", attempts: [["a.webm"]])) == ["job_ended"])
        #expect(types(record("stopped", attempts: []), record("stopped", attempts: [])) == [])
        #expect(types(queued, record("done", attempts: [[]])) == ["job_ended"])
        let failed = JobLifecycle.events(
            previous: opened, current: record("failed", attempts: [[]], error: "disk full"))
        #expect(failed == [JobLifecycle.Event(type: "job_failed", reason: "disk full")])

        // Keys name the change, not the observer: servers that polled at other moments agree.
        func keys(_ previous: JSONValue?, _ current: JSONValue) -> [String] {
            JobLifecycle.events(previous: previous, current: current).map(\.key)
        }
        #expect(keys(queued, running) == keys(nil, running))
        #expect(keys(queued, running) == ["job_started:attempt-1"])
        #expect(keys(running, manifest) == keys(opened, manifest))
        #expect(keys(running, opened) != keys(opened, manifest))
        #expect(keys(opened, record("running", attempts: [["a.webm"], []])) == ["job_started:attempt-2"])
        #expect(
            keys(opened, record("stopped", attempts: [["a.webm"]])) == keys(running, record("done", attempts: [[]])))
    }
}
