import Foundation
import RTC
import RTCWire
import RoomProtocol
import SFU
import Signaling

// WHIP (RFC 9725) and WHEP endpoints of the room server (docs/protocol.md, "WHIP and WHEP endpoints"):
//
//   POST   /whip/ROOM                      publish into ROOM (SEND_AND_RECV participant)
//   POST   /whep/ROOM/PARTICIPANT          play PARTICIPANT's mic and webcam (RECV_ONLY participant)
//   PATCH  <session URL>                   trickle ICE (acknowledged) or ICE restart
//   DELETE <session URL>                   leave the room
//
// The session URL (`Location`) is the endpoint URL plus an unguessable session id.

extension RoomServer {
    func installWHIPRoutes(on server: HTTPServer) {
        for kind in [HTTPParticipant.Kind.whip, .whep] {
            let prefix = "/\(kind.rawValue)/"
            server.route(method: "POST", pathPrefix: prefix) {
                [weak self] (request: HTTPRequest) async -> HTTPResponse in
                guard let self else { return HTTPResponse.text("", status: 503) }
                return withCORS(await self.whipPost(kind, request))
            }
            server.route(method: "PATCH", pathPrefix: prefix) {
                [weak self] (request: HTTPRequest) async -> HTTPResponse in
                guard let self else { return HTTPResponse.text("", status: 503) }
                return withCORS(await self.whipPatch(kind, request))
            }
            server.route(method: "DELETE", pathPrefix: prefix) {
                [weak self] (request: HTTPRequest) async -> HTTPResponse in
                guard let self else { return HTTPResponse.text("", status: 503) }
                return withCORS(await self.whipDelete(kind, request))
            }
            // CORS preflight, so that a page from another origin can POST an offer.
            server.route(method: "OPTIONS", pathPrefix: prefix) { _ in
                var response = HTTPResponse(status: 204)
                response.headers.add("Accept-Post", "application/sdp")
                response.headers.add("Accept-Patch", "application/trickle-ice-sdpfrag")
                response.headers.add("Access-Control-Allow-Methods", "POST, PATCH, DELETE, OPTIONS")
                response.headers.add("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match")
                return withCORS(response)
            }
        }
    }

    // MARK: POST: a new session

    private func whipPost(_ kind: HTTPParticipant.Kind, _ request: HTTPRequest) async -> HTTPResponse {
        let parts = pathSegments(request.path, after: "/\(kind.rawValue)/")
        guard parts.count == (kind == .whip ? 1 : 2) else {
            let form = kind == .whip ? "/whip/ROOM" : "/whep/ROOM/PARTICIPANT"
            return adminError(404, RoomError(4003, "POST needs \(form) (got \(request.path.prefix(200)))"))
        }
        let roomId = parts[0]
        let target = kind == .whep ? parts[1] : nil
        guard isValidIdentifier(roomId) else {
            return adminError(404, RoomError(4003, "invalid room id in the URL"))
        }
        if let target, !isValidIdentifier(target) {
            return adminError(404, RoomError(4004, "invalid participant id in the URL"))
        }
        if let refusal = sdpBodyProblem(request, contentType: "application/sdp") { return refusal }
        guard let jwt = bearerTokenOf(request) else {
            var response = adminError(401, RoomError(4002, "missing Authorization: Bearer token"))
            response.headers.add("WWW-Authenticate", "Bearer")
            return response
        }
        if let directory, existingRoom(roomId) == nil {
            // Cluster mode: the room's owner node takes the session (RFC 9725 allows redirects).
            switch await directory.locate(roomId: roomId) {
            case .here: break
            case .peer(let peer):
                var response = HTTPResponse(status: 307)
                response.headers.add("Location", peer.httpURL + request.target)
                return response
            case .unavailable(let why): return adminError(503, RoomError(3047, why))
            }
        }
        // A cheap early refusal when the server is full; the shares are checked with the token below.
        guard httpSessions.count < configuration.maxHTTPSessions else {
            return httpSessionRefusal(.server(configuration.maxHTTPSessions), roomId: roomId)
        }
        let data: JSONValue = [
            "roomId": .string(roomId), "protocolVersion": 2, "autoConsume": false,
            "mode": .string(kind == .whip ? ParticipantMode.sendAndRecv.rawValue : ParticipantMode.recvOnly.rawValue),
        ]
        var join: JoinRequest
        do {
            join = try JoinRequest.parse(
                id: .null, data: data, queryToken: jwt, secret: secret,
                maxTokenLifetime: configuration.maxTokenLifetimeSeconds)
        } catch {
            return adminError(whipStatus(error), error)
        }
        guard !join.permissions.contains("ask_join") else {
            return adminError(
                403, RoomError(4008, "WHIP/WHEP needs a token with allow_join (a lobby cannot hold an HTTP request)"))
        }
        let offer: SessionDescription
        do { offer = try SessionDescription.parse(request.text) } catch {
            return adminError(400, RoomError(3073, "the body is not a valid SDP offer: \(error)", cause: error))
        }
        let audio = offer.media.filter { !$0.isRejected && $0.kind == .audio }.count
        let video = offer.media.filter { !$0.isRejected && $0.kind == .video }.count
        guard audio + video > 0, audio <= 1, video <= 1 else {
            return adminError(
                400, RoomError(3073, "the offer needs one audio and/or one video m-line (has \(audio) and \(video))"))
        }
        let micWanted = audio == 1
        let camWanted = video == 1
        join.micEnabled = kind == .whip && micWanted
        join.camEnabled = kind == .whip && camWanted
        if let target, join.participantId == target {
            // Joining under the played id would replace the very participant it wants to play.
            return adminError(400, RoomError(4004, "a WHEP viewer cannot play itself ('\(target)')"))
        }
        if join.name == join.participantId, let name = request.query("name"), !name.isEmpty {
            join.name = String(name.prefix(256))
        }
        let session = HTTPParticipant(kind: kind, roomId: roomId, endpointPath: request.path, server: self)
        let limits = HTTPSessionRegistry.Limits(
            server: configuration.maxHTTPSessions, room: configuration.maxHTTPSessionsPerRoom,
            token: configuration.maxHTTPSessionsPerToken)
        if let refusal = httpSessions.reserve(session, token: grantKey(jwt), limits: limits) {
            return httpSessionRefusal(refusal, roomId: roomId)
        }
        if case .failure(let error) = await session.join(join) {
            httpSessions.remove(session)
            return adminError(whipStatus(error), error)
        }
        let answer: Result<String, RoomError>
        switch kind {
        case .whip: answer = await publish(session, offer: offer, text: request.text)
        case .whep: answer = await play(session, offer: offer, target: target ?? "", mic: micWanted, cam: camWanted)
        }
        switch answer {
        case .failure(let error):
            await session.leave()
            return adminError(whipStatus(error), error)
        case .success(let sdp):
            session.remember(offer: offer, answer: sdp)
            session.watchICE(timeout: configuration.httpSessionICETimeoutSeconds)
            var response = HTTPResponse(status: 201, body: Array(sdp.utf8))
            response.headers.add("Content-Type", "application/sdp")
            response.headers.add("Location", session.resourcePath)
            response.headers.add("ETag", session.eTag)
            response.headers.add("Accept-Patch", "application/trickle-ice-sdpfrag")
            return response
        }
    }

    /// WHIP: the room's own `produce` with the offer; every m-line becomes a producer.
    private func publish(_ session: HTTPParticipant, offer: SessionDescription, text: String) async -> Result<
        String, RoomError
    > {
        // In the offer's m-line order, which `produce` labels its new m-lines by.
        let tracks: [JSONValue] = offer.media.compactMap(\.kind).map {
            ["kind": .string(($0 == .audio ? TrackKind.mic : .webcam).rawValue)]
        }
        let result = await session.request(.produce, ["tracks": .array(tracks), "sdp": .string(text)])
        return result.flatMap { response in
            guard let sdp = response["sdp"]?.stringValue else {
                return .failure(RoomError(5000, "produce answered without an SDP"))
            }
            return .success(sdp)
        }
    }

    /// WHEP: the SFU answers the viewer's offer with consumers of `target`'s mic and webcam, then the
    /// room records them through its own `consume` (which finds the consumers already in the SFU).
    private func play(_ session: HTTPParticipant, offer: SessionDescription, target: String, mic: Bool, cam: Bool)
        async -> Result<String, RoomError>
    {
        guard let media = media(), let key = session.mediaKey else {
            return .failure(RoomError(3047, "the media server is stopping"))
        }
        guard let found = await session.onRoomQueue({ $0.mediaProducers(of: target) }), let producers = found else {
            return .failure(RoomError(4004, "no participant '\(target)' in room '\(session.roomId)'"))
        }
        // One producer per offered kind, in the offer's m-line order.
        var chosen: [RoomProducer] = []
        for kind in offer.media.filter({ !$0.isRejected }).compactMap(\.kind) {
            let wanted: TrackKind = kind == .audio ? .mic : .webcam
            if let producer = producers.first(where: { $0.kind == wanted }) { chosen.append(producer) }
        }
        guard !chosen.isEmpty else {
            return .failure(
                RoomError(4081, "'\(target)' publishes no \(mic && cam ? "mic or webcam" : mic ? "mic" : "webcam")"))
        }
        let ids = chosen.map(\.producerId)
        let answered = await session.onRoomQueue { _ -> Result<SessionDescription, RoomError> in
            do throws(RoomError) {
                return .success(
                    try media.callOnLoop("whepAnswer") {
                        try $0.answerViewerOfferOnLoop(participantID: key, offer: offer, producerIDs: ids).answer
                    })
            } catch { return .failure(error) }
        }
        guard let answered else { return .failure(RoomError(3047, "the session closed")) }
        let answer: SessionDescription
        switch answered {
        case .failure(let error): return .failure(error)
        case .success(let a): answer = a
        }
        for producer in chosen {
            let result = await session.request(
                .consume, ["participantId": .string(target), "kind": .string(producer.kind.rawValue)])
            if case .failure(let error) = result { return .failure(error) }
        }
        return .success(answer.serialize())
    }

    // MARK: PATCH and DELETE on a session

    private func session(_ kind: HTTPParticipant.Kind, _ request: HTTPRequest) -> HTTPParticipant? {
        let parts = pathSegments(request.path, after: "/\(kind.rawValue)/")
        guard parts.count == (kind == .whip ? 2 : 3), let session = httpSessions.find(parts[parts.count - 1]),
            session.kind == kind, session.resourcePath == request.path
        else { return nil }
        return session
    }

    private func whipDelete(_ kind: HTTPParticipant.Kind, _ request: HTTPRequest) async -> HTTPResponse {
        guard let session = session(kind, request) else {
            return adminError(
                404, RoomError(4003, "no \(kind.rawValue.uppercased()) session at \(request.path.prefix(200))"))
        }
        await session.leave()
        return HTTPResponse(status: 200)
    }

    private func whipPatch(_ kind: HTTPParticipant.Kind, _ request: HTTPRequest) async -> HTTPResponse {
        guard let session = session(kind, request) else {
            return adminError(
                404, RoomError(4003, "no \(kind.rawValue.uppercased()) session at \(request.path.prefix(200))"))
        }
        if let refusal = sdpBodyProblem(request, contentType: "application/trickle-ice-sdpfrag") { return refusal }
        let fragment: TrickleICEFragment
        do { fragment = try TrickleICEFragment.parse(request.text) } catch {
            return adminError(400, RoomError(3073, "bad trickle-ice-sdpfrag: \(error.message)"))
        }
        let ifMatch = request.headers["If-Match"]
        if let ifMatch, ifMatch != "*", ifMatch != session.eTag {
            return adminError(412, RoomError(3073, "If-Match \(ifMatch.prefix(80)) is not the session's ETag"))
        }
        guard let ufrag = fragment.ufrag, let pwd = fragment.pwd, ufrag != session.remoteUfrag else {
            // Trickle: the server is ICE-lite and learns the client's addresses from its checks, so
            // candidates need no action (RFC 9725 §4.3.1: 204 without a body).
            return HTTPResponse(status: 204)
        }
        guard (4...256).contains(ufrag.utf8.count), (22...256).contains(pwd.utf8.count) else {
            return adminError(400, RoomError(3073, "ice-ufrag must be 4-256 and ice-pwd 22-256 characters"))
        }
        guard let media = media(), let key = session.mediaKey else {
            return adminError(503, RoomError(3047, "the media server is stopping"))
        }
        let role: SFUConnectionRole = kind == .whip ? .publish : .subscribe
        let fresh: (ufrag: String, password: String)
        do {
            fresh = try await media.sfu.restartICE(
                participantID: key, connection: role, remoteUfrag: ufrag, remotePassword: pwd)
        } catch {
            return adminError(500, RoomError(5000, "ICE restart failed: \(error)", cause: error))
        }
        session.restarted(remoteUfrag: ufrag)
        var body = "a=ice-lite\r\na=ice-ufrag:\(fresh.ufrag)\r\na=ice-pwd:\(fresh.password)\r\n"
        if let mid = fragment.mids.first ?? session.firstMid {
            body += "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:\(mid)\r\n"
        }
        for candidate in session.localCandidates { body += candidate + "\r\n" }
        body += "a=end-of-candidates\r\n"
        var response = HTTPResponse(status: 200, body: Array(body.utf8))
        response.headers.add("Content-Type", "application/trickle-ice-sdpfrag")
        response.headers.add("ETag", session.eTag)
        return response
    }
}

// MARK: Helpers

/// The non-empty path segments after `prefix`, or one empty list when the path has empty ones.
func pathSegments(_ path: String, after prefix: String) -> [String] {
    guard path.hasPrefix(prefix) else { return [] }
    let parts = path.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    return parts.contains("") ? [] : parts
}

/// 415 for another content type, 400 for an empty body, 413 for one over the SDP size limit.
func sdpBodyProblem(_ request: HTTPRequest, contentType: String) -> HTTPResponse? {
    let given = request.headers["Content-Type"]?.split(separator: ";").first.map {
        $0.trimmingCharacters(in: .whitespaces).lowercased()
    }
    guard given == contentType else {
        return adminError(
            415,
            RoomError(
                3073, "Content-Type must be \(contentType) (got \(given.map { String($0.prefix(80)) } ?? "none"))"))
    }
    guard !request.body.isEmpty else { return adminError(400, RoomError(3073, "the body is empty")) }
    guard request.body.count <= SessionDescription.maximumInputSize else {
        return adminError(
            413,
            RoomError(3073, "the body of \(request.body.count) bytes exceeds \(SessionDescription.maximumInputSize)"))
    }
    return nil
}

func bearerTokenOf(_ request: HTTPRequest) -> String? {
    guard let value = request.headers["Authorization"] else { return nil }
    let parts = value.split(separator: " ", maxSplits: 1)
    guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else { return nil }
    return String(parts[1])
}

/// What identifies a token for its share of WHIP/WHEP sessions: its signed part (header and claims
/// exactly as sent). Only the secret's holder can make another one; the signature segment is left
/// out because several spellings of it decode to the same bytes.
func grantKey(_ jwt: String) -> String {
    let trimmed = jwt.trimmingCharacters(in: .whitespaces)
    guard let dot = trimmed.lastIndex(of: ".") else { return trimmed }
    return String(trimmed[..<dot])
}

/// The answer to a POST over one of the session caps: 503 when the server or the room is full,
/// 429 when the token already holds its share; 4009 either way, the message names the limit.
func httpSessionRefusal(_ refusal: HTTPSessionRegistry.Refusal, roomId: String) -> HTTPResponse {
    switch refusal {
    case .server(let n):
        return adminError(503, RoomError(4009, "the server has reached \(n) WHIP/WHEP sessions (maxHTTPSessions)"))
    case .room(let n):
        return adminError(
            503,
            RoomError(
                4009, "room '\(roomId.prefix(128))' has reached \(n) WHIP/WHEP sessions (maxHTTPSessionsPerRoom)"))
    case .token(let n):
        var response = adminError(
            429, RoomError(4009, "this token already holds \(n) WHIP/WHEP sessions (maxHTTPSessionsPerToken)"))
        response.headers.add("Retry-After", "30")
        return response
    }
}

/// The HTTP status of a room error on the WHIP/WHEP endpoints.
func whipStatus(_ error: RoomError) -> Int {
    switch error.code {
    case 4002: return 401
    case 4008, 4022, 4023, 4024: return 403
    case 4003, 4004, 4080, 4081: return 404
    case 3049, 3054, 3058, 3061: return 409
    case 4051: return 422
    case 4009, 3047: return 503
    case 5000...: return 500
    default: return 400
    }
}

/// Lets pages from other origins use the endpoints (browsers read `Location` and `ETag` only when exposed).
func withCORS(_ response: HTTPResponse) -> HTTPResponse {
    var response = response
    response.headers.add("Access-Control-Allow-Origin", "*")
    response.headers.add("Access-Control-Expose-Headers", "Location, ETag, Link, Accept-Patch")
    return response
}
