import RTCWire

/// H.264 as Matroska and MP4 store it: the recorders' conversion of the Annex B access units
/// ``EncodedFrame`` carries into 4-byte length-prefixed NAL units (the avcC's form).
enum H264LengthPrefix {
    /// Rewrites in place an access unit whose start codes are all 4 bytes (`00 00 00 01`, what the
    /// RTP assembler writes) as 4-byte big-endian length-prefixed units (the avcC's form, for
    /// Matroska and MP4): the same size, so a recorder copies the access unit in one block and
    /// rewrites its start codes with one scan, instead of scanning for the size and copying unit by
    /// unit. Returns false, with `b` partly rewritten, when the access unit is not in that form (a
    /// 3-byte start code, a unit ending in zero bytes, no start code first): take
    /// `H264AnnexB.forEachUnitRange` from a fresh copy then. Agrees with it on every unit it rewrites.
    static func rewriteAsLengthPrefixed(_ b: UnsafeMutableRawBufferPointer) -> Bool {
        let n = b.count
        guard n > 4, b[0] == 0, b[1] == 0, b[2] == 0, b[3] == 1, b[4] != 0 else { return false }
        var code = 0  // where the current unit's start code (its length field) is
        var i = 4
        // The scan of forEachUnitRange: a start code `00 00 01` at i; here its byte before must be
        // the fourth zero, and the unit before it must not end in a zero byte.
        while i + 2 < n {
            let third = b[i + 2]
            if third > 1 {
                i += 3
            } else if third == 0 {
                i += 1
            } else if b[i] == 0, b[i + 1] == 0 {
                guard i - 1 > code + 4, b[i - 1] == 0, b[i - 2] != 0 else { return false }
                storeLength(i - 1 - (code + 4), at: code, in: b)
                code = i - 1
                i += 3
            } else {
                i += 3
            }
        }
        guard n > code + 4, b[n - 1] != 0 else { return false }
        storeLength(n - (code + 4), at: code, in: b)
        return true
    }

    private static func storeLength(_ length: Int, at offset: Int, in b: UnsafeMutableRawBufferPointer) {
        let v = UInt32(truncatingIfNeeded: length)
        b[offset] = UInt8(v >> 24)
        b[offset + 1] = UInt8(v >> 16 & 0xFF)
        b[offset + 2] = UInt8(v >> 8 & 0xFF)
        b[offset + 3] = UInt8(v & 0xFF)
    }

    /// Appends `annexB` to `out` as length-prefixed units: one block copy and an in-place rewrite
    /// when it has 4-byte start codes only, else unit by unit. Returns the bytes appended.
    @discardableResult
    static func append(_ annexB: UnsafeRawBufferPointer, to out: inout [UInt8]) -> Int {
        let before = out.count
        out.append(contentsOf: annexB)
        let rewritten = out.withUnsafeMutableBytes {
            rewriteAsLengthPrefixed(UnsafeMutableRawBufferPointer(rebasing: $0[before...]))
        }
        if !rewritten {
            out.removeSubrange(before...)
            H264AnnexB.forEachUnitRange(annexB) { unit in
                out.appendBE32(UInt32(unit.count))
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: annexB[unit]))
            }
        }
        return out.count - before
    }

    /// The size ``append(_:to:)`` appends, found by a scan (for a size written before the data).
    static func length(_ annexB: UnsafeRawBufferPointer) -> Int {
        var n = 0
        H264AnnexB.forEachUnitRange(annexB) { n += 4 + $0.count }
        return n
    }
}
