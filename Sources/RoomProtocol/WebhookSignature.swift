import Foundation

/// The signature of a webhook request (docs/protocol.md, "Webhooks"): HMAC-SHA256 of the raw body
/// with the webhook secret, sent as `X-Understudy-Signature: sha256=<64 lowercase hex digits>`.
///
/// The body carries the event's `id` and `timestamp`, so the signature covers both: a receiver
/// refuses a body whose `timestamp` is too old (a replay) or whose `id` it has seen.
public enum WebhookSignature {
    /// The header that carries the signature.
    public static let header = "X-Understudy-Signature"
    /// The header that repeats the body's `timestamp` (whole seconds since 1970), for receivers
    /// that check the age before parsing the body.
    public static let timestampHeader = "X-Understudy-Timestamp"

    /// `sha256=<hex>` for `body` signed with `secret`.
    public static func sign(body: [UInt8], secret: String) -> String {
        "sha256=" + HMACSHA256.mac(key: Array(secret.utf8), message: body).map { String(format: "%02x", $0) }.joined()
    }

    /// Whether `signature` (the header's value) is `body`'s signature with `secret`; compared in
    /// constant time.
    public static func verify(body: [UInt8], secret: String, signature: String) -> Bool {
        let expected = Array(sign(body: body, secret: secret).utf8)
        return HMACSHA256.constantTimeEqual(expected, Array(signature.utf8))
    }
}
