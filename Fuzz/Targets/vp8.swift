import RTCWire

/// libFuzzer entry for VP8: descriptor parse/write round trip and packetize/reassemble.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  if let (descriptor, length) = try? VP8PayloadDescriptor.parse(bytes) {
    precondition(length >= 1 && length <= 6 && length < size)
    var out = [UInt8](repeating: 0, count: 8)
    let written = out.withUnsafeMutableBytes { try? descriptor.write(into: $0) }
    guard let written, written == descriptor.encodedLength else { fatalError("VP8: write failed") }
    out[written] = 0  // one byte of VP8 data so the parse accepts it
    let again = out.withUnsafeBytes {
      try? VP8PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: $0[0...written]))
    }
    guard let again, again.0 == descriptor, again.headerLength == written else {
      fatalError("VP8: round trip")
    }
  }
  // Packetize the input as a frame with an MTU chosen by its first byte.
  guard size >= 1 else { return 0 }
  let maxPayload = 1 + Int(bytes[0])
  var packetizer = VP8Packetizer()
  var reassembled: [UInt8] = []
  var packets = 0
  let count = try? packetizer.packetize(
    frame: bytes, maxPayloadSize: maxPayload, pictureID: UInt16(bytes[0]) << 7,
    tl0PicIdx: size % 2 == 0 ? bytes[0] : nil
  ) { payload, isLast in
    precondition(payload.count <= maxPayload)
    guard let (d, n) = try? VP8PayloadDescriptor.parse(payload) else {
      fatalError("VP8: packetizer output does not parse")
    }
    precondition(d.startOfPartition == (packets == 0))
    reassembled.append(contentsOf: payload[n...])
    packets += 1
    _ = isLast
  }
  if let count {
    precondition(count == packets && Array(bytes) == reassembled, "VP8: reassembly differs")
  }
  return 0
}
