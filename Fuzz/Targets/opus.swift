import RTCWire

/// libFuzzer entry for the Opus TOC and packet-duration parser.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  guard let toc = try? OpusTOC.parse(bytes) else { return 0 }
  precondition(toc.byte == bytes[0])
  if let samples = try? OpusTOC.packetDuration(bytes) {
    precondition(samples > 0 && samples <= 5760 && samples % toc.frameDuration == 0)
  }
  return 0
}
