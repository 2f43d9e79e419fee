import RTCWire

// A send stream's features as a chain of links, composed the same generic way as the receive chain
// (RTPLinkChain.swift): ``RTPSender`` keeps the stream state (sequence numbers, timestamp offset,
// packetizing, header writing) and hands every outgoing packet to the chain twice — `prepare`
// before its header extensions are written (a link may set values, e.g. the capture time), `sent`
// once the packet is built (the retransmission buffer keeps it, the sender reports count it).
// Feedback about the stream goes down the chain with `handleRTCP`; the timer asks each link whether
// it has RTCP to send and lets each write its part of one compound. Plain values, specialized
// generics: no existential box, no allocation per packet.

/// The kind of packet being built, for links that stamp only some of them.
enum RTPOutgoingKind {
    /// A packet of a frame this sender packetized.
    case ownFrame
    /// A payload forwarded from another stream (an SFU consumer).
    case forwarded
    /// A resend for a NACK.
    case retransmission
}

/// Header-extension values links choose for one outgoing packet, before it is written.
struct RTPOutgoingExtensions {
    let kind: RTPOutgoingKind
    /// abs-capture-time (NTP 32.32), or nil to leave the element out.
    var captureTime: UInt64?
}

/// One packet as built, as every send link sees it (valid only during the call).
struct RTPSentPacket {
    /// The whole plaintext RTP packet.
    let packet: UnsafeRawBufferPointer
    let sequenceNumber: UInt16
    let timestamp: UInt32
    let payloadOffset: Int
    /// Bytes of payload (the SR octet count).
    var payloadLength: Int { packet.count - payloadOffset }
}

/// Feedback about a send stream, as ``RTCPRouter`` took it apart.
enum RTPSendFeedback {
    /// A report block (from an SR or RR) about this stream.
    case reportBlock(RTCPReportBlock)
    /// Only the LSR/DLSR of a report block.
    case reportTiming(lastSR: UInt32, delaySinceLastSR: UInt32)
    /// Picture Loss Indication.
    case pictureLoss
    /// A Full Intra Request entry with its sequence number.
    case fullIntraRequest(sequenceNumber: UInt8)
}

/// What send links need when they write RTCP: the time, and the wall clock read once for the
/// compound (only when some link has something to write).
struct RTPSendClock {
    let now: UInt64
    let wallClock: NTPTime
}

/// One feature of a send stream. Every requirement has a default that does nothing.
protocol RTPSendLink {
    /// A packet is about to be written: choose header-extension values.
    mutating func prepare(_ extensions: inout RTPOutgoingExtensions, now: UInt64)
    /// A new packet (not a retransmission) was built and is being sent.
    mutating func sent(_ packet: RTPSentPacket, now: UInt64)
    /// Feedback about the stream arrived.
    mutating func handleRTCP(_ feedback: RTPSendFeedback, now: UInt64)
    /// Runs timers; returns whether the link has RTCP to send now.
    mutating func tick(now: UInt64) -> Bool
    /// Writes what ``tick(now:)`` prepared (called on every link once any link had something to send).
    mutating func writeRTCP(_ out: inout RTCPOutput, _ clock: RTPSendClock) throws(RTCPError)
}

extension RTPSendLink {
    mutating func prepare(_ extensions: inout RTPOutgoingExtensions, now: UInt64) {}
    mutating func sent(_ packet: RTPSentPacket, now: UInt64) {}
    mutating func handleRTCP(_ feedback: RTPSendFeedback, now: UInt64) {}
    mutating func tick(now: UInt64) -> Bool { false }
    mutating func writeRTCP(_ out: inout RTCPOutput, _ clock: RTPSendClock) throws(RTCPError) {}
}

/// Two send links run in order: `head` first, then `tail` (itself a pair for longer chains).
struct RTPSendLinkPair<Head: RTPSendLink, Tail: RTPSendLink>: RTPSendLink {
    var head: Head
    var tail: Tail

    mutating func prepare(_ extensions: inout RTPOutgoingExtensions, now: UInt64) {
        head.prepare(&extensions, now: now)
        tail.prepare(&extensions, now: now)
    }

    mutating func sent(_ packet: RTPSentPacket, now: UInt64) {
        head.sent(packet, now: now)
        tail.sent(packet, now: now)
    }

    mutating func handleRTCP(_ feedback: RTPSendFeedback, now: UInt64) {
        head.handleRTCP(feedback, now: now)
        tail.handleRTCP(feedback, now: now)
    }

    mutating func tick(now: UInt64) -> Bool {
        let a = head.tick(now: now)
        let b = tail.tick(now: now)
        return a || b
    }

    mutating func writeRTCP(_ out: inout RTCPOutput, _ clock: RTPSendClock) throws(RTCPError) {
        try head.writeRTCP(&out, clock)
        try tail.writeRTCP(&out, clock)
    }
}

/// The links of every ``RTPSender``: abs-capture-time stamping, the retransmission responder's
/// buffer, sender reports (the SR opens the compound), key-frame request filtering.
typealias RTPSenderLinks = RTPSendLinkPair<
    AbsCaptureTimeStamper,
    RTPSendLinkPair<RetransmissionResponder, RTPSendLinkPair<SenderReports, KeyframeRequestFilter>>
>

extension RTPSendLinkPair
where
    Head == AbsCaptureTimeStamper,
    Tail == RTPSendLinkPair<RetransmissionResponder, RTPSendLinkPair<SenderReports, KeyframeRequestFilter>>
{
    init(
        captureTime: AbsCaptureTimeStamper, retransmissions: RetransmissionResponder, reports: SenderReports,
        keyframes: KeyframeRequestFilter
    ) {
        self.init(
            head: captureTime,
            tail: .init(head: retransmissions, tail: .init(head: reports, tail: keyframes)))
    }

    // `_read`/`_modify` borrow the link in place: no copy per access.
    var captureTime: AbsCaptureTimeStamper {
        _read { yield head }
        _modify { yield &head }
    }
    var retransmissions: RetransmissionResponder {
        _read { yield tail.head }
        _modify { yield &tail.head }
    }
    var reports: SenderReports {
        _read { yield tail.tail.head }
        _modify { yield &tail.tail.head }
    }
    var keyframes: KeyframeRequestFilter {
        _read { yield tail.tail.tail }
        _modify { yield &tail.tail.tail }
    }
}
