// library: RoomProtocol
import Foundation

@testable import RoomProtocol

/// libFuzzer entry for room tokens. The input is verified as a compact JWT; then, because a fuzzer
/// cannot forge the HMAC, it is also signed with the secret so the claim checks run on it: input
/// `HEADER\nCLAIMS` becomes a token with that header and payload JSON (without a newline, the input
/// is the payload under a normal HS256 header).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  let now = Date(timeIntervalSince1970: 1_700_000_000)
  check(String(decoding: bytes, as: UTF8.self), now: now)
  let parts = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false)
  let header = parts.count == 2 ? Array(parts[0]) : Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8)
  let claims = Array(parts.count == 2 ? parts[1] : parts[0])
  let input = base64url(header) + "." + base64url(claims)
  check(input + "." + base64url(hmac(input)), now: now)
  return 0
}

let secret = "fuzz-secret"

func check(_ jwt: String, now: Date) {
  guard let token = try? RoomToken.verify(jwt, secret: secret, now: now) else { return }
  precondition(Double(token.exp) > now.timeIntervalSince1970 - 1, "expired token accepted")
  precondition(Set(token.permissions).isSubset(of: RoomToken.knownPermissions))
  // What the server issues for these claims must verify to the same claims.
  // (exp is kept in whole seconds, so check one second earlier.)
  let again = try? RoomToken.verify(
    RoomToken.sign(token, secret: secret), secret: secret, now: now.addingTimeInterval(-1))
  precondition(again == token, "re-signed token does not verify to the same claims")
  _ = try? token.check(room: "room", participant: "p")
}

func base64url(_ bytes: [UInt8]) -> String { Base64URL.encode(bytes) }

func hmac(_ input: String) -> [UInt8] { HMACSHA256.mac(key: Array(secret.utf8), message: Array(input.utf8)) }
