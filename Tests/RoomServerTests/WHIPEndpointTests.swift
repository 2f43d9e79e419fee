import Foundation
import RTC
import RTCWire
import RoomProtocol
import Signaling
import TestSupport
import Testing

@testable import RoomServer

/// The server's WHIP/WHEP endpoints (docs/protocol.md, "WHIP and WHEP endpoints"): bad input gets a
/// clear 4xx and never a crash; a WHIP session is a room member that joins, publishes and leaves.
@Suite("WHIP and WHEP endpoints")
struct WHIPEndpointTests {
    /// An offer from our own PeerConnection (`video`/`audio` send-only m-lines, or receive-only).
    static func offer(video: Int = 1, audio: Int = 1, receive: Bool = false) async throws -> (PeerConnection, String) {
        let pc = try PeerConnection(loop: EventLoop(name: "whip-test"))
        let sdp = try await pc.loop.submit {
            for _ in 0..<video { _ = pc.addTransceiver(kind: .video, direction: receive ? .recvonly : .sendonly) }
            for _ in 0..<audio { _ = pc.addTransceiver(kind: .audio, direction: receive ? .recvonly : .sendonly) }
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return o.serialize()
        }
        return (pc, sdp)
    }

    /// A server whose SFU binds ephemeral ports (tests run in parallel).
    static func mediaServer(_ tweak: (inout RoomServerConfiguration) -> Void = { _ in }) throws -> RoomServer {
        try startServer {
            $0.udpPortLow = 0
            $0.udpPortHigh = 0
            tweak(&$0)
        }
    }

    static func post(
        _ server: RoomServer, _ path: String, sdp: String, bearer: String?, contentType: String = "application/sdp",
        method: String = "POST", extra: [(String, String)] = []
    ) async throws -> HTTPResponse {
        var headers = HTTPHeaders(extra)
        if let bearer { headers.add("Authorization", "Bearer \(bearer)") }
        headers.add("Content-Type", contentType)
        return try await HTTPClient.request(
            method, try HTTPURL("http://127.0.0.1:\(server.httpPort)\(path)"), headers: headers, body: Array(sdp.utf8))
    }

    static func errorCode(_ response: HTTPResponse) -> Int? {
        (try? JSONValue.parse(response.body))?["error"]?["code"]?.intValue
    }

    @Test func badInputGetsAClear4xx() async throws {
        let server = try startServer()
        defer { server.stop() }
        let good = token(server, room: "r1")
        let (pc, sdp) = try await Self.offer()
        defer { pc.loop.shutdown(after: { pc.close() }) }

        let wrongType = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: good, contentType: "text/plain")
        #expect(wrongType.status == 415 && Self.errorCode(wrongType) == 3073)
        let noToken = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: nil)
        #expect(noToken.status == 401 && Self.errorCode(noToken) == 4002)
        #expect(noToken.headers["WWW-Authenticate"] == "Bearer")
        let badToken = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: "not.a.jwt")
        #expect(badToken.status == 401 && Self.errorCode(badToken) == 4002)
        let forged = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: token(server, secret: "other"))
        #expect(forged.status == 401)
        let otherRoom = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: token(server, room: "r2"))
        #expect(otherRoom.status == 403 && Self.errorCode(otherRoom) == 4022)
        let lobby = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: token(server, permissions: ["ask_join"]))
        #expect(lobby.status == 403 && Self.errorCode(lobby) == 4008)
        let garbage = try await Self.post(server, "/whip/r1", sdp: "this is not SDP \u{0}\u{1}", bearer: good)
        #expect(garbage.status == 400 && Self.errorCode(garbage) == 3073)
        let empty = try await Self.post(server, "/whip/r1", sdp: "", bearer: good)
        #expect(empty.status == 400)
        let oversize = try await Self.post(
            server, "/whip/r1", sdp: sdp + String(repeating: "a=x\r\n", count: 60_000), bearer: good)
        #expect(oversize.status == 413)
        let (pc2, twoVideos) = try await Self.offer(video: 2, audio: 0)
        defer { pc2.loop.shutdown(after: { pc2.close() }) }
        let tooMany = try await Self.post(server, "/whip/r1", sdp: twoVideos, bearer: good)
        #expect(tooMany.status == 400 && Self.errorCode(tooMany) == 3073)
        // A well-formed offer without Opus or VP8: the room's `produce` refuses it, the member leaves.
        let h264 = sdp.replacingOccurrences(of: "VP8/90000", with: "H264/90000")
            .replacingOccurrences(of: "opus/48000", with: "G722/8000")
        #expect(h264 != sdp)
        let noCodec = try await Self.post(server, "/whip/r1", sdp: h264, bearer: good)
        #expect(noCodec.status == 422 && Self.errorCode(noCodec) == 4051, "\(noCodec.text)")
        let badRoom = try await Self.post(server, "/whip/r1/extra/segments", sdp: sdp, bearer: good)
        #expect(badRoom.status == 404)
        let (pc3, receiveOffer) = try await Self.offer(receive: true)
        defer { pc3.loop.shutdown(after: { pc3.close() }) }
        let nobody = try await Self.post(server, "/whep/r1/nobody", sdp: receiveOffer, bearer: good)
        #expect(nobody.status == 404 && Self.errorCode(nobody) == 4004)
        let playsItself = try await Self.post(
            server, "/whep/r1/me", sdp: receiveOffer, bearer: token(server, room: "r1", participant: "me"))
        #expect(playsItself.status == 400 && Self.errorCode(playsItself) == 4004)
        let whepNoTarget = try await Self.post(server, "/whep/r1", sdp: receiveOffer, bearer: good)
        #expect(whepNoTarget.status == 404)
        let unknownDelete = try await Self.post(server, "/whip/r1/whipdeadbeef", sdp: "", bearer: nil, method: "DELETE")
        #expect(unknownDelete.status == 404)
        let unknownPatch = try await Self.post(
            server, "/whip/r1/whipdeadbeef", sdp: "a=ice-ufrag:abcd\r\na=ice-pwd:0123456789012345678901\r\n",
            bearer: nil, contentType: "application/trickle-ice-sdpfrag", method: "PATCH")
        #expect(unknownPatch.status == 404)
        let get = try await http(server, "GET", "/whip/r1")
        #expect(get.status == 405)

        // Nothing joined, nothing is left behind, and the server still serves.
        #expect(try await http(server, "GET", "/healthz").status == 200)
        #expect(await server.roomSummaries().isEmpty)
        #expect(server.httpSessions.count == 0)
    }

    @Test func whipPublisherJoinsPublishesAndLeavesOnDelete() async throws {
        let server = try Self.mediaServer()
        defer { server.stop() }
        let (alice, _) = try await TestClient.joined(server, participant: "alice")
        let (pc, sdp) = try await Self.offer()
        defer { pc.loop.shutdown(after: { pc.close() }) }
        let created = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: token(server, participant: "cam"))
        #expect(created.status == 201, "\(created.text)")
        #expect(created.headers["Content-Type"] == "application/sdp")
        let location = try #require(created.headers["Location"])
        #expect(location.hasPrefix("/whip/r1/"))
        #expect(try SessionDescription.parse(created.text).media.count == 2)
        let joined = try await alice.notification("participantJoined")
        #expect(joined["participantId"] == "cam" && joined["mode"] == "SEND_AND_RECV")
        try await alice.notification("producerAdded") { $0["kind"] == "webcam" }
        try await alice.notification("producerAdded") { $0["kind"] == "mic" }

        let deleted = try await Self.post(server, location, sdp: "", bearer: nil, method: "DELETE")
        #expect(deleted.status == 200)
        let left = try await alice.notification("participantLeft")
        #expect(left["participantId"] == "cam" && left["reason"]?.intValue == 1101)
        let again = try await Self.post(server, location, sdp: "", bearer: nil, method: "DELETE")
        #expect(again.status == 404)
        #expect(server.httpSessions.count == 0)
    }

    @Test func sessionWhoseICENeverCompletesIsReaped() async throws {
        let server = try Self.mediaServer { $0.httpSessionICETimeoutSeconds = 1 }
        defer { server.stop() }
        let (alice, _) = try await TestClient.joined(server, participant: "alice")
        let (pc, sdp) = try await Self.offer()
        defer { pc.loop.shutdown(after: { pc.close() }) }
        // The answer is never applied, so no ICE check ever reaches the server.
        let created = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: token(server, participant: "ghost"))
        #expect(created.status == 201)
        _ = try await alice.notification("participantJoined")
        let left = try await alice.notification("participantLeft", seconds: 30)
        #expect(left["participantId"] == "ghost" && left["reason"]?.intValue == 1001)
        #expect(server.httpSessions.count == 0)
        let location = try #require(created.headers["Location"])
        #expect(try await Self.post(server, location, sdp: "", bearer: nil, method: "DELETE").status == 404)
    }

    /// A session that was connected and loses its transport (here the client goes silent, so ICE
    /// consent lapses) is reaped once it stays unconnected for the timeout: the SFU's state events
    /// arm the deadline.
    @Test func sessionThatLosesItsConnectionIsReaped() async throws {
        let server = try Self.mediaServer { $0.httpSessionICETimeoutSeconds = 5 }
        defer { server.stop() }
        let (alice, _) = try await TestClient.joined(server, participant: "alice")
        let (pc, sdp) = try await Self.offer()
        let created = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: token(server, participant: "lost"))
        #expect(created.status == 201)
        let answer = try SessionDescription.parse(created.text)
        try await pc.loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
        try await pc.waitUntilConnected(timeout: 10)
        let session = try #require(server.httpSessions.all.first)
        try await waitUntil("the server saw the WHIP connection connect") { session.isMediaConnected }
        await pc.loop.submit { pc.close() }
        let left = try await alice.notification("participantLeft", seconds: 60)
        #expect(left["participantId"] == "lost" && left["reason"]?.intValue == 1001)
        #expect(!session.isMediaConnected)
        #expect(server.httpSessions.count == 0)
    }

    @Test func patchAcknowledgesTrickleAndRestartsICE() async throws {
        let server = try Self.mediaServer()
        defer { server.stop() }
        let (pc, sdp) = try await Self.offer()
        defer { pc.loop.shutdown(after: { pc.close() }) }
        let created = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: token(server))
        #expect(created.status == 201)
        let location = try #require(created.headers["Location"])
        let eTag = try #require(created.headers["ETag"])
        let offer = try SessionDescription.parse(sdp)
        let (ufrag, pwd) = try #require(offer.iceCredentials(forMediaAt: 0))
        let answerUfrag = try #require(SessionDescription.parse(created.text).iceCredentials(forMediaAt: 0)?.ufrag)
        let fragment = "application/trickle-ice-sdpfrag"

        let trickle = try await Self.post(
            server, location,
            sdp: "a=ice-ufrag:\(ufrag)\r\na=ice-pwd:\(pwd)\r\na=candidate:1 1 udp 1 127.0.0.1 9 typ host\r\n",
            bearer: nil, contentType: fragment, method: "PATCH")
        #expect(trickle.status == 204)
        let wrongType = try await Self.post(server, location, sdp: "a=ice-ufrag:x", bearer: nil, method: "PATCH")
        #expect(wrongType.status == 415)
        let broken = try await Self.post(
            server, location, sdp: "not a fragment", bearer: nil, contentType: fragment, method: "PATCH")
        #expect(broken.status == 400)
        let restartBody = "a=ice-ufrag:rst1\r\na=ice-pwd:fresh-password-0123456789\r\n"
        let stale = try await Self.post(
            server, location, sdp: restartBody, bearer: nil, contentType: fragment, method: "PATCH",
            extra: [("If-Match", "\"not-the-etag\"")])
        #expect(stale.status == 412)
        let restart = try await Self.post(
            server, location, sdp: restartBody, bearer: nil, contentType: fragment, method: "PATCH",
            extra: [("If-Match", "*")])
        #expect(restart.status == 200, "\(restart.text)")
        #expect(restart.headers["Content-Type"] == fragment)
        let fresh = try TrickleICEFragment.parse(restart.text)
        #expect(fresh.ufrag != nil && fresh.ufrag != answerUfrag)
        #expect(!fresh.candidates.isEmpty)
        #expect(restart.headers["ETag"] != nil && restart.headers["ETag"] != eTag)
    }

    @Test func trickleFragmentParser() throws {
        let f = try TrickleICEFragment.parse(
            "a=ice-ufrag:abcd\r\na=ice-pwd:secret\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\n"
                + "a=candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host\r\na=end-of-candidates\r\n")
        #expect(f.ufrag == "abcd" && f.pwd == "secret" && f.mids == ["0"] && f.candidates.count == 1)
        #expect(f.endOfCandidates)
        #expect(throws: TrickleICEFragment.ParseError.self) { try TrickleICEFragment.parse("hello") }
        #expect(throws: TrickleICEFragment.ParseError.self) { try TrickleICEFragment.parse("a=ice-ufrag:x\r\n") }
        #expect(
            throws: TrickleICEFragment.ParseError.self,
            performing: { try TrickleICEFragment.parse(String(repeating: "a=x\n", count: 1001)) })
    }

    /// Issue 31 item 7: one room token opened every WHIP/WHEP session of the server. A token now
    /// has its share (429, 4009), a room its share (503, 4009), beside the server's cap; another
    /// token and another room still get sessions, and a DELETE gives the share back.
    @Test func oneTokenOrOneRoomCannotTakeEverySession() async throws {
        let server = try Self.mediaServer {
            $0.maxHTTPSessions = 8
            $0.maxHTTPSessionsPerRoom = 5
            $0.maxHTTPSessionsPerToken = 3
        }
        defer { server.stop() }
        let (pc, sdp) = try await Self.offer()
        defer { pc.loop.shutdown(after: { pc.close() }) }
        // Unbound tokens (the server makes up an id per session); distinct lifetimes, distinct tokens.
        let first = token(server, room: "r1", lifetime: 3600)
        let second = token(server, room: "r1", lifetime: 3601)
        let elsewhere = token(server, room: "r2", lifetime: 3602)
        #expect(first != second)

        var locations: [String] = []
        for _ in 0..<3 {
            let created = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: first)
            #expect(created.status == 201, "\(created.text)")
            locations.append(try #require(created.headers["Location"]))
        }
        let overToken = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: first)
        #expect(overToken.status == 429 && Self.errorCode(overToken) == 4009, "\(overToken.text)")
        #expect(overToken.text.contains("maxHTTPSessionsPerToken"))
        // The same token with a spacing the header allows is the same grant.
        let respelled = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: first + " ")
        #expect(respelled.status == 429, "\(respelled.text)")

        for _ in 0..<2 {
            let created = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: second)
            #expect(created.status == 201, "\(created.text)")
        }
        let overRoom = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: second)
        #expect(overRoom.status == 503 && Self.errorCode(overRoom) == 4009, "\(overRoom.text)")
        #expect(overRoom.text.contains("maxHTTPSessionsPerRoom"))
        #expect(server.httpSessions.count(room: "r1") == 5)

        // Another room is not starved by r1.
        let other = try await Self.post(server, "/whip/r2", sdp: sdp, bearer: elsewhere)
        #expect(other.status == 201, "\(other.text)")

        // A DELETE gives the token's and the room's share back.
        let deleted = try await Self.post(server, locations[0], sdp: "", bearer: nil, method: "DELETE")
        #expect(deleted.status == 200)
        let again = try await Self.post(server, "/whip/r1", sdp: sdp, bearer: first)
        #expect(again.status == 201, "\(again.text)")
        #expect(server.httpSessions.count == 6)

        // The server-wide cap still holds: 8 sessions, then 503 naming maxHTTPSessions.
        let third = token(server, room: "r3", lifetime: 3603)
        for _ in 0..<2 { #expect(try await Self.post(server, "/whip/r3", sdp: sdp, bearer: third).status == 201) }
        let overServer = try await Self.post(server, "/whip/r3", sdp: sdp, bearer: third)
        #expect(overServer.status == 503 && Self.errorCode(overServer) == 4009, "\(overServer.text)")
        #expect(overServer.text.contains("maxHTTPSessions"))
    }

    @Test func sessionSharesAreConfigurable() throws {
        let defaults = RoomServerConfiguration()
        #expect(defaults.maxHTTPSessionsPerRoom == 250 && defaults.maxHTTPSessionsPerToken == 20)
        let read = try JSONDecoder().decode(
            RoomServerConfiguration.self, from: Data(#"{"maxHTTPSessionsPerRoom":7,"maxHTTPSessionsPerToken":2}"#.utf8))
        #expect(read.maxHTTPSessionsPerRoom == 7 && read.maxHTTPSessionsPerToken == 2)
        var bad = defaults
        bad.maxHTTPSessionsPerToken = -1
        #expect(bad.validationProblem() != nil)
    }

    @Test func errorCodesMapToHTTPStatuses() {
        #expect(whipStatus(RoomError(4002, "")) == 401)
        #expect(whipStatus(RoomError(4022, "")) == 403)
        #expect(whipStatus(RoomError(4004, "")) == 404)
        #expect(whipStatus(RoomError(4051, "")) == 422)
        #expect(whipStatus(RoomError(4009, "")) == 503)
        #expect(whipStatus(RoomError(5000, "")) == 500)
        #expect(whipStatus(RoomError(3073, "")) == 400)
    }
}
