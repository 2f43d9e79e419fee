/// Strict parsers for the numbers that frame an HTTP/1.1 body (RFC 9112 §6.3, §7.1).
///
/// `Int(_:radix:)` is not enough on wire text: it accepts a sign (`-2`, `+5`) and fails only at
/// `Int.max`, so a peer could declare a negative chunk or one big enough to overflow the length
/// arithmetic after it. These accept digits only and saturate at ``cap``, which is far above any body
/// limit and far below `Int.max`, so a caller's `count + size` can neither go negative nor overflow.
enum HTTPNumber {
    /// The value every larger number is clamped to (1 TiB): bigger than any body limit, so
    /// "too large" stays "too large", and small enough that sums of a few of them cannot overflow.
    static let cap = 1 << 40

    /// A `chunk-size`: one or more hex digits (`1*HEXDIG`), nothing else; nil for any other text.
    static func chunkSize(_ text: some StringProtocol) -> Int? {
        parse(text.utf8, radix: 16)
    }

    /// A `Content-Length`: one or more decimal digits (`1*DIGIT`), nothing else; nil otherwise.
    static func contentLength(_ text: some StringProtocol) -> Int? {
        parse(text.utf8, radix: 10)
    }

    private static func parse(_ digits: some Collection<UInt8>, radix: Int) -> Int? {
        guard !digits.isEmpty else { return nil }
        var value = 0
        for c in digits {
            let digit: Int
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f") where radix == 16: digit = Int(c - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F") where radix == 16: digit = Int(c - UInt8(ascii: "A")) + 10
            default: return nil
            }
            // value <= cap, so value * 16 + 15 cannot overflow.
            value = min(cap, value * radix + digit)
        }
        return value
    }
}
