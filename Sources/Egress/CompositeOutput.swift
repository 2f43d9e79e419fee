public import RTCWire

/// One destination of a room composite: a file, an HLS playlist or an RTMP server.
///
/// A composite encodes its video and its mixed audio once and hands every frame to each of its outputs,
/// on the composite's own thread (never the packet loop), in presentation order per track. Times are
/// microseconds from the composite's start, on one clock for both tracks, so an output lines them up
/// without knowing the room.
public protocol CompositeOutput: AnyObject {
    /// The destination as the user gave it (a path or a URL), for logs, the manifest and webhooks.
    var destination: String { get }

    /// Takes one encoded video frame: an H.264 access unit in Annex B form or a VP8 frame.
    func writeVideo(_ frame: EncodedFrame, ptsMicros: Int64) throws

    /// Takes one 20 ms frame of the room's mixed audio: its Opus packet, and the 48 kHz mono PCM it was
    /// encoded from, for an output that needs another codec (AAC for RTMP and MPEG-TS).
    func writeAudio(_ opus: EncodedFrame, pcm: UnsafeBufferPointer<Int16>, ptsMicros: Int64) throws

    /// Ends the output (trailers, the final playlist, the connection). Called once; nothing is written after.
    func finish() throws
}
