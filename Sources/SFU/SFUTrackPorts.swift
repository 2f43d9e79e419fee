import RTC
import RTCWire

/// Where a consumer (down track) writes: one outgoing stream towards a subscriber.
///
/// The forwarding units know only this and ``SFUUpstream``, not the connection or its JSEP. In the
/// server it is ``SFUTransportDownTrack`` (a transceiver's sender on a subscriber's
/// ``MediaTransport``); tests record into their own. Class-bound, so a consumer holds it as a
/// reference and a witness table: no box and no allocation per packet.
protocol SFUDownTrack: AnyObject {
    /// Whether a packet written now would go out (connected, negotiated, sending).
    var canSend: Bool { get }

    /// Sends one forwarded packet with the outgoing sequence number and timestamp the consumer chose,
    /// the codec `rewrite` applied to the payload, and the publisher's AV1 `dependencyDescriptor`
    /// element when it had one. False when it did not go out.
    func sendForwarded(
        payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, sequenceNumber: UInt16,
        rewrite: RTPPayloadRewrite, audioLevel: RTPAudioLevel?, captureTime: UInt64?,
        dependencyDescriptor: UnsafeRawBufferPointer?, now: UInt64
    ) -> Bool

    /// Resends one packet the subscriber NACKed, from the producer's shared buffer (as RTX when
    /// negotiated). False when it did not go out.
    @discardableResult
    func sendRetransmission(
        payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, sequenceNumber: UInt16,
        rewrite: RTPPayloadRewrite, dependencyDescriptor: UnsafeRawBufferPointer?, now: UInt64
    ) -> Bool

    /// The outgoing stream's counters and round-trip time (nil before negotiation created it).
    var senderStats: RTPSenderStats? { get }

    /// Whether ``sendPadding(bytes:now:)`` can send (connected, with RTX negotiated).
    var canPad: Bool { get }

    /// Sends about `bytes` of padding-only RTX packets (a bandwidth probe that carries no media).
    /// Returns the bytes sent.
    func sendPadding(bytes: Int, now: UInt64) -> Int

    /// Where the outgoing stream's sender reports take their RTP time from (its consumer: the
    /// publisher's reports in the outgoing timeline). Held weakly.
    var reportSource: (any RTPSenderReportSource)? { get set }
}

/// Where a producer's requests go: the publisher's receive streams of its m-line.
protocol SFUUpstream: AnyObject {
    /// Sends a PLI for one encoding (`rid`; nil for a single-encoding track) now, without the
    /// receiver's own throttle: the producer throttles (``SFUKeyframeRequests``).
    func requestKeyframe(rid: String?)

    /// The latest sender report of the publisher's media SSRC `ssrc` (nil before one arrived).
    func senderReport(ssrc: UInt32) -> SFULayerTimeline.SenderReport?

    /// NACKs sent upstream for this track, all encodings.
    var nacksSent: UInt64 { get }

    /// The producer closed: the publisher's receive streams of this m-line are freed (it may keep
    /// the connection, as a guest back in the audience does) and nothing it sends there is read.
    func stopReceiving()
}

/// A down track on a subscriber's transport: the first sender of `transceiver`.
final class SFUTransportDownTrack: SFUDownTrack {
    // `unowned(unsafe)`: used on every forwarded packet; the SFU retires the consumer (and with it
    // this track) before it closes the subscriber's connection.
    unowned(unsafe) let transport: MediaTransport
    let transceiver: RTPTransceiver

    init(transport: MediaTransport, transceiver: RTPTransceiver) {
        self.transport = transport
        self.transceiver = transceiver
    }

    var canSend: Bool { transport.canSend(on: transceiver) }

    func sendForwarded(
        payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, sequenceNumber: UInt16,
        rewrite: RTPPayloadRewrite, audioLevel: RTPAudioLevel?, captureTime: UInt64?,
        dependencyDescriptor: UnsafeRawBufferPointer?, now: UInt64
    ) -> Bool {
        transport.sendForwarded(
            on: transceiver, payload: payload, marker: marker, timestamp: timestamp, sequenceNumber: sequenceNumber,
            rewrite: rewrite, audioLevel: audioLevel, captureTime: captureTime,
            dependencyDescriptor: dependencyDescriptor, now: now)
    }

    func sendRetransmission(
        payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, sequenceNumber: UInt16,
        rewrite: RTPPayloadRewrite, dependencyDescriptor: UnsafeRawBufferPointer?, now: UInt64
    ) -> Bool {
        transport.sendRetransmission(
            on: transceiver, payload: payload, marker: marker, timestamp: timestamp, sequenceNumber: sequenceNumber,
            rewrite: rewrite, dependencyDescriptor: dependencyDescriptor, now: now)
    }

    var senderStats: RTPSenderStats? { transceiver.senderStats }

    var canPad: Bool { transport.canSend(on: transceiver) && transceiver.primarySender?.rtx != nil }

    func sendPadding(bytes: Int, now: UInt64) -> Int { transport.sendPadding(on: transceiver, bytes: bytes, now: now) }

    var reportSource: (any RTPSenderReportSource)? {
        get { transceiver.reportSource }
        set { transceiver.reportSource = newValue }
    }
}

/// A producer's upstream on a publisher's transport: the receive streams of `transceiver`.
final class SFUTransportUpstream: SFUUpstream {
    // `unowned(unsafe)`: the SFU drops a producer before its publisher connection.
    unowned(unsafe) let transport: MediaTransport
    let transceiver: RTPTransceiver

    init(transport: MediaTransport, transceiver: RTPTransceiver) {
        self.transport = transport
        self.transceiver = transceiver
    }

    func requestKeyframe(rid: String?) { transport.requestKeyframeNow(on: transceiver, rid: rid) }

    func senderReport(ssrc: UInt32) -> SFULayerTimeline.SenderReport? {
        transport.receiver(forSSRC: ssrc)?.senderReport
    }

    var nacksSent: UInt64 {
        transport.receiverStats(on: transceiver).reduce(0) { $0 &+ $1.nacksSent }
    }

    func stopReceiving() { transport.stopReceiving(on: transceiver) }
}
