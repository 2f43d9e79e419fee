import RTCWire

/// libFuzzer entry for H.264 (RFC 6184): inspect, the Annex B depacketizer, the packetizer, the SPS
/// parser, the decoder configuration record and sprop-parameter-sets.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    // One payload: inspect and the depacketizer agree on what is valid.
    if let info = try? H264PayloadFormat.inspect(bytes) {
        precondition(info.headerLength == 0, "H264: header length")
        precondition(!info.isKeyframe || size > 0)
        var counter = H264PayloadFormat.AnnexBWriter(output: nil)
        counter.append(bytes)
        var out = [UInt8](repeating: 0, count: counter.length)
        out.withUnsafeMutableBytes { buffer in
            var writer = H264PayloadFormat.AnnexBWriter(output: buffer)
            writer.append(bytes)
            precondition(writer.length == counter.length, "H264: count and write differ")
        }
    }
    // The input split into payloads by a length byte each, as one access unit.
    var payloads: [UnsafeRawBufferPointer] = []
    var at = 0
    while at < size {
        let n = Int(bytes[at])
        at += 1
        let end = min(size, at + n)
        payloads.append(UnsafeRawBufferPointer(rebasing: bytes[at..<end]))
        at = end
    }
    var counter = H264PayloadFormat.AnnexBWriter(output: nil)
    for p in payloads {
        _ = try? H264PayloadFormat.inspect(p)
        counter.append(p)
    }
    counter.finish()
    var au = [UInt8](repeating: 0, count: counter.length)
    au.withUnsafeMutableBytes { buffer in
        var writer = H264PayloadFormat.AnnexBWriter(output: buffer)
        for p in payloads { writer.append(p) }
        writer.finish()
        precondition(writer.length == counter.length && writer.typesSeen == counter.typesSeen)
    }
    au.withUnsafeBytes { b in
        _ = H264DecoderConfiguration.record(fromAnnexB: b)
        H264AnnexB.forEachUnit(b) { unit in _ = H264SPS.parse(unit) }
        // What the relay's .sdp and the recorders read from a received key frame.
        _ = H264FormatParameters.spropParameterSets(fromAnnexB: b)
    }
    _ = EncodedFrame(codec: .h264, data: au, timestamp: 0, isKeyframe: true).keyframePictureSize
    // The input as an Annex B access unit: packetized, rebuilt, the same units come back.
    guard size >= 1 else { return 0 }
    let mtu = 3 + Int(bytes[0])
    var units: [[UInt8]] = []
    H264AnnexB.forEachUnit(bytes) { units.append([UInt8]($0)) }
    var scratch: [UInt8] = []
    var rebuilt = H264PayloadFormat.AnnexBWriter(output: nil)
    var packets: [[UInt8]] = []
    H264PayloadFormat.packetize(accessUnit: bytes, maxPayloadSize: mtu, scratch: &scratch) { p, _ in
        precondition(p.count <= mtu, "H264: payload over the size")
        packets.append([UInt8](p))
    }
    for p in packets { p.withUnsafeBytes { rebuilt.append($0) } }
    rebuilt.finish()
    // Units with a forbidden bit set are not NAL units the depacketizer takes; otherwise it is exact.
    if units.allSatisfy({ $0[0] & 0x80 == 0 && $0[0] & 0x1F >= 1 && $0[0] & 0x1F <= 23 }) {
        var expected: [UInt8] = []
        for u in units { expected += [0, 0, 0, 1] + u }
        var got = [UInt8](repeating: 0, count: rebuilt.length)
        got.withUnsafeMutableBytes { buffer in
            var writer = H264PayloadFormat.AnnexBWriter(output: buffer)
            for p in packets { p.withUnsafeBytes { writer.append($0) } }
            writer.finish()
        }
        precondition(got == expected, "H264: packetize then rebuild differs")
    }
    // sprop-parameter-sets text.
    if let text = String(validating: bytes.prefix(200), as: UTF8.self) {
        let params = H264FormatParameters([
            SDPParameter(key: "packetization-mode", value: "1"), SDPParameter(key: "sprop-parameter-sets", value: text),
        ])
        _ = params?.spropAnnexB
        _ = H264ProfileLevelID(text)?.profile
    }
    return 0
}
