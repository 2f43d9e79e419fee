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
    /// abs-capture-time, handed to every receiver for its latency samples.
    var captureTimeExtensionID: UInt8 = 0 {
        didSet { for stream in streams { stream.receiver.captureTimeExtensionID = captureTimeExtensionID } }
    }
    /// Handed to every new stream's receiver (``RTPReceiver/measuresQuality``).
    var measuresQuality = RTPReceiver.measuresQualityByDefault
    /// At most this many remote SSRCs are bound (a hostile peer cannot grow the table without end).
    let maxSSRCs: Int
    /// SSRC (media or RTX) → stream.
    private(set) var bySSRC: [UInt32: Stream] = [:]
    /// `bySSRC` unretained, for the per-packet lookup: each stream is kept alive by `bySSRC` and
    /// `streams`, and is dropped only between datagrams (``stopReceiving(on:)``), so a packet's lookup
    /// costs no retain and release.
    private var references: [UInt32: Unmanaged<Stream>] = [:]
    /// m-lines that no longer receive (``stopReceiving(on:)``): a new SSRC is never bound to them.
    private var stopped: Set<ObjectIdentifier> = []
    /// The stream of the last SSRC looked up (packets come in runs per SSRC).
    private var lastSSRC: UInt32 = 0
    private var lastReference: Unmanaged<Stream>?
    /// Every stream, in creation order.
    private(set) var streams: [Stream] = []
    /// Runs once for each new stream (the owner attaches its frame handler).
    var onNewStream: ((Stream) -> Void)?
    /// The owning transport's timer deadline, handed to each new stream's receiver.
    var tickDeadline: TickDeadline?

    /// The loop the streams' receivers are confined to (nil for a listener without one, in tests).
    let loop: EventLoop?
    init(maxSSRCs: Int, loop: EventLoop? = nil) {
        self.maxSSRCs = maxSSRCs
        self.loop = loop
    }

    /// Drops the receive streams of `transceiver` (their receivers, reorder buffers and SSRC
    /// bindings) and binds no new SSRC to it: an SFU calls this when the track's producer closes,
    /// so that a guest who left the stage but kept the connection costs nothing per stream.
    /// Loop thread, between datagrams (never from inside a packet's handling).
    /// Returns the SSRCs (media and RTX) that were bound to them.
    @discardableResult
    func stopReceiving(on transceiver: RTPTransceiver) -> [UInt32] {
        stopped.insert(ObjectIdentifier(transceiver))
        return dropStreams { $0.transceiver === transceiver }
    }

    /// Frees the streams whose track ended with a new remote description (`announcedBefore`: each
    /// m-line's announced SSRCs before it). An m-line that no longer receives ends all of its
    /// streams. One whose announced SSRCs changed (an SFU moved another track onto it) ends the
    /// streams of the SSRCs it no longer announces; a stream of an SSRC that was never announced
    /// (bound by mid or payload type) stays, since the peer never said it ended. Returns the SSRCs
    /// (media and RTX) that were bound to the ended streams.
    @discardableResult
    func endStreams(announcedBefore: [ObjectIdentifier: [UInt32]]) -> [UInt32] {
        dropStreams { stream in
            let t = stream.transceiver
            if !t.receives { return true }
            guard let before = announcedBefore[ObjectIdentifier(t)], before != t.remoteSSRCs else { return false }
            let ssrc = stream.receiver.ssrc
            return before.contains(ssrc) && !t.remoteSSRCs.contains(ssrc)
        }
    }

    /// Unbinds and frees the streams `ends` picks (between datagrams only: see `references`);
    /// returns the SSRCs that were bound to them.
    private func dropStreams(where ends: (Stream) -> Bool) -> [UInt32] {
        let ended = Set(streams.filter(ends).map(ObjectIdentifier.init))
        guard !ended.isEmpty else { return [] }
        streams.removeAll { ended.contains(ObjectIdentifier($0)) }
        let unbound = bySSRC.compactMap { ended.contains(ObjectIdentifier($0.value)) ? $0.key : nil }
        for ssrc in unbound {
            bySSRC[ssrc] = nil
            references[ssrc] = nil
        }
        lastSSRC = 0
        lastReference = nil
        return unbound
    }

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
        if let mid {
            // A mid names the m-line (RFC 8843 §9.2): one that receives nothing, or none, drops the
            // packet rather than letting the payload type pick another m-line (a stream in flight
            // when its m-line went inactive must not become a track of its neighbour).
            transceiver = routes.first { $0.mid == mid && $0.receives }
            if transceiver == nil { return nil }
        }
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
        guard let t = transceiver, !stopped.contains(ObjectIdentifier(t)) else { return nil }
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
        receiver.loop = loop
        receiver.captureTimeExtensionID = captureTimeExtensionID
        receiver.measuresQuality = measuresQuality
        if t.codec == .h264, let p = t.codecParameters, let sets = H264FormatParameters(p)?.spropAnnexB, !sets.isEmpty {
            receiver.setH264ParameterSets(sets)
        }
        let stream = Stream(transceiver: t, rid: rid, receiver: receiver)
        bindSSRC(ssrc, to: stream)
        streams.append(stream)
        onNewStream?(stream)
        return stream
    }
}
