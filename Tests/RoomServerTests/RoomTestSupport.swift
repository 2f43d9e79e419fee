import Foundation
import RoomProtocol
import RoomServer
import Signaling
import Testing

struct Timeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// A running server on an ephemeral loopback port, stopped by the test.
func startServer(_ tweak: (inout RoomServerConfiguration) -> Void = { _ in }) throws -> RoomServer {
    var configuration = RoomServerConfiguration()
    configuration.listenPort = 0
    configuration.secret = "test-secret"
    tweak(&configuration)
    let server = RoomServer(configuration: configuration)
    try server.start()
    return server
}

func token(
    _ server: RoomServer, room: String? = nil, participant: String? = nil, permissions: [String] = ["allow_join"],
    lifetime: TimeInterval = 3600, secret: String? = nil
) -> String {
    RoomToken.sign(
        RoomToken(
            apikey: "test", permissions: permissions, roomId: room, participantId: participant, lifetime: lifetime),
        secret: secret ?? server.secret)
}

/// One signalling client: a real WebSocket to the server, with everything it received kept in order.
final class TestClient: @unchecked Sendable {
    let connection: WebSocketConnection
    private let lock = NSLock()
    private var log: [SignalEnvelope] = []
    private var rawLog: [String] = []
    private var consumed: Set<Int> = []
    private var closeInfo: (UInt16, String)?
    private var nextId = 1

    private init(connection: WebSocketConnection) {
        self.connection = connection
    }

    static func connect(_ server: RoomServer, token: String?) async throws -> TestClient {
        let url = server.signalingURL + (token.map { "?token=" + $0 } ?? "")
        let connection = try await WebSocketConnection.connect(url: url)
        let client = TestClient(connection: connection)
        connection.onText = { [client] text in client.received(text) }
        connection.onClose = { [client] code, reason in client.closedWith(code, reason) }
        connection.start()
        return client
    }

    /// Connects and joins; returns the client and the join response data (throws on a refusal).
    static func joined(
        _ server: RoomServer, room: String = "r1", participant: String, permissions: [String] = ["allow_join"],
        extra: [String: JSONValue] = [:], bound: Bool = false
    ) async throws -> (TestClient, JSONValue) {
        let client = try await connect(
            server, token: token(server, room: room, participant: bound ? participant : nil, permissions: permissions))
        var data: [String: JSONValue] = [
            "roomId": .string(room), "participantId": .string(participant), "name": .string("name-\(participant)"),
            "protocolVersion": 1,
        ]
        for (k, v) in extra { data[k] = v }
        let response = try await client.request("join", .object(data)).get()
        return (client, response)
    }

    private func received(_ text: String) {
        lock.lock()
        rawLog.append(text)
        if let e = try? SignalEnvelope.parse(text) { log.append(e) }
        lock.unlock()
    }

    private func closedWith(_ code: UInt16, _ reason: String) {
        lock.lock()
        closeInfo = (code, reason)
        lock.unlock()
    }

    /// Every text frame received, exactly as it arrived.
    var rawTexts: [String] {
        lock.lock()
        defer { lock.unlock() }
        return rawLog
    }

    var messages: [SignalEnvelope] {
        lock.lock()
        defer { lock.unlock() }
        return log
    }

    func send(raw text: String) { connection.send(text: text) }

    func sendRequest(_ method: String, _ data: JSONValue = [:]) -> Int {
        lock.lock()
        let id = nextId
        nextId += 1
        lock.unlock()
        connection.send(text: SignalEnvelope.request(id: .number(Double(id)), method: method, data: data).text)
        return id
    }

    /// Sends a request and waits for its response.
    func request(_ method: String, _ data: JSONValue = [:]) async throws -> Result<JSONValue, RoomError> {
        let id = sendRequest(method, data)
        return try await response(id: .number(Double(id)))
    }

    func response(id: JSONValue) async throws -> Result<JSONValue, RoomError> {
        let envelope = try await waitFor("response \(id)") {
            if case .response(let rid, _) = $0 { return rid == id }
            return false
        }
        guard case .response(_, let result) = envelope else { throw Timeout(what: "response") }
        return result
    }

    /// Sends a request and returns its error (fails the test if it succeeded).
    func expectError(_ method: String, _ data: JSONValue = [:]) async throws -> RoomError {
        switch try await request(method, data) {
        case .success(let d):
            Issue.record("\(method) unexpectedly succeeded: \(d)")
            return RoomError(code: 0, name: "", message: "")
        case .failure(let e): return e
        }
    }

    /// Waits for the first not-yet-taken message matching `match` and takes it.
    @discardableResult
    func waitFor(_ what: String, seconds: Double = 30, _ match: (SignalEnvelope) -> Bool) async throws -> SignalEnvelope
    {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let found: SignalEnvelope? = {
                lock.lock()
                defer { lock.unlock() }
                for (i, e) in log.enumerated() where !consumed.contains(i) && match(e) {
                    consumed.insert(i)
                    return e
                }
                return nil
            }()
            if let found { return found }
            if Date() > deadline { throw Timeout(what: what) }
            try await Task.sleep(nanoseconds: 5_000_000)
        }
    }

    /// Waits for the next notification `method` (optionally matching its data) and returns its data.
    @discardableResult
    func notification(_ method: String, seconds: Double = 30, where match: (JSONValue) -> Bool = { _ in true })
        async throws -> JSONValue
    {
        let e = try await waitFor("notification \(method)", seconds: seconds) {
            if case .notification(let m, let d) = $0 { return m == method && match(d) }
            return false
        }
        guard case .notification(_, let data) = e else { throw Timeout(what: method) }
        return data
    }

    /// Notifications named `method` received so far (taken or not).
    func notifications(_ method: String) -> [JSONValue] {
        messages.compactMap {
            if case .notification(let m, let d) = $0, m == method { return d }
            return nil
        }
    }

    /// Waits for the socket to close; returns the close code.
    func closed(seconds: Double = 30) async throws -> UInt16 {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if let info = closeState { return info.0 }
            if Date() > deadline { throw Timeout(what: "close") }
            try await Task.sleep(nanoseconds: 5_000_000)
        }
    }

    private var closeState: (UInt16, String)? {
        lock.lock()
        defer { lock.unlock() }
        return closeInfo
    }

    var isClosed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return closeInfo != nil
    }

    func close() { connection.close() }
}

extension SignalEnvelope {
    var method: String? {
        switch self {
        case .notification(let m, _), .request(_, let m, _): return m
        case .response: return nil
        }
    }
}

/// An HTTP request to the server under test.
func http(_ server: RoomServer, _ method: String, _ path: String, bearer: String? = nil, body: String = "") async throws
    -> HTTPResponse
{
    var headers = HTTPHeaders()
    if let bearer { headers.add("Authorization", "Bearer \(bearer)") }
    if !body.isEmpty { headers.add("Content-Type", "application/json") }
    return try await HTTPClient.request(
        method, try HTTPURL("http://127.0.0.1:\(server.httpPort)\(path)"), headers: headers, body: Array(body.utf8))
}
