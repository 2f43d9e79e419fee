#pragma once
#include <vpx/vpx_encoder.h>
#include <vpx/vpx_decoder.h>
#include <vpx/vp8cx.h>
#include <vpx/vp8dx.h>

// vpx_codec_enc_init / vpx_codec_dec_init / vpx_codec_control are macros (they pass the ABI
// version or dispatch on the control id's type), so Swift calls these wrappers instead.

static inline vpx_codec_err_t ua_vpx_enc_init_vp8(vpx_codec_ctx_t *ctx, const vpx_codec_enc_cfg_t *cfg,
                                                  vpx_codec_flags_t flags) {
    return vpx_codec_enc_init(ctx, vpx_codec_vp8_cx(), cfg, flags);
}
static inline vpx_codec_err_t ua_vpx_enc_config_default_vp8(vpx_codec_enc_cfg_t *cfg) {
    return vpx_codec_enc_config_default(vpx_codec_vp8_cx(), cfg, 0);
}
static inline vpx_codec_err_t ua_vpx_enc_init_vp9(vpx_codec_ctx_t *ctx, const vpx_codec_enc_cfg_t *cfg,
                                                  vpx_codec_flags_t flags) {
    return vpx_codec_enc_init(ctx, vpx_codec_vp9_cx(), cfg, flags);
}
static inline vpx_codec_err_t ua_vpx_enc_config_default_vp9(vpx_codec_enc_cfg_t *cfg) {
    return vpx_codec_enc_config_default(vpx_codec_vp9_cx(), cfg, 0);
}
static inline vpx_codec_err_t ua_vpx_dec_init_vp8(vpx_codec_ctx_t *ctx, const vpx_codec_dec_cfg_t *cfg,
                                                  vpx_codec_flags_t flags) {
    return vpx_codec_dec_init(ctx, vpx_codec_vp8_dx(), cfg, flags);
}
static inline vpx_codec_err_t ua_vpx_control_int(vpx_codec_ctx_t *ctx, int ctrl_id, int value) {
    return vpx_codec_control_(ctx, ctrl_id, value);
}
static inline vpx_codec_err_t ua_vpx_set_cpuused(vpx_codec_ctx_t *ctx, int value) {
    return vpx_codec_control(ctx, VP8E_SET_CPUUSED, value);
}
static inline vpx_codec_err_t ua_vpx_set_static_threshold(vpx_codec_ctx_t *ctx, unsigned int value) {
    return vpx_codec_control(ctx, VP8E_SET_STATIC_THRESHOLD, value);
}
static inline vpx_codec_err_t ua_vpx_set_noise_sensitivity(vpx_codec_ctx_t *ctx, unsigned int value) {
    return vpx_codec_control(ctx, VP8E_SET_NOISE_SENSITIVITY, value);
}
static inline vpx_codec_err_t ua_vpx_set_token_partitions(vpx_codec_ctx_t *ctx, int value) {
    return vpx_codec_control(ctx, VP8E_SET_TOKEN_PARTITIONS, (vp8e_token_partitions)value);
}
static inline vpx_codec_err_t ua_vpx_set_max_intra_bitrate_pct(vpx_codec_ctx_t *ctx, unsigned int value) {
    return vpx_codec_control(ctx, VP8E_SET_MAX_INTRA_BITRATE_PCT, value);
}
static inline vpx_codec_err_t ua_vpx_set_vp9_aq_mode(vpx_codec_ctx_t *ctx, unsigned int value) {
    return vpx_codec_control(ctx, VP9E_SET_AQ_MODE, value);
}
static inline vpx_codec_err_t ua_vpx_set_vp9_tile_columns(vpx_codec_ctx_t *ctx, int value) {
    return vpx_codec_control(ctx, VP9E_SET_TILE_COLUMNS, value);
}
/* VPX_DL_REALTIME etc. are macros with casts; expose them as plain constants. */
static const unsigned long ua_vpx_dl_realtime = VPX_DL_REALTIME;
static const unsigned long ua_vpx_dl_good_quality = VPX_DL_GOOD_QUALITY;
static const vpx_enc_frame_flags_t ua_vpx_efflag_force_kf = VPX_EFLAG_FORCE_KF;
static const vpx_codec_frame_flags_t ua_vpx_frame_is_key = VPX_FRAME_IS_KEY;
static const vpx_codec_er_flags_t ua_vpx_error_resilient_default = VPX_ERROR_RESILIENT_DEFAULT;
