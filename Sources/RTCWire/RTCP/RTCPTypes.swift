/// Errors from RTCP parsing and writing.
public enum RTCPError: Error, Equatable, Sendable {
    /// Fewer bytes than an RTCP header or the packet's fixed part needs.
    case tooShort
    /// The version field is not 2.
    case badVersion(UInt8)
    /// The length field claims more bytes than the buffer holds.
    case lengthOverrun
    /// The padding count is zero or longer than the packet.
    case badPadding
    /// A report count, chunk count or item runs past the packet.
    case countOverrun
    /// Feedback control information that does not fit the format (NACK, FIR, REMB, transport-cc).
    case badFCI
    /// An SDES chunk or BYE reason is malformed.
    case badItem
    /// The output buffer is too small, or a value cannot be encoded (too many entries, text > 255 bytes).
    case bufferTooSmall
}

/// RTCP packet types (RFC 3550, RFC 4585).
public enum RTCPPacketType {
    public static let senderReport: UInt8 = 200
    public static let receiverReport: UInt8 = 201
    public static let sourceDescription: UInt8 = 202
    public static let bye: UInt8 = 203
    public static let app: UInt8 = 204
    /// Transport-layer feedback (NACK fmt 1, transport-cc fmt 15).
    public static let transportFeedback: UInt8 = 205
    /// Payload-specific feedback (PLI fmt 1, FIR fmt 4, REMB in AFB fmt 15).
    public static let payloadFeedback: UInt8 = 206
}

/// A reception report block (RFC 3550 §6.4.1).
public struct RTCPReportBlock: Sendable, Equatable {
    /// The source this block reports on.
    public var ssrc: UInt32
    /// Fraction of packets lost since the previous report, in 1/256.
    public var fractionLost: UInt8
    /// Cumulative packets lost: a 24-bit signed value (-8388608...8388607).
    public var cumulativeLost: Int32
    /// Extended highest sequence number received (cycles << 16 | seq).
    public var highestSequence: UInt32
    /// Interarrival jitter in RTP timestamp units.
    public var jitter: UInt32
    /// Middle 32 bits of the NTP timestamp of the last SR received from this source (0 if none).
    public var lastSR: UInt32
    /// Delay since that SR, in 1/65536 s.
    public var delaySinceLastSR: UInt32

    public init(
        ssrc: UInt32, fractionLost: UInt8, cumulativeLost: Int32, highestSequence: UInt32,
        jitter: UInt32,
        lastSR: UInt32, delaySinceLastSR: UInt32
    ) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = cumulativeLost
        self.highestSequence = highestSequence
        self.jitter = jitter
        self.lastSR = lastSR
        self.delaySinceLastSR = delaySinceLastSR
    }

    /// Wire size of one block.
    public static let size = 24
}

/// A sender report (RFC 3550 §6.4.1).
public struct RTCPSenderReport: Sendable, Equatable {
    public var ssrc: UInt32
    /// 64-bit NTP timestamp (32.32 seconds since 1900).
    public var ntpTimestamp: UInt64
    /// The same instant in the stream's RTP clock.
    public var rtpTimestamp: UInt32
    public var packetCount: UInt32
    public var octetCount: UInt32
    /// Up to 31 reception reports.
    public var reports: [RTCPReportBlock]

    public init(
        ssrc: UInt32, ntpTimestamp: UInt64, rtpTimestamp: UInt32, packetCount: UInt32,
        octetCount: UInt32,
        reports: [RTCPReportBlock] = []
    ) {
        self.ssrc = ssrc
        self.ntpTimestamp = ntpTimestamp
        self.rtpTimestamp = rtpTimestamp
        self.packetCount = packetCount
        self.octetCount = octetCount
        self.reports = reports
    }

    /// The middle 32 bits of the NTP timestamp, which receivers echo as LSR.
    public var compactNTP: UInt32 { UInt32(truncatingIfNeeded: ntpTimestamp >> 16) }
}

/// A receiver report (RFC 3550 §6.4.2).
public struct RTCPReceiverReport: Sendable, Equatable {
    public var ssrc: UInt32
    /// Up to 31 reception reports.
    public var reports: [RTCPReportBlock]

    public init(ssrc: UInt32, reports: [RTCPReportBlock] = []) {
        self.ssrc = ssrc
        self.reports = reports
    }
}

/// One SDES item (RFC 3550 §6.5): a type (1 = CNAME) and up to 255 bytes of UTF-8 text.
public struct SDESItem: Sendable, Equatable {
    public var type: UInt8
    public var text: String

    public init(type: UInt8, text: String) {
        self.type = type
        self.text = text
    }

    /// Item type of the canonical name.
    public static let cname: UInt8 = 1
}

/// One SDES chunk: a source and its items.
public struct SDESChunk: Sendable, Equatable {
    public var ssrc: UInt32
    public var items: [SDESItem]

    public init(ssrc: UInt32, items: [SDESItem]) {
        self.ssrc = ssrc
        self.items = items
    }
}

/// A generic NACK (RFC 4585 §6.2.1) with its lost sequence numbers expanded from the PID+BLP pairs.
public struct RTCPGenericNACK: Sendable, Equatable {
    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    /// Lost sequence numbers, in wire order (each PID followed by the BLP bits in ascending order).
    public var lostSequenceNumbers: [UInt16]

    public init(senderSSRC: UInt32, mediaSSRC: UInt32, lostSequenceNumbers: [UInt16]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.lostSequenceNumbers = lostSequenceNumbers
    }
}

/// One FIR entry (RFC 5104 §4.3.1.1): the source asked for a full intra frame and the command sequence number.
public struct RTCPFIREntry: Sendable, Equatable {
    public var ssrc: UInt32
    public var sequenceNumber: UInt8

    public init(ssrc: UInt32, sequenceNumber: UInt8) {
        self.ssrc = ssrc
        self.sequenceNumber = sequenceNumber
    }
}

/// Transport-wide congestion control feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01).
public struct RTCPTransportFeedback: Sendable, Equatable {
    /// The status of one transport-wide sequence number.
    public struct PacketStatus: Sendable, Equatable {
        public var sequenceNumber: UInt16
        public var received: Bool
        /// Arrival time minus the previous received packet's (or, for the first, the reference time),
        /// in microseconds; a multiple of 250. Zero when not received.
        public var deltaMicros: Int32

        public init(sequenceNumber: UInt16, received: Bool, deltaMicros: Int32 = 0) {
            self.sequenceNumber = sequenceNumber
            self.received = received
            self.deltaMicros = deltaMicros
        }
    }

    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    /// First sequence number described.
    public var baseSequenceNumber: UInt16
    /// Reference time in multiples of 64 ms, a 24-bit signed value.
    public var referenceTime: Int32
    /// Feedback packet counter, to detect lost feedback.
    public var feedbackPacketCount: UInt8
    /// One entry per sequence number from ``baseSequenceNumber``, in order.
    public var packets: [PacketStatus]

    public init(
        senderSSRC: UInt32, mediaSSRC: UInt32, baseSequenceNumber: UInt16, referenceTime: Int32,
        feedbackPacketCount: UInt8, packets: [PacketStatus]
    ) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.baseSequenceNumber = baseSequenceNumber
        self.referenceTime = referenceTime
        self.feedbackPacketCount = feedbackPacketCount
        self.packets = packets
    }

    /// The reference time in microseconds.
    public var referenceTimeMicros: Int64 { Int64(referenceTime) * 64_000 }
}

/// One RTCP packet of a compound packet.
public enum RTCPPacket: Sendable, Equatable {
    case senderReport(RTCPSenderReport)
    case receiverReport(RTCPReceiverReport)
    case sourceDescription([SDESChunk])
    /// BYE with up to 31 sources and an optional reason (≤ 255 UTF-8 bytes).
    case bye(ssrcs: [UInt32], reason: String?)
    case nack(RTCPGenericNACK)
    /// Picture loss indication (RFC 4585 §6.3.1).
    case pli(senderSSRC: UInt32, mediaSSRC: UInt32)
    /// Full intra request (RFC 5104 §4.3.1).
    case fir(senderSSRC: UInt32, entries: [RTCPFIREntry])
    /// Receiver estimated maximum bitrate (draft-alvestrand-rmcat-remb), in bits per second.
    case remb(senderSSRC: UInt32, bitrate: UInt64, ssrcs: [UInt32])
    case transportCC(RTCPTransportFeedback)
    /// Any other packet: its type, the 5-bit count/format field and the body after the 4-byte header
    /// (padding removed).
    case unknown(packetType: UInt8, count: UInt8, payload: [UInt8])
}

// MARK: - big-endian helpers (bounds are checked by callers)

extension UnsafeRawBufferPointer {
    @inline(__always) func rtcpU16(_ i: Int) -> UInt16 { UInt16(self[i]) << 8 | UInt16(self[i + 1]) }
    @inline(__always) func rtcpU24(_ i: Int) -> UInt32 {
        UInt32(self[i]) << 16 | UInt32(self[i + 1]) << 8 | UInt32(self[i + 2])
    }
    @inline(__always) func rtcpU32(_ i: Int) -> UInt32 {
        UInt32(self[i]) << 24 | UInt32(self[i + 1]) << 16 | UInt32(self[i + 2]) << 8
            | UInt32(self[i + 3])
    }
    @inline(__always) func rtcpU64(_ i: Int) -> UInt64 {
        UInt64(rtcpU32(i)) << 32 | UInt64(rtcpU32(i + 4))
    }
}

extension UnsafeMutableRawBufferPointer {
    /// Copies `bytes` to offset `i` on; returns the offset after them.
    @inline(__always) func rtcpPutBytes(_ bytes: some Sequence<UInt8>, _ i: Int) -> Int {
        var at = i
        for b in bytes {
            self[at] = b
            at += 1
        }
        return at
    }
    /// Zeroes from offset `i` up to `end` (RTCP pads to 32-bit words); returns the offset after the
    /// padding (`i` when it is already at or past `end`).
    @inline(__always) func rtcpPad(_ i: Int, to end: Int) -> Int {
        var at = i
        while at < end {
            self[at] = 0
            at += 1
        }
        return at
    }
}
