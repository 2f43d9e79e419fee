public import RTCWire

/// Reads VP8, VP9 or AV1 frames from an IVF file (the simple container libvpx's and libaom's tools
/// and ffmpeg write; the header's fourcc names the codec).
public struct IVFReader: Sendable {
    /// One frame as stored in the file.
    public struct Frame: Sendable {
        /// Presentation time in the file's time base (`timebaseNumerator / timebaseDenominator` s).
        public var pts: UInt64
        /// The coded frame (AV1: a temporal unit, as stored, with its temporal delimiter).
        public var data: [UInt8]
    }

    /// The codec the header's fourcc names: VP8 (`VP80`), VP9 (`VP90`) or AV1 (`AV01`).
    public let codec: MediaCodec
    /// Picture width from the file header.
    public let width: Int
    /// Picture height from the file header.
    public let height: Int
    /// Time base numerator (seconds per tick = numerator / denominator).
    public let timebaseNumerator: UInt32
    /// Time base denominator.
    public let timebaseDenominator: UInt32
    /// All complete frames in file order.
    public let frames: [Frame]
    /// True when the file ended inside a frame (e.g. a recording that was killed); the partial
    /// frame is not in `frames`.
    public let truncated: Bool

    /// Parses `path`. Throws ``MediaError/malformedFile(path:reason:)`` for a file that is not IVF
    /// or holds another codec.
    public init(path: String) throws {
        try self.init(bytes: readWholeFile(path), path: path)
    }

    /// Parses an IVF file already in memory; `path` is only used in error messages.
    public init(bytes b: [UInt8], path: String = "<memory>") throws {
        func bad(_ reason: String) -> MediaError { .malformedFile(path: path, reason: reason) }
        guard b.count >= 32, b.hasBytes(0, Array("DKIF".utf8)) else { throw bad("not an IVF file (no DKIF signature)") }
        guard let headerLength = b.le16(6), headerLength >= 32, Int(headerLength) <= b.count else {
            throw bad("bad IVF header length")
        }
        if b.hasBytes(8, Array("VP80".utf8)) {
            codec = .vp8
        } else if b.hasBytes(8, Array("VP90".utf8)) {
            codec = .vp9
        } else if b.hasBytes(8, Array("AV01".utf8)) {
            codec = .av1
        } else {
            let fourcc = String(decoding: b[8..<12], as: UTF8.self).filter { $0.isASCII && !$0.isNewline }
            throw bad("IVF codec '\(fourcc)' is not VP8 (VP80), VP9 (VP90) or AV1 (AV01)")
        }
        width = Int(b.le16(12) ?? 0)
        height = Int(b.le16(14) ?? 0)
        let rate = b.le32(16) ?? 0
        let scale = b.le32(20) ?? 0
        // IVF stores the frame rate as rate/scale; the time base is its inverse.
        timebaseDenominator = rate == 0 ? 30 : rate
        timebaseNumerator = scale == 0 ? 1 : scale
        var frames: [Frame] = []
        var at = Int(headerLength)
        var truncated = false
        while at < b.count {
            guard let size = b.le32(at), let pts = b.le64(at + 4) else {
                truncated = true
                break
            }
            let start = at + 12
            guard Int(size) <= b.count - start else {
                truncated = true
                break
            }
            frames.append(Frame(pts: pts, data: Array(b[start..<(start + Int(size))])))
            at = start + Int(size)
        }
        guard !frames.isEmpty else { throw bad("IVF file has no complete frame") }
        self.frames = frames
        self.truncated = truncated
    }

    /// Frame rate implied by the time base when it is a whole number of frames per second.
    public var framesPerSecond: Int? {
        guard timebaseNumerator > 0, timebaseDenominator % timebaseNumerator == 0 else { return nil }
        let fps = Int(timebaseDenominator / timebaseNumerator)
        return (1...240).contains(fps) ? fps : nil
    }

    /// The frames as ``EncodedFrame``s of ``codec`` with 90 kHz timestamps (first frame at 0) and
    /// durations, key frames by their own bitstream. AV1 temporal units lose their leading temporal
    /// delimiters (the low-overhead format the packetizer and the recorders take).
    public func encodedFrames() -> [EncodedFrame] {
        guard let firstPts = frames.first?.pts else { return [] }
        // 90 kHz ticks from the first frame, in UInt64 so hostile timestamps (up to 2^64 - 1 ticks)
        // cannot overflow; the RTP timestamp keeps the low 32 bits anyway.
        func ticks(_ pts: UInt64) -> UInt64 {
            let rel = pts >= firstPts ? pts - firstPts : 0
            let (product, overflow) = rel.multipliedReportingOverflow(by: 90_000 * UInt64(timebaseNumerator))
            return overflow ? 0 : product / UInt64(timebaseDenominator)
        }
        let defaultDuration = UInt32(90_000 / (framesPerSecond ?? 30))
        var out: [EncodedFrame] = []
        out.reserveCapacity(frames.count)
        for (i, f) in frames.enumerated() {
            let t = ticks(f.pts)
            let next = i + 1 < frames.count ? ticks(frames[i + 1].pts) : t &+ UInt64(defaultDuration)
            let duration = next > t ? UInt32(clamping: next - t) : defaultDuration
            var data = f.data
            if codec == .av1 {
                let skip = data.withUnsafeBytes { AV1OBUType.leadingTemporalDelimiters($0) }
                if skip > 0 { data.removeFirst(skip) }
            }
            out.append(
                EncodedFrame(
                    codec: codec, data: data, timestamp: UInt32(truncatingIfNeeded: t),
                    isKeyframe: EncodedFrame.isKeyframe(codec, data), duration: duration))
        }
        return out
    }
}
