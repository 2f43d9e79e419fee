/// The parts of an `application/trickle-ice-sdpfrag` body (RFC 8840) that WHIP/WHEP PATCH uses.
struct TrickleICEFragment: Equatable, Sendable {
    var ufrag: String?
    var pwd: String?
    var mids: [String] = []
    var candidates: [String] = []
    var endOfCandidates = false

    struct ParseError: Error, Equatable {
        var message: String
    }

    /// Parses the fragment; refuses lines that are not `x=value` and more than 1000 lines.
    static func parse(_ text: String) throws(ParseError) -> TrickleICEFragment {
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
