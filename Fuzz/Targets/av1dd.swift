import RTCWire

/// libFuzzer entry for the AV1 dependency descriptor header extension: a first element read alone
/// (a key frame's, with a template structure), then the rest read against the structure it gave.
/// The first input byte is the first element's length.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  guard size >= 1 else { return 0 }
  let split = min(size, 1 + Int(bytes[0]))
  let first = UnsafeRawBufferPointer(rebasing: bytes[1..<split])
  let rest = UnsafeRawBufferPointer(rebasing: bytes[split...])
  var structure: AV1DependencyStructure?
  if let d = try? AV1DependencyDescriptor.parse(first, structure: nil) {
    structure = d.structure
    check(d, structure)
  }
  if let d = try? AV1DependencyDescriptor.parse(rest, structure: structure) {
    check(d, d.structure ?? structure)
  }
  return 0
}

/// What a read descriptor promises: its layers are the structure's, its targets within its count.
func check(_ d: AV1DependencyDescriptor, _ structure: AV1DependencyStructure?) {
  guard let s = structure else { fatalError("AV1 DD: read without a structure") }
  precondition(!s.templates.isEmpty && s.templates.count <= 64, "AV1 DD: template count")
  precondition(s.decodeTargetCount >= 1 && s.decodeTargetCount <= 32, "AV1 DD: decode targets")
  precondition(s.decodeTargetSpatialID.count == s.decodeTargetCount, "AV1 DD: target layers")
  precondition(d.spatialID <= s.maxSpatialID && d.temporalID <= s.maxTemporalID, "AV1 DD: frame layers")
  precondition(s.maxSpatialID < 4 && s.maxTemporalID < 8, "AV1 DD: layer bounds")
  precondition(s.renderWidth.isEmpty || s.renderWidth.count == Int(s.maxSpatialID) + 1, "AV1 DD: resolutions")
  for t in 0..<s.decodeTargetCount { _ = d.indication(t) }
}
