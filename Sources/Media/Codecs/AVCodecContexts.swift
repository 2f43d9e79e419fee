internal import CAVCodec

/// The one home of libavcodec's open, free and error-text code, shared by every codec Understudy runs
/// through libavcodec (``AVCodecDecoder``, ``AACEncoder``).
enum AVCodecContexts {
    /// Allocates a context for `codec`, lets `configure` set it up, and opens it. The caller owns the
    /// result (`avcodec_free_context`). Throws ``MediaError/avcodec(function:code:detail:)`` naming
    /// `name` when it does not open; nothing is left allocated then.
    static func open(
        _ codec: UnsafePointer<AVCodec>, name: String,
        configure: (UnsafeMutablePointer<AVCodecContext>) -> Void = { _ in }
    ) throws -> UnsafeMutablePointer<AVCodecContext> {
        guard let context = avcodec_alloc_context3(codec) else {
            throw MediaError.avcodec(function: "avcodec_alloc_context3", code: 0, detail: "out of memory")
        }
        configure(context)
        let opened = avcodec_open2(context, codec, nil)
        guard opened >= 0 else {
            free(context)
            throw failure("avcodec_open2 (\(name))", opened)
        }
        return context
    }

    /// Frees a context with the packet and frames that go with it (nil ones are skipped): what an
    /// owner's `deinit` does, and what its `init` does when a later allocation fails.
    static func free(
        _ context: UnsafeMutablePointer<AVCodecContext>?, packet: UnsafeMutablePointer<AVPacket>? = nil,
        frames: UnsafeMutablePointer<AVFrame>?...
    ) {
        var context = context
        avcodec_free_context(&context)
        var packet = packet
        av_packet_free(&packet)
        for frame in frames {
            var frame = frame
            av_frame_free(&frame)
        }
    }

    /// The error for a failed libavcodec call: the function, its `AVERROR` code and libavcodec's text.
    static func failure(_ function: String, _ code: Int32) -> MediaError {
        .avcodec(function: function, code: code, detail: text(code))
    }

    /// libavcodec's text for an `AVERROR` code.
    static func text(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        return String(cString: ua_av_strerror(code, &buffer, buffer.count))
    }
}
