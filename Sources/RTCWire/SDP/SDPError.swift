/// Why an SDP text (or a single `candidate` value) could not be parsed.
///
/// Line numbers are 1-based and count every line of the input, including empty ones.
public enum SDPError: Error, Sendable, Hashable {
    /// The input exceeds ``SessionDescription/maximumInputSize`` bytes.
    case inputTooLarge(size: Int, limit: Int)
    /// The first line is not a `v=` line (or the input is empty).
    case missingVersion
    /// `v=` carries something other than `0`.
    case unsupportedVersion(line: Int)
    /// A line that is not `<letter>=<value>`, contains NUL or a stray CR, or appears where it may not.
    case malformedLine(line: Int, text: String)
    /// No `o=` line before the first media section.
    case missingOrigin
    /// The `o=` line does not have six fields or its version is not a number.
    case invalidOrigin(line: Int)
    /// A `t=` line without two numbers, or an `r=` line before any `t=` line.
    case invalidTiming(line: Int)
    /// A `c=` line without exactly three fields.
    case invalidConnection(line: Int)
    /// A `b=` line that is not `<type>:<number>`.
    case invalidBandwidth(line: Int)
    /// An `m=` line with too few fields or an invalid port.
    case invalidMediaLine(line: Int)
    /// An attribute the model understands whose value is malformed.
    case invalidAttribute(line: Int, name: String)
    /// A `candidate` value given to ``ICECandidate/parse(_:)`` is malformed.
    case invalidCandidate(reason: String)

    /// Builds a `malformedLine` with a bounded, printable excerpt of the offending bytes.
    static func malformed(line: Int, bytes: SDPBytes) -> SDPError {
        .malformedLine(line: line, text: SDPText.string(bytes.prefix(120)))
    }
}
