import Foundation
import RoomProtocol
import RoomServer
import Signaling
import TestSupport
import Testing

@Suite("Room protocol: names once, the client core against the real server", .serialized)
struct RoomProtocolTests {
    /// The server's error names are the shared table.
    @Test func theServerNamesErrorsFromTheSharedTable() {
        for (code, name) in RoomError.names { #expect(RoomError(code, "x").name == name) }
        #expect(RoomError.canonicalName(4009) == "MAX_PARTCIPANT_REACHED")
        #expect(RoomError.canonicalName(1) == "UNKNOWN_ERROR")
        #expect(RoomLeaveCode(code: 1011) == .DUPLICATE_PARTICIPANT && RoomLeaveCode(code: 9) == .UNKNOWN)
    }

    /// A protocol-2 batch reaches the handler as its events, in order; anything else as itself;
    /// names this version does not know are dropped.
    @Test func participantEventsAreUnpackedInOrder() throws {
        let batch = try JSONValue.parse(
            #"{"events":[{"method":"participantJoined","data":{"participantId":"a"}},"#
                + #"{"method":"participantLeft","data":{"participantId":"b"}}]}"#)
        var seen: [String] = []
        RoomProtocolClient.unpack("participantEvents", batch) { m, d in
            seen.append("\(m.rawValue):\(d["participantId"]?.stringValue ?? "")")
        }
        RoomProtocolClient.unpack("roomClosed", .object([:])) { m, _ in seen.append(m.rawValue) }
        RoomProtocolClient.unpack("notAThing", .object([:])) { m, _ in seen.append(m.rawValue) }
        #expect(seen == ["participantJoined:a", "participantLeft:b", "roomClosed"])
    }

    /// The request table gives each request its own id and its text frame; an answer is taken once.
    @Test func requestsAreMatchedOnceByID() throws {
        var table = RoomRequestTable<String>()
        let first = table.add(.consume, ["kind": "mic"], waiter: "first")
        let second = table.add(.ping, .object([:]), waiter: "second")
        #expect(second.id == first.id + 1 && table.nextRequestID == second.id + 1 && table.count == 2)
        guard case .request(let id, let method, let data)? = try? SignalEnvelope.parse(first.text) else {
            Issue.record("not a request: \(first.text)")
            return
        }
        #expect(id.intValue == first.id && method == "consume" && data["kind"]?.stringValue == "mic")
        #expect(table.take(first.id) == "first")
        #expect(table.take(first.id) == nil)
        #expect(table.takeAll() == ["second"] && table.count == 0)

        let answer =
            #"{"id":\#(second.id),"ok":false,"error":{"code":4009,"name":"MAX_PARTCIPANT_REACHED","message":"full"}}"#
        guard case .response(let rid, .failure(let error))? = RoomIncoming.decode(answer) else {
            Issue.record("not a failed response")
            return
        }
        #expect(rid == second.id && error == RoomError(4009, "full"))
        #expect(RoomIncoming.decode("not json") == nil)
        #expect(RoomIncoming.decode(#"{"id":1,"method":"ping","data":{}}"#) == nil)
    }

    /// Against a running server: a join succeeds, a refused request comes back as the one wire error
    /// shape with the documented name, notifications arrive, and closing fails what is pending.
    @Test func theClientCoreJoinsGetsTypedErrorsAndNotifications() async throws {
        let server = try startTestServer(secret: "protocol-test-secret")
        defer { server.stop() }
        func connect(_ id: String) async throws -> RoomProtocolClient {
            let token = RoomToken.sign(
                RoomToken(apikey: "t", permissions: ["allow_join"], roomId: "p", participantId: id, lifetime: 600),
                secret: server.secret)
            return try await RoomProtocolClient.connect(url: server.signalingURL + "?token=" + token, timeout: 10)
        }
        let a = try await connect("a")
        let joined = await a.request(
            .join, ["roomId": "p", "participantId": "a", "mode": "SIGNALLING_ONLY"], timeout: 10)
        guard case .success = joined else {
            Issue.record("join failed: \(joined)")
            return
        }

        let notes = NotificationLog()
        a.setNotificationHandler { method, data in notes.add(method.rawValue, data["participantId"]?.stringValue) }
        let b = try await connect("b")
        _ = await b.request(.join, ["roomId": "p", "participantId": "b", "mode": "SIGNALLING_ONLY"], timeout: 10)
        let deadline = Date().addingTimeInterval(20)
        while !notes.has("participantJoined:b") && Date() < deadline { try await Task.sleep(nanoseconds: 20_000_000) }
        #expect(notes.has("participantJoined:b"))

        // The server dispatches every typed method (a refusal, if any, is about the request, never
        // an unknown method).
        for method in RoomMethod.allCases where ![.join, .leave, .end].contains(method) {
            if case .failure(let e) = await a.request(method, .object([:]), timeout: 10) {
                #expect(!e.message.contains("unknown method"), "\(method): \(e)")
            }
        }

        // produce is refused outside SEND_AND_RECV: the documented code and name.
        let refused = await a.request(.produce, ["kind": "webcam"], timeout: 10)
        guard case .failure(let error) = refused else {
            Issue.record("produce was not refused")
            return
        }
        #expect(RoomError.names[error.code] == error.name, "\(error)")

        // A cancelled request's answer is ignored; the close handler runs before the requests still
        // waiting fail, so an owner that queues both learns of the close first.
        // On a busy machine the server may answer a ping before the cancel: then cancel says so
        // (false) and the try is repeated, so the check runs on a request that was really pending.
        var cancelledInTime = false
        for _ in 0..<50 where !cancelledInTime {
            let cancelled = ResultLog()
            let cancelledID = try #require(b.send(.ping, .object([:])) { _ in cancelled.add("answered") })
            if b.cancel(cancelledID) {
                cancelledInTime = true
                #expect(await b.request(.ping, timeout: 10).isSuccess)
                #expect(cancelled.lines.isEmpty && b.pendingCount == 0)
            } else {
                #expect(await b.request(.ping, timeout: 10).isSuccess)  // the late answer is in by now
                #expect(cancelled.lines == ["answered"], "a cancel that failed means the answer came")
            }
        }
        #expect(cancelledInTime)
        let order = ResultLog()
        b.setCloseHandler { order.add("closed") }
        b.send(.getStats, .object([:])) { result in
            if case .failure(let e) = result { order.add("failed:\(e.name)") } else { order.add("answered") }
        }
        b.close()
        // (The answer may in principle beat the close; then only the order of the close is checked.)
        let lines = order.lines
        #expect(lines == ["closed", "failed:CONNECTION_CLOSED"] || lines == ["answered", "closed"], "\(lines)")
        let afterClose = await b.request(.ping, timeout: 10)
        guard case .failure(let closed) = afterClose else {
            Issue.record("a closed client answered")
            return
        }
        #expect(closed == RoomProtocolClient.closedError)
        a.close()
    }
}

final class NotificationLog: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func add(_ method: String, _ pid: String?) { lock.withLock { lines.append("\(method):\(pid ?? "")") } }
    func has(_ line: String) -> Bool { lock.withLock { lines.contains(line) } }
}

final class ResultLog: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    func add(_ line: String) { lock.withLock { stored.append(line) } }
    var lines: [String] { lock.withLock { stored } }
}

extension Result {
    var isSuccess: Bool { if case .success = self { true } else { false } }
}
