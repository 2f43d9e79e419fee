/// VP9 (RFC 9628) as an ``RTPPayloadFormat``: the payload descriptor (flexible and non-flexible
/// mode, layer indices, reference differences, scalability structure) read in one pass, and on a key
/// frame's first packet the picture size, without allocating.
///
/// A frame starts at a packet with the B bit of spatial layer 0 (or without layer indices), so the
/// layer frames of one picture (spatial SVC) make one frame, ended by the marker bit. A key frame is
/// such a start with the P bit clear. The size comes from the scalability structure (its largest
/// layer) or else from the key frame's uncompressed header. Picture ID and TL0PICIDX sit where the
/// VP8 descriptor puts them (an M bit then 7 or 15 bits; one byte), so the same munger keeps them
/// continuous across simulcast switches.
public enum VP9PayloadFormat: VideoPayloadFormat {
    /// Reads the payload descriptor and, on a key frame's first packet, the picture size.
    ///
    /// A descriptor cut short, one followed by no VP9 byte, or more than three reference differences
    /// throws ``RTPPayloadError/malformedHeader``.
    @inlinable
    public static func read(_ p: UnsafeRawBufferPointer, into info: inout RTPPayloadInfo) throws(RTPPayloadError) {
        let b0 = p[0]
        let hasPictureID = b0 & 0x80 != 0
        let interPredicted = b0 & 0x40 != 0
        let hasLayers = b0 & 0x20 != 0
        let flexible = b0 & 0x10 != 0
        let begins = b0 & 0x08 != 0
        let hasStructure = b0 & 0x02 != 0
        var at = 1
        if hasPictureID { try VP8PayloadFormat.readPictureID(p, at: &at, into: &info) }
        var spatialLayer: UInt8 = 0
        if hasLayers {
            guard at < p.count else { throw .malformedHeader }
            let l = p[at]
            info.temporalLayer = l >> 5
            info.switchingUpPoint = l & 0x10 != 0
            spatialLayer = (l >> 1) & 0x07
            info.spatialLayer = spatialLayer
            info.hasLayerIndices = true
            at += 1
            if !flexible {
                guard at < p.count else { throw .malformedHeader }
                info.tl0PicIdxOffset = UInt8(at)
                info.tl0PicIdx = p[at]
                at += 1
            }
        }
        if flexible && interPredicted {
            // Up to three P_DIFF bytes, each with N set while another follows.
            var diffs = 0
            while true {
                guard at < p.count, diffs < 3 else { throw .malformedHeader }
                let more = p[at] & 0x01 != 0
                at += 1
                diffs += 1
                if !more { break }
            }
        }
        if hasStructure {
            guard at < p.count else { throw .malformedHeader }
            let ss = p[at]
            let layers = Int(ss >> 5) + 1
            info.spatialLayerCount = UInt8(layers)
            let hasSizes = ss & 0x10 != 0
            let hasGroup = ss & 0x08 != 0
            at += 1
            if hasSizes {
                guard at + 4 * layers <= p.count else { throw .malformedHeader }
                for _ in 0..<layers {
                    let w = UInt16(p[at]) << 8 | UInt16(p[at + 1])
                    let h = UInt16(p[at + 2]) << 8 | UInt16(p[at + 3])
                    if UInt32(w) * UInt32(h) >= UInt32(info.width) * UInt32(info.height) {
                        info.width = w
                        info.height = h
                    }
                    at += 4
                }
            }
            if hasGroup {
                guard at < p.count else { throw .malformedHeader }
                let pictures = Int(p[at])
                at += 1
                for _ in 0..<pictures {
                    guard at < p.count else { throw .malformedHeader }
                    let references = Int((p[at] >> 2) & 0x03)
                    at += 1 + references
                }
                guard at <= p.count else { throw .malformedHeader }
            }
        }
        guard at < p.count else { throw .malformedHeader }
        info.headerLength = at
        info.nonReference = false
        info.beginsLayerFrame = begins
        info.endsLayerFrame = b0 & 0x04 != 0
        info.interPicturePredicted = interPredicted
        info.startsFrame = begins && spatialLayer == 0
        info.isKeyframe = info.startsFrame && !interPredicted
        if info.isKeyframe && info.width == 0,
            let size = VP9FrameHeader.keyframeSize(UnsafeRawBufferPointer(rebasing: p[at...]))
        {
            info.width = size.width
            info.height = size.height
        }
    }
}

/// The part of a VP9 frame's uncompressed header (VP9 bitstream specification §6.2) that gives a key
/// frame's size and profile.
public enum VP9FrameHeader {
    /// The profile (0–3) and coded size of a key frame; nil for any other frame or a short header.
    @inlinable
    public static func keyframeInfo(_ b: UnsafeRawBufferPointer) -> (profile: UInt8, width: UInt16, height: UInt16)? {
        var r = BitReader(b)
        guard r.read(2) == 2 else { return nil }  // frame_marker
        let low = r.read(1)
        let high = r.read(1)
        let profile = UInt8(high << 1 | low)
        if profile == 3 { _ = r.read(1) }
        guard r.read(1) == 0 else { return nil }  // show_existing_frame
        guard r.read(1) == 0 else { return nil }  // frame_type: KEY_FRAME is 0
        _ = r.read(2)  // show_frame, error_resilient_mode
        guard r.read(8) == 0x49, r.read(8) == 0x83, r.read(8) == 0x42 else { return nil }
        if profile >= 2 { _ = r.read(1) }  // ten_or_twelve_bit
        let colorSpace = r.read(3)
        if colorSpace != 7 {  // not RGB
            _ = r.read(1)  // color_range
            if profile == 1 || profile == 3 { _ = r.read(3) }  // subsampling_x, _y, reserved
        } else if profile == 1 || profile == 3 {
            _ = r.read(1)
        }
        let w = r.read(16) + 1
        let h = r.read(16) + 1
        guard !r.overrun else { return nil }
        return (profile, UInt16(clamping: w), UInt16(clamping: h))  // 65,536 is legal: kept as 65,535
    }

    /// The coded size of a key frame (see ``keyframeInfo(_:)``).
    @inlinable
    public static func keyframeSize(_ b: UnsafeRawBufferPointer) -> (width: UInt16, height: UInt16)? {
        keyframeInfo(b).map { ($0.width, $0.height) }
    }
}

extension VP9PayloadFormat {
    /// Bytes of payload descriptor that ``writePacket(_:of:frame:pictureID:isKeyframe:into:)``
    /// writes on an inter frame's packets: the flags, a 15-bit picture ID, the layer indices and
    /// TL0PICIDX.
    public static let packetDescriptorLength = 5
    /// Bytes a key frame's packets reserve: ``packetDescriptorLength`` and, on the first packet, the
    /// scalability structure (one layer with its size, a group of one picture).
    public static let keyframePacketDescriptorLength = packetDescriptorLength + 8

    /// The descriptor length to plan a frame's split with (``VP8PayloadFormat/Split``).
    @inlinable
    public static func descriptorLength(isKeyframe: Bool) -> Int {
        isKeyframe ? keyframePacketDescriptorLength : packetDescriptorLength
    }

    /// Writes packet `k` of one VP9 frame split by `split` (planned with
    /// ``descriptorLength(isKeyframe:)``) at the start of `buffer` and returns its length, or 0 when
    /// `buffer` is too small.
    ///
    /// The descriptor is the non-flexible mode's (RFC 9628 §4.2) for a stream of one spatial and one
    /// temporal layer, as libwebrtc's receiver needs it: I with a 15-bit picture ID, P on an inter
    /// frame, L with layer indices 0 and TL0PICIDX (the picture ID's low byte: every picture is a
    /// base-layer picture, so both count up together), B on the first packet and E on the last. A
    /// key frame's first packet carries the scalability structure (V): one layer, its size from the
    /// frame's uncompressed header, and a group of one picture that references the previous one.
    @inlinable
    public static func writePacket(
        _ k: Int, of split: VP8PayloadFormat.Split, frame: UnsafeRawBufferPointer, pictureID: UInt16,
        isKeyframe: Bool, into buffer: UnsafeMutableRawBufferPointer
    ) -> Int {
        let chunk = split.chunk(k)
        let size = k == 0 && isKeyframe ? VP9FrameHeader.keyframeSize(frame) : nil
        let descriptor = packetDescriptorLength + (size == nil ? 0 : 8)
        let length = descriptor + chunk.count
        guard length <= buffer.count, let dst = buffer.baseAddress else { return 0 }
        var flags: UInt8 = 0xA0  // I, L
        if !isKeyframe { flags |= 0x40 }  // P
        if k == 0 { flags |= 0x08 }  // B
        if k == split.count - 1 { flags |= 0x04 }  // E
        if size != nil { flags |= 0x02 }  // V
        buffer[0] = flags
        buffer[1] = 0x80 | UInt8(truncatingIfNeeded: pictureID >> 8) & 0x7F  // M: 15 bits
        buffer[2] = UInt8(truncatingIfNeeded: pictureID)
        buffer[3] = 0  // TID 0, U 0, SID 0, D 0
        buffer[4] = UInt8(truncatingIfNeeded: pictureID)  // TL0PICIDX
        if let size {
            buffer[5] = 0x18  // N_S 0 (one layer), Y (sizes), G (group)
            buffer[6] = UInt8(truncatingIfNeeded: size.width >> 8)
            buffer[7] = UInt8(truncatingIfNeeded: size.width)
            buffer[8] = UInt8(truncatingIfNeeded: size.height >> 8)
            buffer[9] = UInt8(truncatingIfNeeded: size.height)
            buffer[10] = 1  // N_G: one picture in the group
            buffer[11] = 0x04  // TID 0, U 0, R 1
            buffer[12] = 1  // P_DIFF: the previous picture
        }
        if let src = frame.baseAddress, !chunk.isEmpty {
            (dst + descriptor).copyMemory(from: src + chunk.lowerBound, byteCount: chunk.count)
        }
        return length
    }
}

extension VP9PayloadFormat {
    /// Calls `body` with each spatial layer's size (index, width, height) from the scalability
    /// structure of `p`, a payload whose descriptor carries one with sizes (a key picture's first
    /// packet, as libwebrtc sends it). Returns the number of layers reported (0: no sizes, or a
    /// descriptor that ``inspect(_:)`` would refuse). Allocation-free; run per key frame, not per packet.
    @discardableResult
    public static func forEachLayerSize(
        _ p: UnsafeRawBufferPointer, _ body: (_ layer: Int, _ width: UInt16, _ height: UInt16) -> Void
    ) -> Int {
        guard p.count >= 1, p[0] & 0x02 != 0 else { return 0 }
        let b0 = p[0]
        var at = 1
        if b0 & 0x80 != 0 {
            guard at < p.count else { return 0 }
            at += p[at] & 0x80 != 0 ? 2 : 1
        }
        if b0 & 0x20 != 0 { at += b0 & 0x10 != 0 ? 1 : 2 }
        if b0 & 0x10 != 0, b0 & 0x40 != 0 {
            var diffs = 0
            while true {
                guard at < p.count, diffs < 3 else { return 0 }
                let more = p[at] & 0x01 != 0
                at += 1
                diffs += 1
                if !more { break }
            }
        }
        guard at < p.count, p[at] & 0x10 != 0 else { return 0 }
        let layers = Int(p[at] >> 5) + 1
        at += 1
        guard at + 4 * layers <= p.count else { return 0 }
        for i in 0..<layers {
            body(i, UInt16(p[at]) << 8 | UInt16(p[at + 1]), UInt16(p[at + 2]) << 8 | UInt16(p[at + 3]))
            at += 4
        }
        return layers
    }
}

extension VP9FrameHeader {
    /// Calls `body` with each frame of a VP9 superframe (annex B: the frames joined, then an index of
    /// their sizes between two marker bytes), or with `data` whole when it has no valid index.
    @inlinable
    public static func forEachFrame(_ data: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        guard let last = data.last, last & 0xE0 == 0xC0 else { return body(data) }
        let frames = Int(last & 0x07) + 1
        let magnitude = Int((last >> 3) & 0x03) + 1
        let indexSize = 2 + magnitude * frames
        guard data.count > indexSize, data[data.count - indexSize] == last else { return body(data) }
        var at = data.count - indexSize + 1
        var offset = 0
        for _ in 0..<frames {
            var size = 0
            for k in 0..<magnitude { size |= Int(data[at + k]) << (8 * k) }
            at += magnitude
            guard size > 0, offset + size <= data.count - indexSize else { return }
            body(UnsafeRawBufferPointer(rebasing: data[offset..<offset + size]))
            offset += size
        }
    }

    /// The largest coded size a key picture states: its key frame's, or in a superframe (spatial
    /// SVC) an upper layer's when that frame codes its size explicitly (`found_ref` 0, as libvpx
    /// codes the layers of a key picture); nil when the first frame is not a key frame.
    @inlinable
    public static func keyPictureSize(_ data: UnsafeRawBufferPointer) -> (width: UInt16, height: UInt16)? {
        var best: (width: UInt16, height: UInt16)?
        var first = true
        forEachFrame(data) { frame in
            defer { first = false }
            if first {
                best = keyframeSize(frame)
                return
            }
            guard best != nil, let size = explicitInterFrameSize(frame) ?? keyframeSize(frame),
                UInt32(size.width) * UInt32(size.height) > UInt32(best!.width) * UInt32(best!.height)
            else { return }
            best = size
        }
        return best
    }

    /// The size an inter or intra-only frame codes explicitly (VP9 specification §6.2: `frame_size()`,
    /// or `frame_size_with_refs()` with no `found_ref`); nil when it takes a reference's size.
    @inlinable
    static func explicitInterFrameSize(_ b: UnsafeRawBufferPointer) -> (width: UInt16, height: UInt16)? {
        var r = BitReader(b)
        guard r.read(2) == 2 else { return nil }
        let low = r.read(1)
        let high = r.read(1)
        let profile = high << 1 | low
        if profile == 3 { _ = r.read(1) }
        guard r.read(1) == 0, r.read(1) == 1 else { return nil }  // show_existing_frame; NON_KEY_FRAME
        let showFrame = r.read(1)
        let errorResilient = r.read(1)
        let intraOnly = showFrame == 0 ? r.read(1) : 0
        if errorResilient == 0 { _ = r.read(2) }  // reset_frame_context
        if intraOnly == 1 {
            guard r.read(8) == 0x49, r.read(8) == 0x83, r.read(8) == 0x42 else { return nil }
            if profile > 0 {
                if profile >= 2 { _ = r.read(1) }
                if r.read(3) != 7 {
                    _ = r.read(1)
                    if profile == 1 || profile == 3 { _ = r.read(3) }
                } else if profile == 1 || profile == 3 {
                    _ = r.read(1)
                }
            }
            _ = r.read(8)  // refresh_frame_flags
        } else {
            _ = r.read(8)  // refresh_frame_flags
            _ = r.read(12)  // three ref_frame_idx and sign bias
            for _ in 0..<3 where r.read(1) == 1 { return nil }  // found_ref: a reference's size
        }
        let w = r.read(16) + 1
        let h = r.read(16) + 1
        guard !r.overrun else { return nil }
        return (UInt16(clamping: w), UInt16(clamping: h))
    }
}
