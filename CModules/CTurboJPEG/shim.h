#pragma once
#include <turbojpeg.h>

// TJSAMP_420 / TJFLAG_* are enum values or macros Swift imports fine; this wrapper only
// fixes the pixel format argument for the common case of compressing an I420 image.
static inline int ua_tj_compress_i420(tjhandle handle, const unsigned char *planes[3], int width,
                                      const int strides[3], int height, unsigned char **jpeg,
                                      unsigned long *jpeg_size, int quality) {
    return tjCompressFromYUVPlanes(handle, planes, width, strides, height, TJSAMP_420, jpeg,
                                   jpeg_size, quality, TJFLAG_FASTDCT);
}
