/// Minimal EBML (Matroska) serialisation helpers.
enum EBML {
    /// Sizes of this value mean "unknown size" (a live stream that is still growing).
    static let unknownSize8: [UInt8] = [0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]

    /// An 8-byte size field for `size` (so it can be patched in place later).
    static func size8(_ size: Int) -> [UInt8] {
        var out: [UInt8] = [0x01]
        for shift in stride(from: 48, through: 0, by: -8) { out.append(UInt8((UInt64(size) >> UInt64(shift)) & 0xFF)) }
        return out
    }
}

extension Array where Element == UInt8 {
    mutating func ebmlID(_ id: UInt32) {
        if id > 0xFF_FFFF { append(UInt8(id >> 24)) }
        if id > 0xFFFF { append(UInt8((id >> 16) & 0xFF)) }
        if id > 0xFF { append(UInt8((id >> 8) & 0xFF)) }
        append(UInt8(id & 0xFF))
    }

    /// Appends a data size as the shortest EBML variable-length integer (all-ones is reserved).
    mutating func ebmlSize(_ size: Int) {
        let n = UInt64(size)
        if n < 0x7F {
            append(0x80 | UInt8(n))
        } else if n < 0x3FFF {
            append(0x40 | UInt8(n >> 8))
            append(UInt8(n & 0xFF))
        } else if n < 0x1F_FFFF {
            append(0x20 | UInt8(n >> 16))
            append(UInt8((n >> 8) & 0xFF))
            append(UInt8(n & 0xFF))
        } else if n < 0x0FFF_FFFF {
            append(0x10 | UInt8(n >> 24))
            append(UInt8((n >> 16) & 0xFF))
            append(UInt8((n >> 8) & 0xFF))
            append(UInt8(n & 0xFF))
        } else {
            append(contentsOf: EBML.size8(size))
        }
    }

    mutating func ebmlUInt(_ id: UInt32, _ value: UInt64, width: Int? = nil) {
        var bytes = 1
        while bytes < 8, value >> UInt64(bytes * 8) != 0 { bytes += 1 }
        let w = width ?? bytes
        ebmlID(id)
        ebmlSize(w)
        for i in stride(from: w - 1, through: 0, by: -1) { append(UInt8((value >> UInt64(i * 8)) & 0xFF)) }
    }

    mutating func ebmlFloat(_ id: UInt32, _ value: Double) {
        ebmlID(id)
        ebmlSize(8)
        let bits = value.bitPattern
        for i in stride(from: 7, through: 0, by: -1) { append(UInt8((bits >> UInt64(i * 8)) & 0xFF)) }
    }

    mutating func ebmlString(_ id: UInt32, _ value: String) { ebmlBytes(id, Array(value.utf8)) }

    mutating func ebmlBytes(_ id: UInt32, _ value: [UInt8]) {
        ebmlID(id)
        ebmlSize(value.count)
        append(contentsOf: value)
    }

    mutating func ebmlMaster(_ id: UInt32, _ build: (inout [UInt8]) -> Void) {
        var body: [UInt8] = []
        build(&body)
        ebmlID(id)
        ebmlSize(body.count)
        append(contentsOf: body)
    }

    /// Appends a Void element occupying exactly `total` bytes (at least 2).
    mutating func ebmlVoid(total: Int) {
        precondition(total >= 2 && total <= 127, "void size")
        append(0xEC)
        append(0x80 | UInt8(total - 2))
        append(contentsOf: repeatElement(0, count: total - 2))
    }
}
