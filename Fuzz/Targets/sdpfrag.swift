import RTCWire

/// libFuzzer entry for the trickle-ICE SDP fragment parser (the body of a WHIP/WHEP PATCH) and the ICE
/// candidate parser that its candidates meet.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: data, count: size), as: UTF8.self)
    guard let fragment = try? TrickleICEFragment.parse(text) else { return 0 }
    // A parsed fragment keeps the credential pair whole and never holds more lines than it was given.
    if (fragment.ufrag == nil) != (fragment.pwd == nil) { fatalError("ufrag without pwd accepted") }
    let lineCount = text.split(whereSeparator: \.isNewline).count
    if fragment.mids.count + fragment.candidates.count > lineCount { fatalError("more entries than lines") }
    for value in fragment.candidates {
        guard let candidate = try? ICECandidate.parse(value) else { continue }
        // A candidate that parses must parse again from its own serialization to the same value.
        guard (try? ICECandidate.parse(candidate.attributeValue)) == candidate else {
            fatalError("ICE candidate round trip failed")
        }
    }
    return 0
}
