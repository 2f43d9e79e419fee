#pragma once
#include <stdint.h>
#include <x264.h>

// x264_encoder_open is a macro naming the versioned symbol (x264_encoder_open_164), which Swift
// cannot call; this wrapper can.
static inline x264_t *ua_x264_encoder_open(x264_param_t *param) { return x264_encoder_open(param); }
