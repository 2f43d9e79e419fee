import RTCWire

/// An avcC record (ISO/IEC 14496-15 §5.3.3.1): the NAL length size and the parameter sets. How
/// H.264 is stored in Matroska (`V_MPEG4/ISO/AVC` CodecPrivate) and MP4 (`avcC`): length-prefixed
/// NAL units, parameter sets out of band; ``annexB(_:)`` makes the access units decoders and RTP take.
struct AVCConfiguration {
    var lengthSize: Int
    /// The SPS and PPS units as Annex B.
    var parameterSets: [UInt8]

    init?(_ b: [UInt8]) {
        guard b.count >= 7, b[0] == 1 else { return nil }
        lengthSize = Int(b[4] & 3) + 1
        guard lengthSize != 3 else { return nil }
        var at = 5
        var sets: [UInt8] = []
        for countMask in [UInt8(0x1F), 0xFF] {
            guard at < b.count else { return nil }
            let count = Int(b[at] & countMask)
            at += 1
            for _ in 0..<count {
                guard at + 2 <= b.count else { return nil }
                let n = Int(b[at]) << 8 | Int(b[at + 1])
                at += 2
                guard n > 0, at + n <= b.count else { return nil }
                sets += [0, 0, 0, 1] + b[at..<(at + n)]
                at += n
            }
        }
        parameterSets = sets
    }

    /// A block's length-prefixed units as Annex B; an IDR without its own SPS gets the
    /// record's parameter sets first. Nil when a length overruns the block.
    func annexB(_ block: [UInt8]) -> (bytes: [UInt8], isKeyframe: Bool)? {
        var units: [UInt8] = []
        units.reserveCapacity(block.count + 16)
        var at = 0
        var idr = false
        var sps = false
        while at < block.count {
            guard at + lengthSize <= block.count else { return nil }
            var n = 0
            for i in 0..<lengthSize { n = n << 8 | Int(block[at + i]) }
            at += lengthSize
            guard n > 0, n <= block.count - at else { return nil }
            let type = block[at] & 0x1F
            if type == H264NALType.idr { idr = true }
            if type == H264NALType.sps { sps = true }
            units += [0, 0, 0, 1] + block[at..<(at + n)]
            at += n
        }
        return (idr && !sps ? parameterSets + units : units, idr)
    }
}
