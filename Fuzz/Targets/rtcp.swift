import RTCWire

/// libFuzzer entry for RTCP: the view API with every accessor, the enum parser, and a
/// serialize → parse round trip that must be stable after one normalizing pass.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  var viewCount = 0
  try? RTCPCompound.forEach(bytes) { view in
    viewCount += 1
    precondition(view.range.upperBound <= size && view.bytes.count >= 4)
    _ = view.ssrc
    _ = view.mediaSSRC
    _ = view.isREMB
    _ = try? view.senderInfo()
    try? view.forEachReportBlock { _ in }
    try? view.forEachNACKSequence { _ in }
    try? view.forEachFIREntry { _ in }
    _ = try? view.rembBitrate()
    try? view.forEachTransportCCStatus { _ in }
    // BYE: never more sources than whole words after the header.
    var byeSources = 0
    try? view.forEachBYESource { _ in byeSources += 1 }
    precondition(byeSources <= (view.bytes.count - 4) / 4, "RTCP: BYE read past its packet")
  }
  guard let packets = try? RTCPCompound.parse(bytes) else { return 0 }
  precondition(packets.count == viewCount)
  let first = RTCPCompound.serialize(packets)
  guard let reparsed = try? RTCPCompound.parse(first) else {
    fatalError("RTCP: serialized packets do not parse")
  }
  precondition(reparsed.count == packets.count, "RTCP: serialize dropped a packet")
  let second = RTCPCompound.serialize(reparsed)
  guard let again = try? RTCPCompound.parse(second), again == reparsed else {
    fatalError("RTCP: round trip not stable")
  }
  // Writers must throw, not trap, when the buffer is short.
  var scratch = [UInt8](repeating: 0, count: 64)
  scratch.withUnsafeMutableBytes { buffer in
    for p in packets { _ = try? RTCPWriter.write(p, into: buffer, at: 3) }
  }
  return 0
}
