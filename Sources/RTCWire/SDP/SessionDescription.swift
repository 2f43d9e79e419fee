/// A typed SDP session description (RFC 8866) with the attributes WebRTC uses (RFC 8829, 8839, 8843…).
///
/// Parsing keeps every line: attributes the model does not interpret stay in ``attributes`` (and
/// ``MediaDescription/attributes``) as ``SDPAttribute/other(name:value:)``, in place, so
/// `serialize()` reproduces the input's lines in order (typed values are re-rendered in canonical
/// spacing).
public struct SessionDescription: Sendable, Hashable, SDPAttributeContainer {
    /// Inputs larger than this are rejected before parsing.
    public static let maximumInputSize = 256 * 1024

    public var version: Int
    public var origin: SDPOrigin
    public var sessionName: String
    /// `i=`, `u=`, `e=`, `p=` lines (between `s=` and `c=`), verbatim.
    public var informationLines: [SDPLine]
    /// The `c=` line.
    public var connection: SDPConnection?
    /// `b=` lines in order.
    public var bandwidths: [SDPBandwidth]
    /// `t=` lines with their `r=` lines; `[0 0]` for WebRTC.
    public var timing: [SDPTiming]
    /// `z=`, `k=` and unknown line types (after `t=`), verbatim.
    public var otherLines: [SDPLine]
    /// Session-level `a=` lines in order.
    public var attributes: [SDPAttribute]
    public var media: [MediaDescription]

    /// Creates a value from its fields.
    public init(
        origin: SDPOrigin, sessionName: String = "-", timing: [SDPTiming] = [SDPTiming()],
        attributes: [SDPAttribute] = [], media: [MediaDescription] = []
    ) {
        self.version = 0
        self.origin = origin
        self.sessionName = sessionName
        self.informationLines = []
        self.connection = nil
        self.bandwidths = []
        self.timing = timing
        self.otherLines = []
        self.attributes = attributes
        self.media = media
    }

    // MARK: Session-level attributes

    /// The mids of the first `a=group:BUNDLE` line.
    public var bundleGroup: [String]? {
        first { $0.asGroup?.semantics == "BUNDLE" ? $0.asGroup?.mids : nil }
    }

    public var groups: [SDPGroup] {
        get { all(\.asGroup) }
        set { replaceAll(\.asGroup, with: newValue.map(SDPAttribute.group)) }
    }

    public var iceLite: Bool {
        get { has(.iceLite) }
        set { setFlag(.iceLite, newValue) }
    }

    public var extmapAllowMixed: Bool {
        get { has(.extmapAllowMixed) }
        set { setFlag(.extmapAllowMixed, newValue) }
    }

    /// `a=msid-semantic`. Stored verbatim (Chromium writes `msid-semantic: WMS` with a space, aiortc
    /// without), so reading parses it and writing uses Chromium's form.
    public var msidSemantic: SDPMsidSemantic? {
        get {
            first { attribute -> SDPMsidSemantic? in
                guard case .other("msid-semantic", let value?) = attribute else { return nil }
                let parts = SDPText.tokens(SDPText.bytes(value)).map(SDPText.string)
                guard let semantic = parts.first else { return nil }
                return SDPMsidSemantic(semantic: semantic, identifiers: Array(parts.dropFirst()))
            }
        }
        set {
            let isMsidSemantic: (SDPAttribute) -> Void? = { $0.name == "msid-semantic" ? () : nil }
            let replacement = newValue.map { value in
                [
                    SDPAttribute.other(
                        name: "msid-semantic",
                        value: " " + ([value.semantic] + value.identifiers).joined(separator: " "))
                ]
            }
            replaceAll(isMsidSemantic, with: replacement ?? [])
        }
    }

    /// The media section whose mid is `mid`.
    public func media(mid: String) -> MediaDescription? {
        media.first { $0.mid == mid }
    }

    /// ICE ufrag for `media[index]`: media level, else session level.
    public func iceCredentials(forMediaAt index: Int) -> (ufrag: String, pwd: String)? {
        guard media.indices.contains(index) else { return nil }
        let section = media[index]
        guard let ufrag = section.iceUfrag ?? iceUfrag, let pwd = section.icePwd ?? icePwd else { return nil }
        return (ufrag, pwd)
    }

    /// Fingerprints for `media[index]`: media level, else session level.
    public func fingerprints(forMediaAt index: Int) -> [SDPFingerprint] {
        guard media.indices.contains(index) else { return [] }
        let local = media[index].fingerprints
        return local.isEmpty ? fingerprints : local
    }

    /// DTLS setup for `media[index]`: media level, else session level.
    public func setup(forMediaAt index: Int) -> SDPSetup? {
        guard media.indices.contains(index) else { return nil }
        return media[index].setup ?? setup
    }

    // MARK: Parse

    /// Parses SDP text with CRLF or LF line ends.
    public static func parse(_ text: String) throws(SDPError) -> SessionDescription {
        let size = text.utf8.count
        guard size <= maximumInputSize else { throw .inputTooLarge(size: size, limit: maximumInputSize) }
        var parser = SDPParser(bytes: Array(text.utf8))
        return try parser.run()
    }

    // MARK: Serialize

    /// Renders the description with CRLF line ends in RFC 8866 order:
    /// `v o s [i u e p] [c] [b] t [r] [z k] a…`, then per media `m [i] [c] [b] [k] a…`.
    public func serialize() -> String {
        var out = ""
        out.reserveCapacity(4096)
        func line(_ text: String) {
            out += text
            out += "\r\n"
        }
        line("v=\(version)")
        line("o=" + origin.lineValue)
        line("s=" + sessionName)
        for item in informationLines { line(item.text) }
        if let connection { line("c=" + connection.lineValue) }
        for bandwidth in bandwidths { line("b=" + bandwidth.lineValue) }
        for item in timing {
            line("t=\(item.start) \(item.stop)")
            for repeatLine in item.repeats { line("r=" + repeatLine) }
        }
        for item in otherLines { line(item.text) }
        for attribute in attributes { line("a=" + attribute.text) }
        for section in media {
            var mLine = "m=" + section.type.text + " \(section.port)"
            if let count = section.portCount { mLine += "/\(count)" }
            mLine += " " + section.proto
            for format in section.formats { mLine += " " + format }
            line(mLine)
            for item in section.informationLines { line(item.text) }
            if let connection = section.connection { line("c=" + connection.lineValue) }
            for bandwidth in section.bandwidths { line("b=" + bandwidth.lineValue) }
            for item in section.otherLines { line(item.text) }
            for attribute in section.attributes { line("a=" + attribute.text) }
        }
        return out
    }
}

/// Line-by-line SDP reader.
struct SDPParser {
    let bytes: [UInt8]

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Splits into (1-based line number, trimmed content) pairs, skipping blank lines.
    private func lines() throws(SDPError) -> [(number: Int, content: SDPBytes)] {
        var result: [(Int, SDPBytes)] = []
        var number = 0
        for raw in bytes[...].split(separator: 0x0A, omittingEmptySubsequences: false) {
            number += 1
            var content = raw
            if content.last == 0x0D { content = content.dropLast() }
            if content.contains(where: { $0 == 0x0D || $0 == 0x00 }) { throw .malformed(line: number, bytes: content) }
            content = SDPText.trim(content)
            if content.isEmpty { continue }
            result.append((number, content))
        }
        return result
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A)
    }

    mutating func run() throws(SDPError) -> SessionDescription {
        let lines = try lines()
        guard let first = lines.first, first.content.starts(with: "v=".utf8) else { throw .missingVersion }
        guard first.content.dropFirst(2).elementsEqual("0".utf8) else { throw .unsupportedVersion(line: first.number) }

        var origin: SDPOrigin?
        var sessionName: String?
        var description = SessionDescription(origin: SDPOrigin(sessionID: "0", sessionVersion: 0), timing: [])

        for (number, content) in lines.dropFirst() {
            guard content.count >= 2, Self.isLetter(content[content.startIndex]),
                content[content.startIndex + 1] == SDPText.equals
            else {
                throw .malformed(line: number, bytes: content)
            }
            let type = content[content.startIndex]
            let value = content.dropFirst(2)

            if type == UInt8(ascii: "m") {
                guard origin != nil else { throw .missingOrigin }
                description.media.append(try Self.parseMediaLine(value, line: number))
                continue
            }

            if !description.media.isEmpty {
                // Mutate in place: copying the section out and back would copy its attribute array per line.
                try Self.parseMediaLevel(
                    type: type, value: value, content: content, line: number,
                    into: &description.media[description.media.count - 1])
                continue
            }

            switch type {
            case UInt8(ascii: "o"):
                guard origin == nil else { throw .malformed(line: number, bytes: content) }
                guard let parsed = SDPOrigin.parse(value) else { throw .invalidOrigin(line: number) }
                origin = parsed
            case UInt8(ascii: "s"):
                guard sessionName == nil else { throw .malformed(line: number, bytes: content) }
                sessionName = SDPText.string(value)
            case UInt8(ascii: "c"), UInt8(ascii: "b"):
                try Self.parseConnectionOrBandwidth(
                    type: type, value: value, content: content, line: number, connection: &description.connection,
                    bandwidths: &description.bandwidths)
            case UInt8(ascii: "t"):
                guard let timing = SDPTiming.parse(value) else { throw .invalidTiming(line: number) }
                description.timing.append(timing)
            case UInt8(ascii: "r"):
                guard !description.timing.isEmpty else { throw .invalidTiming(line: number) }
                description.timing[description.timing.count - 1].repeats.append(SDPText.string(value))
            case UInt8(ascii: "a"):
                guard let attribute = SDPAttribute.parse(value) else { throw Self.attributeError(value, line: number) }
                description.attributes.append(attribute)
            case UInt8(ascii: "v"):
                throw .malformed(line: number, bytes: content)
            case UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "e"), UInt8(ascii: "p"):
                description.informationLines.append(SDPLine(type: type, value: SDPText.string(value)))
            default:
                description.otherLines.append(SDPLine(type: type, value: SDPText.string(value)))
            }
        }
        guard let origin else { throw .missingOrigin }
        description.origin = origin
        // s= and t= are mandatory in RFC 8866 but harmless to default; WebRTC always uses "-" and "0 0".
        description.sessionName = sessionName ?? "-"
        if description.timing.isEmpty { description.timing = [SDPTiming()] }
        return description
    }

    private static func parseMediaLevel(
        type: UInt8, value: SDPBytes, content: SDPBytes, line number: Int, into section: inout MediaDescription
    ) throws(SDPError) {
        switch type {
        case UInt8(ascii: "a"):
            guard let attribute = SDPAttribute.parse(value) else { throw attributeError(value, line: number) }
            section.attributes.append(attribute)
        case UInt8(ascii: "c"), UInt8(ascii: "b"):
            try parseConnectionOrBandwidth(
                type: type, value: value, content: content, line: number, connection: &section.connection,
                bandwidths: &section.bandwidths)
        case UInt8(ascii: "i"):
            section.informationLines.append(SDPLine(type: type, value: SDPText.string(value)))
        default:
            section.otherLines.append(SDPLine(type: type, value: SDPText.string(value)))
        }
    }

    /// A `c=` or `b=` line, read alike at session and media level: at most one connection, any
    /// number of bandwidths.
    private static func parseConnectionOrBandwidth(
        type: UInt8, value: SDPBytes, content: SDPBytes, line number: Int, connection: inout SDPConnection?,
        bandwidths: inout [SDPBandwidth]
    ) throws(SDPError) {
        if type == UInt8(ascii: "c") {
            guard connection == nil else { throw .malformed(line: number, bytes: content) }
            guard let parsed = SDPConnection.parse(value) else { throw .invalidConnection(line: number) }
            connection = parsed
        } else {
            guard let bandwidth = SDPBandwidth.parse(value) else { throw .invalidBandwidth(line: number) }
            bandwidths.append(bandwidth)
        }
    }

    private static func attributeError(_ value: SDPBytes, line: Int) -> SDPError {
        let name = SDPText.splitOnce(value, at: SDPText.colon).before
        return .invalidAttribute(line: line, name: SDPText.string(name.prefix(64)))
    }

    private static func parseMediaLine(_ value: SDPBytes, line: Int) throws(SDPError) -> MediaDescription {
        let parts = SDPText.tokens(value)
        guard parts.count >= 3 else { throw .invalidMediaLine(line: line) }
        let (portBytes, countBytes) = SDPText.splitOnce(parts[1], at: SDPText.slash)
        guard let port = SDPText.unsigned(portBytes, as: UInt16.self) else { throw .invalidMediaLine(line: line) }
        var portCount: UInt16?
        if let countBytes {
            guard let count = SDPText.unsigned(countBytes, as: UInt16.self) else { throw .invalidMediaLine(line: line) }
            portCount = count
        }
        return MediaDescription(
            type: SDPMediaType(SDPText.string(parts[0])), port: port, portCount: portCount,
            proto: SDPText.string(parts[2]), formats: parts.dropFirst(3).map(SDPText.string), connection: nil)
    }
}
