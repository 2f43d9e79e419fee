import RTC
import RTCWire

/// One producer forwarded to one subscriber: a send transceiver on the subscriber's connection.
///
/// The subscriber sees one continuous stream: sequence numbers, timestamps and VP8 picture IDs are
/// offset per source layer, and the offsets change only where the forwarder switches layers, on a key
/// frame of the new layer. An upstream retransmission maps to the same outgoing sequence number, so it
/// fills the hole the subscriber saw. Packets go through the subscriber connection's own
/// ``RTPSender`` (its SSRC, negotiated extension ids, RTX, sender reports), which keeps no copy: a
/// video consumer answers NACKs from its producer's shared ``SFUPacketBuffer`` through its
/// ``SFUSequencer``.
///
/// Loop-thread confined.
final class SFUConsumer: @unchecked Sendable {
    let id: String
    let subscriberID: String
    unowned let producer: SFUProducer
    unowned let connection: PeerConnection
    let transceiver: RTPTransceiver

    var quality: SFULayerQuality = .high
    var viewport: (width: Int, height: Int)?
    /// Layer the subscriber should get, and layer being forwarded (-1: none yet).
    var targetLayer = 0
    var currentLayer = -1

    // Rewriting state.
    var sequenceOffset: UInt16 = 0
    var timestampOffset: UInt32 = 0
    var pictureIDOffset: UInt16 = 0
    /// First source sequence number forwarded from the current layer; older ones are not forwarded.
    var switchSequence: UInt16 = 0
    var guardingSwitch = false
    var lastSequence: UInt16 = 0
    var lastTimestamp: UInt32 = 0
    var lastPictureID: UInt16 = 0
    var lastForwardTime: UInt64 = 0
    var hasForwarded = false

    /// Outgoing sequence number → source packet, for NACKs (video only; Opus is never NACKed).
    var sequencer: SFUSequencer?

    var packetsDropped: UInt64 = 0
    var layerSwitches: UInt64 = 0
    var plisReceived: UInt64 = 0
    /// NACKed packets not resent: gone from the shared buffer, or resent less than an RTT ago.
    var nackMisses: UInt64 = 0
    var closed = false

    init(
        id: String, subscriberID: String, producer: SFUProducer, connection: PeerConnection, transceiver: RTPTransceiver
    ) {
        self.id = id
        self.subscriberID = subscriberID
        self.producer = producer
        self.connection = connection
        self.transceiver = transceiver
        if producer.kind == .video { sequencer = SFUSequencer() }
        updateTarget()
    }

    func updateTarget() {
        targetLayer = producer.layerIndex(quality: quality, viewport: viewport)
    }

    // MARK: Hot path

    func forward(layer: Int, _ packet: ReceivedRTPPacket, keyframeStart: Bool) {
        guard !closed else { return }
        let now = packet.arrival
        if producer.kind == .audio {
            forwardAudio(packet, now: now)
            return
        }
        if layer != currentLayer {
            guard layer == targetLayer, keyframeStart, connection.canSend(on: transceiver) else {
                drop()
                // Nothing forwarded yet, or a switch is pending: ask the target layer for a key frame, but
                // only once the subscriber can receive it: one sent earlier is dropped here and would hold
                // the request throttle (500 ms) against the one that counts.
                if layer == targetLayer || currentLayer < 0, connection.canSend(on: transceiver) {
                    producer.requestKeyframe(layer: targetLayer, now: now)
                }
                return
            }
            switchLayer(to: layer, packet, now: now)
        } else if guardingSwitch {
            // Packets from before the switch point (reordered or late repairs) would land on sequence
            // numbers the old layer used. The check only makes sense near the switch (16-bit wrap).
            let distance = Int16(bitPattern: packet.sequenceNumber &- switchSequence)
            if distance < 0 {
                drop()
                return
            }
            if distance > 1024 { guardingSwitch = false }
        }
        let sequence = packet.sequenceNumber &+ sequenceOffset
        let timestamp = packet.header.timestamp &+ timestampOffset
        var pictureID: UInt16?
        if let source = VP8Peek.pictureID(packet.payload) {
            let rewritten = (source.id &+ pictureIDOffset) & (source.long ? 0x7FFF : 0x7F)
            pictureID = rewritten
            if Int16(bitPattern: (rewritten &- lastPictureID) << 1) > 0 || !hasForwarded { lastPictureID = rewritten }
        }
        transceiver.primarySender?.forwardedCaptureTime = producer.captureTime
        let sent = connection.sendForwarded(
            on: transceiver, payload: packet.payload, marker: packet.header.marker, timestamp: timestamp,
            sequenceNumber: sequence, vp8PictureID: pictureID, now: now)
        if sent {
            sequencer?.record(
                outgoing: sequence, source: packet.sequenceNumber, layer: layer, timestamp: timestamp,
                marker: packet.header.marker, pictureID: pictureID)
        }
        noteSent(sent, sequence: sequence, timestamp: timestamp, size: packet.packet.count, now: now)
    }

    /// The subscriber NACKed `sequenceNumbers`: each one still in the producer's shared buffer is
    /// resent with the same rewriting it had (as RTX when negotiated).
    func handleNACK(_ sequenceNumbers: [UInt16], now: UInt64) {
        guard !closed, sequencer != nil else { return }
        let rtt = transceiver.primarySender?.stats.roundTripTime ?? 0
        let interval = rtt > 0 ? max(rtt, 5_000_000) : 50_000_000
        for seq in sequenceNumbers {
            guard let entry = sequencer?.resendable(outgoing: seq, now: now, minimumInterval: interval),
                let payload = producer.bufferedPayload(layer: Int(entry.layer), sequenceNumber: entry.source)
            else {
                nackMisses &+= 1
                continue
            }
            connection.sendRetransmission(
                on: transceiver, payload: payload, marker: entry.marker, timestamp: entry.timestamp,
                sequenceNumber: seq, vp8PictureID: entry.hasPictureID ? entry.pictureID : nil, now: now)
        }
    }

    private func forwardAudio(_ packet: ReceivedRTPPacket, now: UInt64) {
        let sequence = packet.sequenceNumber &+ sequenceOffset
        let timestamp = packet.header.timestamp &+ timestampOffset
        let level = producer.audioLevel.map { RTPAudioLevel(voiceActivity: producer.voiceActivity, level: $0) }
        transceiver.primarySender?.forwardedCaptureTime = producer.captureTime
        let sent = connection.sendForwarded(
            on: transceiver, payload: packet.payload, marker: packet.header.marker, timestamp: timestamp,
            sequenceNumber: sequence, audioLevel: level, now: now)
        noteSent(sent, sequence: sequence, timestamp: timestamp, size: packet.packet.count, now: now)
    }

    @inline(__always)
    private func noteSent(_ sent: Bool, sequence: UInt16, timestamp: UInt32, size: Int, now: UInt64) {
        guard sent else {
            drop()
            return
        }
        if !hasForwarded || Int16(bitPattern: sequence &- lastSequence) > 0 {
            lastSequence = sequence
            lastTimestamp = timestamp
            lastForwardTime = now
        }
        hasForwarded = true
        producer.sfu.counters.packetsOut &+= 1
        producer.sfu.counters.bytesOut &+= UInt64(size)
    }

    @inline(__always)
    private func drop() {
        packetsDropped &+= 1
        producer.sfu.counters.dropped &+= 1
    }

    /// Starts forwarding `layer` at this key-frame packet: the new offsets continue the outgoing
    /// sequence numbers, timestamps (advanced by the wall time since the last packet) and picture IDs.
    private func switchLayer(to layer: Int, _ packet: ReceivedRTPPacket, now: UInt64) {
        if hasForwarded {
            sequenceOffset = lastSequence &+ 1 &- packet.sequenceNumber
            let elapsed = now > lastForwardTime ? now - lastForwardTime : 0
            // At least one frame interval (30 fps at 90 kHz): the new layer's key frame may arrive right
            // after the old layer's frame of the same instant, and must not share its timestamp.
            let ticks = UInt32(truncatingIfNeeded: max(3000, min(elapsed, 10_000_000_000) * 9 / 100_000))
            timestampOffset = lastTimestamp &+ ticks &- packet.header.timestamp
            if let source = VP8Peek.pictureID(packet.payload) {
                pictureIDOffset = lastPictureID &+ 1 &- source.id
            }
            layerSwitches &+= 1
        }
        let previous = currentLayer
        currentLayer = layer
        if previous != layer { producer.sfu.layerSwitched(self) }
        switchSequence = packet.sequenceNumber
        guardingSwitch = true
    }

    /// The subscriber asked for a key frame (PLI/FIR).
    func keyframeRequested(now: UInt64) {
        plisReceived &+= 1
        producer.sfu.counters.plisReceived &+= 1
        producer.requestKeyframe(layer: currentLayer >= 0 ? currentLayer : targetLayer, now: now)
    }

    func stats() -> SFUConsumerStats {
        let s = transceiver.senderStats
        let layers = producer.layers
        return SFUConsumerStats(
            id: id, producerID: producer.id, subscriberID: subscriberID, packetsSent: s?.packetsSent ?? 0,
            bytesSent: s?.bytesSent ?? 0, nacksReceived: s?.nacksReceived ?? 0,
            retransmissions: s?.retransmissions ?? 0,
            plisReceived: plisReceived, packetsDropped: packetsDropped, layerSwitches: layerSwitches,
            currentRID: layers.indices.contains(currentLayer) ? layers[currentLayer].rid : nil,
            targetRID: layers.indices.contains(targetLayer) ? layers[targetLayer].rid : nil)
    }
}
