import RTC
import RTCWire

/// One producer forwarded to one subscriber (a down track), written to an ``SFUDownTrack``: in the
/// server a transceiver's sender on the subscriber's transport, in tests a recording sink.
///
/// The subscriber sees one continuous stream: an ``SFUSequenceManager`` maps sequence numbers, a
/// timestamp offset and a ``VP8Munger`` (picture ID, TL0PICIDX) do the rest, and all of them change
/// only where the forwarder switches layers, on a key frame of the new layer. The packet's codec
/// header was parsed once by the publisher's receiver (``ReceivedRTPPacket/info``). An upstream
/// retransmission maps to the same outgoing sequence number, so it fills the hole the subscriber saw.
/// In the server the track is the subscriber transport's own ``RTPSender`` (its SSRC, negotiated
/// extension ids, RTX, sender reports), which keeps no copy: a video consumer answers NACKs from its
/// producer's shared ``SFUPacketBuffer`` through its ``SFUSequencer``.
///
/// Loop-thread confined.
// Safe: confined to the SFU's loop thread (see above).
final class SFUConsumer: RTPSenderReportSource, @unchecked Sendable {
    let id: String
    let subscriberID: String
    // `unowned(unsafe)`: read on every forwarded packet, where checked `unowned` costs an atomic
    // retain and release per access. The SFU retires a consumer before its producer or connection goes.
    unowned(unsafe) let producer: SFUProducer
    /// Where forwarded packets and retransmissions go.
    let track: any SFUDownTrack

    var quality: SFULayerQuality = .high
    var viewport: (width: Int, height: Int)?
    /// Layer the subscriber should get, and layer being forwarded (-1: none yet).
    var targetLayer = 0
    var currentLayer = -1
    /// In a scalable stream (``SFUProducer/scalable``): the spatial and temporal layers to forward
    /// (every packet at or below both), and those being forwarded. A switch up waits for a picture
    /// where the new layers are decodable; a switch down happens at the next picture.
    var targetSpatial = 0
    var targetTemporal = 0
    var currentSpatial = 0
    var currentTemporal = 0
    /// The RTP timestamp of the picture the current layer decision applies to.
    var pictureTimestamp: UInt32 = 0
    /// When a temporal switch up began waiting for a switching-up point (0: none waiting).
    var temporalUpSince: UInt64 = 0
    /// The position (in quality order) of the layer the subscriber asked for: the stream allocator's
    /// upper bound for this consumer.
    var preferredPosition = 0
    /// The stream allocator's decision, a position in quality order (-1: paused; nil: no allocator
    /// decision, the subscriber's choice applies).
    var allocatedPosition: Int?
    /// The allocator paused this video consumer: nothing is forwarded until it resumes on a key frame.
    var paused = false
    /// The allocator's key for this consumer (its track in the subscriber's ``SFUStreamAllocator``).
    var allocationKey = 0
    /// Until this loop time the layer being forwarded is dropped while a switch down waits for its
    /// target's key frame (0: not): the allocator lowered this consumer on an overloaded path, where
    /// the current layer's packets are mostly lost anyway and, forwarded, keep the bottleneck queue
    /// full, so that the lower layer's key frame is lost with them and the freeze goes on.
    var dropCurrentUntil: UInt64 = 0
    /// The longest the current layer is held back for a switch down (a key frame lost on the way
    /// has the publisher's retries; past this the current layer flows again).
    static let dropCurrentLimit: UInt64 = 1_000_000_000
    /// A current layer that forwarded nothing for this long has stopped at its publisher (an uplink
    /// whose estimate fell stops its upper layers, Chromium's and the agent's alike): a lower layer's
    /// key frame then starts that layer at once, without waiting for the allocator's next rate
    /// measurement (up to 500 ms) and its key frame request (another key frame interval).
    static let stalledLayer: UInt64 = 300_000_000
    /// The layer the last switch down left (-1: the last switch went up): its packets are not repaired.
    var leftBehind = -1
    /// The newest outgoing sequence number sent (probe padding resends from there back).
    var lastOutgoing: UInt16 = 0
    /// Probe padding: the next packet back from ``lastOutgoing`` to resend, and the bytes sent.
    var probeCursor: UInt16 = 0
    var probeBytes: UInt64 = 0

    // Rewriting state: sequence numbers, timestamps and codec fields continue across layer switches.
    var sequence = SFUSequenceManager()
    var timestampOffset: UInt32 = 0
    /// VP8 picture ID and TL0PICIDX (video only; audio passes through).
    var munger = VP8Munger()
    var lastTimestamp: UInt32 = 0
    /// Source timestamp and layer of the newest packet sent (where a switch continues from).
    var lastSourceTimestamp: UInt32 = 0
    var lastSourceLayer = 0
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
    /// The subscriber's answer refused this consumer's m-line, and that was reported.
    var refusedReported = false

    init(
        id: String, subscriberID: String, producer: SFUProducer, track: any SFUDownTrack
    ) {
        self.id = id
        self.subscriberID = subscriberID
        self.producer = producer
        self.track = track
        if producer.kind == .video { sequencer = SFUSequencer() }
        updateTarget()
        track.reportSource = self
    }

    /// Picks the layer to forward: the subscriber's choice, lowered to the allocator's decision.
    func updateTarget() {
        if let scalable = producer.scalable {
            // One stream: the choice is a rung of its layer ladder, the allocator's decision its bound.
            preferredPosition = scalable.position(quality: quality, viewport: viewport)
            targetLayer = 0
            var position = preferredPosition
            if let allocated = allocatedPosition {
                setPaused(allocated < 0)
                if allocated >= 0 { position = min(position, allocated) }
            } else {
                setPaused(false)
            }
            let rung = scalable.ladder[max(0, min(position, scalable.ladder.count - 1))]
            targetSpatial = rung.spatial
            targetTemporal = rung.temporal
            currentSpatial = min(currentSpatial, scalable.spatialCount - 1)
            currentTemporal = min(currentTemporal, scalable.temporalCount - 1)
            return
        }
        let preferred = producer.layerIndex(quality: quality, viewport: viewport)
        let order = producer.qualityOrder
        preferredPosition = order.firstIndex(of: preferred) ?? max(0, order.count - 1)
        guard producer.kind == .video, let allocated = allocatedPosition else {
            targetLayer = preferred
            setPaused(false)
            return
        }
        setPaused(allocated < 0)
        targetLayer = allocated < 0 ? preferred : order[max(0, min(preferredPosition, allocated, order.count - 1))]
    }

    /// Stops or resumes forwarding. A resumed consumer starts again on a key frame of its target, as a
    /// switch does (sequence numbers continue; the timestamp advances by the time paused).
    private func setPaused(_ value: Bool) {
        guard value != paused else { return }
        paused = value
        if value { currentLayer = -1 }
    }

    /// The allocator decided `position` (-1: pause). Returns true when the target or pause changed;
    /// asks the publisher for the new layer's key frame then. `overloaded`: the decision lowers the
    /// layer because the path is overloaded, so the current layer stops at once (``dropCurrentUntil``).
    @discardableResult
    func allocate(position: Int, now: UInt64, overloaded: Bool = false) -> Bool {
        guard allocatedPosition != position else { return false }
        let lowered = allocatedPosition.map { position < $0 } ?? false
        let before = (targetLayer, paused, targetSpatial, targetTemporal)
        allocatedPosition = position
        updateTarget()
        guard before != (targetLayer, paused, targetSpatial, targetTemporal) else { return false }
        dropCurrentUntil = 0
        if !paused, needsKeyframe, track.canSend {
            if overloaded, lowered, currentLayer >= 0, targetLayer != currentLayer {
                dropCurrentUntil = now &+ Self.dropCurrentLimit
            }
            producer.requestKeyframe(layer: targetLayer, now: now)
        }
        return true
    }

    /// The subscriber's preference changed: picks the target again and, when it is another layer,
    /// asks the publisher for its key frame (the switch happens on it).
    func retarget(now: UInt64) {
        updateTarget()
        // Before the subscriber connects, the first forwarded packet asks for the key frame instead.
        if needsKeyframe, track.canSend { producer.requestKeyframe(layer: targetLayer, now: now) }
    }

    /// The stream showed a layer above `from` (the previous top layers; temporal layers show up
    /// as their first frames arrive). A consumer forwarding the previous top forwards the new one too:
    /// nothing of it was withheld, so its frames are decodable. ``updateTarget()`` follows.
    func scalableLayersGrew(from top: (spatial: Int, temporal: Int)) {
        guard currentLayer >= 0 else { return }
        if currentTemporal >= top.temporal { currentTemporal = Int.max }
        if currentSpatial >= top.spatial { currentSpatial = Int.max }
    }

    /// Whether reaching the target takes a key frame: another simulcast layer, or a higher spatial
    /// layer of a scalable stream (its key picture is where the new layer starts).
    private var needsKeyframe: Bool {
        targetLayer != currentLayer || (producer.scalable != nil && targetSpatial > currentSpatial)
    }

    // MARK: Hot path

    func forward(layer: Int, _ packet: ReceivedRTPPacket) {
        guard !closed else { return }
        let now = packet.arrival
        if producer.kind == .audio {
            forwardAudio(packet, now: now)
            return
        }
        if paused {
            drop()
            return
        }
        if layer != currentLayer {
            guard packet.info.isKeyframe, track.canSend, layer == targetLayer || stalled(above: layer, now: now) else {
                drop()
                // Nothing forwarded yet, or a switch is pending: ask the target layer for a key frame, but
                // only once the subscriber can receive it: one sent earlier is dropped here and would hold
                // the request throttle (500 ms) against the one that counts.
                if layer == targetLayer || currentLayer < 0, track.canSend {
                    producer.requestKeyframe(layer: targetLayer, now: now)
                }
                return
            }
            switchLayer(to: layer, packet, now: now)
        } else if dropCurrentUntil != 0 {
            guard now >= dropCurrentUntil else {
                drop()
                return
            }
            dropCurrentUntil = 0
        }
        var marker = packet.header.marker
        if packet.info.hasLayerIndices, producer.scalable != nil {
            guard selectScalable(packet.info, timestamp: packet.header.timestamp, now: now) else {
                // Not forwarded: the packets after it move down, so the subscriber sees no hole.
                sequence.drop(packet.sequenceNumber)
                drop()
                return
            }
            // The end of the highest spatial layer forwarded ends the picture the subscriber sees.
            if packet.info.endsLayerFrame, Int(packet.info.spatialLayer) == currentSpatial { marker = true }
        }
        guard let outgoing = sequence.input(packet.sequenceNumber) else {
            drop()  // from before the switch point (reordered or a late repair)
            return
        }
        let timestamp = packet.header.timestamp &+ timestampOffset
        let rewrite = munger.munge(packet.info)
        let sent = track.sendForwarded(
            payload: packet.payload, marker: marker, timestamp: timestamp, sequenceNumber: outgoing,
            rewrite: rewrite, audioLevel: nil, captureTime: producer.captureTime,
            dependencyDescriptor: producer.dependencyDescriptor, now: now)
        if sent {
            sequencer?.record(
                outgoing: outgoing, source: packet.sequenceNumber, layer: layer, timestamp: timestamp,
                marker: marker, rewrite: rewrite)
            if Int16(bitPattern: outgoing &- lastOutgoing) > 0 || !hasForwarded { lastOutgoing = outgoing }
        }
        noteSent(sent, timestamp: timestamp, size: packet.packet.count, now: now)
        if sent, lastTimestamp == timestamp {
            lastSourceTimestamp = packet.header.timestamp
            lastSourceLayer = layer
        }
    }

    /// Whether the current layer stopped (``stalledLayer``) above `layer`, a lower layer of the same
    /// simulcast producer. Asked only for key frames of layers not forwarded.
    private func stalled(above layer: Int, now: UInt64) -> Bool {
        guard currentLayer >= 0, hasForwarded, now &- lastForwardTime > Self.stalledLayer else { return false }
        let order = producer.qualityOrder
        guard let from = order.firstIndex(of: currentLayer), let to = order.firstIndex(of: layer) else { return false }
        return to < from
    }

    /// Whether a packet of a scalable stream is forwarded: at each new picture the layers move toward
    /// the target (down at once; spatial up only at a key picture, asked for with a PLI; temporal up at
    /// a switching-up point, or a key picture when none came within a second), then the packet goes
    /// when its SID and TID are at most the current ones. A stream that names decode targets (AV1's
    /// dependency descriptor) switches up at any frame that is a switch point of the target's decode
    /// target and forwards the frames the current decode target needs. Allocation-free.
    @inline(__always)
    private func selectScalable(_ info: RTPPayloadInfo, timestamp: UInt32, now: UInt64) -> Bool {
        let newPicture = timestamp != pictureTimestamp && Int32(bitPattern: timestamp &- pictureTimestamp) > 0
        if newPicture {
            pictureTimestamp = timestamp
            if info.isKeyframe {
                currentSpatial = targetSpatial
                currentTemporal = targetTemporal
            } else {
                // Lower layers never reference higher ones: going down is safe at any picture.
                if targetSpatial < currentSpatial { currentSpatial = targetSpatial }
                if targetTemporal < currentTemporal {
                    currentTemporal = targetTemporal
                } else if targetTemporal > currentTemporal, !info.hasDecodeTargets, info.beginsLayerFrame,
                    info.switchingUpPoint, Int(info.temporalLayer ?? 0) <= currentTemporal
                {
                    currentTemporal = targetTemporal
                }
            }
        }
        let decodeTarget: Int?
        if info.hasDecodeTargets, let scalable = producer.scalable {
            // Up to the target where the descriptor says its decode target may start (after the
            // moves down above, the target is at or above the current layers in both).
            if info.beginsLayerFrame, targetSpatial != currentSpatial || targetTemporal != currentTemporal,
                let target = scalable.decodeTarget(spatial: targetSpatial, temporal: targetTemporal),
                info.decodeTargetIndication(target) == AV1DependencyStructure.Indication.switch.rawValue
            {
                currentSpatial = targetSpatial
                currentTemporal = targetTemporal
            }
            decodeTarget = scalable.decodeTarget(spatial: currentSpatial, temporal: currentTemporal)
        } else {
            decodeTarget = nil
        }
        if newPicture, !info.isKeyframe {
            var wantsKeyframe = targetSpatial > currentSpatial
            if targetTemporal > currentTemporal {
                if temporalUpSince == 0 { temporalUpSince = now }
                wantsKeyframe = wantsKeyframe || now &- temporalUpSince > 1_000_000_000
            }
            if wantsKeyframe, track.canSend { producer.requestKeyframe(layer: targetLayer, now: now) }
        }
        if newPicture, targetTemporal <= currentTemporal { temporalUpSince = 0 }
        if let decodeTarget { return info.decodeTargetIndication(decodeTarget) != 0 }
        return Int(info.spatialLayer) <= currentSpatial && Int(info.temporalLayer ?? 0) <= currentTemporal
    }

    /// The subscriber NACKed `sequenceNumbers`: each one still in the producer's shared buffer is
    /// resent with the same rewriting it had (as RTX when negotiated).
    func handleNACK(_ sequenceNumbers: [UInt16], now: UInt64) {
        // Held back for a switch down on an overloaded path: a repair would refill the queue.
        guard !closed, sequencer != nil, dropCurrentUntil <= now else { return }
        let rtt = track.senderStats?.roundTripTime ?? 0
        let interval = rtt > 0 ? max(rtt, 5_000_000) : 50_000_000
        for seq in sequenceNumbers {
            // A packet of the layer a switch down left is not repaired: the subscriber decodes from
            // the new layer's key frame, and on a congested path (why the layer was left) the repairs
            // of a layer three times the path's rate kept its queue full for seconds (issue 33).
            guard let entry = sequencer?.resendable(outgoing: seq, now: now, minimumInterval: interval),
                Int(entry.layer) != leftBehind,
                let payload = producer.bufferedPayload(layer: Int(entry.layer), sequenceNumber: entry.source)
            else {
                nackMisses &+= 1
                continue
            }
            resend(entry, as: seq, payload: payload, now: now)
        }
    }

    private func forwardAudio(_ packet: ReceivedRTPPacket, now: UInt64) {
        if !hasForwarded { sequence.sync(packet.sequenceNumber) }
        guard let outgoing = sequence.input(packet.sequenceNumber) else {
            drop()
            return
        }
        let timestamp = packet.header.timestamp &+ timestampOffset
        let level = producer.audioLevel.map { RTPAudioLevel(voiceActivity: producer.voiceActivity, level: $0) }
        let sent = track.sendForwarded(
            payload: packet.payload, marker: packet.header.marker, timestamp: timestamp, sequenceNumber: outgoing,
            rewrite: .none, audioLevel: level, captureTime: producer.captureTime, dependencyDescriptor: nil, now: now)
        noteSent(sent, timestamp: timestamp, size: packet.packet.count, now: now)
    }

    @inline(__always)
    private func noteSent(_ sent: Bool, timestamp: UInt32, size: Int, now: UInt64) {
        guard sent else {
            drop()
            return
        }
        if !hasForwarded || Int32(bitPattern: timestamp &- lastTimestamp) >= 0 {
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

    /// Starts forwarding `layer` at this key-frame packet: the sequence manager and the munger continue
    /// the outgoing sequence numbers and picture IDs, and the timestamp continues from the last one
    /// sent, advanced by the capture-time gap the publisher's sender reports give
    /// (``SFULayerTimeline``), in the codec's clock.
    private func switchLayer(to layer: Int, _ packet: ReceivedRTPPacket, now: UInt64) {
        sequence.sync(packet.sequenceNumber)
        if hasForwarded {
            let ticks = SFULayerTimeline.advance(
                from: lastSourceTimestamp, producer.senderReport(layer: lastSourceLayer), to: packet.header.timestamp,
                producer.senderReport(layer: layer), elapsed: now > lastForwardTime ? now - lastForwardTime : 0,
                clockRate: producer.codec.clockRate)
            timestampOffset = lastTimestamp &+ ticks &- packet.header.timestamp
            munger.switchSource(at: packet.info)
            layerSwitches &+= 1
        }
        // A scalable stream starts at its key picture with the target layers.
        currentSpatial = targetSpatial
        currentTemporal = targetTemporal
        pictureTimestamp = packet.header.timestamp
        temporalUpSince = 0
        let previous = currentLayer
        let order = producer.qualityOrder
        if let from = order.firstIndex(of: previous), let to = order.firstIndex(of: layer), to < from {
            leftBehind = previous
        } else {
            leftBehind = -1
        }
        currentLayer = layer
        dropCurrentUntil = 0
        if previous != layer { producer.sfu.layerSwitched(self) }
    }

    /// Probe padding: resends up to `bytes` of the packets most recently sent (RTX when negotiated, as
    /// libwebrtc pads), newest first, so that the subscriber's feedback shows the estimator whether the
    /// path carries more. Returns the bytes sent. Allocation-free; the subscriber drops the copies.
    func sendProbePadding(bytes: Int, now: UInt64) -> Int {
        guard !closed, !paused, hasForwarded, sequencer != nil, track.canSend else { return 0 }
        var sent = 0
        var misses = 0
        // Back over at most the last 64 packets, then around again from the newest.
        while sent < bytes, misses < 64 {
            let back = probeCursor
            probeCursor = probeCursor >= 63 ? 0 : probeCursor &+ 1
            let seq = lastOutgoing &- back
            guard let entry = sequencer?.entry(outgoing: seq),
                let payload = producer.bufferedPayload(layer: Int(entry.layer), sequenceNumber: entry.source)
            else {
                misses += 1
                continue
            }
            guard resend(entry, as: seq, payload: payload, now: now) else { break }
            sent += payload.count + 40
        }
        probeBytes &+= UInt64(sent)
        return sent
    }

    /// Sends the buffered `payload` of a forwarded packet again as outgoing number `seq`, with the
    /// rewriting and dependency descriptor it had (as RTX when negotiated): a NACK's repair or probe
    /// padding. False when it does not fit in a packet.
    @discardableResult
    private func resend(_ entry: SFUSequencer.Entry, as seq: UInt16, payload: UnsafeRawBufferPointer, now: UInt64)
        -> Bool
    {
        track.sendRetransmission(
            payload: payload, marker: entry.marker, timestamp: entry.timestamp, sequenceNumber: seq,
            rewrite: entry.rewrite,
            dependencyDescriptor: producer.bufferedDependencyDescriptor(
                layer: Int(entry.layer), sequenceNumber: entry.source), now: now)
    }

    /// The subscriber asked for a key frame (PLI/FIR).
    func keyframeRequested(now: UInt64) {
        plisReceived &+= 1
        producer.sfu.counters.plisReceived &+= 1
        guard !paused else { return }
        producer.requestKeyframe(layer: currentLayer >= 0 ? currentLayer : targetLayer, now: now)
    }

    /// The RTP time its sender reports give: the publisher's latest report of the layer being
    /// forwarded, moved into the outgoing timeline by the timestamp offset, at that report's instant
    /// on our loop clock (LiveKit and Janus relay the publisher's A/V relation likewise). After a
    /// layer switch the new layer's report applies: the switch set the offset from both layers'
    /// reports (``SFULayerTimeline``), so the two give the same timeline. Nil before the publisher's
    /// first report, or before anything was forwarded: the sender extrapolates from its last frame.
    func senderReportReference() -> (rtpTimestamp: UInt32, localTime: UInt64)? {
        guard !closed, hasForwarded, let report = producer.senderReport(layer: lastSourceLayer) else { return nil }
        return (report.rtpTimestamp &+ timestampOffset, report.localTime)
    }

    func stats() -> SFUConsumerStats {
        let s = track.senderStats
        let layers = producer.layers
        let scalable = producer.scalable != nil
        let forwarding = scalable && currentLayer >= 0 && !paused
        var stats = SFUConsumerStats(
            id: id, producerID: producer.id, subscriberID: subscriberID, packetsSent: s?.packetsSent ?? 0,
            bytesSent: s?.bytesSent ?? 0, nacksReceived: s?.nacksReceived ?? 0,
            retransmissions: s?.retransmissions ?? 0,
            plisReceived: plisReceived, packetsDropped: packetsDropped, layerSwitches: layerSwitches,
            currentRID: layers.indices.contains(currentLayer) ? layers[currentLayer].rid : nil,
            targetRID: layers.indices.contains(targetLayer) ? layers[targetLayer].rid : nil, paused: paused,
            allocatedRID: allocatedPosition.flatMap { position in
                let order = producer.qualityOrder
                return position >= 0 && order.indices.contains(position) ? layers[order[position]].rid : nil
            })
        if scalable {
            stats.currentSpatialLayer = forwarding ? currentSpatial : nil
            stats.currentTemporalLayer = forwarding ? currentTemporal : nil
            stats.targetSpatialLayer = targetSpatial
            stats.targetTemporalLayer = targetTemporal
        }
        return stats
    }
}
