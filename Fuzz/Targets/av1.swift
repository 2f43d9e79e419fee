import RTCWire

/// libFuzzer entry for AV1: the aggregation header, the temporal-unit builder over the input cut
/// into payloads, the sequence header and the av1C record.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    if let info = try? AV1PayloadFormat.inspect(bytes) {
        precondition(info.headerLength == 0, "AV1: the payload is kept whole")
        precondition(!info.isKeyframe || info.startsFrame, "AV1: a key frame starts a frame")
    }
    _ = AV1SequenceHeader.parse(bytes)
    if let record = AV1SequenceHeader.configurationRecord(fromTemporalUnit: bytes) {
        precondition(record.count > 4 && record[0] == 0x81, "AV1: av1C header")
    }
    // The input as payloads: the first byte says how many bytes each payload takes.
    guard size >= 2 else { return 0 }
    let step = 1 + Int(bytes[0])
    var builder = AV1TemporalUnitBuilder()
    var at = 1
    while at < size {
        let end = min(size, at + step)
        builder.append(UnsafeRawBufferPointer(rebasing: bytes[at..<end]))
        at = end
    }
    builder.finish()
    guard !builder.malformed else { return 0 }
    let length = builder.encodedLength
    var out = [UInt8](repeating: 0, count: length)
    let written = out.withUnsafeMutableBytes { builder.write(into: $0) }
    precondition(written == length, "AV1: written length")
    // What the builder writes is the low-overhead format: every OBU's size field covers it exactly.
    var o = 0
    while o < out.count {
        let header = out[o]
        precondition(header & 0x02 != 0, "AV1: size field")
        let headerBytes = header & 0x04 != 0 ? 2 : 1
        guard let (obuSize, n) = out.withUnsafeBytes({ AV1LEB128.read($0, at: o + headerBytes) }) else {
            fatalError("AV1: size field unreadable")
        }
        o += headerBytes + n + Int(obuSize)
    }
    precondition(o == out.count, "AV1: OBUs do not tile the unit")
    return 0
}
