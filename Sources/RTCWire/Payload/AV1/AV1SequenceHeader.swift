/// The fields of an AV1 sequence header OBU (AV1 specification §5.5) that recording and layer
/// ordering need: profile, level and tier of the first operating point, the largest frame size and
/// the colour format.
public struct AV1SequenceHeader: Sendable, Equatable {
    public var profile: UInt8
    public var level: UInt8
    public var tier: UInt8
    public var maxWidth: Int
    public var maxHeight: Int
    public var highBitDepth: Bool
    public var twelveBit: Bool
    public var monochrome: Bool
    public var subsamplingX: Bool
    public var subsamplingY: Bool
    public var chromaSamplePosition: UInt8

    /// Parses an OBU payload (after the OBU header and size); nil when it is cut short or invalid.
    public static func parse(_ b: UnsafeRawBufferPointer) -> AV1SequenceHeader? {
        var r = BitReader(b)
        let profile = UInt8(r.read(3))
        guard profile <= 2 else { return nil }
        _ = r.read(1)  // still_picture
        let reduced = r.read(1) == 1
        var level: UInt8 = 0
        var tier: UInt8 = 0
        var decoderModelInfo = false
        var bufferDelayLength = 0
        if reduced {
            level = UInt8(r.read(5))
        } else {
            if r.read(1) == 1 {  // timing_info_present_flag
                _ = r.read(32)
                _ = r.read(32)
                if r.read(1) == 1 { guard r.readUVLC() != nil else { return nil } }  // equal_picture_interval
                decoderModelInfo = r.read(1) == 1
                if decoderModelInfo {
                    bufferDelayLength = Int(r.read(5)) + 1
                    _ = r.read(32)
                    _ = r.read(10)  // buffer_removal_time_length_minus_1, frame_presentation_time_length_minus_1
                }
            }
            let initialDisplayDelay = r.read(1) == 1
            let points = Int(r.read(5)) + 1
            for i in 0..<points {
                _ = r.read(12)  // operating_point_idc
                let l = UInt8(r.read(5))
                let t = l > 7 ? UInt8(r.read(1)) : 0
                if i == 0 { (level, tier) = (l, t) }
                if decoderModelInfo, r.read(1) == 1 {
                    _ = r.read(bufferDelayLength)
                    _ = r.read(bufferDelayLength)
                    _ = r.read(1)
                }
                if initialDisplayDelay, r.read(1) == 1 { _ = r.read(4) }
            }
        }
        let widthBits = Int(r.read(4)) + 1
        let heightBits = Int(r.read(4)) + 1
        let maxWidth = Int(r.read(widthBits)) + 1
        let maxHeight = Int(r.read(heightBits)) + 1
        var frameIDs = false
        if !reduced { frameIDs = r.read(1) == 1 }
        if frameIDs { _ = r.read(7) }  // delta_frame_id_length_minus_2, additional_frame_id_length_minus_1
        _ = r.read(3)  // use_128x128_superblock, enable_filter_intra, enable_intra_edge_filter
        if !reduced {
            _ = r.read(4)  // interintra, masked compound, warped motion, dual filter
            let orderHint = r.read(1) == 1
            if orderHint { _ = r.read(2) }  // jnt_comp, ref_frame_mvs
            var forceScreenContent: UInt32 = 2
            if r.read(1) == 0 { forceScreenContent = r.read(1) }  // seq_choose_screen_content_tools
            if forceScreenContent > 0, r.read(1) == 0 { _ = r.read(1) }  // seq_choose_integer_mv
            if orderHint { _ = r.read(3) }
        }
        _ = r.read(3)  // superres, cdef, restoration
        // color_config()
        let highBitDepth = r.read(1) == 1
        var twelveBit = false
        if profile == 2 && highBitDepth { twelveBit = r.read(1) == 1 }
        let monochrome = profile == 1 ? false : r.read(1) == 1
        var primaries: UInt32 = 2
        var transfer: UInt32 = 2
        var matrix: UInt32 = 2
        if r.read(1) == 1 {
            primaries = r.read(8)
            transfer = r.read(8)
            matrix = r.read(8)
        }
        var sx = true
        var sy = true
        var position: UInt8 = 0
        if monochrome {
            _ = r.read(1)
        } else if primaries == 1 && transfer == 13 && matrix == 0 {  // sRGB
            (sx, sy) = (false, false)
        } else {
            _ = r.read(1)  // color_range
            if profile == 0 {
                (sx, sy) = (true, true)
            } else if profile == 1 {
                (sx, sy) = (false, false)
            } else if twelveBit {
                sx = r.read(1) == 1
                sy = sx ? r.read(1) == 1 : false
            } else {
                (sx, sy) = (true, false)
            }
            if sx && sy { position = UInt8(r.read(2)) }
        }
        guard !r.overrun else { return nil }
        return AV1SequenceHeader(
            profile: profile, level: level, tier: tier, maxWidth: maxWidth, maxHeight: maxHeight,
            highBitDepth: highBitDepth, twelveBit: twelveBit, monochrome: monochrome, subsamplingX: sx,
            subsamplingY: sy, chromaSamplePosition: position)
    }

    /// The `AV1CodecConfigurationRecord` (av1C) for Matroska's CodecPrivate and MP4's `av1C` box,
    /// from a temporal unit in the low-overhead format that holds a sequence header; nil without one.
    public static func configurationRecord(fromTemporalUnit b: UnsafeRawBufferPointer) -> [UInt8]? {
        var at = 0
        while at < b.count {
            let header = b[at]
            guard header & 0x02 != 0 else { return nil }  // low-overhead format: sizes present
            let headerBytes = header & 0x04 != 0 ? 2 : 1
            guard let (size, n) = AV1LEB128.read(b, at: at + headerBytes) else { return nil }
            let start = at + headerBytes + n
            guard size <= UInt64(b.count - start) else { return nil }
            let end = start + Int(size)
            if (header >> 3) & 0x0F == AV1OBUType.sequenceHeader {
                guard let seq = parse(UnsafeRawBufferPointer(rebasing: b[start..<end])) else { return nil }
                var record: [UInt8] = [0x81, seq.profile << 5 | seq.level & 0x1F]
                var flags = seq.tier << 7
                if seq.highBitDepth { flags |= 0x40 }
                if seq.twelveBit { flags |= 0x20 }
                if seq.monochrome { flags |= 0x10 }
                if seq.subsamplingX { flags |= 0x08 }
                if seq.subsamplingY { flags |= 0x04 }
                flags |= seq.chromaSamplePosition & 0x03
                record.append(flags)
                record.append(0)  // no initial presentation delay
                record.append(contentsOf: UnsafeRawBufferPointer(rebasing: b[at..<end]))
                return record
            }
            at = end
        }
        return nil
    }

    /// The largest frame size of a temporal unit's sequence header (low-overhead format).
    public static func frameSize(ofTemporalUnit b: UnsafeRawBufferPointer) -> (width: Int, height: Int)? {
        guard let record = configurationRecord(fromTemporalUnit: b) else { return nil }
        return record.withUnsafeBytes { r -> (width: Int, height: Int)? in
            let obu = UnsafeRawBufferPointer(rebasing: r[4...])
            let headerBytes = obu[0] & 0x04 != 0 ? 2 : 1
            guard let (_, n) = AV1LEB128.read(obu, at: headerBytes) else { return nil }
            return parse(UnsafeRawBufferPointer(rebasing: obu[(headerBytes + n)...])).map {
                ($0.maxWidth, $0.maxHeight)
            }
        }
    }
}
