import RTCWire

/// The senders of one simulcast video track: one ``RTPSender`` per layer (RID), lowest quality first.
///
/// Thin by design: each layer is encoded separately and handed to ``send(layer:frame:now:emit:)``;
/// RTCP feedback is routed to the layer by SSRC with ``sender(ssrc:)``.
// Safe: confined to its connection's loop thread, like its senders.
public final class SimulcastSendGroup: @unchecked Sendable {
    /// The layer senders, in the order of ``rids``.
    public let senders: [RTPSender]

    /// Wraps existing senders (their `rid` must be set).
    public init(senders: [RTPSender]) { self.senders = senders }

    /// Creates one VP8 sender per RID with consecutive settings.
    ///
    /// - Parameters:
    ///   - rids: e.g. `["q", "h", "f"]`, as negotiated in `a=simulcast`.
    ///   - ssrcs: one media SSRC per RID.
    ///   - rtx: one RTX SSRC per RID when RTX is negotiated (with its payload type).
    public convenience init(
        rids: [String], ssrcs: [UInt32], payloadType: UInt8, rtx: (payloadType: UInt8, ssrcs: [UInt32])? = nil,
        extensions: RTPSendExtensions, mid: String?, cname: String, maxPayloadSize: Int = 1150
    ) {
        var senders: [RTPSender] = []
        for (i, rid) in rids.enumerated() where i < ssrcs.count {
            let layerRTX = rtx.flatMap { r in i < r.ssrcs.count ? (r.payloadType, r.ssrcs[i]) : nil }
            senders.append(
                RTPSender(
                    ssrc: ssrcs[i], payloadType: payloadType, codec: .vp8, rtx: layerRTX, extensions: extensions,
                    mid: mid, rid: rid, maxPayloadSize: maxPayloadSize, cname: cname))
        }
        self.init(senders: senders)
    }

    /// The RIDs of the layers, lowest first.
    public var rids: [String?] { senders.map(\.rid) }

    /// The sender for a layer RID.
    public func sender(rid: String) -> RTPSender? { senders.first { $0.rid == rid } }

    /// The sender whose media or RTX SSRC is `ssrc`.
    public func sender(ssrc: UInt32) -> RTPSender? { senders.first { $0.ssrc == ssrc || $0.rtx?.ssrc == ssrc } }

    /// Sends one frame of layer `layer` (index into ``senders``); ignores an unknown layer.
    public func send(
        layer: Int, frame: EncodedFrame, now: UInt64, emit: (UnsafeMutableRawBufferPointer, Int) -> Void
    ) {
        guard senders.indices.contains(layer) else { return }
        senders[layer].send(frame, now: now, emit: emit)
    }

    /// Runs every layer's sender-report timer.
    public func tick(now: UInt64, emitRTCP: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        for s in senders { s.tick(now: now, emitRTCP: emitRTCP) }
    }
}

/// Reading the RID of packets whose SSRC is not yet known (Chromium simulcast before SSRCs are learned).
public enum SimulcastRouting {
    /// The `rtp-stream-id` (or, when `repairedRIDExtensionID` is given and matches, the
    /// `repaired-rtp-stream-id`) carried by `packet`, or nil. Meant for the first packet of a new SSRC,
    /// not every packet: it returns a String.
    public static func ridOf(
        _ packet: UnsafeRawBufferPointer, header: RTPHeader, ridExtensionID: UInt8, repairedRIDExtensionID: UInt8? = nil
    ) -> (rid: String, isRepair: Bool)? {
        if ridExtensionID != 0, let r = header.extensionElement(id: ridExtensionID, in: packet),
            let rid = RTPExtensions.identifier(packet, r)
        {
            return (rid, false)
        }
        if let id = repairedRIDExtensionID, id != 0, let r = header.extensionElement(id: id, in: packet),
            let rid = RTPExtensions.identifier(packet, r)
        {
            return (rid, true)
        }
        return nil
    }
}

/// The RID carried by `packet` in extension `ridExtensionID`, or nil.
public func ridOf(_ packet: UnsafeRawBufferPointer, header: RTPHeader, ridExtensionID: UInt8) -> String? {
    SimulcastRouting.ridOf(packet, header: header, ridExtensionID: ridExtensionID)?.rid
}
