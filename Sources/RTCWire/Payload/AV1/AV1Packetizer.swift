/// Splits AV1 temporal units into RTP payloads (the AOM "RTP Payload Format for AV1", §4): OBUs
/// aggregated into packets of at most `maxPayloadSize` bytes, an OBU larger than the room left
/// fragmented across packets (`Z` on a packet that continues one, `Y` on one whose last element
/// goes on), `N` on the first packet of a key frame (a new coded video sequence).
///
/// OBUs travel without their size field (`obu_has_size_field` cleared, as the format recommends);
/// temporal delimiters, tile lists and padding are dropped. A packet of up to three elements
/// counts them in `W` and leaves the last one's length out; a packet of more uses `W` 0 and gives
/// every element its length.
///
/// Reuse one packetizer per stream: its buffer keeps its capacity, so a temporal unit costs no
/// allocation.
public struct AV1Packetizer: Sendable {
    /// The packet being filled: aggregation header, then elements.
    private var packet: [UInt8] = []
    private var used = 0
    private var elements = 0
    /// Where the last element's length field starts, and its width.
    private var lastLengthAt = 0
    private var lastLengthBytes = 0
    private var continuesFragment = false

    /// An empty packetizer.
    public init() {}

    /// Splits `unit` (one temporal unit in the low-overhead format: each OBU with its size field,
    /// except possibly the last) into payloads. `emit` gets each payload, valid during the call,
    /// and whether it is the unit's last (set the marker then).
    ///
    /// - Returns: the number of payloads emitted; 0 when `maxPayloadSize` is below 8 or the unit
    ///   holds no OBU to send. An OBU whose size field runs past the unit ends the walk (what came
    ///   before it is sent).
    @discardableResult
    public mutating func packetize(
        temporalUnit unit: UnsafeRawBufferPointer, isKeyframe: Bool, maxPayloadSize: Int,
        emit: (UnsafeRawBufferPointer, _ isLast: Bool) -> Void
    ) -> Int {
        guard maxPayloadSize >= 8 else { return 0 }
        if packet.count < maxPayloadSize { packet = [UInt8](repeating: 0, count: maxPayloadSize) }
        // Count the OBUs that will be sent, so the last packet is known when it is written.
        var remaining = 0
        Self.forEachOBU(unit) { _, _, _ in remaining += 1 }
        guard remaining > 0 else { return 0 }
        var emitted = 0
        startPacket()
        Self.forEachOBU(unit) { header, headerBytes, payload in
            remaining -= 1
            // The element: the header bytes (size flag cleared) and then the payload.
            var headerCopy: (UInt8, UInt8) = (header[0] & ~0x02, headerBytes == 2 ? header[1] : 0)
            let total = headerBytes + payload.count
            var offset = 0
            while offset < total {
                let room = maxPayloadSize - used
                // An element needs its length field and at least one byte; else start a packet.
                if room < 2 {
                    flush(isKeyframe: isKeyframe, continuesNext: false, isLast: false, emitted: &emitted, emit: emit)
                    continue
                }
                var take = min(total - offset, room - 1)
                while take > 0 && AV1LEB128.length(take) + take > room { take -= 1 }
                let lengthBytes = AV1LEB128.length(take)
                lastLengthAt = used
                lastLengthBytes = lengthBytes
                packet.withUnsafeMutableBytes { out in
                    used += AV1LEB128.write(take, into: out, at: used)
                    // Header bytes first (those of this chunk), then payload bytes.
                    var i = offset
                    let end = offset + take
                    withUnsafeBytes(of: &headerCopy) { h in
                        while i < end && i < headerBytes {
                            out[used] = h[i]
                            used += 1
                            i += 1
                        }
                    }
                    if i < end, let src = payload.baseAddress, let dst = out.baseAddress {
                        (dst + used).copyMemory(from: src + (i - headerBytes), byteCount: end - i)
                        used += end - i
                    }
                }
                elements += 1
                offset += take
                if offset < total {
                    // The OBU goes on in the next packet.
                    flush(isKeyframe: isKeyframe, continuesNext: true, isLast: false, emitted: &emitted, emit: emit)
                }
            }
            if remaining == 0 {
                flush(isKeyframe: isKeyframe, continuesNext: false, isLast: true, emitted: &emitted, emit: emit)
            }
        }
        return emitted
    }

    private mutating func startPacket() {
        used = 1
        elements = 0
    }

    /// Writes the aggregation header, drops the last element's length when `W` counts the
    /// elements, emits the packet and starts the next one.
    private mutating func flush(
        isKeyframe: Bool, continuesNext: Bool, isLast: Bool, emitted: inout Int,
        emit: (UnsafeRawBufferPointer, Bool) -> Void
    ) {
        guard elements > 0 else {
            startPacket()
            return
        }
        var w = 0
        if elements <= 3 {
            w = elements
            // The last element takes the rest of the packet: its length field goes.
            let from = lastLengthAt + lastLengthBytes
            let count = used - from
            packet.withUnsafeMutableBytes { out in
                if count > 0, let base = out.baseAddress {
                    (base + lastLengthAt).copyMemory(from: base + from, byteCount: count)
                }
            }
            used -= lastLengthBytes
        }
        var h = UInt8(w) << 4
        if continuesFragment { h |= 0x80 }
        if continuesNext { h |= 0x40 }
        if isKeyframe && emitted == 0 { h |= 0x08 }
        packet[0] = h
        let length = used
        packet.withUnsafeBytes { emit(UnsafeRawBufferPointer(rebasing: $0[0..<length]), isLast) }
        emitted += 1
        continuesFragment = continuesNext
        startPacket()
    }

    /// Calls `body` with each OBU to send: its header bytes (1 or 2), their count, and its payload
    /// (after the size field). Temporal delimiters, tile lists and padding are skipped.
    static func forEachOBU(
        _ unit: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer, Int, UnsafeRawBufferPointer) -> Void
    ) {
        var at = 0
        while at < unit.count {
            let header = unit[at]
            let headerBytes = header & 0x04 != 0 ? 2 : 1
            guard header & 0x80 == 0, at + headerBytes <= unit.count else { return }
            var start = at + headerBytes
            var end = unit.count
            if header & 0x02 != 0 {
                guard let (size, n) = AV1LEB128.read(unit, at: start), size <= UInt64(unit.count - start - n) else {
                    return
                }
                start += n
                end = start + Int(size)
            }
            let type = (header >> 3) & 0x0F
            if type != AV1OBUType.temporalDelimiter && type != AV1OBUType.tileList && type != AV1OBUType.padding {
                body(
                    UnsafeRawBufferPointer(rebasing: unit[at..<(at + headerBytes)]), headerBytes,
                    UnsafeRawBufferPointer(rebasing: unit[start..<end]))
            }
            at = end
        }
    }
}
