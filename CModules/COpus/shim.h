#pragma once
#include <opus.h>

// opus_encoder_ctl / opus_decoder_ctl are variadic; Swift cannot call them, so each request
// Understudy uses gets a typed wrapper.

static inline int ua_opus_set_bitrate(OpusEncoder *enc, opus_int32 bps) {
    return opus_encoder_ctl(enc, OPUS_SET_BITRATE(bps));
}
static inline int ua_opus_set_inband_fec(OpusEncoder *enc, int on) {
    return opus_encoder_ctl(enc, OPUS_SET_INBAND_FEC(on));
}
static inline int ua_opus_set_packet_loss_perc(OpusEncoder *enc, int perc) {
    return opus_encoder_ctl(enc, OPUS_SET_PACKET_LOSS_PERC(perc));
}
static inline int ua_opus_set_complexity(OpusEncoder *enc, int complexity) {
    return opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(complexity));
}
static inline int ua_opus_set_dtx(OpusEncoder *enc, int on) {
    return opus_encoder_ctl(enc, OPUS_SET_DTX(on));
}
static inline int ua_opus_get_lookahead(OpusEncoder *enc, opus_int32 *out) {
    return opus_encoder_ctl(enc, OPUS_GET_LOOKAHEAD(out));
}
static inline int ua_opus_encoder_reset(OpusEncoder *enc) {
    return opus_encoder_ctl(enc, OPUS_RESET_STATE);
}
static inline int ua_opus_decoder_reset(OpusDecoder *dec) {
    return opus_decoder_ctl(dec, OPUS_RESET_STATE);
}
