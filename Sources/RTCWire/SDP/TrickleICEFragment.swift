/// The parts of an `application/trickle-ice-sdpfrag` body (RFC 8840) that WHIP/WHEP PATCH uses.
///
/// It lives beside the SDP parser because a peer sends it straight from the network (WHIP PATCH);
/// the `sdpfrag` fuzz target drives it.
public struct TrickleICEFragment: Equatable, Sendable {
    /// `a=ice-ufrag`, present together with `pwd` when the peer restarts ICE.
    public var ufrag: String?
    /// `a=ice-pwd`.
    public var pwd: String?
    /// Every `a=mid` in order.
    public var mids: [String] = []
    /// Every `a=candidate` value (without the `candidate:` prefix), unparsed.
    public var candidates: [String] = []
    /// Whether `a=end-of-candidates` was present.
    public var endOfCandidates = false

    /// Why a fragment was refused; `message` is safe to return to the peer.
    public struct ParseError: Error, Equatable, Sendable {
        public var message: String
    }

    /// Parses the fragment; refuses lines that are not `x=value` and more than 1000 lines.
    public static func parse(_ text: String) throws(ParseError) -> TrickleICEFragment {
        var fragment = TrickleICEFragment()
        let lines = text.split(whereSeparator: \.isNewline)
        guard lines.count <= 1000 else { throw ParseError(message: "more than 1000 lines") }
        for line in lines {
            let bytes = Array(line.utf8)
            guard bytes.count >= 2, bytes[1] == UInt8(ascii: "="), (0x61...0x7A).contains(bytes[0]) else {
                throw ParseError(message: "not an SDP line: \(line.prefix(60))")
            }
            guard line.hasPrefix("a=") else { continue }
            let attribute = line.dropFirst(2)
            let (name, value): (Substring, String) = {
                guard let colon = attribute.firstIndex(of: ":") else { return (attribute, "") }
                return (attribute[..<colon], String(attribute[attribute.index(after: colon)...]))
            }()
            switch name {
            case "ice-ufrag": fragment.ufrag = value
            case "ice-pwd": fragment.pwd = value
            case "mid": fragment.mids.append(value)
            case "candidate": fragment.candidates.append(value)
            case "end-of-candidates": fragment.endOfCandidates = true
            default: break
            }
        }
        if (fragment.ufrag == nil) != (fragment.pwd == nil) {
            throw ParseError(message: "ice-ufrag and ice-pwd go together")
        }
        return fragment
    }
}
