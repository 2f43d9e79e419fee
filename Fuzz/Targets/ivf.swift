// library: Media
import Media
import RTCWire

/// libFuzzer entry for the IVF reader (`--video FILE.ivf`): header, frame table and the frames as
/// they are sent (90 kHz timestamps and durations).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  guard let reader = try? IVFReader(bytes: Array(UnsafeBufferPointer(start: data, count: size))) else { return 0 }
  precondition(!reader.frames.isEmpty)
  precondition(reader.frames.reduce(0) { $0 + $1.data.count + 12 } <= size)
  _ = reader.framesPerSecond
  let frames = reader.encodedFrames()
  precondition(frames.count == reader.frames.count)
  for frame in frames { precondition(frame.duration > 0) }
  return 0
}
