import RTC
import RTCWire

/// Where a published track comes from, as the room layer labels it (the room's track kinds, whose
/// wire names live in RoomProtocol).
public enum SFUMediaSource: Sendable, Hashable, CaseIterable {
    case microphone
    case webcam
    case screen
}

/// A subscriber's preferred simulcast quality.
public enum SFULayerQuality: Int, Sendable, Hashable, Comparable, CaseIterable {
    case low = 0
    case medium = 1
    case high = 2

    public static func < (a: SFULayerQuality, b: SFULayerQuality) -> Bool { a.rawValue < b.rawValue }
}

/// A track received from a publisher.
public struct ProducerInfo: Sendable, Hashable {
    /// Unique within the SFU.
    public var id: String
    /// The publishing participant.
    public var participantID: String
    public var kind: MediaKind
    public var source: SFUMediaSource
    /// The m-line of the publish connection carrying it.
    public var mid: String
    /// Simulcast RIDs offered by the publisher (empty: one encoding).
    public var rids: [String]
    /// The codec the publisher negotiated (Opus; VP8 or H.264).
    public var codec: MediaCodec = .opus
}

/// A producer forwarded to one subscriber (a send transceiver on the subscriber's connection).
public struct ConsumerInfo: Sendable, Hashable {
    public var id: String
    public var producerID: String
    public var subscriberID: String
    public var publisherID: String
    public var kind: MediaKind
    public var source: SFUMediaSource
    /// The m-line of the subscribe connection that will carry it.
    public var mid: String
    /// Whether the subscribe connection must be renegotiated (always true when adding or removing).
    public var renegotiationNeeded: Bool

    /// A consumer's description (an edge's consumer as its origin records it).
    public init(
        id: String, producerID: String, subscriberID: String, publisherID: String, kind: MediaKind,
        source: SFUMediaSource, mid: String, renegotiationNeeded: Bool
    ) {
        self.id = id
        self.producerID = producerID
        self.subscriberID = subscriberID
        self.publisherID = publisherID
        self.kind = kind
        self.source = source
        self.mid = mid
        self.renegotiationNeeded = renegotiationNeeded
    }
}

/// One simulcast layer of a producer as the SFU has seen it.
public struct SFULayerStats: Sendable, Hashable {
    public var rid: String?
    /// Frame size from the last key frame (0 until one arrived).
    public var width: Int
    public var height: Int
    public var packets: UInt64
    public var bytes: UInt64
    public var keyframes: UInt64
    /// The rate measured for the stream allocator, bits per second (0: nothing over the last interval).
    public var bitrate: Int = 0
}

/// Counters of one producer.
public struct SFUProducerStats: Sendable, Hashable {
    public var id: String
    public var participantID: String
    public var kind: MediaKind
    public var packetsReceived: UInt64
    public var bytesReceived: UInt64
    /// Upstream retransmissions (RTX) received.
    public var repairsReceived: UInt64
    /// NACK messages the SFU sent to the publisher for this track.
    public var nacksSent: UInt64
    /// Key-frame requests (PLI) the SFU sent to the publisher for this track.
    public var plisSent: UInt64
    /// Last `ssrc-audio-level` value (-dBov, 127 = silence) for audio; nil before any or for video.
    public var audioLevel: UInt8?
    public var voiceActivity: Bool
    public var layers: [SFULayerStats]
    public var consumers: Int
}

/// Counters of one consumer.
public struct SFUConsumerStats: Sendable, Hashable {
    public var id: String
    public var producerID: String
    public var subscriberID: String
    public var packetsSent: UInt64
    public var bytesSent: UInt64
    /// NACK messages received from the subscriber, and packets resent for them.
    public var nacksReceived: UInt64
    public var retransmissions: UInt64
    /// Key-frame requests (PLI/FIR) received from the subscriber.
    public var plisReceived: UInt64
    /// Packets not forwarded (waiting for a key frame, other layers, before the subscriber connected).
    public var packetsDropped: UInt64
    public var layerSwitches: UInt64
    /// RID of the layer being forwarded (nil for a single-encoding track or before the first key frame).
    public var currentRID: String?
    public var targetRID: String?
    /// The stream allocator paused this video consumer: the subscriber's estimate carries none of its layers.
    public var paused = false
    /// The highest layer the allocator allows (a RID; nil without simulcast or without an estimate).
    public var allocatedRID: String?
    /// In a scalable stream (VP9 SVC): the spatial and temporal layers forwarded (nil before the
    /// first key picture, or while paused) and those the subscriber's preference and the allocator
    /// aim for. All nil for simulcast and single-layer tracks.
    public var currentSpatialLayer: Int?
    public var currentTemporalLayer: Int?
    public var targetSpatialLayer: Int?
    public var targetTemporalLayer: Int?
}

/// What the stream allocator knows and decided for one subscribe connection.
public struct SFUTransportStats: Sendable, Hashable {
    public var participantID: String
    /// The connection's send-side bandwidth estimate, bits per second (nil: none).
    public var estimate: Int?
    /// Whether the allocator shares that estimate out now: once it fell below what was sent, until
    /// every consumer is back at the layer it asked for (docs/design/congestion.md, "the stream allocator").
    public var estimateBinds: Bool
    /// What the allocator's decisions cost, audio included, bits per second (measured layer rates).
    public var allocatedBitrate: Int
    /// Padding asked for by a probe under way, bits per second (0: none).
    public var probeBitrate: Int
    public var videoConsumers: Int
    public var pausedConsumers: Int
    public var raises: UInt64
    public var decreases: UInt64
    public var probes: UInt64
    public var failedProbes: UInt64
    /// Decreases decided on an overloaded path (``SFUStreamAllocator/overloaded``; in ``decreases`` too).
    public var overloadDecreases: UInt64
    /// Bytes sent as probe padding (RTX copies of packets already sent).
    public var probeBytes: UInt64
}

/// Global counters for `/metrics`.
public struct SFUCounters: Sendable, Hashable {
    public var packetsIn: UInt64 = 0
    public var bytesIn: UInt64 = 0
    /// Packets and bytes sent to consumers and over pipes.
    public var packetsOut: UInt64 = 0
    public var bytesOut: UInt64 = 0
    /// NACK messages from subscribers (answered by the consumers' histories).
    public var nacksReceived: UInt64 = 0
    /// NACK messages sent to publishers.
    public var nacksSent: UInt64 = 0
    /// Consumers whose m-line a subscriber refused (it does not take the producer's codec).
    public var consumersRefused: UInt64 = 0
    /// PLIs sent to publishers.
    public var plisSent: UInt64 = 0
    /// PLI/FIR received from subscribers.
    public var plisReceived: UInt64 = 0
    /// Packets received but not forwarded to some consumer.
    public var dropped: UInt64 = 0
    public var producers: Int = 0
    public var consumers: Int = 0
    /// Publish connections held (a guest back in the audience that asked to close its own has none).
    public var publishConnections: Int = 0
    /// Subscribe connections held.
    public var subscribeConnections: Int = 0
    /// Transport-cc feedback messages the connections held have sent to their senders.
    public var transportFeedbackSent: UInt64 = 0
    /// Stream allocator: video consumers paused now, raises and decreases of layers, probes started
    /// and failed, bytes sent as probe padding.
    public var pausedConsumers: Int = 0
    public var allocationRaises: UInt64 = 0
    public var allocationDecreases: UInt64 = 0
    public var probes: UInt64 = 0
    public var failedProbes: UInt64 = 0
    public var allocationOverloadDecreases: UInt64 = 0
    public var probeBytes: UInt64 = 0
    /// Transport-cc feedback messages and REMBs the connections held received about what they send.
    public var transportFeedbackReceived: UInt64 = 0
    public var rembReceived: UInt64 = 0
    /// REMBs the connections held sent (peers that negotiated only `goog-remb`).
    public var rembSent: UInt64 = 0
    /// Subscribe connections with a send-side bandwidth estimate, the sum of their targets (bits/s),
    /// and how many of them are decreasing.
    public var subscriberEstimates: Int = 0
    public var subscriberEstimateBitrate: UInt64 = 0
    public var subscriberEstimatesDecreasing: Int = 0
    /// Node-to-node pipes open (SFUPipe.swift), the media packets they sent (also in
    /// ``packetsOut``) and accepted, the packets resent for NACKs, the PLIs they received and the
    /// datagrams they dropped (wrong address, malformed, unknown SSRC, too large).
    public var pipes: Int = 0
    public var pipePacketsSent: UInt64 = 0
    public var pipePacketsReceived: UInt64 = 0
    public var pipeRetransmissions: UInt64 = 0
    public var pipePLIsReceived: UInt64 = 0
    public var pipeDatagramsDropped: UInt64 = 0
    public init() {}
}

/// A snapshot of every counter of an ``SFU``.
public struct SFUStats: Sendable {
    public var counters: SFUCounters
    public var producers: [SFUProducerStats]
    public var consumers: [SFUConsumerStats]
    /// One entry per subscribe connection.
    public var transports: [SFUTransportStats] = []
    /// One entry per node-to-node pipe (``SFU/openPipeOnLoop(id:port:)``).
    public var pipes: [SFUPipeStats] = []
}

/// Errors of the ``SFU`` control API.
public enum SFUError: Error, Sendable, Equatable, CustomStringConvertible {
    case unknownParticipant(String)
    case unknownProducer(String)
    case notConsuming(subscriber: String, producerID: String)
    /// The subscribe connection has no consumer yet, so there is nothing to offer.
    case nothingToOffer(String)
    case noPendingOffer(String)
    case negotiation(String)
    /// No pipe with this id (``SFU/openPipeOnLoop(id:port:)``).
    case unknownPipe(String)
    /// A piped producer's description is inconsistent (SSRCs missing, repeated or in use), or its
    /// id is already a producer of this SFU.
    case badPipedProducer(String)
    /// Every port of ``SFUConfiguration/portRange`` is taken.
    case noFreePort
    /// An ICE-restart offer tried to add m-lines.
    case restartAddsMLines
    case closed

    public var description: String {
        switch self {
        case .unknownParticipant(let p): return "unknown participant \(p)"
        case .unknownProducer(let p): return "unknown producer \(p)"
        case .notConsuming(let s, let p): return "\(s) does not consume \(p)"
        case .nothingToOffer(let p): return "no consumers for \(p) yet"
        case .noPendingOffer(let p): return "no subscribe offer outstanding for \(p)"
        case .negotiation(let s): return "negotiation failed: \(s)"
        case .unknownPipe(let p): return "unknown pipe \(p)"
        case .badPipedProducer(let p): return "cannot mirror piped producer \(p)"
        case .noFreePort: return "no free UDP port in the configured range"
        case .restartAddsMLines: return "an ICE restart offer must not add m-lines; publish new tracks with produce"
        case .closed: return "SFU closed"
        }
    }
}

/// Settings of an ``SFU``.
public struct SFUConfiguration: Sendable {
    /// Addresses the media sockets bind to (host candidates).
    public var mediaAddresses: [String]
    /// UDP ports for the connections' sockets, one port per connection (nil: ephemeral ports).
    /// A range of exactly one port makes every connection share that port (demultiplexed by ICE ufrag
    /// and validated source address).
    public var portRange: ClosedRange<UInt16>?
    /// Shortest interval between key-frame requests sent to a publisher, per simulcast layer.
    public var keyframeRequestInterval: UInt64
    /// Name of the event loop thread.
    public var loopName: String
    /// Remote SSRCs one connection creates receive state for (a publisher inventing more gets
    /// those packets dropped).
    public var maxSSRCsPerConnection = 32
    /// ICE-TCP passive candidates (RFC 6544) on the shared port's number (single-port mode only).
    public var iceTCP = false
    /// The stream allocator's timings and margins (each subscribe connection's estimate shared among
    /// its video consumers).
    public var allocator = SFUStreamAllocator.Configuration()
    /// The shared port measures how long datagrams wait in its receive queue and drops SRTP and
    /// SRTCP that waited longer than this, unread (nanoseconds; 0: never drops). See
    /// ``UDPSocket/measureReceiveQueue(shedMediaOlderThan:)``.
    public var staleMediaAfter: UInt64 = 1_000_000_000

    public init(
        mediaAddresses: [String] = ["127.0.0.1"], portRange: ClosedRange<UInt16>? = nil,
        keyframeRequestInterval: UInt64 = 300_000_000, loopName: String = "sfu"
    ) {
        self.mediaAddresses = mediaAddresses
        self.portRange = portRange
        self.keyframeRequestInterval = keyframeRequestInterval
        self.loopName = loopName
    }
}

func sfuRandomID(_ prefix: String) -> String {
    let chars = Array("abcdefghijklmnopqrstuvwxyz0123456789")
    var s = prefix
    for _ in 0..<12 { s.append(chars[Int.random(in: 0..<chars.count)]) }
    return s
}
