import RTCWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Header-extension ids negotiated for a sender (RFC 8285 `a=extmap`); nil means not negotiated.
public struct RTPSendExtensions: Sendable, Equatable {
    /// `urn:ietf:params:rtp-hdrext:sdes:mid`
    public var mid: UInt8?
    /// `urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id`
    public var rid: UInt8?
    /// `urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id`
    public var repairedRID: UInt8?
    /// `http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time`
    public var absSendTime: UInt8?
    /// `http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01`
    public var transportWideCC: UInt8?
    /// `urn:ietf:params:rtp-hdrext:ssrc-audio-level`
    public var audioLevel: UInt8?
    /// `http://www.webrtc.org/experiments/rtp-hdrext/abs-capture-time` (``AbsCaptureTime``)
    public var absCaptureTime: UInt8?
    /// The AV1 dependency descriptor (``AV1DependencyDescriptor``): written only on forwarded packets
    /// and their repairs, copied from the publisher's.
    public var dependencyDescriptor: UInt8?

    /// Creates a set of extension ids.
    public init(
        mid: UInt8? = nil, rid: UInt8? = nil, repairedRID: UInt8? = nil, absSendTime: UInt8? = nil,
        transportWideCC: UInt8? = nil, audioLevel: UInt8? = nil, absCaptureTime: UInt8? = nil,
        dependencyDescriptor: UInt8? = nil
    ) {
        self.mid = mid
        self.rid = rid
        self.repairedRID = repairedRID
        self.absSendTime = absSendTime
        self.transportWideCC = transportWideCC
        self.audioLevel = audioLevel
        self.absCaptureTime = absCaptureTime
        self.dependencyDescriptor = dependencyDescriptor
    }
}

/// The transport-wide sequence counter shared by every sender of one transport (BUNDLE group).
// Safe: confined to its transport's loop thread, like the senders that share it.
public final class TransportSequenceCounter: @unchecked Sendable {
    /// The next transport-wide sequence number.
    public var next: UInt16
    /// The number the last packet took and when, until its transport sends it and records it in
    /// its send history (``MediaTransport``); `hasPending` false: none waiting.
    var pendingSequence: UInt16 = 0
    var pendingTime: UInt64 = 0
    var hasPending = false
    /// Creates a counter.
    public init(start: UInt16 = 0) { next = start }
    func take(now: UInt64) -> UInt16 {
        defer { next &+= 1 }
        pendingSequence = next
        pendingTime = now
        hasPending = true
        return next
    }
}

/// Counters of one ``RTPSender``.
public struct RTPSenderStats: Sendable, Equatable {
    /// Media packets sent (first transmissions only).
    public var packetsSent: UInt64 = 0
    /// Bytes of those packets, headers included.
    public var bytesSent: UInt64 = 0
    /// Payload bytes of those packets (the SR octet count).
    public var payloadBytesSent: UInt64 = 0
    /// Frames handed to ``RTPSender/send(_:now:emit:)``.
    public var framesSent: UInt64 = 0
    /// Packets resent because of NACKs (as RTX or as the original).
    public var retransmissions: UInt64 = 0
    /// Bytes of those resent packets.
    public var retransmittedBytes: UInt64 = 0
    /// NACK feedback messages received for this sender.
    public var nacksReceived: UInt64 = 0
    /// Sequence numbers requested by NACKs that were no longer in the history.
    public var nackMisses: UInt64 = 0
    /// Padding-only probe packets sent on the RTX stream (``RTPSender/sendPadding(bytes:now:emit:)``)
    /// and their bytes.
    public var paddingPacketsSent: UInt64 = 0
    public var paddingBytesSent: UInt64 = 0
    /// PLIs received.
    public var plisReceived: UInt64 = 0
    /// FIRs received (new sequence numbers only).
    public var firsReceived: UInt64 = 0
    /// Frames that could not be sent because they were empty or the buffer was too small.
    public var framesFailed: UInt64 = 0
    /// Sender reports emitted.
    public var senderReportsSent: UInt64 = 0
    /// The latest round-trip time computed from receiver reports, in nanoseconds (0 until known).
    public var roundTripTime: UInt64 = 0
    /// Report blocks (RR or SR) received about this sender.
    public var receiverReports: UInt64 = 0
    /// Cumulative packets lost, as the latest report block says (the far end's count).
    public var reportedPacketsLost: Int64 = 0
    /// Interarrival jitter, as the latest report block says, in seconds.
    public var reportedJitter: Double = 0
}

/// Packetizes the frames of one outgoing encoding (one SSRC) into plaintext RTP, keeps a history for
/// retransmission, answers NACK/PLI/FIR and writes sender reports.
///
/// Confined to the event-loop thread. Nothing here allocates per packet: packets are built in one
/// reused scratch buffer (shared by the senders of a transport) and copied into a preallocated
/// history ring.
///
/// Packets are handed to `emit` as `(buffer, length)`: the buffer has room after the packet (its
/// capacity is ``packetCapacity``) so the callee may SRTP-protect it in place. The bytes are only
/// valid during the call.
// Safe: loop-confined; its entry points assert `loop` in debug builds once a transport owns it.
public final class RTPSender: LoopConfined, @unchecked Sendable {
    /// The loop this object is confined to, once a transport owns it (nil when used alone, as in
    /// unit tests): its entry points assert, in debug builds only, that they run there.
    public internal(set) var loop: (any LoopConfinement)?

    /// Capacity of the buffer handed to `emit`; packets never exceed `packetCapacity - 64`.
    public static let packetCapacity = 1500
    private static let trailerReserve = 64

    /// The media SSRC.
    public let ssrc: UInt32
    /// The media payload type.
    public let payloadType: UInt8
    /// The codec being packetized.
    public let codec: MediaCodec
    /// The H.264 packetizer's fragment buffer (grown once to the payload size).
    private var h264Scratch: [UInt8] = []
    /// AV1 OBU aggregation (its packet buffer is reused from unit to unit).
    private var av1Packetizer = AV1Packetizer()
    /// RTX payload type and SSRC (RFC 4588), when negotiated.
    public let rtx: (payloadType: UInt8, ssrc: UInt32)?
    /// Negotiated header-extension ids (of this sender's m-section); a renegotiation may change them
    /// (``updateExtensions(_:)``).
    public private(set) var extensions: RTPSendExtensions
    /// The RTP stream id written in the `rid` extension, if any.
    public let rid: String?
    /// Largest media payload (after the VP8 descriptor) per packet.
    public let maxPayloadSize: Int
    /// The SDES CNAME sent with sender reports.
    public let cname: String

    /// Called when the remote asks for a key frame (PLI, or FIR with a new sequence number).
    public var onKeyframeRequest: (() -> Void)?
    /// Audio level written in the ssrc-audio-level extension: -dBov 0…127 (127 = silence).
    public var audioLevel: UInt8 = 127
    /// Whether the current audio frame carries voice (V bit of the audio-level extension).
    public var voiceActivity = false
    /// Capture time (NTP 32.32) written in the abs-capture-time extension of the next
    /// ``sendForwarded(payload:marker:timestamp:sequenceNumber:rewrite:dependencyDescriptor:now:emit:)`` packet: an
    /// SFU copies the publisher's value here; nil leaves the element out. Own frames are stamped with
    /// the wall clock when they are packetized (the ``AbsCaptureTimeStamper`` link).
    public var forwardedCaptureTime: UInt64? {
        get { links.captureTime.forwarded }
        set { links.captureTime.forwarded = newValue }
    }
    /// Shared transport-wide sequence counter; a private one is used when nil.
    public var transportSequence: TransportSequenceCounter?
    /// Nominal interval between sender reports (randomized ±50 %).
    public var reportInterval: UInt64 {
        get { links.reports.interval }
        set { links.reports.interval = newValue }
    }
    /// Maps the monotonic `now` to wall-clock NTP time for sender reports; reads `CLOCK_REALTIME` by
    /// default. Tests replace it to stay deterministic.
    public var wallClock: (UInt64) -> NTPTime = { _ in NTPTime(unixNanoseconds: realtimeNanoseconds()) }

    /// Where the reports of a forwarded stream take their RTP time from (an SFU consumer: the
    /// publisher's own reports); nil, or a source without a reference yet: from the last frame sent.
    public weak var reportSource: (any RTPSenderReportSource)?

    /// The round-trip time from the last receiver report that allowed one (ns; 0: none yet).
    var reportedRoundTripTime: UInt64 { links.reports.roundTripTime }

    /// Counters; those of the links are read from them.
    public var stats: RTPSenderStats {
        var s = counters
        let reports = links.reports
        s.packetsSent = reports.packetsSent
        s.payloadBytesSent = reports.payloadBytesSent
        s.senderReportsSent = reports.senderReportsSent
        s.roundTripTime = reports.roundTripTime
        s.receiverReports = reports.receiverReports
        s.reportedPacketsLost = reports.reportedPacketsLost
        s.reportedJitter = reports.reportedJitter
        s.plisReceived = links.keyframes.plisReceived
        s.firsReceived = links.keyframes.firsReceived
        return s
    }
    private var counters = RTPSenderStats()

    private let midValue: String?
    private var twoByteExtensions: Bool

    private var sequenceNumber: UInt16
    private var rtxSequenceNumber: UInt16
    private let timestampOffset: UInt32
    private var pictureID: UInt16
    private var privateTransportSequence: UInt16 = 0

    /// Where each packet is built and handed to `emit`, which sends it before the next is built: the
    /// senders of one transport share it (1.5 KB per sender adds up on an SFU with many consumers).
    private let scratch: UnsafeMutableRawBufferPointer
    /// Keeps ``scratch`` (its `bytes`, read directly on the hot path) alive.
    private let scratchOwner: RTPPacketScratch
    /// The stream's features as a chain (RTPSendLinkChain.swift): abs-capture-time stamping, the
    /// retransmission buffer, sender reports, key-frame request filtering.
    private var links: RTPSenderLinks

    /// Creates a sender.
    ///
    /// - Parameters:
    ///   - historySize: packets kept for NACKs; 0 keeps none (the caller answers NACKs itself).
    ///   - initialSequenceNumber, initialTimestamp, seed: fixed starting values for tests; random when nil.
    public convenience init(
        ssrc: UInt32, payloadType: UInt8, codec: MediaCodec, rtx: (payloadType: UInt8, ssrc: UInt32)? = nil,
        extensions: RTPSendExtensions = RTPSendExtensions(), mid: String? = nil, rid: String? = nil,
        maxPayloadSize: Int = 1150, historySize: Int = 512, cname: String,
        initialSequenceNumber: UInt16? = nil, initialTimestamp: UInt32? = nil, seed: UInt64? = nil
    ) {
        self.init(
            ssrc: ssrc, payloadType: payloadType, codec: codec, rtx: rtx, extensions: extensions, mid: mid, rid: rid,
            maxPayloadSize: maxPayloadSize, historySize: historySize, cname: cname,
            initialSequenceNumber: initialSequenceNumber, initialTimestamp: initialTimestamp, seed: seed,
            scratch: RTPPacketScratch())
    }

    /// A sender that builds its packets in `scratch`, which the other senders of its transport share.
    init(
        ssrc: UInt32, payloadType: UInt8, codec: MediaCodec, rtx: (payloadType: UInt8, ssrc: UInt32)?,
        extensions: RTPSendExtensions, mid: String?, rid: String?, maxPayloadSize: Int = 1150, historySize: Int,
        cname: String, initialSequenceNumber: UInt16? = nil, initialTimestamp: UInt32? = nil, seed: UInt64? = nil,
        scratch: RTPPacketScratch
    ) {
        self.ssrc = ssrc
        self.payloadType = payloadType
        self.codec = codec
        self.rtx = rtx
        self.extensions = extensions
        self.rid = rid.flatMap { (1...255).contains($0.utf8.count) ? $0 : nil }
        self.maxPayloadSize = max(16, min(maxPayloadSize, 1200))
        let cname = String(decoding: cname.utf8.prefix(255), as: UTF8.self)
        self.cname = cname
        // Identifiers must be 1–255 bytes; an unusable one is left out rather than breaking every packet.
        let validMid = mid.flatMap { (1...255).contains($0.utf8.count) ? $0 : nil }
        let validRid = rid.flatMap { (1...255).contains($0.utf8.count) ? $0 : nil }
        midValue = validMid
        twoByteExtensions = Self.needsTwoByteExtensions(extensions, mid: validMid, rid: validRid)
        var rng = SplitMix64(seed: seed ?? UInt64.random(in: .min ... .max))
        // Start low enough that the first thousand packets do not wrap: some receivers mishandle an early wrap.
        sequenceNumber = initialSequenceNumber ?? UInt16(truncatingIfNeeded: rng.next() % 0x7FFF)
        rtxSequenceNumber = UInt16(truncatingIfNeeded: rng.next() % 0x7FFF)
        timestampOffset = initialTimestamp ?? UInt32(truncatingIfNeeded: rng.next())
        pictureID = UInt16(truncatingIfNeeded: rng.next()) & 0x7FFF
        links = RTPSenderLinks(
            captureTime: AbsCaptureTimeStamper(enabled: extensions.absCaptureTime != nil),
            retransmissions: RetransmissionResponder(capacity: historySize, slotBytes: Self.packetCapacity),
            reports: SenderReports(
                ssrc: ssrc, clockRate: codec.clockRate, cname: cname, initialTimestamp: timestampOffset,
                random: rng),
            keyframes: KeyframeRequestFilter())

        scratchOwner = scratch
        self.scratch = scratch.bytes
    }

    /// Whether the extension block must use the two-byte header (RFC 8285 §4.3): an id above 14 or
    /// an identifier longer than 16 bytes.
    private static func needsTwoByteExtensions(_ extensions: RTPSendExtensions, mid: String?, rid: String?) -> Bool {
        if (mid?.utf8.count ?? 0) > 16 || (rid?.utf8.count ?? 0) > 16 { return true }
        for id in [
            extensions.mid, extensions.rid, extensions.repairedRID, extensions.absSendTime,
            extensions.transportWideCC, extensions.audioLevel, extensions.absCaptureTime,
            extensions.dependencyDescriptor,
        ] {
            if let id, id > 14 { return true }
        }
        return false
    }

    /// Takes the header-extension ids a renegotiation settled for this sender's m-section; the next
    /// packet carries exactly those. Loop thread only (not on the per-packet path).
    public func updateExtensions(_ extensions: RTPSendExtensions) {
        assertInLoop()
        guard extensions != self.extensions else { return }
        self.extensions = extensions
        twoByteExtensions = Self.needsTwoByteExtensions(extensions, mid: midValue, rid: rid)
        links.captureTime.enabled = extensions.absCaptureTime != nil
    }

    /// The sequence number the next new packet will carry.
    public var nextSequenceNumber: UInt16 { sequenceNumber }

    /// The RTP timestamp on the wire for a frame's media timestamp.
    public func rtpTimestamp(for frameTimestamp: UInt32) -> UInt32 { frameTimestamp &+ timestampOffset }

    // MARK: - Sending

    /// Packetizes `frame` and emits each packet (plaintext RTP) through `emit(buffer, length)`.
    ///
    /// VP8 frames are split into nearly equal packets with a 4-byte payload descriptor carrying a
    /// 15-bit picture ID, VP9 frames likewise in the non-flexible mode of RFC 9628; H.264 access
    /// units into single NAL unit and FU-A packets; AV1 temporal units into OBU aggregates; the
    /// marker bit is set on a frame's last packet. An Opus frame is one packet.
    /// A frame of another codec than the negotiated one is not sent (counted in `framesFailed`):
    /// its bytes would be garbage to the receiver.
    public func send(_ frame: EncodedFrame, now: UInt64, emit: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        assertInLoop()
        guard !frame.data.isEmpty, frame.codec == codec else {
            counters.framesFailed += 1
            return
        }
        let timestamp = frame.timestamp &+ timestampOffset
        // One capture time per frame: every packet of it was "captured" together.
        if links.captureTime.enabled { links.captureTime.beginFrame(captureTime: wallClock(now).value) }
        defer { links.captureTime.endFrame() }
        frame.data.withUnsafeBytes { data in
            switch codec {
            case .opus:
                sendPayload(data, marker: false, timestamp: timestamp, now: now, emit: emit)
            case .vp8:
                // Equal-sized packets spread the loss risk and keep packets below the MTU.
                let split = VP8PayloadFormat.Split(
                    frameLength: data.count, maxPayloadSize: maxPayloadSize, descriptorLength: 4)
                for k in 0..<split.count {
                    sendPacket(marker: k == split.count - 1, timestamp: timestamp, now: now, emit: emit) {
                        out throws(VP8Error) in
                        try VP8PayloadFormat.writePacket(k, of: split, frame: data, pictureID: pictureID, into: out)
                    }
                }
                pictureID = VP8Packetizer.nextPictureID(pictureID)
            case .h264:
                // Single NAL units, FU-A for the larger ones (packetization mode 1).
                H264PayloadFormat.packetize(accessUnit: data, maxPayloadSize: maxPayloadSize, scratch: &h264Scratch) {
                    payload, isLast in
                    sendPayload(payload, marker: isLast, timestamp: timestamp, now: now, emit: emit)
                }
            case .vp9:
                // Non-flexible mode (RFC 9628), split like VP8; a key frame's first packet has room
                // for the scalability structure.
                let split = VP8PayloadFormat.Split(
                    frameLength: data.count, maxPayloadSize: maxPayloadSize,
                    descriptorLength: VP9PayloadFormat.descriptorLength(isKeyframe: frame.isKeyframe))
                let isKeyframe = frame.isKeyframe
                for k in 0..<split.count {
                    sendPacket(marker: k == split.count - 1, timestamp: timestamp, now: now, emit: emit) {
                        out throws(VP8Error) in
                        let n = VP9PayloadFormat.writePacket(
                            k, of: split, frame: data, pictureID: pictureID, isKeyframe: isKeyframe, into: out)
                        guard n > 0 else { throw .bufferTooSmall }
                        return n
                    }
                }
                pictureID = VP8Packetizer.nextPictureID(pictureID)
            case .av1:
                // OBUs aggregated and fragmented (the AOM payload format), N on a key frame.
                av1Packetizer.packetize(
                    temporalUnit: data, isKeyframe: frame.isKeyframe, maxPayloadSize: maxPayloadSize
                ) { payload, isLast in
                    sendPayload(payload, marker: isLast, timestamp: timestamp, now: now, emit: emit)
                }
            }
        }
        counters.framesSent += 1
    }

    /// Sends one payload forwarded from another stream (an SFU consumer): the caller chose the
    /// sequence number and timestamp (continuous across source switches); this sender writes its own
    /// SSRC, payload type and header extensions, applies the codec munger's `rewrite`, keeps the
    /// packet in its history so it answers NACKs for it, and counts it for sender reports.
    ///
    /// A repeated sequence number (an upstream retransmission filling a hole) replaces the stored copy.
    ///
    /// - Returns: false when the payload does not fit in a packet.
    @discardableResult
    public func sendForwarded(
        payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, sequenceNumber: UInt16,
        rewrite: RTPPayloadRewrite = .none, dependencyDescriptor: UnsafeRawBufferPointer? = nil, now: UInt64,
        emit: (UnsafeMutableRawBufferPointer, Int) -> Void
    ) -> Bool {
        assertInLoop()
        let buffer = scratch
        // Keep our own counter ahead so SRs and any later own packets continue the stream.
        if Int16(bitPattern: sequenceNumber &- self.sequenceNumber) >= 0 { self.sequenceNumber = sequenceNumber &+ 1 }
        writeHeader(
            marker: marker, payloadType: payloadType, sequenceNumber: sequenceNumber, timestamp: timestamp, ssrc: ssrc)
        let payloadOffset = writeExtensions(
            buffer, now: now, kind: .forwarded, dependencyDescriptor: dependencyDescriptor)
        guard place(payload, rewrite: rewrite, in: buffer, at: payloadOffset) else {
            counters.framesFailed += 1
            return false
        }
        let length = payloadOffset + payload.count
        sent(seq: sequenceNumber, timestamp: timestamp, length: length, payloadOffset: payloadOffset, now: now)
        if marker || codec == .opus { counters.framesSent += 1 }
        emit(buffer, length)
        return true
    }

    /// Resends one packet whose payload is kept by the caller (an SFU answering a NACK from its shared
    /// per-producer buffer instead of this sender's history): as RTX when negotiated (RFC 4588: RTX
    /// SSRC and payload type, own sequence space, the original sequence number first in the payload),
    /// else as the original packet again. Counted as a retransmission, never as a new packet.
    ///
    /// - Returns: false when the payload does not fit in a packet.
    @discardableResult
    public func sendRetransmission(
        payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, sequenceNumber: UInt16,
        rewrite: RTPPayloadRewrite = .none, dependencyDescriptor: UnsafeRawBufferPointer? = nil, now: UInt64,
        emit: (UnsafeMutableRawBufferPointer, Int) -> Void
    ) -> Bool {
        assertInLoop()
        let buffer = scratch
        let payloadOffset: Int
        if let rtx {
            writeHeader(
                marker: marker, payloadType: rtx.payloadType, sequenceNumber: rtxSequenceNumber, timestamp: timestamp,
                ssrc: rtx.ssrc)
            let o = writeExtensions(
                buffer, now: now, kind: .retransmission, repaired: true, dependencyDescriptor: dependencyDescriptor)
            guard o + 2 <= Self.packetCapacity else { return false }
            buffer.put16(sequenceNumber, at: o)
            payloadOffset = o + 2
        } else {
            writeHeader(
                marker: marker, payloadType: payloadType, sequenceNumber: sequenceNumber, timestamp: timestamp,
                ssrc: ssrc)
            payloadOffset = writeExtensions(
                buffer, now: now, kind: .retransmission, dependencyDescriptor: dependencyDescriptor)
        }
        guard place(payload, rewrite: rewrite, in: buffer, at: payloadOffset) else { return false }
        if rtx != nil { rtxSequenceNumber &+= 1 }
        let length = payloadOffset + payload.count
        counters.retransmissions += 1
        counters.retransmittedBytes += UInt64(length)
        emit(buffer, length)
        return true
    }

    /// Copies a forwarded `payload` behind the header at `payloadOffset` and applies the munger's
    /// `rewrite` to the copy; false when it does not fit before the SRTP trailer's reserve.
    @inline(__always)
    private func place(
        _ payload: UnsafeRawBufferPointer, rewrite: RTPPayloadRewrite, in buffer: UnsafeMutableRawBufferPointer,
        at payloadOffset: Int
    ) -> Bool {
        guard payloadOffset + payload.count <= Self.packetCapacity - Self.trailerReserve, let base = buffer.baseAddress
        else { return false }
        if let src = payload.baseAddress, payload.count > 0 {
            (base + payloadOffset).copyMemory(from: src, byteCount: payload.count)
        }
        if !rewrite.isEmpty {
            rewrite.apply(
                to: UnsafeMutableRawBufferPointer(rebasing: buffer[payloadOffset..<(payloadOffset + payload.count)]))
        }
        return true
    }

    /// Counts one NACK message that the caller answers itself (see ``sendRetransmission(payload:marker:timestamp:sequenceNumber:rewrite:dependencyDescriptor:now:emit:)``).
    public func noteNACKReceived() { counters.nacksReceived += 1 }

    /// Writes the extension block for a packet at offset 12 and returns the payload offset. The links
    /// choose their values first (`prepare`); `repaired` writes repaired-rid instead of rid.
    private func writeExtensions(
        _ buffer: UnsafeMutableRawBufferPointer, now: UInt64, kind: RTPOutgoingKind, repaired: Bool = false,
        dependencyDescriptor: UnsafeRawBufferPointer? = nil
    ) -> Int {
        var chosen = RTPOutgoingExtensions(kind: kind)
        links.prepare(&chosen, now: now)
        let captureTime = chosen.captureTime
        let ridID = repaired ? extensions.repairedRID : extensions.rid
        let audioLevelID = codec == .opus ? extensions.audioLevel : nil
        let captureTimeID = captureTime == nil ? nil : extensions.absCaptureTime
        let descriptor = dependencyDescriptor.flatMap { $0.isEmpty || $0.count > 255 ? nil : $0 }
        let descriptorID = descriptor == nil ? nil : extensions.dependencyDescriptor
        guard
            (extensions.mid != nil && midValue != nil) || (ridID != nil && rid != nil) || extensions.absSendTime != nil
                || extensions.transportWideCC != nil || audioLevelID != nil || captureTimeID != nil
                || descriptorID != nil
        else { return 12 }
        // The buffer is far larger than any block we write (at most 2 × 255-byte ids and 3 small
        // elements), so these writes cannot fail; on failure the packet goes out without extensions.
        do throws(RTPError) {
            // A key frame's dependency descriptor (its template structure) is longer than the
            // one-byte form's 16 bytes: that packet takes the two-byte form (extmap-allow-mixed).
            let twoByte = twoByteExtensions || (descriptorID != nil && descriptor!.count > 16)
            var w = try RTPExtensionBlockWriter(buffer: buffer, at: 12, twoByte: twoByte)
            if let id = extensions.mid, let midValue { try w.appendIdentifier(id: id, midValue) }
            if let id = ridID, let rid { try w.appendIdentifier(id: id, rid) }
            if let id = extensions.absSendTime {
                // 6.18 fixed-point seconds, wrapping every 64 s.
                let seconds = now / RTPNanos.second
                let fraction = ((now % RTPNanos.second) << 18) / RTPNanos.second
                try w.appendAbsSendTime(id: id, UInt32(truncatingIfNeeded: (seconds << 18 | fraction) & 0xFF_FFFF))
            }
            if let id = extensions.transportWideCC {
                let seq: UInt16
                if let shared = transportSequence {
                    seq = shared.take(now: now)
                } else {
                    seq = privateTransportSequence
                    privateTransportSequence &+= 1
                }
                try w.appendTransportSequenceNumber(id: id, seq)
            }
            if let id = audioLevelID {
                try w.appendAudioLevel(id: id, RTPAudioLevel(voiceActivity: voiceActivity, level: audioLevel & 0x7F))
            }
            if let id = captureTimeID, let captureTime { try w.appendAbsCaptureTime(id: id, captureTime) }
            if let id = descriptorID, let descriptor { try w.appendBytes(id: id, descriptor) }
            return try w.finish()
        } catch {
            buffer[0] &= ~0x10
            return 12
        }
    }

    /// Builds one packet of an own frame: header and extensions here, the payload written by the
    /// codec's packetizer straight into the packet buffer.
    /// Sends a payload that is ready as it is (an Opus frame, an H.264 or AV1 packetizer's payload).
    private func sendPayload(
        _ payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, now: UInt64,
        emit: (UnsafeMutableRawBufferPointer, Int) -> Void
    ) {
        sendPacket(marker: marker, timestamp: timestamp, now: now, emit: emit) { out throws(VP8Error) in
            guard payload.count <= out.count else { throw .bufferTooSmall }
            if let src = payload.baseAddress, let dst = out.baseAddress {
                dst.copyMemory(from: src, byteCount: payload.count)
            }
            return payload.count
        }
    }

    /// Writes the fixed header into `scratch`, which is far larger than a header, so the write cannot fail.
    @inline(__always)
    private func writeHeader(marker: Bool, payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32)
    {
        _ = try? RTPHeaderWriter.writeFixedHeader(
            into: scratch, marker: marker, payloadType: payloadType, sequenceNumber: sequenceNumber,
            timestamp: timestamp, ssrc: ssrc)
    }

    private func sendPacket(
        marker: Bool, timestamp: UInt32, now: UInt64, emit: (UnsafeMutableRawBufferPointer, Int) -> Void,
        writePayload: (UnsafeMutableRawBufferPointer) throws(VP8Error) -> Int
    ) {
        let buffer = scratch
        let seq = sequenceNumber
        writeHeader(marker: marker, payloadType: payloadType, sequenceNumber: seq, timestamp: timestamp, ssrc: ssrc)
        let payloadOffset = writeExtensions(buffer, now: now, kind: .ownFrame)
        let room = UnsafeMutableRawBufferPointer(
            rebasing: buffer[payloadOffset..<(Self.packetCapacity - Self.trailerReserve)])
        let payloadLength: Int
        do throws(VP8Error) { payloadLength = try writePayload(room) } catch {
            counters.framesFailed += 1
            return
        }
        sequenceNumber &+= 1
        let length = payloadOffset + payloadLength
        sent(seq: seq, timestamp: timestamp, length: length, payloadOffset: payloadOffset, now: now)
        emit(buffer, length)
    }

    /// A new packet is built in `scratch`: the links keep and count it.
    private func sent(seq: UInt16, timestamp: UInt32, length: Int, payloadOffset: Int, now: UInt64) {
        counters.bytesSent += UInt64(length)
        links.sent(
            RTPSentPacket(
                packet: UnsafeRawBufferPointer(rebasing: scratch[0..<length]), sequenceNumber: seq,
                timestamp: timestamp,
                payloadOffset: payloadOffset),
            now: now)
    }

    // MARK: - Feedback

    /// Minimum spacing between two resends of the same packet: one RTT, or 50 ms before one is known.
    private var resendInterval: UInt64 {
        let rtt = links.reports.roundTripTime
        return rtt > 0 ? max(rtt, 5 * RTPNanos.millisecond) : 50 * RTPNanos.millisecond
    }

    /// Counts one NACK message and resends the requested packets that are still in the history.
    ///
    /// With RTX negotiated, each resend is an RTX packet (RFC 4588: RTX SSRC and payload type, its own
    /// sequence space, the original sequence number in the first two payload bytes, and the
    /// repaired-rid extension); otherwise the original packet is sent again. A packet is resent at most
    /// once per RTT (50 ms before the RTT is known).
    public func handleNACK(
        sequenceNumbers: some Sequence<UInt16>, now: UInt64, emit: (UnsafeMutableRawBufferPointer, Int) -> Void
    ) {
        assertInLoop()
        counters.nacksReceived += 1
        for seq in sequenceNumbers {
            resendFromHistory(seq, now: now, emit: emit)
        }
    }

    /// Resends one NACKed packet from the history (the retransmission responder, see
    /// ``handleNACK(sequenceNumbers:now:emit:)``).
    func resendFromHistory(_ seq: UInt16, now: UInt64, emit: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        // The first NACK is answered at once; repeats wait an RTT so a resend in flight is not doubled.
        let stored: UnsafeRawBufferPointer
        let payloadOffset: Int
        switch links.retransmissions.buffer.resend(seq, now: now, minimumInterval: resendInterval) {
        case .missing:
            counters.nackMisses += 1
            return
        case .tooSoon:
            return
        case .resend(let packet, let offset):
            stored = packet
            payloadOffset = offset
        }
        guard let out = scratch.baseAddress else { return }
        let length = stored.count
        let outLength: Int
        if let rtx {
            let payloadLength = length - payloadOffset
            scratch[0] = 0x80
            scratch[1] = (stored[1] & 0x80) | (rtx.payloadType & 0x7F)
            scratch.put16(rtxSequenceNumber, at: 2)
            rtxSequenceNumber &+= 1
            for i in 4..<8 { scratch[i] = stored[i] }
            scratch.put32(rtx.ssrc, at: 8)
            let o = writeExtensions(scratch, now: now, kind: .retransmission, repaired: true)
            guard o + 2 + payloadLength <= Self.packetCapacity - Self.trailerReserve, let src = stored.baseAddress
            else {
                return
            }
            scratch.put16(seq, at: o)
            (out + o + 2).copyMemory(from: src + payloadOffset, byteCount: payloadLength)
            outLength = o + 2 + payloadLength
        } else {
            guard let src = stored.baseAddress else { return }
            out.copyMemory(from: src, byteCount: length)
            outLength = length
        }
        counters.retransmissions += 1
        counters.retransmittedBytes += UInt64(outLength)
        emit(scratch, outLength)
    }

    /// Sends one padding-only packet on the RTX stream (libwebrtc's bandwidth probe): a header with
    /// the transport-wide number, `bytes` of RTP padding (1…255) and nothing else, so a receiver
    /// drops it (an RTX packet without payload) while its transport-cc feedback counts it. Returns
    /// the packet's length, or 0 when this sender has no RTX stream.
    @discardableResult
    public func sendPadding(bytes: Int, now: UInt64, emit: (UnsafeMutableRawBufferPointer, Int) -> Void) -> Int {
        assertInLoop()
        guard let rtx, let out = scratch.baseAddress else { return 0 }
        let padding = min(max(bytes, 1), 255)
        scratch[0] = 0xA0  // version 2, padding
        scratch[1] = rtx.payloadType & 0x7F
        scratch.put16(rtxSequenceNumber, at: 2)
        rtxSequenceNumber &+= 1
        scratch.put32(timestampOffset, at: 4)
        scratch.put32(rtx.ssrc, at: 8)
        let o = writeExtensions(scratch, now: now, kind: .retransmission, repaired: true)
        guard o + padding <= Self.packetCapacity - Self.trailerReserve else { return 0 }
        (out + o).initializeMemory(as: UInt8.self, repeating: 0, count: padding - 1)
        scratch[o + padding - 1] = UInt8(padding)
        counters.paddingPacketsSent &+= 1
        counters.paddingBytesSent &+= UInt64(o + padding)
        emit(scratch, o + padding)
        return o + padding
    }

    /// Handles a Picture Loss Indication for this sender.
    public func handlePLI() {
        assertInLoop()
        links.handleRTCP(.pictureLoss, now: 0)
        if links.keyframes.takeRequest() { onKeyframeRequest?() }
    }

    /// Handles a Full Intra Request entry for this sender; repeats of the same sequence number are ignored
    /// (RFC 5104 §4.3.1.1).
    ///
    /// - Returns: whether it was a new request (and ``onKeyframeRequest`` ran).
    @discardableResult
    public func handleFIR(sequenceNumber: UInt8) -> Bool {
        assertInLoop()
        links.handleRTCP(.fullIntraRequest(sequenceNumber: sequenceNumber), now: 0)
        guard links.keyframes.takeRequest() else { return false }
        onKeyframeRequest?()
        return true
    }

    /// Takes a parsed report block about this sender (from an SR or RR) and updates the round-trip time.
    public func handleReceiverReport(_ block: RTCPReportBlock, now: UInt64) {
        links.handleRTCP(.reportBlock(block), now: now)
    }

    /// Takes the LSR/DLSR of a report block about this sender and updates the round-trip time.
    public func handleReportBlock(lastSR: UInt32, delaySinceLastSR: UInt32, now: UInt64) {
        links.handleRTCP(.reportTiming(lastSR: lastSR, delaySinceLastSR: delaySinceLastSR), now: now)
    }

    /// Handles every feedback in a compound RTCP packet that concerns this sender: report blocks (RTT),
    /// generic NACK (resend), PLI and FIR (key-frame request), through the same ``RTCPRouter`` a
    /// ``PeerConnection`` uses. Walks the packet without allocating.
    ///
    /// - Throws: the parser's error when the compound packet is malformed; feedback before the
    ///   malformed part may already have been handled.
    public func handleRTCP(
        _ compound: UnsafeRawBufferPointer, now: UInt64, emit: (UnsafeMutableRawBufferPointer, Int) -> Void
    ) throws(RTCPError) {
        assertInLoop()
        try RTCPRouter.route(
            compound, now: now, sender: { $0 == ssrc ? self : nil }, receiver: { _ in nil }, emit: emit)
    }

    // MARK: - Reports

    /// Writes a sender report (with the RTP time that corresponds to `wallClock`, extrapolated from the
    /// last frame sent) followed by an SDES CNAME into `buffer` at `offset`.
    ///
    /// - Returns: the offset just past the written bytes, or `offset` when the buffer is too small.
    public func makeSenderReport(
        now: UInt64, wallClock: NTPTime, into buffer: UnsafeMutableRawBufferPointer, at offset: Int
    ) -> Int {
        links.reports.reference = reportSource?.senderReportReference()
        return links.reports.write(now: now, wallClock: wallClock, into: buffer, at: offset)
    }

    /// When ``tick(now:emitRTCP:)`` next has RTCP to send (the next sender report); nil before the
    /// first packet, after which one is due at once.
    var nextTimer: UInt64? { links.reports.nextTimer }

    /// Emits the links' RTCP when any has some due (a sender report about every ``reportInterval``),
    /// with the time from ``wallClock``.
    public func tick(now: UInt64, emitRTCP: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        assertInLoop()
        // Asked before reading the wall clock: this runs for every sender on every loop tick.
        guard links.tick(now: now) else { return }
        writeDueRTCP(RTPSendClock(now: now, wallClock: wallClock(now)), emitRTCP: emitRTCP)
    }

    /// Emits the links' RTCP when any has some due (a sender report about every ``reportInterval``,
    /// randomized ±50 %, and soon after the first packet).
    public func tick(now: UInt64, wallClock: NTPTime, emitRTCP: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        assertInLoop()
        guard links.tick(now: now) else { return }
        writeDueRTCP(RTPSendClock(now: now, wallClock: wallClock), emitRTCP: emitRTCP)
    }

    private func writeDueRTCP(_ clock: RTPSendClock, emitRTCP: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        var out = RTCPOutput(buffer: scratch, end: 0, localSSRC: ssrc, mediaSSRC: ssrc)
        // Only the report is timed: this runs when it is due (about once a second).
        links.reports.reference = reportSource?.senderReportReference()
        do throws(RTCPError) { try links.writeRTCP(&out, clock) } catch {
            // Only a too-small buffer can fail; send what was written.
        }
        guard out.end > 0 else { return }
        emitRTCP(scratch, out.end)
    }
}

/// Current `CLOCK_REALTIME` in nanoseconds.
func realtimeNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// The bytes one packet is built in (``RTPSender/packetCapacity``), shared by the senders of one
/// transport: a sender builds a packet and its `emit` sends it before any other sender builds the
/// next, all on the loop thread.
final class RTPPacketScratch {
    let bytes: UnsafeMutableRawBufferPointer

    init() {
        bytes = .allocate(byteCount: RTPSender.packetCapacity, alignment: 16)
        bytes.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit { bytes.deallocate() }
}
