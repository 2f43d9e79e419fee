#pragma once
#include <errno.h>
#include <libavcodec/avcodec.h>
#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/pixdesc.h>

// AVERROR(EAGAIN) and AVERROR_EOF are function-like or cast macros that Swift does not import;
// expose them as plain constants.
static const int ua_averror_eagain = AVERROR(EAGAIN);
static const int ua_averror_eof = AVERROR_EOF;

// av_err2str is a macro over a compound literal; this fills a caller's buffer instead.
static inline const char *ua_av_strerror(int code, char *buffer, size_t size) {
    av_strerror(code, buffer, size);
    return buffer;
}

// The pixel-format descriptor flags a conversion to I420 looks at (macros with shifts).
static const uint64_t ua_pix_fmt_flag_planar = AV_PIX_FMT_FLAG_PLANAR;
static const uint64_t ua_pix_fmt_flag_be = AV_PIX_FMT_FLAG_BE;
static const uint64_t ua_pix_fmt_unsupported_flags = AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_HWACCEL |
                                                     AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM |
                                                     AV_PIX_FMT_FLAG_FLOAT | AV_PIX_FMT_FLAG_BAYER;

// The AAC encoder's flag for an out-of-band AudioSpecificConfig (extradata), as a plain constant.
static const int ua_codec_flag_global_header = AV_CODEC_FLAG_GLOBAL_HEADER;
