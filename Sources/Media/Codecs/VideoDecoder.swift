internal import CAVCodec
public import RTCWire

/// Decodes one video stream to ``I420Image`` pictures, whatever its codec: the one decoder home for
/// every ``MediaCodec`` Understudy receives.
///
/// VP8, H.264 and VP9 go through libavcodec's native decoders (its `vp8` costs 8–25 % less CPU than
/// libvpx on the same frames, measured for the composite; ``VP8Decoder`` keeps libvpx for the
/// callers that want it directly); AV1 through libavcodec's libdav1d wrapper (its native `av1`
/// decoder needs a hardware accelerator and is only the fallback). Frames are in the form ``EncodedFrame`` documents for their codec: VP8 and
/// VP9 frames, H.264 Annex B access units (the parameter sets in band before the first IDR), AV1
/// temporal units in the low-overhead format with the sequence header before the first key frame.
///
/// Pictures of other layouts (10-bit, 4:2:2, 4:4:4, grey) are converted to 8-bit 4:2:0.
///
/// Not thread-safe: confine an instance to one thread.
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class VideoDecoder: @unchecked Sendable {
    /// The codec this decoder takes.
    public let codec: MediaCodec
    /// The libavcodec decoder (one per stream).
    private let d: AVCodecDecoder

    /// Creates a decoder for `codec`; throws ``MediaError/invalidArgument(_:)`` for audio and
    /// ``MediaError/avcodec(function:code:detail:)`` when libavcodec lacks the decoder.
    public init(codec: MediaCodec) throws {
        self.codec = codec
        switch codec {
        case .vp8, .h264, .vp9, .av1: d = try AVCodecDecoder(codec: codec)
        case .opus: throw MediaError.invalidArgument("VideoDecoder: \(codec.rawValue) is not a video codec")
        }
    }

    /// The libavcodec decoder in use (`vp8`, `h264`, `vp9`, `libdav1d`).
    public var implementation: String { d.name }

    /// Decodes one frame. Returns the newest picture it completed, or nil when it completed none
    /// (a decoder may hold pictures back: ``finish()`` returns them). Throws for a frame the
    /// decoder rejects; the decoder stays usable.
    public func decode(_ frame: [UInt8]) throws -> I420Image? {
        guard !frame.isEmpty else { throw MediaError.invalidArgument("empty \(codec.rawValue) frame") }
        try d.send(frame)
        return try d.takeLatest()
    }

    /// Decodes one frame and keeps its picture inside the decoder instead of copying it out: true
    /// when a picture completed. ``withPicture(_:)`` lends it (no copy) until the next decode: how
    /// the compositor draws a tile straight from the decoder's buffer. Throws as ``decode(_:)``.
    public func decodeInPlace(_ frame: [UInt8]) throws -> Bool {
        guard !frame.isEmpty else { throw MediaError.invalidArgument("empty \(codec.rawValue) frame") }
        try d.send(frame)
        return d.takeFresh()
    }

    /// Lends the newest picture ``decodeInPlace(_:)`` completed to `body`; nil (body not called)
    /// when there is none yet. A picture of another layout
    /// than 8-bit 4:2:0 is converted first (a copy).
    public func withPicture<R>(_ body: (I420Planes) throws -> R) throws -> R? {
        try d.withPicture(body)
    }

    /// Ends the stream: returns the newest of the pictures the decoder still held back (nil when
    /// none). The decoder takes no frame after this.
    public func finish() throws -> I420Image? {
        try d.flush()
        return try d.takeLatest()
    }

    /// Decodes `frames` (a key frame first, then the frames after it) and returns the last
    /// picture, copying only that one. Frames the decoder rejects are skipped, as a player skips a
    /// damaged frame; throws when no picture comes out at all, naming the last failure.
    public func newestPicture(decoding frames: [[UInt8]]) throws -> I420Image {
        var lastError: Error?
        var picture: I420Image?
        for frame in frames where !frame.isEmpty {
            do { try d.send(frame) } catch { lastError = error }
        }
        do { try d.flush() } catch { lastError = error }
        do { picture = try d.takeLatest() } catch { lastError = error }
        guard let picture, picture.isConsistent else {
            let reason = lastError.map { "\($0)" } ?? "the decoder produced no picture"
            throw MediaError.invalidArgument(
                "no \(codec.rawValue) picture decoded from \(frames.count) frame(s): \(reason)")
        }
        return picture
    }
}

/// libavcodec's `avcodec_send_packet` / `avcodec_receive_frame` loop, keeping only a reference to the
/// newest picture (so a run of frames costs no copies until ``takeLatest()``).
final class AVCodecDecoder {
    private let context: UnsafeMutablePointer<AVCodecContext>
    private let packet: UnsafeMutablePointer<AVPacket>
    private let received: UnsafeMutablePointer<AVFrame>
    private let latest: UnsafeMutablePointer<AVFrame>
    /// `latest` holds a picture (kept until the next one replaces it).
    private var hasLatest = false
    /// `latest` came since the last ``takeLatest()`` or ``takeFresh()``.
    private var fresh = false
    /// libavcodec's name for the decoder.
    let name: String

    init(codec: MediaCodec) throws {
        let decoder: UnsafePointer<AVCodec>?
        switch codec {
        case .h264: decoder = avcodec_find_decoder(AV_CODEC_ID_H264)
        case .vp9: decoder = avcodec_find_decoder(AV_CODEC_ID_VP9)
        case .vp8: decoder = avcodec_find_decoder(AV_CODEC_ID_VP8)
        case .av1: decoder = avcodec_find_decoder_by_name("libdav1d") ?? avcodec_find_decoder_by_name("av1")
        case .opus: decoder = nil
        }
        guard let decoder else {
            throw MediaError.avcodec(
                function: "avcodec_find_decoder", code: 0, detail: "libavcodec has no \(codec.rawValue) decoder")
        }
        name = String(cString: decoder.pointee.name)
        // One thread: a capture decodes a short run off the media loop; frame threads would only add delay.
        let context = try AVCodecContexts.open(decoder, name: name) { $0.pointee.thread_count = 1 }
        let (packet, received, latest) = (av_packet_alloc(), av_frame_alloc(), av_frame_alloc())
        guard let packet, let received, let latest else {
            AVCodecContexts.free(context, packet: packet, frames: received, latest)
            throw MediaError.avcodec(function: "av_frame_alloc (\(name))", code: 0, detail: "out of memory")
        }
        self.context = context
        self.packet = packet
        self.received = received
        self.latest = latest
    }

    deinit { AVCodecContexts.free(context, packet: packet, frames: received, latest) }

    /// Sends one frame. The packet borrows `frame` (not reference counted, so libavcodec copies it
    /// into a padded buffer of its own).
    func send(_ frame: [UInt8]) throws {
        try frame.withUnsafeBufferPointer { bytes in
            packet.pointee.data = UnsafeMutablePointer(mutating: bytes.baseAddress)
            packet.pointee.size = Int32(clamping: bytes.count)
            defer {
                packet.pointee.data = nil
                packet.pointee.size = 0
            }
            var status = avcodec_send_packet(context, packet)
            if status == ua_averror_eagain {
                // Output is waiting: take it, then the packet is accepted.
                try receiveAll()
                status = avcodec_send_packet(context, packet)
            }
            guard status >= 0 else {
                throw AVCodecContexts.failure("avcodec_send_packet (\(name))", status)
            }
        }
        try receiveAll()
    }

    /// Ends the stream, so the pictures held back come out.
    func flush() throws {
        let status = avcodec_send_packet(context, nil)
        guard status >= 0 || status == ua_averror_eof else {
            throw AVCodecContexts.failure("avcodec_send_packet (\(name), flush)", status)
        }
        try receiveAll()
    }

    /// A copy of the newest picture since the last call, as 8-bit 4:2:0; nil when none came out.
    func takeLatest() throws -> I420Image? {
        guard takeFresh() else { return nil }
        return try Self.i420(latest.pointee)
    }

    /// Whether a picture came out since the last call (it stays held for ``withPicture(_:)``).
    func takeFresh() -> Bool {
        defer { fresh = false }
        return fresh
    }

    /// Lends the held picture: its own planes when it is 8-bit 4:2:0, else a converted copy.
    func withPicture<R>(_ body: (I420Planes) throws -> R) throws -> R? {
        guard hasLatest else { return nil }
        let f = latest.pointee
        if let desc = av_pix_fmt_desc_get(AVPixelFormat(rawValue: f.format)), desc.pointee.comp.0.depth == 8,
            desc.pointee.nb_components == 3, desc.pointee.log2_chroma_w == 1, desc.pointee.log2_chroma_h == 1,
            desc.pointee.flags & (ua_pix_fmt_unsupported_flags | ua_pix_fmt_flag_be) == 0,
            desc.pointee.flags & ua_pix_fmt_flag_planar != 0, f.width > 0, f.height > 0,
            let y = f.data.0, let u = f.data.1, let v = f.data.2, f.linesize.0 > 0, f.linesize.1 > 0, f.linesize.2 > 0
        {
            return try body(
                I420Planes(
                    width: Int(f.width), height: Int(f.height), y: y, u: u, v: v, strideY: Int(f.linesize.0),
                    strideU: Int(f.linesize.1), strideV: Int(f.linesize.2)))
        }
        return try Self.i420(f).withPlanes(body)
    }

    private func receiveAll() throws {
        while true {
            let status = avcodec_receive_frame(context, received)
            if status == ua_averror_eagain || status == ua_averror_eof { return }
            guard status >= 0 else {
                throw AVCodecContexts.failure("avcodec_receive_frame (\(name))", status)
            }
            av_frame_unref(latest)
            av_frame_move_ref(latest, received)
            hasLatest = true
            fresh = true
        }
    }

    /// Converts a decoded picture of any planar YUV (or grey) layout of 8 to 16 bits to I420.
    static func i420(_ f: AVFrame) throws -> I420Image {
        let format = AVPixelFormat(rawValue: f.format)
        guard let desc = av_pix_fmt_desc_get(format) else {
            throw MediaError.avcodec(function: "av_pix_fmt_desc_get", code: f.format, detail: "unknown pixel format")
        }
        let d = desc.pointee
        let formatName = String(cString: d.name)
        let depth = Int(d.comp.0.depth)
        let grey = d.nb_components < 3
        guard d.flags & ua_pix_fmt_unsupported_flags == 0, grey || d.flags & ua_pix_fmt_flag_planar != 0,
            (8...16).contains(depth), f.width > 0, f.height > 0
        else {
            throw MediaError.avcodec(
                function: "decode", code: f.format, detail: "pixel format \(formatName) is not planar YUV")
        }
        let width = Int(f.width)
        let height = Int(f.height)
        let planes = [f.data.0, f.data.1, f.data.2]
        let strides = [Int(f.linesize.0), Int(f.linesize.1), Int(f.linesize.2)]
        guard planes[0] != nil, strides[0] > 0, grey || (planes[1] != nil && planes[2] != nil) else {
            throw MediaError.avcodec(function: "decode", code: f.format, detail: "\(formatName) picture without planes")
        }
        var out = I420Image(width: width, height: height, fillY: 0)
        let bigEndian = d.flags & ua_pix_fmt_flag_be != 0
        let shift = depth - 8
        let chromaShiftX = Int(d.log2_chroma_w)
        let chromaShiftY = Int(d.log2_chroma_h)
        // One sample at (x, y) of a plane, reduced to 8 bits.
        func sample(_ plane: Int, _ x: Int, _ y: Int) -> UInt8 {
            let row = planes[plane]! + y * strides[plane]
            if depth == 8 { return row[x] }
            let lo = Int(row[2 * x + (bigEndian ? 1 : 0)])
            let hi = Int(row[2 * x + (bigEndian ? 0 : 1)])
            return UInt8(clamping: (hi << 8 | lo) >> shift)
        }
        out.y.withUnsafeMutableBufferPointer { dst in
            for y in 0..<height {
                if depth == 8 {
                    (dst.baseAddress! + y * width).update(from: planes[0]! + y * strides[0], count: width)
                } else {
                    for x in 0..<width { dst[y * width + x] = sample(0, x, y) }
                }
            }
        }
        guard !grey else { return out }  // neutral chroma, as I420Image made it
        let cw = out.chromaWidth
        let ch = out.chromaHeight
        let native420 = depth == 8 && chromaShiftX == 1 && chromaShiftY == 1
        for (plane, keyPath) in [(1, \I420Image.u), (2, \I420Image.v)] {
            out[keyPath: keyPath].withUnsafeMutableBufferPointer { dst in
                for y in 0..<ch {
                    if native420 {
                        (dst.baseAddress! + y * cw).update(from: planes[plane]! + y * strides[plane], count: cw)
                        continue
                    }
                    // The source chroma sample nearest the 4:2:0 one (4:2:2 and 4:4:4 are finer).
                    let sy = (y << 1) >> chromaShiftY
                    for x in 0..<cw { dst[y * cw + x] = sample(plane, (x << 1) >> chromaShiftX, sy) }
                }
            }
        }
        return out
    }
}
