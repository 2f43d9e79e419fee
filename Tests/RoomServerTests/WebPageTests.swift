import Foundation
import RoomProtocol
import Signaling
import Testing

@testable import RoomServer

@Suite("RoomServer browser page")
struct WebPageTests {
    /// A server with its generated development secret (no secret configured).
    private func startDevServer() throws -> RoomServer {
        var configuration = RoomServerConfiguration()
        configuration.listenPort = 0
        let server = RoomServer(configuration: configuration)
        try server.start()
        return server
    }

    @Test func pageIsServedAtRootAndRoomPaths() async throws {
        let server = try startServer()
        defer { server.stop() }
        for path in ["/", "/room/stage", "/room/my-room?autoJoin=1&name=x"] {
            let response = try await http(server, "GET", path)
            #expect(response.status == 200, "GET \(path)")
            #expect(response.headers["Content-Type"] == "text/html; charset=utf-8", "GET \(path)")
            let text = String(decoding: response.body, as: UTF8.self)
            #expect(text.contains(#"<script src="/web/room.js""#), "GET \(path)")
            #expect(text.contains(#"id="stage-list""#) && text.contains(#"id="audience-list""#))
            #expect(response.headers["Content-Security-Policy"]?.contains("default-src 'self'") == true)
        }
        let script = try await http(server, "GET", "/web/room.js")
        #expect(script.status == 200)
        #expect(script.headers["Content-Type"] == "text/javascript; charset=utf-8")
        #expect(String(decoding: script.body, as: UTF8.self).contains("REQUEST_TO_JOIN_AS_HOST_"))
        let style = try await http(server, "GET", "/web/style.css")
        #expect(style.status == 200)
        #expect(style.headers["Content-Type"] == "text/css; charset=utf-8")
        #expect(try await http(server, "GET", "/web/missing.js").status == 404)
        // The signalling socket and the API keep their routes.
        #expect(try await http(server, "GET", "/healthz").status == 200)
    }

    @Test func pageLoadsNothingFromOtherOrigins() {
        for (name, asset) in WebAssets.files {
            let text = String(decoding: asset.body, as: UTF8.self)
            for marker in ["http://", "https://", "//cdn", "@import"] {
                #expect(!text.contains(marker), "\(name) refers to \(marker)")
            }
        }
    }

    @Test func devTokenExistsOnlyWithTheGeneratedSecret() async throws {
        let configured = try startServer()
        defer { configured.stop() }
        #expect(!configured.secretWasGenerated)
        #expect(try await http(configured, "GET", "/dev/token?room=stage&participant=alice").status == 404)

        let dev = try startDevServer()
        defer { dev.stop() }
        #expect(dev.secretWasGenerated)
        let response = try await http(dev, "GET", "/dev/token?room=stage&participant=alice")
        #expect(response.status == 200)
        let body = try JSONValue.parse(response.body)
        let jwt = try #require(body["token"]?.stringValue)
        let token = try RoomToken.verify(jwt, secret: dev.secret)
        #expect(token.roomId == "stage")
        #expect(token.participantId == "alice")
        #expect(Set(token.permissions) == ["allow_join", "allow_mod"])
        #expect(throws: TokenError.self) { try RoomToken.verify(jwt, secret: "another-secret") }

        // The token opens the room it names.
        let client = try await TestClient.connect(dev, token: jwt)
        let joined = try await client.request("join", ["roomId": "stage", "participantId": "alice"]).get()
        #expect(joined["participant"]?["participantId"] == "alice")
        client.close()

        #expect(try await http(dev, "GET", "/dev/token").status == 400)
        #expect(try await http(dev, "GET", "/dev/token?room=a%20b").status == 400)
        #expect(try await http(dev, "GET", "/dev/token?room=ok&participant=a/b").status == 400)
    }

    /// Every file in `Web/assets/` is compiled in and served byte for byte.
    @Test func everyAssetFileIsServedAsWritten() throws {
        let assets = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/RoomServer/Web/assets")
        let names = try FileManager.default.contentsOfDirectory(atPath: assets.path)
        #expect(Set(names) == Set(WebAssets.files.keys), "add new asset files to Package.swift and WebAssets")
        for name in names {
            let onDisk = try [UInt8](Data(contentsOf: assets.appendingPathComponent(name)))
            #expect(WebPage.asset(named: name)?.body == onDisk, "\(name)")
        }
    }
}
