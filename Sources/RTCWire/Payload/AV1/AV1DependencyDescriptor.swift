/// The dependency descriptor RTP header extension (AV1 RTP specification, appendix A), read for
/// layer selection: which spatial and temporal layer a packet's frame belongs to, where the frame
/// starts and ends, and whether a decode target may switch up at it.
///
/// Most packets carry three bytes (start/end of frame, a template ID, the frame number) that mean
/// something only against the *template structure* a key frame's first packet carries; the reader
/// of a stream keeps the last structure (``AV1DependencyStructure``) and hands it to every
/// ``AV1DependencyDescriptor/parse(_:structure:)``. A packet without a structure reads without
/// allocating.
public enum AV1DependencyDescriptorURI {
    public static let uri =
        "https://aomediacodec.github.io/av1-rtp-spec/#dependency-descriptor-rtp-header-extension"
}

/// Why a dependency descriptor could not be read.
public enum AV1DependencyDescriptorError: Error, Equatable, Sendable {
    /// Shorter than the three mandatory bytes, or a field runs past the end.
    case truncated
    /// A template ID that the structure has no template for, or a packet that needs a structure
    /// before one was seen.
    case unknownTemplate
    /// The structure is inconsistent (no template of spatial and temporal layer 0 first, more layers
    /// than the specification allows).
    case malformedStructure
}

/// The template dependency structure: the frame templates of a stream (each a spatial and temporal
/// layer with its decode target indications) and the decode targets' layers.
public struct AV1DependencyStructure: Sendable, Equatable {
    /// The decode target indication of a frame for one decode target (table A.1).
    public enum Indication: UInt8, Sendable {
        case notPresent = 0
        case discardable = 1
        /// A decoder may start decoding this target at this frame (given the chains).
        case `switch` = 2
        case required = 3
    }

    public struct Template: Sendable, Equatable {
        public var spatialID: UInt8
        public var temporalID: UInt8
        /// Two bits per decode target, target 0 lowest (see ``Indication``).
        public var indications: UInt64
    }

    public var templateIDOffset: UInt8 = 0
    public var decodeTargetCount = 1
    public var templates: [Template] = []
    /// Per decode target: the highest spatial and temporal layer it needs.
    public var decodeTargetSpatialID: [UInt8] = []
    public var decodeTargetTemporalID: [UInt8] = []
    /// Chains (0: none); a frame then carries one frame-number difference per chain.
    public var chainCount = 0
    /// Per spatial layer: the render size, when the structure says (0 otherwise).
    public var renderWidth: [UInt16] = []
    public var renderHeight: [UInt16] = []
    public var maxSpatialID: UInt8 = 0
    public var maxTemporalID: UInt8 = 0

    public init() {}
}

/// One packet's dependency descriptor.
public struct AV1DependencyDescriptor: Sendable, Equatable {
    public var startOfFrame = false
    public var endOfFrame = false
    public var templateID: UInt8 = 0
    public var frameNumber: UInt16 = 0
    public var spatialID: UInt8 = 0
    public var temporalID: UInt8 = 0
    /// The frame's decode target indications, two bits per target (the template's unless custom).
    public var indications: UInt64 = 0
    /// Bit `i` set: decode target `i` is active (all targets unless the descriptor says).
    public var activeDecodeTargets: UInt32 = 0
    /// The structure this packet carried (a key frame's first packet), to keep for later packets.
    public var structure: AV1DependencyStructure?

    public init() {}

    /// The frame's indication for decode target `target`.
    public func indication(_ target: Int) -> AV1DependencyStructure.Indication {
        guard target >= 0, target < 32 else { return .notPresent }
        return AV1DependencyStructure.Indication(rawValue: UInt8((indications >> (2 * UInt64(target))) & 3))
            ?? .notPresent
    }

    /// Writes what a forwarder selects layers by into `info` (the packet's payload info): the frame's
    /// layers, where it starts and ends, its decode target indications and, from a structure, the
    /// number of spatial layers. Allocation-free.
    public func describe(_ info: inout RTPPayloadInfo) {
        info.hasLayerIndices = true
        info.spatialLayer = spatialID
        info.temporalLayer = temporalID
        info.beginsLayerFrame = startOfFrame
        info.endsLayerFrame = endOfFrame
        info.hasDecodeTargets = true
        info.decodeTargetIndications = indications
        if let structure { info.spatialLayerCount = structure.maxSpatialID + 1 }
    }

    /// Reads the extension element `bytes` against the stream's last `structure` (or the one the
    /// element carries). Allocates only when the element carries a structure.
    public static func parse(
        _ bytes: UnsafeRawBufferPointer, structure known: AV1DependencyStructure?
    ) throws(AV1DependencyDescriptorError) -> AV1DependencyDescriptor {
        guard bytes.count >= 3 else { throw .truncated }
        var r = BitReader(bytes)
        var d = AV1DependencyDescriptor()
        d.startOfFrame = r.read(1) == 1
        d.endOfFrame = r.read(1) == 1
        d.templateID = UInt8(r.read(6))
        d.frameNumber = UInt16(r.read(16))
        var customIndications = false
        var customDiffs = false
        var customChains = false
        var activePresent = false
        var structure = known
        if bytes.count > 3 {
            let structurePresent = r.read(1) == 1
            activePresent = r.read(1) == 1
            customIndications = r.read(1) == 1
            customDiffs = r.read(1) == 1
            customChains = r.read(1) == 1
            if structurePresent {
                let parsed = try readStructure(&r)
                structure = parsed
                d.structure = parsed
            }
        }
        guard let structure else { throw .unknownTemplate }
        let targets = structure.decodeTargetCount
        d.activeDecodeTargets = targets >= 32 ? UInt32.max : (UInt32(1) << UInt32(targets)) - 1
        if activePresent { d.activeDecodeTargets = r.read(targets) }
        let index = (Int(d.templateID) + 64 - Int(structure.templateIDOffset)) % 64
        guard index < structure.templates.count else { throw .unknownTemplate }
        let template = structure.templates[index]
        d.spatialID = template.spatialID
        d.temporalID = template.temporalID
        d.indications = template.indications
        if customIndications {
            var packed: UInt64 = 0
            for t in 0..<targets { packed |= UInt64(r.read(2)) << (2 * UInt64(t)) }
            d.indications = packed
        }
        if customDiffs {
            var size = r.read(2)
            var count = 0
            while size != 0, !r.overrun, count < 64 {
                _ = r.read(4 * Int(size))
                size = r.read(2)
                count += 1
            }
        }
        if customChains { for _ in 0..<structure.chainCount { _ = r.read(8) } }
        guard !r.overrun else { throw .truncated }
        return d
    }

    /// template_dependency_structure() (A.8.2): allocates its arrays (once per key frame).
    static func readStructure(_ r: inout BitReader) throws(AV1DependencyDescriptorError) -> AV1DependencyStructure {
        var s = AV1DependencyStructure()
        s.templateIDOffset = UInt8(r.read(6))
        let targets = Int(r.read(5)) + 1
        s.decodeTargetCount = targets
        // template_layers(): each template's layers, as steps from the previous one.
        var spatial: UInt8 = 0
        var temporal: UInt8 = 0
        while true {
            guard s.templates.count < 64, !r.overrun else { throw r.overrun ? .truncated : .malformedStructure }
            s.templates.append(.init(spatialID: spatial, temporalID: temporal, indications: 0))
            let next = r.read(2)
            if next == 3 { break }
            if next == 1 {
                temporal += 1
                guard temporal < 8 else { throw .malformedStructure }
                s.maxTemporalID = max(s.maxTemporalID, temporal)
            } else if next == 2 {
                temporal = 0
                spatial += 1
                guard spatial < 4 else { throw .malformedStructure }
            }
        }
        s.maxSpatialID = spatial
        // template_dtis()
        for i in s.templates.indices {
            var packed: UInt64 = 0
            for t in 0..<targets { packed |= UInt64(r.read(2)) << (2 * UInt64(t)) }
            s.templates[i].indications = packed
        }
        // template_fdiffs(): read past (selection needs the layers, not the references).
        for _ in s.templates.indices {
            var count = 0
            while r.read(1) == 1 {
                _ = r.read(4)
                count += 1
                guard count <= 16, !r.overrun else { throw r.overrun ? .truncated : .malformedStructure }
            }
        }
        // template_chains()
        s.chainCount = Int(readNonSymmetric(&r, targets + 1))
        if s.chainCount > 0 {
            for _ in 0..<targets { _ = readNonSymmetric(&r, s.chainCount) }
            for _ in s.templates.indices { for _ in 0..<s.chainCount { _ = r.read(4) } }
        }
        // decode_target_layers(): the highest layers of the templates present in each target.
        s.decodeTargetSpatialID = Array(repeating: 0, count: targets)
        s.decodeTargetTemporalID = Array(repeating: 0, count: targets)
        for t in 0..<targets {
            for template in s.templates where (template.indications >> (2 * UInt64(t))) & 3 != 0 {
                s.decodeTargetSpatialID[t] = max(s.decodeTargetSpatialID[t], template.spatialID)
                s.decodeTargetTemporalID[t] = max(s.decodeTargetTemporalID[t], template.temporalID)
            }
        }
        if r.read(1) == 1 {  // resolutions_present_flag
            for _ in 0...Int(s.maxSpatialID) {
                s.renderWidth.append(UInt16(truncatingIfNeeded: r.read(16) + 1))
                s.renderHeight.append(UInt16(truncatingIfNeeded: r.read(16) + 1))
            }
        }
        guard !r.overrun else { throw .truncated }
        return s
    }

    /// ns(n) (A.8.1): a value below `n` in the fewest bits.
    static func readNonSymmetric(_ r: inout BitReader, _ n: Int) -> UInt32 {
        guard n > 1 else { return 0 }
        var w = 0
        var x = n
        while x != 0 {
            x >>= 1
            w += 1
        }
        let m = UInt32((1 << w) - n)
        let v = r.read(w - 1)
        if v < m { return v }
        return (v << 1) - m + r.read(1)
    }
}
