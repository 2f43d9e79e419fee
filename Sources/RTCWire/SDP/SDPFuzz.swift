/// libFuzzer entry point for the SDP parser.
public enum SDPFuzz {
    /// Decodes `data` as UTF-8 (invalid bytes become U+FFFD) and parses it. When it parses, the
    /// serialized form must parse again to an equal description; anything else is a serializer or
    /// parser bug and traps so the fuzzer reports it.
    public static func run(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        guard let description = try? SessionDescription.parse(text) else { return }
        let serialized = description.serialize()
        let reparsed: SessionDescription
        do {
            reparsed = try SessionDescription.parse(serialized)
        } catch {
            fatalError("SDP round trip failed to re-parse: \(error)")
        }
        guard reparsed == description else {
            fatalError("SDP round trip changed the description")
        }
        for section in description.media {
            _ = section.codecs
            for candidate in section.candidates {
                guard (try? ICECandidate.parse(candidate.attributeValue)) == candidate else {
                    fatalError("ICE candidate round trip failed")
                }
            }
        }
    }
}
