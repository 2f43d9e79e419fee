import RTCWire

/// The receive side of a transport's RTP demultiplexing: which receive stream an incoming packet
/// belongs to, by SSRC, and for a new SSRC by the mid / rid / repaired-rid header extensions,
/// announced SSRCs (`a=ssrc`, `ssrc-group:FID`) or payload type — the rules of RFC 8843 §9.2 and
/// RFC 8852. It owns the receive streams (one ``RTPReceiver`` each) and their SSRC table.
///
/// It is the transport's listener, apart from JSEP: offers, answers and m-line bookkeeping stay in
/// ``PeerConnection``, which hands the listener the negotiated extension ids and the receiving
/// transceivers (only their receive parameters are read). No socket, no SRTP: the unit runs alone
/// on synthetic packets. Loop-thread confined; the per-packet path is one compare (the last SSRC)
/// or one dictionary lookup, without a retain.
final class RTPStreamListener {
    /// One remote media stream (its RTX stream maps to the same one).
    final class Stream {
        let transceiver: RTPTransceiver
        let rid: String?
        let receiver: RTPReceiver
        init(transceiver: RTPTransceiver, rid: String?, receiver: RTPReceiver) {
            self.transceiver = transceiver
            self.rid = rid
            self.receiver = receiver
        }
    }

    /// Negotiated header-extension ids (0: not negotiated).
    var midExtensionID: UInt8 = 0
    var ridExtensionID: UInt8 = 0
    var repairedRIDExtensionID: UInt8 = 0
    /// At most this many remote SSRCs are bound (a hostile peer cannot grow the table without end).
    let maxSSRCs: Int
    /// SSRC (media or RTX) → stream.
    private(set) var bySSRC: [UInt32: Stream] = [:]
    /// `bySSRC` unretained, for the per-packet lookup: streams are never unbound, so each lives as
    /// long as the listener, and a packet's lookup then costs no retain and release.
    private var references: [UInt32: Unmanaged<Stream>] = [:]
    /// The stream of the last SSRC looked up (packets come in runs per SSRC).
    private var lastSSRC: UInt32 = 0
    private var lastReference: Unmanaged<Stream>?
    /// Every stream, in creation order.
    private(set) var streams: [Stream] = []
    /// Runs once for each new stream (the owner attaches its frame handler).
    var onNewStream: ((Stream) -> Void)?
    /// The owning transport's timer deadline, handed to each new stream's receiver.
    var tickDeadline: TickDeadline?

    init(maxSSRCs: Int) { self.maxSSRCs = maxSSRCs }

    /// The stream of `packet`: the bound one for its SSRC, else one bound now among `routes` (the
    /// receiving m-lines), or nil when it belongs to none or the SSRC table is full.
    func stream(for packet: UnsafeRawBufferPointer, header: RTPHeader, routes: [RTPTransceiver]) -> Stream? {
        bySSRC[header.ssrc] ?? bind(packet, header: header, routes: routes)
    }

    /// The stream bound to `ssrc`, unretained (valid as long as this listener), or nil when the SSRC
    /// is not bound yet. The per-packet lookup.
    @inline(__always)
    func boundStream(_ ssrc: UInt32) -> Unmanaged<Stream>? {
        if let lastReference, lastSSRC == ssrc { return lastReference }
        guard let found = references[ssrc] else { return nil }
        lastSSRC = ssrc
        lastReference = found
        return found
    }

    /// Binds a new SSRC to a receive stream by mid/rid extension, announced SSRCs, or payload type.
    /// Runs once per new SSRC, not per packet.
    func bind(_ packet: UnsafeRawBufferPointer, header: RTPHeader, routes: [RTPTransceiver]) -> Stream? {
        guard bySSRC.count < maxSSRCs else { return nil }
        var mid: String?
        var rid: String?
        var isRepair = false
        if midExtensionID != 0, let r = header.extensionElement(id: midExtensionID, in: packet) {
            mid = asciiString(packet, r)
        }
        if ridExtensionID != 0, let r = header.extensionElement(id: ridExtensionID, in: packet) {
            rid = asciiString(packet, r)
        }
        if rid == nil, repairedRIDExtensionID != 0,
            let r = header.extensionElement(id: repairedRIDExtensionID, in: packet)
        {
            rid = asciiString(packet, r)
            isRepair = true
        }
        // Which m-line?
        var transceiver: RTPTransceiver?
        if let mid { transceiver = routes.first { $0.mid == mid && $0.receives } }
        if transceiver == nil {
            transceiver = routes.first { t in
                t.receives && (t.remoteSSRCs.contains(header.ssrc) || t.remoteRTXSSRCs[header.ssrc] != nil)
            }
        }
        if transceiver == nil {
            transceiver = routes.first { t in
                t.receives && (t.payloadType == header.payloadType || t.rtxPayloadType == header.payloadType)
            }
        }
        guard let t = transceiver else { return nil }
        let isRTX = header.payloadType == t.rtxPayloadType && t.rtxPayloadType != nil
        // RTX SSRC announced with ssrc-group FID: attach to its primary stream.
        if let primary = t.remoteRTXSSRCs[header.ssrc] {
            let stream = bySSRC[primary] ?? makeStream(t, rid: rid, ssrc: primary)
            stream.receiver.setRTX(ssrc: header.ssrc, payloadType: t.rtxPayloadType ?? 0)
            bindSSRC(header.ssrc, to: stream)
            return stream
        }
        if isRTX || isRepair {
            // Repair stream identified by repaired-rid: find the primary stream with that rid.
            guard let primary = streams.first(where: { $0.transceiver === t && $0.rid == rid }) else { return nil }
            primary.receiver.setRTX(ssrc: header.ssrc, payloadType: t.rtxPayloadType ?? 0)
            bindSSRC(header.ssrc, to: primary)
            return primary
        }
        return makeStream(t, rid: rid, ssrc: header.ssrc)
    }

    private func bindSSRC(_ ssrc: UInt32, to stream: Stream) {
        bySSRC[ssrc] = stream
        references[ssrc] = Unmanaged.passUnretained(stream)
    }

    private func makeStream(_ t: RTPTransceiver, rid: String?, ssrc: UInt32) -> Stream {
        let localSSRC = t.localSSRCs.first ?? 1
        let receiver = RTPReceiver(
            ssrc: ssrc, codec: t.codec, payloadType: t.payloadType, localSSRC: localSSRC,
            nack: t.kind == .video, pli: t.kind == .video)
        receiver.tickDeadline = tickDeadline
        let stream = Stream(transceiver: t, rid: rid, receiver: receiver)
        bindSSRC(ssrc, to: stream)
        streams.append(stream)
        onNewStream?(stream)
        return stream
    }
}
