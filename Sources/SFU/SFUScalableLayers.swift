import RTCWire

/// The spatial and temporal layers inside one scalable stream (VP9 SVC: one SSRC whose payload
/// descriptors carry SID/TID; AV1: one SSRC whose dependency descriptors name them), as a producer measures them and a consumer selects among them.
///
/// A consumer's choice is a *rung* of ``ladder``, lowest first: the base spatial layer at each frame
/// rate (S0T0, S0T1, …), then each higher spatial layer at the full frame rate (S1T2, S2T2 for
/// L3T3). `setQuality`/`setViewPort` pick a spatial layer at the full frame rate; the stream
/// allocator may go below it, down to the base layer at its lowest frame rate, before it pauses the
/// track. A rung forwards every packet whose SID and TID are at most the rung's.
///
/// An AV1 stream names each frame's decode targets in its dependency descriptor: each rung maps to
/// the decode target of its layers (``decodeTarget(spatial:temporal:)``, from the template structure),
/// and a consumer forwards the frames that target needs and switches up where it may start.
///
/// Counts grow as packets show them (never shrink: a publisher that stops a layer shows a rate of
/// 0 for it, as a simulcast layer does). Loop-thread confined; allocation-free per packet.
struct SFUScalableLayers {
    /// Layers of each kind this type tracks (VP9 allows 8; libwebrtc sends at most 3 of each).
    static let maxLayers = 4

    struct Rung: Equatable {
        var spatial: Int
        var temporal: Int
    }

    private(set) var spatialCount = 1
    private(set) var temporalCount = 1
    /// Per spatial layer: the picture size from the scalability structure (0: not seen).
    private(set) var width = [Int](repeating: 0, count: maxLayers)
    private(set) var height = [Int](repeating: 0, count: maxLayers)
    /// Bytes received and smoothed bitrate per (spatial, temporal) layer, index `s * maxLayers + t`.
    private var bytes = [UInt64](repeating: 0, count: maxLayers * maxLayers)
    private var measuredBytes = [UInt64](repeating: 0, count: maxLayers * maxLayers)
    private var bitrate = [Int](repeating: 0, count: maxLayers * maxLayers)
    /// The selectable rungs, lowest first (see the type's documentation).
    private(set) var ladder = [Rung(spatial: 0, temporal: 0)]
    /// Per (spatial, temporal) layer, index `s * maxLayers + t`: the decode target of exactly those
    /// layers in the last dependency structure (-1: none, or no structure seen).
    private var decodeTargets = [Int8](repeating: -1, count: maxLayers * maxLayers)

    /// Counts one packet. Returns true when it showed a new layer (the ladder changed).
    @inline(__always)
    mutating func count(_ info: RTPPayloadInfo, size: UInt64) -> Bool {
        let s = min(Int(info.spatialLayer), Self.maxLayers - 1)
        let t = min(Int(info.temporalLayer ?? 0), Self.maxLayers - 1)
        bytes[s * Self.maxLayers + t] &+= size
        let announced = min(Int(info.spatialLayerCount), Self.maxLayers)
        guard s >= spatialCount || t >= temporalCount || announced > spatialCount else { return false }
        spatialCount = max(spatialCount, s + 1, announced)
        temporalCount = max(temporalCount, t + 1)
        rebuildLadder()
        return true
    }

    /// A key picture's scalability structure gave spatial layer `layer`'s size.
    mutating func setSize(layer: Int, width w: UInt16, height h: UInt16) {
        guard layer < Self.maxLayers else { return }
        width[layer] = Int(w)
        height[layer] = Int(h)
    }

    /// A key frame's dependency structure (AV1): the decode target of each layer pair and the
    /// spatial layers' render sizes. Runs once per structure, not per packet.
    mutating func setStructure(_ structure: AV1DependencyStructure) {
        for i in decodeTargets.indices { decodeTargets[i] = -1 }
        for target in 0..<min(structure.decodeTargetCount, structure.decodeTargetSpatialID.count, 32) {
            let s = Int(structure.decodeTargetSpatialID[target])
            let t = Int(structure.decodeTargetTemporalID[target])
            guard s < Self.maxLayers, t < Self.maxLayers, decodeTargets[s * Self.maxLayers + t] < 0 else { continue }
            decodeTargets[s * Self.maxLayers + t] = Int8(target)
        }
        for layer in structure.renderWidth.indices where layer < structure.renderHeight.count {
            setSize(layer: layer, width: structure.renderWidth[layer], height: structure.renderHeight[layer])
        }
    }

    /// The decode target that holds exactly these layers (nil: none known; select by layer indices).
    @inline(__always)
    func decodeTarget(spatial: Int, temporal: Int) -> Int? {
        guard spatial >= 0, temporal >= 0, spatial < Self.maxLayers, temporal < Self.maxLayers else { return nil }
        let target = decodeTargets[spatial * Self.maxLayers + temporal]
        return target < 0 ? nil : Int(target)
    }

    private mutating func rebuildLadder() {
        var rungs = (0..<temporalCount).map { Rung(spatial: 0, temporal: $0) }
        for s in 1..<max(1, spatialCount) { rungs.append(Rung(spatial: s, temporal: temporalCount - 1)) }
        // The allocator takes a bounded number of positions: the lowest frame rates go first.
        if rungs.count > SFUStreamAllocator.LayerRates.capacity {
            rungs.removeFirst(rungs.count - SFUStreamAllocator.LayerRates.capacity)
        }
        ladder = rungs
    }

    /// Measures each layer's bitrate over `elapsed` nanoseconds, smoothed as
    /// ``SFUProducer/measureRates(elapsed:)`` does simulcast layers. Allocation-free.
    mutating func measureRates(elapsed: UInt64) {
        guard elapsed > 0 else { return }
        for i in bytes.indices {
            bitrate[i] = SFUProducer.smoothedRate(
                previous: bitrate[i], bytes: bytes[i] &- measuredBytes[i], elapsed: elapsed)
            measuredBytes[i] = bytes[i]
        }
    }

    /// The smoothed bitrate of one (spatial, temporal) layer alone, bits per second.
    func bitrate(spatial: Int, temporal: Int) -> Int {
        guard spatial < Self.maxLayers, temporal < Self.maxLayers else { return 0 }
        return bitrate[spatial * Self.maxLayers + temporal]
    }

    /// What forwarding each rung costs (every layer at or below it), for the stream allocator; 0 for a
    /// rung whose own layer sent nothing (the allocator treats it as not flowing).
    var rates: SFUStreamAllocator.LayerRates {
        var rates = SFUStreamAllocator.LayerRates()
        rates.count = ladder.count
        for (position, rung) in ladder.enumerated() {
            var own = 0
            var total = 0
            for s in 0...rung.spatial {
                for t in 0...rung.temporal {
                    let r = bitrate(spatial: s, temporal: t)
                    total += r
                    if s == rung.spatial && (t == rung.temporal || rung.spatial > 0) { own += r }
                }
            }
            rates[position] = own > 0 ? total : 0
        }
        return rates
    }

    /// The rung for a quality preference or, with a viewport, the smallest spatial layer that covers
    /// it (sizes from the scalability structure; the top layer while they are unknown), always at the
    /// full frame rate.
    func position(quality: SFULayerQuality, viewport: (width: Int, height: Int)?) -> Int {
        let top = spatialCount - 1
        var spatial: Int
        if let viewport {
            spatial = top
            for s in 0...top where width[s] > 0 && width[s] >= viewport.width && height[s] >= viewport.height {
                spatial = s
                break
            }
        } else {
            switch quality {
            case .low: spatial = 0
            case .medium: spatial = min(1, top)
            case .high: spatial = top
            }
        }
        return ladder.lastIndex { $0.spatial == spatial } ?? ladder.count - 1
    }
}
