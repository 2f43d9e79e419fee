import RTCWire

@testable import RTC
@testable import SFU

/// The SFU's forwarding units without sockets: a producer fed synthetic packets on a synthetic clock,
/// its upstream and its consumers' down tracks replaced by recorders. Nothing here opens a socket
/// or runs a connection; the units are called on the test's thread (the SFU's loop stays idle).

/// Records what a producer asks of its publisher and serves the sender reports a test sets.
final class RecordingUpstream: SFUUpstream {
    /// The rid of each PLI sent, in order (nil: a single-encoding track).
    var keyframeRequests: [String?] = []
    /// Sender reports by media SSRC.
    var reports: [UInt32: SFULayerTimeline.SenderReport] = [:]
    var nacksSent: UInt64 = 0

    /// Whether the producer let its upstream go (``SFUUpstream/stopReceiving()``).
    var stopped = false

    func requestKeyframe(rid: String?) { keyframeRequests.append(rid) }
    func stopReceiving() { stopped = true }
    func senderReport(ssrc: UInt32) -> SFULayerTimeline.SenderReport? { reports[ssrc] }
}

/// Records every packet a consumer writes, as the subscriber would see its payload (rewrite applied).
final class RecordingDownTrack: SFUDownTrack {
    struct Sent: Equatable {
        var sequenceNumber: UInt16
        var timestamp: UInt32
        var marker: Bool
        /// The payload after the rewrite, as it would go out.
        var payload: [UInt8]
        var info: RTPPayloadInfo
        var audioLevel: RTPAudioLevel?
        /// The dependency descriptor element written with it (nil: none).
        var dependencyDescriptor: [UInt8]? = nil
        /// Which source packet this was (``SyntheticVP8Layer`` writes layer and sequence number last).
        var sourceLayer: UInt8 { payload[payload.count - 3] }
        var sourceSequenceNumber: UInt16 {
            UInt16(payload[payload.count - 2]) << 8 | UInt16(payload[payload.count - 1])
        }
    }

    var canSend = true
    var canPad = false
    /// Padding bytes asked for (``sendPadding(bytes:now:)``).
    var padding = 0
    var sent: [Sent] = []
    var retransmissions: [Sent] = []
    var senderStats: RTPSenderStats? { nil }
    weak var reportSource: (any RTPSenderReportSource)?

    func sendPadding(bytes: Int, now: UInt64) -> Int {
        guard canPad else { return 0 }
        padding += bytes
        return bytes
    }

    func sendForwarded(
        payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, sequenceNumber: UInt16,
        rewrite: RTPPayloadRewrite, audioLevel: RTPAudioLevel?, captureTime: UInt64?,
        dependencyDescriptor: UnsafeRawBufferPointer?, now: UInt64
    ) -> Bool {
        guard canSend else { return false }
        var packet = Self.record(payload, marker, timestamp, sequenceNumber, rewrite)
        packet.audioLevel = audioLevel
        packet.dependencyDescriptor = dependencyDescriptor.map(Array.init)
        sent.append(packet)
        return true
    }

    func sendRetransmission(
        payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32, sequenceNumber: UInt16,
        rewrite: RTPPayloadRewrite, dependencyDescriptor: UnsafeRawBufferPointer?, now: UInt64
    ) -> Bool {
        guard canSend else { return false }
        var packet = Self.record(payload, marker, timestamp, sequenceNumber, rewrite)
        packet.dependencyDescriptor = dependencyDescriptor.map(Array.init)
        retransmissions.append(packet)
        return true
    }

    private static func record(
        _ payload: UnsafeRawBufferPointer, _ marker: Bool, _ timestamp: UInt32, _ sequenceNumber: UInt16,
        _ rewrite: RTPPayloadRewrite
    ) -> Sent {
        var bytes = Array(payload)
        bytes.withUnsafeMutableBytes { rewrite.apply(to: $0) }
        let info = (try? bytes.withUnsafeBytes { try VP8PayloadFormat.inspect($0) }) ?? RTPPayloadInfo()
        return Sent(
            sequenceNumber: sequenceNumber, timestamp: timestamp, marker: marker, payload: bytes, info: info,
            audioLevel: nil)
    }
}

/// One simulcast layer of a synthetic VP8 publisher: one packet per frame, a 15-bit picture ID and
/// TL0PICIDX in the descriptor, the layer index and source sequence number in the last three bytes.
struct SyntheticVP8Layer {
    let index: UInt8
    let ssrc: UInt32
    let width: UInt16
    let height: UInt16
    /// Values of frame 0; frame `k` adds `k` (sequence number, picture ID, TL0PICIDX) or `3000 k`
    /// (timestamp, 30 fps at 90 kHz), all with wraparound.
    let firstSequenceNumber: UInt16
    let firstTimestamp: UInt32
    let firstPictureID: UInt16
    let firstTL0PicIdx: UInt8

    func sequenceNumber(_ k: Int) -> UInt16 { firstSequenceNumber &+ UInt16(k) }
    func timestamp(_ k: Int) -> UInt32 { firstTimestamp &+ UInt32(k) * 3000 }
    func pictureID(_ k: Int) -> UInt16 { (firstPictureID &+ UInt16(k)) & 0x7FFF }
    func tl0PicIdx(_ k: Int) -> UInt8 { firstTL0PicIdx &+ UInt8(truncatingIfNeeded: k) }

    /// The RTP packet of frame `k`.
    func packet(_ k: Int, keyframe: Bool) -> [UInt8] {
        let seq = sequenceNumber(k)
        let ts = timestamp(k)
        var bytes: [UInt8] = [0x80, 0x80 | 96, UInt8(seq >> 8), UInt8(seq & 0xFF)]
        bytes += withUnsafeBytes(of: ts.bigEndian, Array.init)
        bytes += withUnsafeBytes(of: ssrc.bigEndian, Array.init)
        let pid = pictureID(k)
        // Descriptor: X=1, S=1, PID 0; I and L; 15-bit picture ID; TL0PICIDX.
        bytes += [0x90, 0xC0, 0x80 | UInt8(pid >> 8), UInt8(pid & 0xFF), tl0PicIdx(k)]
        if keyframe {
            bytes += [0x00, 0x00, 0x00, 0x9D, 0x01, 0x2A]  // frame tag (P=0) and start code
            bytes += [UInt8(width & 0xFF), UInt8(width >> 8), UInt8(height & 0xFF), UInt8(height >> 8)]
        } else {
            bytes += [0x01, 0x00, 0x00]  // frame tag, P=1
        }
        bytes += [index, UInt8(seq >> 8), UInt8(seq & 0xFF)]
        return bytes
    }
}

extension SFUProducer {
    /// Hands the plaintext RTP packet `bytes` to the producer as the publisher's transport would:
    /// header parsed, codec header read once (``VP8PayloadFormat``), arrival on the synthetic clock.
    func receive(_ bytes: [UInt8], rid: String?, arrival: UInt64, repair: Bool = false) throws {
        try bytes.withUnsafeBytes { raw in
            let header = try RTPHeader.parse(raw)
            let payload = UnsafeRawBufferPointer(
                rebasing: raw[header.payloadOffset..<header.payloadOffset + header.payloadLength])
            let info = try codec.inspect(payload)
            receive(
                rid: rid,
                ReceivedRTPPacket(
                    packet: raw, header: header, mediaSSRC: header.ssrc, sequenceNumber: header.sequenceNumber,
                    payload: payload, info: info, isRepair: repair, arrival: arrival))
        }
    }
}

/// A producer of `rids` (video) on a recording upstream, with consumers on recording down tracks.
struct SFUUnitRig {
    let sfu: SFU
    let upstream = RecordingUpstream()
    let producer: SFUProducer

    init(rids: [String], sfu: SFU = SFU()) {
        self.sfu = sfu
        producer = SFUProducer(
            id: "p-1", participantID: "alice", kind: .video, source: .webcam, mid: "0", rids: rids,
            upstream: upstream, sfu: sfu)
    }

    /// An audio (Opus) producer whose publisher negotiated the audio-level extension as `audioLevelID`.
    init(audioLevelID: UInt8, sfu: SFU = SFU()) {
        self.sfu = sfu
        producer = SFUProducer(
            id: "p-1", participantID: "alice", kind: .audio, source: .microphone, mid: "1", rids: [],
            upstream: upstream, audioLevelExtensionID: audioLevelID, sfu: sfu)
    }

    /// A consumer of the producer at `quality`, writing to a new recording track.
    func consume(quality: SFULayerQuality) -> (SFUConsumer, RecordingDownTrack) {
        let track = RecordingDownTrack()
        let consumer = SFUConsumer(
            id: "c-\(producer.consumers.count)", subscriberID: "bob", producer: producer, track: track)
        consumer.quality = quality
        consumer.updateTarget()
        producer.consumers.append(consumer)
        return (consumer, track)
    }

    func close() async {
        for c in producer.consumers { c.closed = true }
        producer.consumers = []
        producer.closed = true
        await sfu.shutdown()
    }
}

/// One Opus packet with the audio-level extension (RFC 6464, one-byte form, id `extensionID`).
func syntheticOpusPacket(
    ssrc: UInt32, sequenceNumber: UInt16, timestamp: UInt32, extensionID: UInt8, level: UInt8, voice: Bool
) -> [UInt8] {
    var bytes: [UInt8] = [0x90, 111, UInt8(sequenceNumber >> 8), UInt8(sequenceNumber & 0xFF)]
    bytes += withUnsafeBytes(of: timestamp.bigEndian, Array.init)
    bytes += withUnsafeBytes(of: ssrc.bigEndian, Array.init)
    bytes += [0xBE, 0xDE, 0x00, 0x01, extensionID << 4, (voice ? 0x80 : 0) | level, 0x00, 0x00]
    bytes += [0xFC, 0xFF, 0xFE]  // an Opus TOC and two bytes
    return bytes
}
