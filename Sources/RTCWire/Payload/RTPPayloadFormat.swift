/// What the receive and forwarding paths need to know about one RTP payload, read once from its
/// codec payload header.
///
/// The receiver's frame assembler, the SFU's producer (key frames, layer sizes) and every consumer's
/// munger all work from this value, so a forwarded packet is parsed once however many subscribers it
/// reaches. Offsets are from the start of the payload; 0 means "not present" for the rewritable
/// fields (no codec header field can sit at offset 0 behind a descriptor's first byte).
public struct RTPPayloadInfo: Sendable, Equatable {
    /// Bytes of codec payload header before the media bytes (VP8: the payload descriptor; Opus: 0).
    public var headerLength: Int = 0
    /// The packet starts a frame (VP8: S=1 and partition 0; Opus: always).
    public var startsFrame = true
    /// The packet starts a key frame (VP8: P bit clear and the start code; Opus: always).
    public var isKeyframe = true
    /// Picture size coded in a VP8 key frame's header (0 when unknown).
    public var width: UInt16 = 0
    /// See ``width``.
    public var height: UInt16 = 0
    /// The picture ID, when ``pictureIDOffset`` is not 0.
    public var pictureID: UInt16 = 0
    /// Where the picture ID starts in the payload (0: none).
    public var pictureIDOffset: UInt8 = 0
    /// Whether the picture ID uses the 15-bit form.
    public var pictureIDIs15Bit = false
    /// TL0PICIDX, when ``tl0PicIdxOffset`` is not 0.
    public var tl0PicIdx: UInt8 = 0
    /// Where TL0PICIDX sits in the payload (0: none).
    public var tl0PicIdxOffset: UInt8 = 0
    /// The temporal layer (VP8 TID), or nil.
    public var temporalLayer: UInt8?
    /// The frame can be dropped without affecting others (VP8 N bit).
    public var nonReference = false
    /// The spatial layer of a scalable stream (VP9 SID; 0 without layer indices).
    public var spatialLayer: UInt8 = 0
    /// The payload carries layer indices (VP9 L bit): the stream is scalable and a forwarder may
    /// select layers in it.
    public var hasLayerIndices = false
    /// The packet starts a layer frame (VP9 B bit; the frame of one spatial layer in a picture).
    public var beginsLayerFrame = false
    /// The packet ends a layer frame (VP9 E bit): with the highest spatial layer forwarded, the end
    /// of the picture the subscriber sees.
    public var endsLayerFrame = false
    /// The layer frame is predicted from earlier pictures (VP9 P bit).
    public var interPicturePredicted = false
    /// A switching-up point (VP9 U bit): later frames of higher temporal layers do not reference
    /// frames before this one, so a forwarder may add those layers from here.
    public var switchingUpPoint = false
    /// Spatial layers announced by a scalability structure in this packet (VP9 N_S + 1; AV1: the
    /// dependency descriptor's template structure; 0: none).
    public var spatialLayerCount: UInt8 = 0
    /// The frame's decode target indications (AV1 dependency descriptor), two bits per decode target,
    /// target 0 lowest (``AV1DependencyStructure/Indication``); meaningful when ``hasDecodeTargets``.
    public var decodeTargetIndications: UInt64 = 0
    /// The packet named its frame's decode targets (a dependency descriptor was read): a forwarder
    /// selects by decode target rather than by layer indices alone.
    public var hasDecodeTargets = false

    /// Creates the info of a payload with no codec header (a whole frame, decodable alone).
    public init() {}

    /// An empty payload of a video format: padding (RFC 3550 §5.1), which starts no frame and
    /// carries no key frame. One rule for every format that reads a payload header.
    @inlinable public static var padding: RTPPayloadInfo {
        var info = RTPPayloadInfo()
        info.startsFrame = false
        info.isKeyframe = false
        return info
    }

    /// Whether the payload carries a picture ID.
    @inlinable public var hasPictureID: Bool { pictureIDOffset != 0 }
    /// Whether the payload carries TL0PICIDX.
    @inlinable public var hasTL0PicIdx: Bool { tl0PicIdxOffset != 0 }

    /// The frame's indication for decode target `target` (``decodeTargetIndications``); 0
    /// (not present) for a target out of range.
    @inlinable public func decodeTargetIndication(_ target: Int) -> UInt8 {
        guard target >= 0, target < 32 else { return 0 }
        return UInt8(truncatingIfNeeded: (decodeTargetIndications >> (2 * UInt64(target))) & 3)
    }
}

/// Errors of ``RTPPayloadFormat/inspect(_:)``.
public enum RTPPayloadError: Error, Equatable, Sendable {
    /// An empty payload where the codec needs bytes.
    case empty
    /// The codec payload header is malformed (VP8: see ``VP8Error``).
    case malformedHeader
}

/// One codec's RTP payload format: how its payload header is read and how a frame is split into
/// packets. The codec's clock has one home, ``MediaCodec/clockRate``.
///
/// Adding a codec (H.264, AV1) is one type conforming to this protocol plus one ``MediaCodec`` case;
/// the receiver, the sender and the SFU dispatch through ``MediaCodec/inspect(_:)``.
public protocol RTPPayloadFormat {
    /// Reads the payload header of one RTP payload (without RTP header or RTX prefix).
    static func inspect(_ payload: UnsafeRawBufferPointer) throws(RTPPayloadError) -> RTPPayloadInfo
}

/// A video codec's payload format: a payload header to read, and an empty payload that is padding
/// (``RTPPayloadInfo/padding``, RFC 3550 §5.1) rather than an error, one rule for every such format.
public protocol VideoPayloadFormat: RTPPayloadFormat {
    /// Reads the payload header of a non-empty payload into `info`, which starts as
    /// `RTPPayloadInfo()` (a payload with no header that starts a key frame).
    static func read(_ payload: UnsafeRawBufferPointer, into info: inout RTPPayloadInfo) throws(RTPPayloadError)
}

extension VideoPayloadFormat {
    /// An empty payload is padding; any other is read by ``read(_:into:)``.
    @inlinable
    public static func inspect(_ payload: UnsafeRawBufferPointer) throws(RTPPayloadError) -> RTPPayloadInfo {
        guard !payload.isEmpty else { return .padding }
        var info = RTPPayloadInfo()
        try read(payload, into: &info)
        return info
    }
}

/// Opus (RFC 7587): one packet per frame, no payload header, every packet decodable alone.
public enum OpusPayloadFormat: RTPPayloadFormat {
    @inlinable
    public static func inspect(_ payload: UnsafeRawBufferPointer) throws(RTPPayloadError) -> RTPPayloadInfo {
        guard !payload.isEmpty else { throw .empty }
        return RTPPayloadInfo()
    }
}

extension MediaCodec {
    /// Reads `payload` with this codec's ``RTPPayloadFormat``.
    @inlinable
    public func inspect(_ payload: UnsafeRawBufferPointer) throws(RTPPayloadError) -> RTPPayloadInfo {
        switch self {
        case .opus: return try OpusPayloadFormat.inspect(payload)
        case .vp8: return try VP8PayloadFormat.inspect(payload)
        case .h264: return try H264PayloadFormat.inspect(payload)
        case .vp9: return try VP9PayloadFormat.inspect(payload)
        case .av1: return try AV1PayloadFormat.inspect(payload)
        }
    }
}

/// A payload rewrite a munger decided for one outgoing packet, applied in place by the sender after
/// it copied the payload, at offsets the single parse found (no second parse).
public struct RTPPayloadRewrite: Sendable, Equatable {
    /// Where the picture ID starts in the payload (0: leave it).
    public var pictureIDOffset: UInt8 = 0
    /// Whether the picture ID field is 15 bits wide.
    public var pictureIDIs15Bit = false
    /// The picture ID to write.
    public var pictureID: UInt16 = 0
    /// Where TL0PICIDX sits in the payload (0: leave it).
    public var tl0PicIdxOffset: UInt8 = 0
    /// The TL0PICIDX to write.
    public var tl0PicIdx: UInt8 = 0

    /// A rewrite that changes nothing (pass-through codecs).
    public static let none = RTPPayloadRewrite()

    /// Creates a rewrite; the defaults change nothing.
    public init(
        pictureIDOffset: UInt8 = 0, pictureIDIs15Bit: Bool = false, pictureID: UInt16 = 0, tl0PicIdxOffset: UInt8 = 0,
        tl0PicIdx: UInt8 = 0
    ) {
        self.pictureIDOffset = pictureIDOffset
        self.pictureIDIs15Bit = pictureIDIs15Bit
        self.pictureID = pictureID
        self.tl0PicIdxOffset = tl0PicIdxOffset
        self.tl0PicIdx = tl0PicIdx
    }

    /// Whether applying it changes no byte.
    @inlinable public var isEmpty: Bool { pictureIDOffset == 0 && tl0PicIdxOffset == 0 }

    /// Writes the rewritten fields into `payload` (the copy about to be sent). Offsets past the end
    /// are ignored, so a rewrite can never write outside the payload.
    @inlinable
    public func apply(to payload: UnsafeMutableRawBufferPointer) {
        if pictureIDOffset != 0 {
            let i = Int(pictureIDOffset)
            if pictureIDIs15Bit {
                if i + 1 < payload.count {
                    payload[i] = 0x80 | UInt8(truncatingIfNeeded: (pictureID >> 8) & 0x7F)
                    payload[i + 1] = UInt8(truncatingIfNeeded: pictureID)
                }
            } else if i < payload.count {
                payload[i] = UInt8(truncatingIfNeeded: pictureID) & 0x7F
            }
        }
        if tl0PicIdxOffset != 0, Int(tl0PicIdxOffset) < payload.count {
            payload[Int(tl0PicIdxOffset)] = tl0PicIdx
        }
    }
}

/// Rewrites the codec fields of a forwarded stream so that a receiver sees one continuous stream
/// across source switches (simulcast layers). Loop-confined state, one per down track.
public protocol RTPPayloadMunger {
    /// The forwarder starts taking packets from a new source at `info` (a key frame): continue the
    /// outgoing fields from the last ones sent.
    mutating func switchSource(at info: RTPPayloadInfo)
    /// The rewrite for one packet of the current source.
    mutating func munge(_ info: RTPPayloadInfo) -> RTPPayloadRewrite
}

/// The munger of codecs with nothing to rewrite (Opus).
public struct PassThroughMunger: RTPPayloadMunger {
    public init() {}
    public mutating func switchSource(at info: RTPPayloadInfo) {}
    public mutating func munge(_ info: RTPPayloadInfo) -> RTPPayloadRewrite { .none }
}
