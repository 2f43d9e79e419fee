import RTCWire

/// libFuzzer entry for RTP: header parse, every header-extension lookup and decoder, and the
/// VP8/Opus payload parsers on whatever payload the header yields.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  _ = RTPHeader.isRTCP(bytes)
  guard let header = try? RTPHeader.parse(bytes) else { return 0 }
  precondition(header.payloadOffset >= 12 && header.payloadLength >= 0)
  precondition(header.payloadOffset + header.payloadLength + header.paddingLength == size)
  for id in UInt8(1)...UInt8(255) {
    guard let range = header.extensionElement(id: id, in: bytes) else { continue }
    precondition(range.lowerBound >= header.extensionOffset && range.upperBound <= size)
    if let s = RTPExtensions.identifier(bytes, range) {
      precondition(RTPExtensions.identifier(bytes, range, equals: s))
    }
    _ = RTPExtensions.absSendTime(bytes, range)
    _ = RTPExtensions.audioLevel(bytes, range)
    _ = RTPExtensions.transportSequenceNumber(bytes, range)
  }
  let payload = UnsafeRawBufferPointer(
    rebasing: bytes[header.payloadOffset..<(header.payloadOffset + header.payloadLength)])
  if let (descriptor, length) = try? VP8PayloadDescriptor.parse(payload) {
    precondition(length >= 1 && length < payload.count)
    _ = VP8PayloadDescriptor.isKeyframe(
      payloadAfterDescriptor: UnsafeRawBufferPointer(rebasing: payload[length...]))
    _ = descriptor.encodedLength
  }
  _ = try? OpusTOC.packetDuration(payload)
  return 0
}
