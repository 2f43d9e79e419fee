import RTCWire

/// libFuzzer entry for VP9: the payload descriptor (RFC 9628) and the key-frame header, with the
/// munger's rewrite applied to what the descriptor parse found.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  if let header = VP9FrameHeader.keyframeInfo(bytes) {
    precondition(header.profile <= 3 && header.width >= 1 && header.height >= 1, "VP9: header")
  }
  // Superframes and SVC layer sizes: every piece lies inside the input.
  var pieces = 0
  VP9FrameHeader.forEachFrame(bytes) { frame in
    precondition(frame.count <= size, "VP9: superframe piece")
    pieces += frame.count
  }
  precondition(pieces <= size, "VP9: superframe pieces")
  _ = VP9FrameHeader.keyPictureSize(bytes)
  let layers = VP9PayloadFormat.forEachLayerSize(bytes) { layer, _, _ in precondition(layer < 8, "VP9: SS layer") }
  precondition(layers <= 8, "VP9: SS layers")
  guard let info = try? VP9PayloadFormat.inspect(bytes) else { return 0 }
  precondition(!info.hasLayerIndices || info.spatialLayer < 8, "VP9: SID")
  precondition(info.spatialLayerCount <= 8, "VP9: N_S")
  guard size > 0 else { return 0 }
  // A parsed descriptor leaves at least one VP9 byte, and its fields lie inside it.
  precondition(info.headerLength >= 1 && info.headerLength < size, "VP9: header length")
  precondition(Int(info.pictureIDOffset) < info.headerLength, "VP9: picture ID offset")
  precondition(Int(info.tl0PicIdxOffset) < info.headerLength, "VP9: TL0PICIDX offset")
  precondition(!info.isKeyframe || info.startsFrame, "VP9: a key frame starts a frame")
  // A munger's rewrite keeps the descriptor's shape.
  var munger = VP8Munger()
  munger.switchSource(at: info)
  var shifted = info
  shifted.pictureID = info.pictureID &+ 1000
  shifted.tl0PicIdx = info.tl0PicIdx &+ 7
  munger.switchSource(at: shifted)
  let rewrite = munger.munge(info)
  var copy = Array(bytes)
  copy.withUnsafeMutableBytes { rewrite.apply(to: $0) }
  let again = copy.withUnsafeBytes { try? VP9PayloadFormat.inspect($0) }
  guard let again, again.headerLength == info.headerLength, again.startsFrame == info.startsFrame,
    again.hasPictureID == info.hasPictureID, again.pictureIDIs15Bit == info.pictureIDIs15Bit,
    !again.hasPictureID || again.pictureID == rewrite.pictureID
  else { fatalError("VP9: rewrite changed the descriptor's shape") }
  return 0
}
