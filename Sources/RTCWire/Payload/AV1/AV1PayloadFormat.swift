/// AV1 (the AOM "RTP Payload Format for AV1") as an ``RTPPayloadFormat``.
///
/// A payload is an aggregation header (`Z Y W W N - - -`) and OBU elements: with `W` 0 each element
/// has a LEB128 length, otherwise the last of `W` elements takes the rest. `Z` says the first element
/// continues an OBU fragment, `Y` that the last one continues in the next packet, `N` that the packet
/// starts a coded video sequence (a key frame with its sequence header). The payload is kept whole
/// (``RTPPayloadInfo/headerLength`` 0): ``AV1TemporalUnitBuilder`` turns a temporal unit's payloads
/// into OBUs in the low-overhead format (each with its size field) that files hold.
///
/// Only a packet with `N` is certainly a temporal unit's first; otherwise, as with H.264, a temporal
/// unit begins after the previous marker or at a new timestamp (the frame assembler's rule). The
/// size of a key frame comes from its sequence header, when the first element holds it.
public enum AV1PayloadFormat: VideoPayloadFormat {
    /// Reads the aggregation header and the first element (see above).
    @inlinable
    public static func read(_ p: UnsafeRawBufferPointer, into info: inout RTPPayloadInfo) throws(RTPPayloadError) {
        let h = p[0]
        let continues = h & 0x80 != 0
        let count = Int(h >> 4) & 0x03
        let newSequence = h & 0x08 != 0
        guard p.count >= 2 else { throw .malformedHeader }
        guard !(continues && newSequence) else { throw .malformedHeader }
        info.headerLength = 0
        info.startsFrame = newSequence
        info.isKeyframe = newSequence
        // The first element: its length (unless it is the only one of a counted set) and its OBU.
        var at = 1
        var length = p.count - 1
        if count != 1 {
            guard let (value, n) = AV1LEB128.read(p, at: at) else { throw .malformedHeader }
            at += n
            guard value <= UInt64(p.count - at) else { throw .malformedHeader }
            length = Int(value)
        }
        guard length >= 1 else { return }
        if !continues {
            let header = p[at]
            guard header & 0x80 == 0 else { throw .malformedHeader }  // forbidden bit
            let hasExtension = header & 0x04 != 0
            if hasExtension, length >= 2 { info.temporalLayer = p[at + 1] >> 5 }
            if newSequence, (header >> 3) & 0x0F == AV1OBUType.sequenceHeader {
                let headerBytes = hasExtension ? 2 : 1
                var start = at + headerBytes
                var end = at + length
                if header & 0x02 != 0, let (size, n) = AV1LEB128.read(p, at: start) {
                    start += n
                    end = min(end, start + Int(clamping: size))
                }
                if start < end, let seq = AV1SequenceHeader.parse(UnsafeRawBufferPointer(rebasing: p[start..<end])) {
                    info.width = UInt16(clamping: seq.maxWidth)
                    info.height = UInt16(clamping: seq.maxHeight)
                }
            }
        }
    }
}

/// OBU types this stack looks at (AV1 specification §6.2.2).
public enum AV1OBUType {
    public static let sequenceHeader: UInt8 = 1
    public static let temporalDelimiter: UInt8 = 2
    public static let tileList: UInt8 = 8
    public static let padding: UInt8 = 15

    /// Bytes of temporal delimiter OBUs (each with its size field) at the start of `unit`: what an
    /// encoder or an IVF file puts before a temporal unit, and the low-overhead format this stack
    /// passes around (and Matroska stores) leaves out.
    public static func leadingTemporalDelimiters(_ unit: UnsafeRawBufferPointer) -> Int {
        var at = 0
        while at < unit.count {
            let header = unit[at]
            guard (header >> 3) & 0x0F == temporalDelimiter, header & 0x02 != 0 else { break }
            let headerBytes = header & 0x04 != 0 ? 2 : 1
            guard let (size, n) = AV1LEB128.read(unit, at: at + headerBytes),
                size <= UInt64(unit.count - at - headerBytes - n)
            else { break }
            at += headerBytes + n + Int(size)
        }
        return at
    }
}

/// Unsigned LEB128 (AV1 specification §4.10.5), at most 8 bytes.
public enum AV1LEB128 {
    /// The value at `at` and the bytes it took; nil when cut short or longer than 8 bytes.
    @inlinable
    public static func read(_ p: UnsafeRawBufferPointer, at: Int) -> (UInt64, Int)? {
        var value: UInt64 = 0
        var i = 0
        while i < 8 {
            guard at + i < p.count else { return nil }
            let b = p[at + i]
            value |= UInt64(b & 0x7F) << (7 * UInt64(i))
            i += 1
            if b & 0x80 == 0 { return (value, i) }
        }
        return nil
    }

    /// Bytes the shortest encoding of `value` takes.
    @inlinable
    public static func length(_ value: Int) -> Int {
        var n = 1
        var v = value >> 7
        while v > 0 {
            n += 1
            v >>= 7
        }
        return n
    }

    /// Writes the shortest encoding of `value` at `at`; returns the bytes written.
    @inlinable
    public static func write(_ value: Int, into out: UnsafeMutableRawBufferPointer, at: Int) -> Int {
        var v = value
        var i = 0
        repeat {
            var b = UInt8(v & 0x7F)
            v >>= 7
            if v > 0 { b |= 0x80 }
            out[at + i] = b
            i += 1
        } while v > 0
        return i
    }
}

/// Joins the OBU elements of one temporal unit's RTP payloads (fragments across packets
/// included) and writes them in the low-overhead bitstream format (AV1 specification §5.2): every
/// OBU with its size field, without temporal delimiters, tile lists or padding, which the RTP
/// format and files do not carry.
///
/// Reuse one builder: its buffers keep their capacity, so a temporal unit costs no allocation
/// beyond the output.
public struct AV1TemporalUnitBuilder: Sendable {
    /// The OBUs as received (without size fields unless the sender kept them), back to back.
    private var bytes: [UInt8] = []
    /// Each OBU's length in ``bytes``.
    private var lengths: [Int] = []
    /// The last OBU continues in the next packet.
    private var open = false
    /// A fragment without its start or end, or an element that does not fit its packet.
    public private(set) var malformed = false

    /// An empty builder.
    public init() {}

    /// Forgets the previous temporal unit.
    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        lengths.removeAll(keepingCapacity: true)
        open = false
        malformed = false
    }

    /// Takes one packet's payload (aggregation header included), in sequence order.
    public mutating func append(_ p: UnsafeRawBufferPointer) {
        guard !p.isEmpty, !malformed else { return }
        let h = p[0]
        let continues = h & 0x80 != 0
        let count = Int(h >> 4) & 0x03
        if continues != open {
            // A continuation without its start, or an OBU left unfinished: the unit is broken.
            malformed = true
            return
        }
        var at = 1
        var element = 0
        while at < p.count {
            var length = p.count - at
            let last = count != 0 && element == count - 1
            if !last {
                guard let (value, n) = AV1LEB128.read(p, at: at), value <= UInt64(p.count - at - n) else {
                    malformed = true
                    return
                }
                at += n
                length = Int(value)
            }
            let piece = UnsafeRawBufferPointer(rebasing: p[at..<at + length])
            if element == 0 && continues {
                guard !lengths.isEmpty else {
                    // The open "OBU" was an empty element: nothing to continue.
                    malformed = true
                    return
                }
                bytes.append(contentsOf: piece)
                lengths[lengths.count - 1] += length
            } else if length > 0 {
                bytes.append(contentsOf: piece)
                lengths.append(length)
            }
            at += length
            element += 1
            if last { break }
        }
        if count != 0 && element != count {
            malformed = true
            return
        }
        open = h & 0x40 != 0
    }

    /// Ends the temporal unit: an OBU still open is a lost fragment, and an OBU whose header is
    /// invalid (forbidden bit, too short, or a size field that does not cover it exactly) makes the
    /// unit malformed.
    public mutating func finish() {
        if open { malformed = true }
        open = false
        guard !malformed else { return }
        var offset = 0
        for length in lengths {
            defer { offset += length }
            let header = bytes[offset]
            let headerBytes = header & 0x04 != 0 ? 2 : 1
            guard header & 0x80 == 0, length >= headerBytes else {
                malformed = true
                return
            }
            if header & 0x02 != 0 {
                let size = bytes.withUnsafeBytes { AV1LEB128.read($0, at: offset + headerBytes) }
                guard let (value, n) = size, offset + headerBytes + n <= offset + length,
                    value == UInt64(length - headerBytes - n)
                else {
                    malformed = true
                    return
                }
            }
        }
    }

    /// Walks the OBUs that go into the file: (offset in `bytes`, length, header bytes, has size field).
    private func forEachKept(_ body: (Int, Int, Int, Bool) -> Void) {
        var offset = 0
        for length in lengths {
            defer { offset += length }
            let header = bytes[offset]
            let type = (header >> 3) & 0x0F
            if type == AV1OBUType.temporalDelimiter || type == AV1OBUType.tileList || type == AV1OBUType.padding {
                continue
            }
            let headerBytes = header & 0x04 != 0 ? 2 : 1
            guard length >= headerBytes else { continue }
            body(offset, length, headerBytes, header & 0x02 != 0)
        }
    }

    /// The length of the temporal unit in the low-overhead format.
    public var encodedLength: Int {
        var total = 0
        forEachKept { _, length, headerBytes, sized in
            total += sized ? length : length + AV1LEB128.length(length - headerBytes)
        }
        return total
    }

    /// Writes the temporal unit (``encodedLength`` bytes) into `out`; returns the bytes written.
    @discardableResult
    public func write(into out: UnsafeMutableRawBufferPointer) -> Int {
        var w = 0
        bytes.withUnsafeBytes { src in
            forEachKept { offset, length, headerBytes, sized in
                if sized {
                    out.baseAddress.map { ($0 + w).copyMemory(from: src.baseAddress! + offset, byteCount: length) }
                    w += length
                    return
                }
                out[w] = src[offset] | 0x02  // obu_has_size_field
                if headerBytes == 2 { out[w + 1] = src[offset + 1] }
                w += headerBytes
                w += AV1LEB128.write(length - headerBytes, into: out, at: w)
                let payload = length - headerBytes
                if payload > 0 {
                    out.baseAddress.map {
                        ($0 + w).copyMemory(from: src.baseAddress! + offset + headerBytes, byteCount: payload)
                    }
                }
                w += payload
            }
        }
        return w
    }

    /// Whether the temporal unit holds a sequence header OBU.
    public var hasSequenceHeader: Bool {
        var seen = false
        forEachKept { offset, _, _, _ in
            if (bytes[offset] >> 3) & 0x0F == AV1OBUType.sequenceHeader { seen = true }
        }
        return seen
    }
}
