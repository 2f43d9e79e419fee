import RTCWire

/// The one place where received RTCP is taken apart and handed to the streams it concerns.
///
/// It walks a compound packet once with ``RTCPCompound/forEach(_:_:)`` (views, no allocation) and
/// routes by SSRC:
/// - sender report → the receiver of that SSRC (NTP/RTP mapping, LSR), its report blocks → senders;
/// - receiver report blocks → the sender they describe (loss, jitter, RTT);
/// - generic NACK → the sender's retransmission responder, or the owner's `nack` handler when it
///   answers NACKs itself (an SFU answering from its shared per-producer buffer);
/// - PLI, and FIR with a new sequence number (RFC 5104 §4.3.1.1: a repeated FIR is the same
///   request) → the sender's key-frame request, then the owner's `keyframeRequested`.
/// - BYE → the owner's `goodbye`, once per source it names (RFC 3550 §6.6).
/// - transport-cc feedback and REMB → the owner's `transportFeedback` and `remb` (the transport's
///   send-side bandwidth estimator).
///
/// A ``PeerConnection`` routes every compound it receives through here, and so does
/// ``RTPSender/handleRTCP(_:now:emit:)`` for a lone sender, so the production path and the unit
/// tests run the same rules.
enum RTCPRouter {
    /// Routes one decrypted compound RTCP packet.
    ///
    /// - Parameters:
    ///   - sender: the local sender of a media SSRC, if any.
    ///   - receiver: the receiver of a remote SSRC, if any.
    ///   - nack: takes a NACK for `sender` that the owner answers itself and returns true; false
    ///     lets the sender resend from its own history through `emit`.
    ///   - keyframeRequested: runs after `sender` accepted a key-frame request.
    ///   - goodbye: runs for each SSRC a BYE names.
    /// - Throws: the parser's error for a malformed compound; what came before it was handled.
    static func route(
        _ compound: UnsafeRawBufferPointer, now: UInt64, sender: (UInt32) -> RTPSender?,
        receiver: (UInt32) -> RTPReceiver?,
        nack: (RTPSender, RTCPPacketView) throws(RTCPError) -> Bool = { _, _ in false },
        keyframeRequested: (RTPSender) -> Void = { _ in },
        goodbye: (UInt32) -> Void = { _ in },
        transportFeedback: (RTCPPacketView) throws(RTCPError) -> Void = { _ in },
        remb: (UInt64) -> Void = { _ in },
        emit: (UnsafeMutableRawBufferPointer, Int) -> Void
    ) throws(RTCPError) {
        try RTCPCompound.forEach(compound) { view throws(RTCPError) in
            if view.isSenderReport {
                let info = try view.senderInfo()
                receiver(info.ssrc)?.handleSenderReport(
                    ntp: info.ntpTimestamp, rtpTimestamp: info.rtpTimestamp, now: now)
                try view.forEachReportBlock { block in sender(block.ssrc)?.handleReceiverReport(block, now: now) }
            } else if view.isReceiverReport {
                try view.forEachReportBlock { block in sender(block.ssrc)?.handleReceiverReport(block, now: now) }
            } else if view.isNACK {
                guard let target = sender(view.mediaSSRC) else { return }
                target.noteNACKReceived()
                if try nack(target, view) { return }
                try view.forEachNACKSequence { seq in target.resendFromHistory(seq, now: now, emit: emit) }
            } else if view.isPLI {
                guard let target = sender(view.mediaSSRC) else { return }
                target.handlePLI()
                keyframeRequested(target)
            } else if view.isTransportCC {
                try transportFeedback(view)
            } else if view.isREMB {
                remb(try view.rembBitrate().bitrate)
            } else if view.isBYE {
                try view.forEachBYESource { goodbye($0) }
            } else if view.isFIR {
                try view.forEachFIREntry { entry in
                    guard let target = sender(entry.ssrc) else { return }
                    if target.handleFIR(sequenceNumber: entry.sequenceNumber) { keyframeRequested(target) }
                }
            }
        }
    }
}
