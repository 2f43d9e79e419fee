import Foundation
import RoomProtocol
import Signaling

/// The browser page that `understudy serve` hands to people: `/` and `/room/ROOM` serve the page,
/// `/web/*` its script and style sheet, and `/dev/token` signs tokens, but only while the server
/// runs with its generated development secret.
///
/// The files live in `Sources/RoomServer/Web/assets/` and are compiled in (`WebAssets`), so the
/// binary needs nothing on disk.
enum WebPage {
    /// Paths of the page itself. `/room/` is a prefix route: the page reads the room from the path.
    static let pagePaths = ["/", "/index.html"]
    static let roomPrefix = "/room/"
    /// Permissions of a development token: a dev server is a playground, so everyone may moderate.
    static let devPermissions = ["allow_join", "allow_mod"]
    static let devTokenLifetime: TimeInterval = 6 * 3600

    /// A `GET` answer for one embedded asset, or nil when there is no such asset.
    static func asset(named name: String) -> HTTPResponse? {
        guard let asset = WebAssets.files[name] else { return nil }
        var headers: [(String, String)] = [
            ("Content-Type", asset.contentType),
            ("Cache-Control", "no-cache"),
            ("X-Content-Type-Options", "nosniff"),
        ]
        if name == "index.html" {
            // Everything comes from this origin; the page opens a WebSocket back to it.
            headers.append(
                (
                    "Content-Security-Policy",
                    "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; "
                        + "media-src 'self' blob: mediastream:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
                ))
        }
        return HTTPResponse(status: 200, headers: HTTPHeaders(headers), body: asset.body)
    }

    /// `GET /dev/token?room=R[&participant=ID]`: a token signed with the dev secret.
    static func devToken(_ request: HTTPRequest, secret: String, now: Date = Date()) -> HTTPResponse {
        guard let room = request.query("room"), isValidIdentifier(room) else {
            return errorResponse(400, RoomError(4003, "room must be 1-128 bytes with no whitespace or '/'"))
        }
        let participant = request.query("participant").flatMap { $0.isEmpty ? nil : $0 }
        if let participant, !isValidIdentifier(participant) {
            return errorResponse(400, RoomError(4004, "participant must be 1-128 bytes with no whitespace or '/'"))
        }
        let token = RoomToken(
            apikey: "understudy-dev", permissions: devPermissions, roomId: room, participantId: participant,
            lifetime: devTokenLifetime, now: now)
        var body: [String: JSONValue] = [
            "token": .string(RoomToken.sign(token, secret: secret)), "roomId": .string(room),
            "permissions": .array(devPermissions.map(JSONValue.string)),
        ]
        if let participant { body["participantId"] = .string(participant) }
        var response = HTTPResponse.json(JSONValue.object(body).jsonString)
        response.headers = HTTPHeaders([("Content-Type", "application/json"), ("Cache-Control", "no-store")])
        return response
    }

    private static func errorResponse(_ status: Int, _ error: RoomError) -> HTTPResponse {
        let body: JSONValue = [
            "error": [
                "code": .number(Double(error.code)), "name": .string(error.name), "message": .string(error.message),
            ]
        ]
        return HTTPResponse.json(body.jsonString, status: status)
    }
}

extension RoomServer {
    /// Adds the page routes; `/dev/token` only when ``secretWasGenerated``.
    func installWebRoutes(on server: HTTPServer) {
        for path in WebPage.pagePaths {
            server.route(method: "GET", path: path) { _ in WebPage.asset(named: "index.html") ?? notFound() }
        }
        server.route(method: "GET", pathPrefix: WebPage.roomPrefix) { _ in
            WebPage.asset(named: "index.html") ?? notFound()
        }
        for name in WebAssets.files.keys where name != "index.html" {
            server.route(method: "GET", path: "/web/\(name)") { _ in WebPage.asset(named: name) ?? notFound() }
        }
        if secretWasGenerated {
            let secret = self.secret
            server.route(method: "GET", path: "/dev/token") { request in WebPage.devToken(request, secret: secret) }
        }
    }
}

private func notFound() -> HTTPResponse { HTTPResponse.text("not found\n", status: 404) }
