import RTCWire

/// What negotiation needs from a remote description, extracted once and validated.
struct RemoteDescription {
    struct Media {
        var mid: String
        var kind: MediaKind?
        /// Rejected or stopped by the remote side (port 0 without `a=bundle-only`).
        var rejected: Bool
        var direction: SDPDirection
        var codecs: [RTPCodec]
        var extensions: [(uri: String, id: UInt8)]
        /// The one-way extensions of ``extensions`` (`a=extmap:N/sendonly`, RFC 8285 §6), by uri:
        /// Firefox offers its simulcast rid extensions `sendonly`.
        var extensionDirections: [String: SDPDirection]
        var ssrcs: [UInt32]
        var rtxToPrimary: [UInt32: UInt32]
        var sendRIDs: [String]

        /// The payload type of the first offered codec matching `codec` (VP8 or Opus; H.264 in a
        /// packetization mode we implement and a profile browsers negotiate).
        func payloadType(for codec: MediaCodec) -> UInt8? { format(for: codec)?.payloadType }

        /// The first listed format of `codec` this stack can take.
        func format(for codec: MediaCodec) -> RTPCodec? {
            codecs.first { $0.usableCodec == codec }
        }

        /// The first of `preferences` the description lists (the codec, its format).
        func firstFormat(of preferences: [MediaCodec]) -> (MediaCodec, RTPCodec)? {
            for codec in preferences { if let f = format(for: codec) { return (codec, f) } }
            return nil
        }

        /// The RTX payload type associated with `pt`, if any.
        func rtxPayloadType(for pt: UInt8) -> UInt8? {
            codecs.first { $0.isRTX && $0.associatedPayloadType == pt }?.payloadType
        }
    }

    var iceUfrag: String
    var icePassword: String
    var iceLite: Bool
    var fingerprint: SDPFingerprint
    var setup: SDPSetup?
    var candidates: [ICECandidate]
    var media: [Media]

    init(_ d: SessionDescription) throws(PeerConnectionError) {
        guard !d.media.isEmpty else { throw .badDescription("no m-lines") }
        var ufrag = d.iceUfrag
        var pwd = d.icePwd
        var fp = d.fingerprint
        var setup = d.setup
        var candidates: [ICECandidate] = []
        var media: [Media] = []
        for (index, m) in d.media.enumerated() {
            ufrag = ufrag ?? m.iceUfrag
            pwd = pwd ?? m.icePwd
            fp = fp ?? m.fingerprint
            setup = setup ?? m.setup
            for c in m.candidates where !candidates.contains(c) { candidates.append(c) }
            let mid = m.mid ?? String(index)
            var rtx: [UInt32: UInt32] = [:]
            for g in m.ssrcGroups where g.semantics == "FID" && g.ssrcs.count == 2 { rtx[g.ssrcs[1]] = g.ssrcs[0] }
            let primaries = m.ssrcs.filter { rtx[$0] == nil }
            var exts: [(uri: String, id: UInt8)] = []
            var directions: [String: SDPDirection] = [:]
            // An extension with a direction (`a=extmap:N/sendonly`) is kept with it: an answer
            // writes the reverse one (RFC 8285 §6). An inactive one is used by neither side.
            for e in m.extmaps where e.id > 0 && e.id < 256 && e.direction != .inactive {
                exts.append((e.uri, UInt8(e.id)))
                if let d = e.direction, d != .sendrecv, directions[e.uri] == nil { directions[e.uri] = d }
            }
            let sendRIDs = m.simulcast?.sendRIDs ?? m.rids.filter { $0.direction == .send }.map(\.id)
            media.append(
                Media(
                    mid: mid, kind: m.kind, rejected: m.isRejected, direction: m.direction ?? .sendrecv,
                    codecs: m.codecs,
                    extensions: exts, extensionDirections: directions, ssrcs: primaries, rtxToPrimary: rtx,
                    sendRIDs: sendRIDs))
        }
        guard let ufrag, let pwd else { throw .badDescription("missing a=ice-ufrag / a=ice-pwd") }
        guard let fp else { throw .badDescription("missing a=fingerprint") }
        self.iceUfrag = ufrag
        self.icePassword = pwd
        self.iceLite = d.iceLite
        self.fingerprint = fp
        self.setup = setup
        self.candidates = candidates
        self.media = media
    }
}
