// library: Media
import Media
import RTCWire

/// libFuzzer entry for the Ogg Opus reader (`--audio FILE.ogg`): pages, CRCs, lacing, OpusHead and
/// the packets as they are sent (48 kHz timestamps from each packet's TOC).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  guard let reader = try? OggOpusReader(bytes: Array(UnsafeBufferPointer(start: data, count: size))) else {
    return 0
  }
  precondition(reader.channels == 1 || reader.channels == 2)
  precondition(reader.packets.reduce(0) { $0 + $1.count } <= size)
  let frames = reader.encodedFrames()
  precondition(frames.count <= reader.packets.count)
  for frame in frames { precondition(frame.duration > 0 && frame.duration <= 5760) }
  return 0
}
