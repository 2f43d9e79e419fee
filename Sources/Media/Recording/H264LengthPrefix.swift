import RTCWire

/// H.264 as Matroska and MP4 store it: the recorders' conversion of the Annex B access units
/// ``EncodedFrame`` carries into 4-byte length-prefixed NAL units (the avcC's form).
enum H264LengthPrefix {
    /// Rewrites in place an access unit whose start codes are all 4 bytes (`00 00 00 01`, what the
    /// RTP assembler writes) as 4-byte big-endian length-prefixed units (the avcC's form, for
    /// Matroska and MP4): the same size, so a recorder copies the access unit in one block and
    /// rewrites its start codes during the one scan, instead of scanning for the size and copying unit
    /// by unit. The scan is `H264AnnexB.forEachUnitRange`'s, so the units are exactly its units.
    /// Returns false, with `b` partly rewritten, when the access unit is not in that form (a 3-byte
    /// start code, a unit ending in zero bytes before the next start code, an empty unit, anything
    /// before the first start code): take `H264AnnexB.forEachUnitRange` from a fresh copy then.
    static func rewriteAsLengthPrefixed(_ b: UnsafeMutableRawBufferPointer) -> Bool {
        let n = b.count
        guard n > 4, b[0] == 0 else { return false }
        // Where the next unit must begin: right after the previous one and a 4-byte start code,
        // whose bytes the scan has passed when it names the unit, so they can take its length.
        var next = 4
        var inForm = true
        H264AnnexB.forEachUnitRange(UnsafeRawBufferPointer(b)) { unit in
            guard inForm else { return }
            guard unit.lowerBound == next else {
                inForm = false
                return
            }
            storeLength(unit.count, at: unit.lowerBound - 4, in: b)
            next = unit.upperBound + 4
        }
        // The last unit runs to the end (the scan keeps its trailing zero bytes, as here).
        return inForm && next == n + 4
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
