import RTCWire

/// libFuzzer entry for the STUN parser; the checks live in `STUNFuzz.run`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  STUNFuzz.run(UnsafeRawBufferPointer(start: data, count: size))
  return 0
}
