import Foundation
import Signaling
import Testing

@testable import RoomProtocol

/// Correctly signed tokens with hostile claims (issue 10): each is refused with a typed error or
/// read with sane values; none traps (huge, negative and non-integer numbers, wrong types).
@Suite("Hostile token claims")
struct HostileTokenTests {
    let secret = "s3cret"
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    /// A token with exactly this header and payload text, signed with the secret.
    func signed(_ claims: String, header: String = #"{"alg":"HS256","typ":"JWT"}"#) -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        return input + "." + Base64URL.encode(HMACSHA256.mac(key: Array(secret.utf8), message: Array(input.utf8)))
    }

    @Test func hostileNumbersAndTypesAreRefused() {
        let base = #""apikey":"k","permissions":["allow_join"]"#
        for claims in [
            #"{\#(base),"exp":1e300}"#, #"{\#(base),"exp":-1e300}"#, #"{\#(base),"exp":1e15}"#,
            #"{\#(base),"exp":-5}"#, #"{\#(base),"exp":"4102444800"}"#, #"{\#(base),"exp":null}"#,
            #"{\#(base),"exp":true}"#, #"{\#(base),"exp":[4102444800]}"#, #"{\#(base)}"#,
            #"{"apikey":"k","permissions":"allow_join","exp":4102444800}"#,
            #"{"apikey":"k","permissions":[1],"exp":4102444800}"#,
            #"{"apikey":7,"permissions":["allow_join"],"exp":4102444800}"#,
            #"{\#(base),"exp":4102444800,"version":2.5}"#, #"{\#(base),"exp":4102444800,"version":1e300}"#,
            #"{\#(base),"exp":4102444800,"roles":"x"}"#, #"{\#(base),"exp":4102444800,"roles":[1]}"#,
            #"{\#(base),"exp":4102444800,"participantId":12}"#, #"{\#(base),"exp":4102444800,"roomId":{}}"#,
            #"[1,2]"#, #""text""#, "", "{",
        ] {
            #expect(throws: TokenError.self, "\(claims)") {
                try RoomToken.verify(signed(claims), secret: secret, now: now)
            }
        }
        for header in [#"[]"#, #"{"alg":1}"#, #"{"alg":null}"#, #"{}"#, "not json"] {
            let jwt = signed(#"{\#(base),"exp":4102444800}"#, header: header)
            #expect(throws: TokenError.self, "\(header)") { try RoomToken.verify(jwt, secret: secret, now: now) }
        }
    }

    /// Issue 32 item 7: `version` is one of the claims the room API requires. A token without it
    /// (or with `null`) is refused with 4002, as one with another version is; with `2` it is read.
    @Test func aTokenWithoutItsVersionIsRefused() throws {
        let base = #""apikey":"k","permissions":["allow_join"],"exp":4102444800"#
        for claims in [
            #"{\#(base)}"#, #"{\#(base),"version":null}"#, #"{\#(base),"version":1}"#, #"{\#(base),"version":"2"}"#,
        ] {
            #expect(throws: TokenError.self, "\(claims)") {
                try RoomToken.verify(signed(claims), secret: secret, now: now)
            }
            do {
                _ = try RoomToken.verify(signed(claims), secret: secret, now: now)
            } catch {
                #expect(error.code == 4002, "\(claims)")
            }
        }
        #expect(throws: TokenError.invalid("missing version")) {
            try RoomToken.verify(signed(#"{\#(base)}"#), secret: secret, now: now)
        }
        #expect(try RoomToken.verify(signed(#"{\#(base),"version":2}"#), secret: secret, now: now).version == 2)
    }

    @Test func oddButValidNumbersReadSanely() throws {
        let token = try RoomToken.verify(
            signed(#"{"apikey":"k","permissions":["allow_join"],"exp":4102444800.9,"iat":1e300,"version":2.0}"#),
            secret: secret, now: now)
        #expect(token.exp == 4_102_444_800)
        #expect(token.iat == nil)  // out of range: dropped, not trapped on
    }
}
