// library: Media
import Media
import RTCWire

/// libFuzzer entry for the WebM/Matroska reader (`--video`/`--audio FILE.webm`, `understudy
/// analyze`): EBML headers, known- and unknown-size elements, tracks, clusters and blocks.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  guard let reader = try? WebMReader(bytes: Array(UnsafeBufferPointer(start: data, count: size))) else { return 0 }
  precondition(reader.timecodeScale > 0)
  _ = reader.durationNanoseconds
  var total = 0
  for track in reader.tracks { precondition(track.number > 0) }
  for number in Set(reader.tracks.map(\.number)) {
    let frames = reader.frames(track: number)
    total += frames.count
    for frame in frames { precondition(frame.data.count < size) }
  }
  _ = reader.firstTrack(of: .video)
  _ = reader.firstTrack(of: .audio)
  precondition(total <= reader.frames.count)
  return 0
}
