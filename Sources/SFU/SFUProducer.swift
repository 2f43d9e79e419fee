import RTC
import RTCWire

/// One track received from a publisher, fanned out to its consumers.
///
/// It knows its publisher only as an ``SFUUpstream`` (key-frame requests, sender reports): packets
/// come in through ``receive(rid:_:)``, so it runs on synthetic packets with no socket or
/// connection. Loop-thread confined, like the transports it sits between.
// Safe: confined to the SFU's loop thread (see above).
final class SFUProducer: @unchecked Sendable {
    struct Layer {
        var rid: String?
        var width = 0
        var height = 0
        var packets: UInt64 = 0
        var bytes: UInt64 = 0
        var keyframes: UInt64 = 0
        /// ``bytes`` at the last rate measurement, and the smoothed rate, bits per second (0: the
        /// layer sent nothing over the last interval).
        var measuredBytes: UInt64 = 0
        var bitrate = 0
    }

    let id: String
    let participantID: String
    let kind: MediaKind
    /// The codec the publisher negotiated (Opus; VP8 or H.264): its clock drives timestamp rewriting,
    /// and a subscriber is offered exactly this codec.
    let codec: MediaCodec
    /// The publisher's fmtp parameters of that codec (H.264: profile-level-id, packetization mode),
    /// offered to subscribers as they are.
    let codecParameters: [SDPParameter]?
    let source: SFUMediaSource
    /// The publisher's receive streams of this track: PLIs go there, sender reports come from there.
    let upstream: any SFUUpstream
    // `unowned(unsafe)`: read on every packet (checked `unowned` costs an atomic retain and release per
    // access); the SFU owns its producers.
    unowned(unsafe) let sfu: SFU
    let mid: String
    var layers: [Layer]
    /// ``layersByQuality``, kept: read by the stream allocator every run, redone when a key frame
    /// shows a new resolution.
    private(set) var qualityOrder: [Int] = []
    /// The spatial and temporal layers inside the stream when it is scalable (VP9 SVC: one encoding
    /// whose packets carry layer indices); nil until such a packet arrives, and for simulcast.
    var scalable: SFUScalableLayers?
    /// Media SSRC -> layer index, learned on each SSRC's first packet.
    var layerBySSRC: [UInt32: Int] = [:]
    var consumers: [SFUConsumer] = [] {
        didSet { fanOut = consumers.map { Unmanaged.passUnretained($0) } }
    }
    /// ``consumers`` without reference counting, for the per-packet fan-out: iterating the array of
    /// classes retained and released every consumer for every packet (about 5 % of the loop's CPU
    /// in a room of 100 subscribers). Each element is kept alive by ``consumers``.
    private(set) var fanOut: [Unmanaged<SFUConsumer>] = []
    /// The pipes this producer is sent over (SFUPipe.swift): every packet of every layer goes to
    /// each once. Unretained for the hot path, like ``fanOut``; each is kept alive by its pipe.
    var pipeTaps: [SFUPipeOutbound] = [] {
        didSet { pipeFanOut = pipeTaps.map { Unmanaged.passUnretained($0) } }
    }
    private(set) var pipeFanOut: [Unmanaged<SFUPipeOutbound>] = []
    /// Pending key-frame requests per layer: throttled, retried until the key frame arrives.
    var keyframeRequests: SFUKeyframeRequests
    /// The last packets of each video layer, shared by every consumer for NACKs (empty for audio).
    let buffers: [SFUPacketBuffer]
    var audioLevelExtensionID: UInt8 = 0
    var captureTimeExtensionID: UInt8 = 0
    /// The AV1 dependency descriptor's id (0: not negotiated, or not AV1): its layers make the
    /// stream scalable.
    var dependencyDescriptorExtensionID: UInt8 = 0
    /// The dependency descriptor element of the packet being forwarded (nil: none), copied to every
    /// consumer as the capture time is; valid only during ``receive(rid:_:)``.
    var dependencyDescriptor: UnsafeRawBufferPointer?
    /// The last template structure a dependency descriptor carried (every later one is read against it).
    var dependencyStructure: AV1DependencyStructure?
    /// Dependency descriptors that could not be read (cut short, or naming an unknown template).
    var dependencyDescriptorErrors: UInt64 = 0
    /// The abs-capture-time of the packet being forwarded (nil when it has none), copied to every
    /// consumer so latency can be measured end to end.
    var captureTime: UInt64?
    var audioLevel: UInt8?
    var voiceActivity = false
    var packetsReceived: UInt64 = 0
    var bytesReceived: UInt64 = 0
    var repairsReceived: UInt64 = 0
    var plisSent: UInt64 = 0
    var closed = false

    /// - Parameters:
    ///   - mid: the publisher's m-line; `rids`: its simulcast encodings (empty: one layer).
    ///   - audioLevelExtensionID, captureTimeExtensionID, dependencyDescriptorExtensionID: the
    ///     header-extension ids the publisher negotiated (0: none).
    init(
        id: String, participantID: String, kind: MediaKind, source: SFUMediaSource, mid: String, rids: [String],
        upstream: any SFUUpstream, audioLevelExtensionID: UInt8 = 0, captureTimeExtensionID: UInt8 = 0,
        dependencyDescriptorExtensionID: UInt8 = 0, sfu: SFU, codec: MediaCodec? = nil,
        codecParameters: [SDPParameter]? = nil
    ) {
        self.id = id
        self.participantID = participantID
        self.kind = kind
        self.codec = codec ?? (kind == .audio ? .opus : .vp8)
        self.codecParameters = codecParameters
        self.source = source
        self.upstream = upstream
        self.sfu = sfu
        self.mid = mid
        let rids = kind == .video ? rids : []
        layers = rids.isEmpty ? [Layer(rid: nil)] : rids.map { Layer(rid: $0) }
        // An AV1 stream's repairs carry the dependency descriptor the original did.
        let elementBytes = codec == .av1 && dependencyDescriptorExtensionID != 0 ? 255 : 0
        buffers = kind == .video ? layers.map { _ in SFUPacketBuffer(elementBytes: elementBytes) } : []
        keyframeRequests = SFUKeyframeRequests(
            layers: layers.count, interval: sfu.configuration.keyframeRequestInterval)
        self.audioLevelExtensionID = audioLevelExtensionID
        self.captureTimeExtensionID = captureTimeExtensionID
        // Only AV1 is selected by its descriptor (VP9 names its layers in the payload descriptor).
        self.dependencyDescriptorExtensionID = self.codec == .av1 ? dependencyDescriptorExtensionID : 0
        qualityOrder = layersByQuality
    }

    var info: ProducerInfo {
        ProducerInfo(
            id: id, participantID: participantID, kind: kind, source: source, mid: mid,
            rids: layers.compactMap(\.rid), codec: codec)
    }

    // MARK: Hot path

    /// One packet from the publisher. Allocation-free except on a new SSRC's first packet.
    func receive(rid: String?, _ received: ReceivedRTPPacket) {
        guard !closed else { return }
        var packet = received
        dependencyDescriptor = nil
        if dependencyDescriptorExtensionID != 0, layers.count == 1,
            let r = packet.header.extensionElement(id: dependencyDescriptorExtensionID, in: packet.packet)
        {
            let element = UnsafeRawBufferPointer(rebasing: packet.packet[r])
            packet = withDependencyDescriptor(packet, element)
            dependencyDescriptor = element
        }
        let layer: Int
        if let known = layerBySSRC[packet.mediaSSRC] {
            layer = known
        } else {
            layer = layers.firstIndex { $0.rid == rid } ?? 0
            layerBySSRC[packet.mediaSSRC] = layer
            // A PLI asked for before this layer's first packet had no stream to go out on: ask now
            // rather than after the throttle interval.
            if kind == .video, keyframeRequests.isPending(layer), !packet.info.isKeyframe {
                keyframeRequests.resent(layer: layer, now: packet.arrival)
                sendPLI(layer: layer)
            }
        }
        let size = UInt64(packet.packet.count)
        packetsReceived &+= 1
        bytesReceived &+= size
        if packet.isRepair { repairsReceived &+= 1 }
        layers[layer].packets &+= 1
        layers[layer].bytes &+= size
        sfu.counters.packetsIn &+= 1
        sfu.counters.bytesIn &+= size

        if kind == .video {
            // The codec header was parsed once by the publisher's receiver; every consumer reuses it.
            let info = packet.info
            if info.hasLayerIndices, layers.count == 1, codec == .vp9 || codec == .av1 {
                countScalable(packet)
            }
            if info.isKeyframe {
                layers[layer].keyframes &+= 1
                keyframeRequests.keyframeArrived(layer: layer)
                let width = Int(info.width)
                let height = Int(info.height)
                if width > 0, height > 0, layers[layer].width != width || layers[layer].height != height {
                    layers[layer].width = width
                    layers[layer].height = height
                    qualityOrder = layersByQuality
                    // Layer order by resolution may have changed: re-pick every consumer's target.
                    for c in consumers { c.updateTarget() }
                }
            }
        } else if audioLevelExtensionID != 0, !packet.isRepair,
            let r = packet.header.extensionElement(id: audioLevelExtensionID, in: packet.packet), r.count >= 1
        {
            let byte = packet.packet[r.lowerBound]
            audioLevel = byte & 0x7F
            voiceActivity = byte & 0x80 != 0
        }
        captureTime = nil
        if captureTimeExtensionID != 0, !packet.isRepair,
            let r = packet.header.extensionElement(id: captureTimeExtensionID, in: packet.packet)
        {
            captureTime = AbsCaptureTime.captureTime(packet.packet, r)
        }
        if kind == .video {
            buffers[layer].store(
                sequenceNumber: packet.sequenceNumber, payload: packet.payload, element: dependencyDescriptor)
            // A PLI or the key frame it asked for was lost: ask again (packets drive the clock).
            if keyframeRequests.hasPending, let retry = keyframeRequests.retryDue(now: packet.arrival) {
                sendPLI(layer: retry)
            }
        }
        // The snapshot keeps every consumer alive even if forwarding changes the list.
        let targets = fanOut
        withExtendedLifetime(consumers) {
            for target in targets { target._withUnsafeGuaranteedRef { $0.forward(layer: layer, packet) } }
        }
        if !pipeFanOut.isEmpty {
            let pipes = pipeFanOut
            withExtendedLifetime(pipeTaps) {
                for tap in pipes { tap._withUnsafeGuaranteedRef { $0.forward(layer: layer, packet) } }
            }
        }
    }

    /// `packet` with the layers and decode targets its dependency descriptor `element` names (as it
    /// was when the descriptor cannot be read). A descriptor with a template structure (a key frame's)
    /// replaces the kept one. Allocation-free except for a structure.
    private func withDependencyDescriptor(
        _ packet: ReceivedRTPPacket, _ element: UnsafeRawBufferPointer
    ) -> ReceivedRTPPacket {
        guard let descriptor = try? AV1DependencyDescriptor.parse(element, structure: dependencyStructure) else {
            dependencyDescriptorErrors &+= 1
            return packet
        }
        if let structure = descriptor.structure, structure != dependencyStructure {
            dependencyStructure = structure
            if scalable == nil { scalable = SFUScalableLayers() }
            scalable!.setStructure(structure)
            for c in consumers { c.updateTarget() }
        }
        var info = packet.info
        descriptor.describe(&info)
        return packet.with(info: info)
    }

    /// Counts a packet of a scalable stream; a new layer or a key picture's layer sizes re-pick every
    /// consumer's target (rare: the first packets, key frames).
    private func countScalable(_ packet: ReceivedRTPPacket) {
        if scalable == nil { scalable = SFUScalableLayers() }
        let before = (spatial: scalable!.spatialCount - 1, temporal: scalable!.temporalCount - 1)
        var changed = scalable!.count(packet.info, size: UInt64(packet.packet.count))
        if changed { for c in consumers { c.scalableLayersGrew(from: before) } }
        if packet.info.isKeyframe, packet.info.spatialLayerCount > 0, codec == .vp9 {
            VP9PayloadFormat.forEachLayerSize(packet.payload) { layer, width, height in
                scalable!.setSize(layer: layer, width: width, height: height)
            }
            changed = true
        }
        if changed { for c in consumers { c.updateTarget() } }
    }

    /// The latest sender report of `layer`'s media SSRC (a layer switch lines timestamps up with it).
    /// Runs at a switch, not per packet.
    func senderReport(layer: Int) -> SFULayerTimeline.SenderReport? {
        guard let ssrc = layerBySSRC.first(where: { $0.value == layer })?.key else { return nil }
        return upstream.senderReport(ssrc: ssrc)
    }

    /// A packet of `layer` from the shared buffer (see ``SFUPacketBuffer/payload(sequenceNumber:)``).
    func bufferedPayload(layer: Int, sequenceNumber: UInt16) -> UnsafeRawBufferPointer? {
        guard buffers.indices.contains(layer) else { return nil }
        return buffers[layer].payload(sequenceNumber: sequenceNumber)
    }

    /// The dependency descriptor kept with a buffered packet (nil: none), for its repair.
    func bufferedDependencyDescriptor(layer: Int, sequenceNumber: UInt16) -> UnsafeRawBufferPointer? {
        guard buffers.indices.contains(layer) else { return nil }
        return buffers[layer].element(sequenceNumber: sequenceNumber)
    }

    // MARK: Layers

    /// Measures each layer's bitrate over the `elapsed` nanoseconds since the last call (the stream
    /// allocator's timer): smoothed, and 0 at once for a layer that sent nothing (a publisher that
    /// dropped a layer, as Chromium does when its own estimate falls). Allocation-free.
    func measureRates(elapsed: UInt64) {
        guard elapsed > 0 else { return }
        for i in layers.indices {
            layers[i].bitrate = Self.smoothedRate(
                previous: layers[i].bitrate, bytes: layers[i].bytes &- layers[i].measuredBytes, elapsed: elapsed)
            layers[i].measuredBytes = layers[i].bytes
        }
        scalable?.measureRates(elapsed: elapsed)
    }

    /// A layer's bitrate after `bytes` more in `elapsed` nanoseconds: a quarter of each new window
    /// (key frames and frame-size swings average out within a few seconds), and 0 at once for a
    /// layer that sent nothing.
    static func smoothedRate(previous: Int, bytes: UInt64, elapsed: UInt64) -> Int {
        guard bytes > 0 else { return 0 }
        let rate = Int(min(bytes &* 8_000_000_000 / elapsed, UInt64(Int.max / 2)))
        return previous == 0 ? rate : previous + (rate - previous) / 4
    }

    /// The measured bitrates in quality order, for the stream allocator.
    var ratesByQuality: SFUStreamAllocator.LayerRates {
        if let scalable { return scalable.rates }
        var rates = SFUStreamAllocator.LayerRates()
        rates.count = min(qualityOrder.count, SFUStreamAllocator.LayerRates.capacity)
        for position in 0..<rates.count { rates[position] = layers[qualityOrder[position]].bitrate }
        return rates
    }

    /// The measured rate of the whole track (every layer), bits per second.
    var totalBitrate: Int { layers.reduce(0) { $0 + $1.bitrate } }

    /// Layer indices from lowest to highest quality: by key-frame resolution when every layer has
    /// shown one, else by the usual RID names (q/h/f, l/m/h), else in offer order.
    var layersByQuality: [Int] {
        let indices = Array(layers.indices)
        guard layers.count > 1 else { return indices }
        if layers.allSatisfy({ $0.width > 0 }) {
            return indices.sorted { layers[$0].width * layers[$0].height < layers[$1].width * layers[$1].height }
        }
        func rank(_ rid: String?) -> Int? {
            switch rid?.lowercased() {
            case "q", "l", "low", "quarter": return 0
            case "h", "half": return 1
            case "f", "full", "high", "hi": return 2
            case "m", "mid", "medium": return 1
            default: return nil
            }
        }
        if layers.allSatisfy({ rank($0.rid) != nil }) {
            return indices.sorted { (rank(layers[$0].rid) ?? 0) < (rank(layers[$1].rid) ?? 0) }
        }
        return indices
    }

    /// The layer for a quality preference or, when a viewport is given, the smallest layer that covers it.
    func layerIndex(quality: SFULayerQuality, viewport: (width: Int, height: Int)?) -> Int {
        let order = layersByQuality
        guard order.count > 1 else { return 0 }
        if let viewport {
            for i in order where layers[i].width >= viewport.width && layers[i].height >= viewport.height {
                return i
            }
            return order[order.count - 1]
        }
        switch quality {
        case .low: return order[0]
        case .medium: return order[min(1, order.count - 1)]
        case .high: return order[order.count - 1]
        }
    }

    /// Asks the publisher for a key frame on `layer`: at most one PLI per configured interval per
    /// layer, repeated until the key frame arrives (``SFUKeyframeRequests``).
    func requestKeyframe(layer: Int, now: UInt64) {
        guard kind == .video, layers.indices.contains(layer), !closed else { return }
        if keyframeRequests.request(layer: layer, now: now) { sendPLI(layer: layer) }
    }

    private func sendPLI(layer: Int) {
        plisSent &+= 1
        sfu.counters.plisSent &+= 1
        // This producer throttles its requests (``SFUKeyframeRequests``); the receiver's own throttle
        // would hold a request for up to another interval after its own start-up PLI.
        upstream.requestKeyframe(rid: layers[layer].rid)
    }

    func stats() -> SFUProducerStats {
        let nacks = upstream.nacksSent
        return SFUProducerStats(
            id: id, participantID: participantID, kind: kind, packetsReceived: packetsReceived,
            bytesReceived: bytesReceived, repairsReceived: repairsReceived, nacksSent: nacks, plisSent: plisSent,
            audioLevel: kind == .audio ? audioLevel : nil, voiceActivity: voiceActivity,
            layers: layers.map {
                SFULayerStats(
                    rid: $0.rid, width: $0.width, height: $0.height, packets: $0.packets, bytes: $0.bytes,
                    keyframes: $0.keyframes, bitrate: $0.bitrate)
            }, consumers: consumers.count)
    }
}

extension SFUProducer: SFUAudioLevelSource {
    var latestAudioLevel: (level: UInt8, voice: Bool)? { audioLevel.map { ($0, voiceActivity) } }
    var isClosed: Bool { closed }
}
