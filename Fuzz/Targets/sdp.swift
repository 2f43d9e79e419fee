import RTCWire

/// libFuzzer entry for the SDP parser; the checks live in `SDPFuzz.run`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  SDPFuzz.run(UnsafeRawBufferPointer(start: data, count: size))
  return 0
}
