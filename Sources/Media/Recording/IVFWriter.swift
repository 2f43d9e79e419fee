public import RTCWire

/// Writes VP8 or VP9 frames to an IVF file without transcoding (one codec per file: the first
/// keyframe's).
///
/// The 32-byte header is written when the first keyframe arrives (its size comes from that
/// keyframe unless given). Delta frames before the first keyframe are dropped and counted. Each
/// frame is flushed to the kernel as it is written, so a killed process leaves a readable file;
/// `close()` patches the frame count. Time base: 1/90000 s.
// Safe as used: one thread writes (its recording's loop); Sendable only to move it there.
public final class IVFWriter: @unchecked Sendable {
    /// Frames written.
    public private(set) var framesWritten = 0
    /// Delta frames dropped because no keyframe had been written yet.
    public private(set) var droppedBeforeKeyframe = 0
    private let sink: FileSink
    private var width: Int?
    private var height: Int?
    private var headerWritten = false
    /// The file's codec, once the first keyframe was written.
    public private(set) var codec: MediaCodec?
    private var firstTimestamp: UInt32 = 0
    private var lastTimestamp: UInt32 = 0
    private var unwrappedTicks: Int64 = 0
    private var lastPts: Int64 = -1
    private var closed = false

    /// Bytes handed to the disk writer thread and not yet written (see ``DiskWriter``).
    public var backlogBytes: Int { sink.backlogBytes }
    /// The file (for the recorder's count of what reached it).
    var fileSink: FileSink { sink }

    /// Creates (truncates) `path`. Throws ``MediaError/cannotOpen(path:errno:)`` if it cannot.
    public init(path: String, width: Int? = nil, height: Int? = nil, writer: DiskWriter = .shared) throws {
        sink = try FileSink(path: path, writer: writer)
        self.width = width
        self.height = height
    }

    /// Writes one VP8 frame. `pts` is nanoseconds since the recording's start; when nil the
    /// frame's RTP timestamp (relative to the first frame) is used.
    public func write(_ frame: EncodedFrame, pts: Int64? = nil) throws {
        guard !closed else { throw MediaError.closed }
        guard frame.codec == .vp8 || frame.codec == .vp9 else {
            throw MediaError.invalidArgument("IVF holds VP8 or VP9, got \(frame.codec)")
        }
        if let codec, codec != frame.codec {
            throw MediaError.invalidArgument("IVF file is \(codec), got \(frame.codec)")
        }
        guard !frame.data.isEmpty else { return }
        if !headerWritten {
            guard let size = frame.keyframePictureSize else {
                droppedBeforeKeyframe += 1
                return
            }
            codec = frame.codec
            writeHeader(width: width ?? size.width, height: height ?? size.height)
            firstTimestamp = frame.timestamp
            lastTimestamp = frame.timestamp
        }
        var ticks: Int64
        if let pts {
            ticks = (max(0, pts) * 9 + 50_000) / 100_000  // ns → 90 kHz, rounded
        } else {
            unwrappedTicks += Int64(Int32(bitPattern: frame.timestamp &- lastTimestamp))
            lastTimestamp = frame.timestamp
            ticks = max(0, unwrappedTicks)
        }
        if ticks <= lastPts { ticks = lastPts + 1 }  // IVF demuxers expect increasing pts
        lastPts = ticks
        sink.buffer.appendLE32(UInt32(frame.data.count))
        sink.buffer.appendLE64(UInt64(ticks))
        sink.buffer.append(contentsOf: frame.data)
        sink.pendingFrames.add(frame)
        try sink.flush()
        framesWritten += 1
    }

    private func writeHeader(width: Int, height: Int) {
        sink.buffer.append(contentsOf: Array("DKIF".utf8))
        sink.buffer.appendLE16(0)  // version
        sink.buffer.appendLE16(32)  // header length
        sink.buffer.append(contentsOf: Array((codec == .vp9 ? "VP90" : "VP80").utf8))
        sink.buffer.appendLE16(UInt16(clamping: width))
        sink.buffer.appendLE16(UInt16(clamping: height))
        sink.buffer.appendLE32(90_000)  // time base denominator ("rate")
        sink.buffer.appendLE32(1)  // time base numerator ("scale")
        sink.buffer.appendLE32(0)  // frame count, patched at close
        sink.buffer.appendLE32(0)  // unused
        headerWritten = true
    }

    /// Patches the frame count and closes the file. Safe to call twice.
    public func close() throws {
        guard !closed else { return }
        closed = true
        if headerWritten {
            var count: [UInt8] = []
            count.appendLE32(UInt32(clamping: framesWritten))
            try sink.patch(at: 24, count)
        }
        try sink.close()
    }
}
