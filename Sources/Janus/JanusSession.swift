import Foundation
import Signaling

/// Why a Janus request failed.
public enum JanusError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL is not `janus://HOST:PORT/ROOM_NUMBER`.
    case badURL(String)
    /// The HTTP exchange failed (connection refused, timeout, not JSON).
    case transport(String)
    /// Janus answered `{"janus":"error"}` or a plugin answered with an `error` field.
    case refused(code: Int, reason: String)
    /// No answer within the deadline.
    case timeout(String)
    /// The session is gone (destroyed, or Janus dropped it).
    case closed

    public var description: String {
        switch self {
        case .badURL(let u): return "bad Janus URL '\(u)': expected janus://HOST:PORT/ROOM_NUMBER"
        case .transport(let m): return "Janus HTTP API: \(m)"
        case .refused(let code, let reason): return "Janus refused (\(code)): \(reason)"
        case .timeout(let what): return "Janus did not answer \(what) in time"
        case .closed: return "the Janus session is closed"
        }
    }
}

/// `janus://HOST:PORT/ROOM_NUMBER`: where a Janus HTTP API listens and which VideoRoom to join.
///
/// The API is plain HTTP at `http://HOST:PORT/janus` (Janus's default `base_path`).
public struct JanusRoomURL: Sendable, Equatable {
    public var api: HTTPURL
    public var room: UInt64

    /// Parses `janus://HOST:PORT/ROOM_NUMBER`.
    public init(_ text: String) throws(JanusError) {
        guard text.hasPrefix("janus://") else { throw .badURL(text) }
        let rest = text.dropFirst("janus://".count)
        guard let slash = rest.firstIndex(of: "/") else { throw .badURL(text) }
        let hostPort = rest[..<slash]
        let roomText = rest[rest.index(after: slash)...]
        guard !hostPort.isEmpty, let room = UInt64(roomText), room > 0 else { throw .badURL(text) }
        do { api = try HTTPURL("http://\(hostPort)/janus") } catch { throw .badURL(text) }
        self.room = room
    }
}

/// One message from Janus: a reply or an asynchronous event (`event`, `webrtcup`, `media`, `hangup`…).
public struct JanusMessage: Sendable {
    public let json: JSONValue

    /// `janus`: the message type.
    public var kind: String { json["janus"]?.stringValue ?? "" }
    /// The handle the event is about (`sender`).
    public var sender: UInt64? { json["sender"]?.intValue.map { UInt64($0) } }
    /// The VideoRoom's own payload (`plugindata.data`).
    public var data: JSONValue { json["plugindata"]?["data"] ?? .object([:]) }
    /// The SDP Janus attached (`jsep.sdp`), with its type.
    public var jsep: (type: String, sdp: String)? {
        guard let type = json["jsep"]?["type"]?.stringValue, let sdp = json["jsep"]?["sdp"]?.stringValue else {
            return nil
        }
        return (type, sdp)
    }
}

/// A session of the Janus HTTP API (https://janus.conf.meetecho.com/docs/rest.html).
///
/// Requests are POSTs that Janus answers at once (`success`) or acknowledges (`ack`) and answers
/// later as an event carrying the same `transaction`; ``request(_:body:jsep:timeout:)`` hides the
/// difference. A long-poll loop (`GET /janus/SESSION`) collects events: replies go to their
/// waiting request, everything else (publishers joining/leaving, `webrtcup`, `hangup`) to
/// ``onEvent``. Keepalives (every third of Janus's `session-timeout`, at most 25 s) keep the session
/// alive: Janus drops a session that sends nothing for that long (a pending long poll does not count).
// Safe: its state is guarded by `lock`.
public final class JanusSession: @unchecked Sendable {
    public let api: HTTPURL
    public let sessionId: UInt64
    /// Unsolicited events; called on the poll thread.
    public var onEvent: (@Sendable (JanusMessage) -> Void)? {
        get { lock.withLock { eventHandler } }
        set { lock.withLock { eventHandler = newValue } }
    }

    private let lock = NSLock()
    private var eventHandler: (@Sendable (JanusMessage) -> Void)?
    private var waiting: [String: CheckedContinuation<JanusMessage, Error>] = [:]
    private var closed = false
    private var poller: Task<Void, Never>?
    private var keepalive: Task<Void, Never>?

    /// Creates a session on the Janus at `api` and starts polling it.
    public init(api: HTTPURL) async throws(JanusError) {
        self.api = api
        let created = try await Self.post(api, ["janus": "create", "transaction": .string(Self.transactionId())])
        guard created.kind == "success", let id = created.json["data"]?["id"]?.intValue else {
            throw Self.failure(created)
        }
        sessionId = UInt64(id)
        let interval = await Self.keepaliveInterval(api)
        poller = Task.detached { [weak self] in await self?.poll() }
        keepalive = Task.detached { [weak self] in
            while let self, !self.isClosed {
                try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
                if self.isClosed { return }
                _ = try? await self.post(path: "", ["janus": "keepalive"], timeout: 10)
            }
        }
    }

    var isClosed: Bool { lock.withLock { closed } }

    /// Seconds between keepalives: a third of the server's `session-timeout` (from `GET /janus/info`),
    /// at most 25 s as in Janus's own client; 25 s when the server does not say.
    static func keepaliveInterval(_ api: HTTPURL) async -> Double {
        var info = api
        info.target = api.target + "/info"
        guard let response = try? await HTTPClient.request("GET", info, timeout: 10),
            let timeout = (try? JSONValue.parse(response.body))?["session-timeout"]?.doubleValue, timeout > 0
        else { return 25 }
        return min(25, max(1, timeout / 3))
    }

    /// Attaches a plugin (by default the VideoRoom) and returns the handle id.
    public func attach(plugin: String = "janus.plugin.videoroom") async throws(JanusError) -> UInt64 {
        let reply = try await post(path: "", ["janus": "attach", "plugin": .string(plugin)], timeout: 10)
        guard reply.kind == "success", let id = reply.json["data"]?["id"]?.intValue else {
            throw Self.failure(reply)
        }
        return UInt64(id)
    }

    /// Sends a plugin message and returns Janus's answer: the synchronous reply, or the event that
    /// answers an `ack`. A plugin `error` in either becomes ``JanusError/refused(code:reason:)``.
    public func request(
        _ handle: UInt64, body: JSONValue, jsep: (type: String, sdp: String)? = nil, timeout: Double = 20
    ) async throws(JanusError) -> JanusMessage {
        let transaction = Self.transactionId()
        var message: [String: JSONValue] = ["janus": "message", "body": body, "transaction": .string(transaction)]
        if let jsep { message["jsep"] = ["type": .string(jsep.type), "sdp": .string(jsep.sdp)] }
        let payload = JSONValue.object(message)
        let url = sessionPath("/\(handle)")
        let what = body["request"]?.stringValue ?? "a request"
        // Registered before posting: the event may arrive on the poll before the POST returns.
        let reply: JanusMessage
        do {
            reply = try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<JanusMessage, Error>) in
                let open = lock.withLock {
                    if !closed { waiting[transaction] = continuation }
                    return !closed
                }
                guard open else { return continuation.resume(throwing: JanusError.closed) }
                Task {
                    let deadline = Date().addingTimeInterval(timeout)
                    do {
                        let first = try await Self.post(url, payload, timeout: timeout)
                        if first.kind != "ack" { self.resolve(transaction, with: first) }
                    } catch {
                        self.fail(transaction, error)
                    }
                    // The answer to an `ack` comes through the long poll; give up at the deadline.
                    while self.isWaiting(transaction) {
                        if Date() >= deadline { return self.fail(transaction, JanusError.timeout(what)) }
                        try? await Task.sleep(nanoseconds: 100_000_000)
                    }
                }
            }
        } catch let error as JanusError {
            throw error
        } catch {
            throw .transport("\(error)")
        }
        if reply.kind == "error" { throw Self.failure(reply) }
        if let code = reply.data["error_code"]?.intValue {
            throw .refused(code: code, reason: reply.data["error"]?.stringValue ?? "")
        }
        return reply
    }

    /// Tells Janus the handle's candidates are all in its SDP (we do not trickle).
    public func endOfCandidates(_ handle: UInt64) async throws(JanusError) {
        let reply = try await post(
            path: "/\(handle)", ["janus": "trickle", "candidate": ["completed": true]], timeout: 10)
        if reply.kind == "error" { throw Self.failure(reply) }
    }

    /// Detaches a handle (its PeerConnection on Janus's side closes).
    public func detach(_ handle: UInt64) async {
        _ = try? await post(path: "/\(handle)", ["janus": "detach"], timeout: 5)
    }

    /// Destroys the session (Janus detaches every handle) and stops polling.
    public func destroy() async {
        let pending: [CheckedContinuation<JanusMessage, Error>] = lock.withLock {
            if closed { return [] }
            closed = true
            defer { waiting.removeAll() }
            return Array(waiting.values)
        }
        for continuation in pending { continuation.resume(throwing: JanusError.closed) }
        keepalive?.cancel()
        _ = try? await Self.post(
            sessionPath(""), ["janus": "destroy", "transaction": .string(Self.transactionId())], timeout: 5)
        poller?.cancel()
    }

    // MARK: Polling

    private func poll() async {
        var failures = 0
        while !isClosed {
            let url = sessionPath("?maxev=10&rid=\(UInt64(Date().timeIntervalSince1970 * 1000))")
            let reply: JSONValue
            do {
                // Janus holds a long poll for 30 s and then answers with a keepalive.
                let response = try await HTTPClient.request("GET", url, timeout: 40)
                reply = try JSONValue.parse(response.body)
                failures = 0
            } catch {
                if isClosed { return }
                failures += 1
                // Janus gone for good: fail whoever waits, tell the owner with a synthetic hangup.
                if failures >= 5 {
                    onEvent?(JanusMessage(json: ["janus": "session_lost", "reason": .string("\(error)")]))
                    return
                }
                try? await Task.sleep(nanoseconds: 500_000_000)
                continue
            }
            for json in reply.arrayValue ?? [reply] {
                let message = JanusMessage(json: json)
                if message.kind == "keepalive" { continue }
                if let transaction = json["transaction"]?.stringValue, resolve(transaction, with: message) { continue }
                onEvent?(message)
            }
        }
    }

    private func isWaiting(_ transaction: String) -> Bool { lock.withLock { waiting[transaction] != nil } }

    @discardableResult
    private func resolve(_ transaction: String, with message: JanusMessage) -> Bool {
        guard let continuation = lock.withLock({ waiting.removeValue(forKey: transaction) }) else { return false }
        continuation.resume(returning: message)
        return true
    }

    private func fail(_ transaction: String, _ error: Error) {
        lock.withLock { waiting.removeValue(forKey: transaction) }?.resume(throwing: error)
    }

    // MARK: HTTP

    private func sessionPath(_ suffix: String) -> HTTPURL {
        var url = api
        url.target = api.target + "/\(sessionId)" + suffix
        return url
    }

    private func post(path: String, _ body: [String: JSONValue], timeout: Double) async throws(JanusError)
        -> JanusMessage
    {
        var body = body
        body["transaction"] = .string(Self.transactionId())
        return try await Self.post(sessionPath(path), .object(body), timeout: timeout)
    }

    private static func post(_ url: HTTPURL, _ body: JSONValue, timeout: Double = 10) async throws(JanusError)
        -> JanusMessage
    {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        do {
            let response = try await HTTPClient.request(
                "POST", url, headers: headers, body: Array(body.jsonString.utf8), timeout: timeout)
            guard response.status == 200 else {
                throw JanusError.transport("HTTP \(response.status) \(response.reason)")
            }
            return JanusMessage(json: try JSONValue.parse(response.body))
        } catch let error as JanusError {
            throw error
        } catch {
            throw .transport("\(error)")
        }
    }

    private static func failure(_ message: JanusMessage) -> JanusError {
        .refused(
            code: message.json["error"]?["code"]?.intValue ?? 0,
            reason: message.json["error"]?["reason"]?.stringValue ?? "unexpected reply \(message.json)")
    }

    private static func transactionId() -> String {
        String(UInt64.random(in: 0...UInt64.max), radix: 36)
    }
}
