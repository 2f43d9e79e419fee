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
  // The one-pass codec-layer inspect agrees with the descriptor parser, and a munger's rewrite
  // keeps the descriptor parseable with the same shape.
  if size > 0 {
    let parsed = try? VP8PayloadDescriptor.parse(bytes)
    let info = try? VP8PayloadFormat.inspect(bytes)
    precondition((parsed == nil) == (info == nil), "VP8: inspect and parse disagree on validity")
    if let (d, n) = parsed, let info {
      precondition(info.headerLength == n, "VP8: header length")
      precondition(info.startsFrame == (d.startOfPartition && d.partitionIndex == 0), "VP8: frame start")
      precondition(info.hasPictureID == (d.pictureID != nil) && (d.pictureID ?? info.pictureID) == info.pictureID)
      precondition((info.hasTL0PicIdx ? info.tl0PicIdx : nil) == d.tl0PicIdx, "VP8: TL0PICIDX")
      precondition(info.temporalLayer == d.tid, "VP8: TID")
      var munger = VP8Munger()
      munger.switchSource(at: info)
      _ = munger.munge(info)
      var shifted = info
      shifted.pictureID = info.pictureID &+ 1000
      shifted.tl0PicIdx = info.tl0PicIdx &+ 7
      munger.switchSource(at: shifted)
      let rewrite = munger.munge(info)
      var copy = Array(bytes)
      copy.withUnsafeMutableBytes { rewrite.apply(to: $0) }
      let again = copy.withUnsafeBytes { try? VP8PayloadFormat.inspect($0) }
      guard let again, again.headerLength == info.headerLength, again.hasPictureID == info.hasPictureID,
        again.pictureIDIs15Bit == info.pictureIDIs15Bit, !again.hasPictureID || again.pictureID == rewrite.pictureID
      else { fatalError("VP8: rewrite changed the descriptor's shape") }
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
