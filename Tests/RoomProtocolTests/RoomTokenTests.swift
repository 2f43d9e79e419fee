import Foundation
import Signaling
import TestSupport
import Testing

@testable import RoomProtocol

@Suite("RoomToken")
struct RoomTokenTests {
    let secret = "s3cr3t-key"
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    func token(_ permissions: [String] = ["allow_join"], exp: Int64 = 1_700_003_600) -> RoomToken {
        RoomToken(
            apikey: "key-1", permissions: permissions, roomId: "room-a", participantId: "p-1", roles: ["rtc"], exp: exp,
            iat: 1_700_000_000)
    }

    @Test func signThenVerifyRoundTrips() throws {
        let jwt = RoomToken.sign(token(), secret: secret)
        #expect(jwt.split(separator: ".").count == 3)
        #expect(try RoomToken.verify(jwt, secret: secret, now: now) == token())
    }

    @Test func pythonSignedTokenVerifies() throws {
        let script = """
            import base64, hashlib, hmac, json
            def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
            h = b64(json.dumps({"typ": "JWT", "alg": "HS256"}).encode())
            p = b64(json.dumps({"apikey": "py-key", "permissions": ["allow_join", "allow_mod"], "version": 2,
                                "roomId": "r1", "roles": ["rtc", "viewer"], "exp": 1700003600, "iat": 1700000000}).encode())
            s = b64(hmac.new(b"s3cr3t-key", f"{h}.{p}".encode(), hashlib.sha256).digest())
            print(f"{h}.{p}.{s}")
            """
        let (status, out, err) = try runTool("python3", ["-c", script])
        #expect(status == 0, "\(err)")
        let jwt = out.trimmingCharacters(in: .whitespacesAndNewlines)
        let verified = try RoomToken.verify(jwt, secret: secret, now: now)
        #expect(verified.apikey == "py-key")
        #expect(verified.permissions == ["allow_join", "allow_mod"])
        #expect(verified.roomId == "r1")
        #expect(verified.participantId == nil)
        #expect(verified.roles == ["rtc", "viewer"])
        #expect(verified.exp == 1_700_003_600)
        #expect(throws: TokenError.invalid("bad signature")) { try RoomToken.verify(jwt, secret: "other", now: now) }
    }

    @Test func swiftSignedTokenVerifiesInPython() throws {
        let jwt = RoomToken.sign(token(["ask_join"]), secret: secret)
        let script = """
            import base64, hashlib, hmac, json, sys
            def d(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
            h, p, s = sys.argv[1].split(".")
            assert json.loads(d(h))["alg"] == "HS256"
            good = hmac.compare_digest(d(s), hmac.new(b"s3cr3t-key", f"{h}.{p}".encode(), hashlib.sha256).digest())
            c = json.loads(d(p))
            print(good, c["apikey"], ",".join(c["permissions"]), c["version"], c["roomId"], c["participantId"], c["exp"])
            """
        let (status, out, err) = try runTool("python3", ["-c", script, jwt])
        #expect(status == 0, "\(err)")
        #expect(out.trimmingCharacters(in: .whitespacesAndNewlines) == "True key-1 ask_join 2 room-a p-1 1700003600")
    }

    @Test func tamperedTokensAreRejected() throws {
        let jwt = RoomToken.sign(token(), secret: secret)
        let parts = jwt.split(separator: ".").map(String.init)
        // Swap in a payload granting moderation, keep the signature.
        let forged = RoomToken.sign(token(["allow_join", "allow_mod"]), secret: "attacker").split(separator: ".").map(
            String.init)
        #expect(throws: TokenError.invalid("bad signature")) {
            try RoomToken.verify("\(parts[0]).\(forged[1]).\(parts[2])", secret: secret, now: now)
        }
        // Flip one signature character.
        var sig = Array(parts[2])
        sig[5] = sig[5] == "A" ? "B" : "A"
        #expect(throws: TokenError.invalid("bad signature")) {
            try RoomToken.verify("\(parts[0]).\(parts[1]).\(String(sig))", secret: secret, now: now)
        }
        #expect(throws: TokenError.invalid("bad signature")) {
            try RoomToken.verify(jwt, secret: secret + "x", now: now)
        }
    }

    @Test func malformedTokensAreInvalid() {
        for bad in ["", "   ", "abc", "a.b", "a.b.c.d", "!!!.e30.sig", "e30.e30.", "eyJhbGciOiJIUzI1NiJ9.%%%.abc"] {
            #expect(throws: TokenError.self, "\(bad)") { try RoomToken.verify(bad, secret: secret, now: now) }
            do {
                _ = try RoomToken.verify(bad, secret: secret, now: now)
            } catch {
                #expect(error.code == 4002)
            }
        }
    }

    @Test func algNoneAndOtherAlgorithmsAreRejected() {
        let payload = Base64URL.encode(Array(token().claims.jsonString.utf8))
        for alg in ["none", "HS512", "RS256", "hs256"] {
            let header = Base64URL.encode(Array(#"{"alg":"\#(alg)","typ":"JWT"}"#.utf8))
            let signature =
                alg == "none"
                ? ""
                : Base64URL.encode(HMACSHA256.mac(key: Array(secret.utf8), message: Array("\(header).\(payload)".utf8)))
            #expect(throws: TokenError.invalid("unsupported alg \(alg)")) {
                try RoomToken.verify("\(header).\(payload).\(signature)", secret: secret, now: now)
            }
        }
    }

    @Test func expiredTokenIsInvalid() throws {
        let jwt = RoomToken.sign(token(exp: 1_700_000_100), secret: secret)
        #expect(try RoomToken.verify(jwt, secret: secret, now: now).exp == 1_700_000_100)
        #expect(throws: TokenError.invalid("token expired")) {
            try RoomToken.verify(jwt, secret: secret, now: now.addingTimeInterval(100))
        }
    }

    @Test func permissionRules() throws {
        for ok in [["allow_join"], ["ask_join"], ["allow_join", "allow_mod"], ["allow_mod"], []] {
            #expect(throws: Never.self) {
                try RoomToken.verify(RoomToken.sign(token(ok), secret: secret), secret: secret, now: now)
            }
        }
        for bad in [["ask_join", "allow_join"], ["ask_join", "allow_mod"], ["allow_join", "superuser"]] {
            let jwt = RoomToken.sign(token(bad), secret: secret)
            #expect(throws: TokenError.invalidPermissions) { try RoomToken.verify(jwt, secret: secret, now: now) }
        }
        #expect(TokenError.invalidPermissions.code == 4008)
    }

    @Test func roomAndParticipantChecks() throws {
        let t = token()
        #expect(throws: Never.self) { try t.check(room: "room-a", participant: "p-1") }
        #expect(throws: TokenError.wrongRoom) { try t.check(room: "room-b", participant: "p-1") }
        #expect(throws: TokenError.wrongParticipant) { try t.check(room: "room-a", participant: "p-2") }
        let open = RoomToken(apikey: "k", permissions: ["allow_join"], exp: 1)
        #expect(throws: Never.self) { try open.check(room: "anything", participant: "anyone") }
        #expect(TokenError.wrongRoom.code == 4022 && TokenError.wrongParticipant.code == 4023)
    }

    @Test func durations() {
        #expect(RoomToken.parseDuration("2h") == 7200)
        #expect(RoomToken.parseDuration("30m") == 1800)
        #expect(RoomToken.parseDuration("45s") == 45)
        #expect(RoomToken.parseDuration("1d") == 86400)
        #expect(RoomToken.parseDuration("1h30m") == 5400)
        #expect(RoomToken.parseDuration("90") == 90)
        for bad in ["", "h", "2x", "-1h", "1h2", "abc"] { #expect(RoomToken.parseDuration(bad) == nil, "\(bad)") }
    }
}
