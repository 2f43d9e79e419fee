#pragma once
#include <aom/aom_encoder.h>
#include <aom/aomcx.h>

// aom_codec_enc_init and aom_codec_control are macros (they pass the ABI version or dispatch on the
// control id's type), so Swift calls these wrappers instead.

static inline aom_codec_err_t ua_aom_enc_config_default_av1_realtime(aom_codec_enc_cfg_t *cfg) {
    return aom_codec_enc_config_default(aom_codec_av1_cx(), cfg, AOM_USAGE_REALTIME);
}
static inline aom_codec_err_t ua_aom_enc_init_av1(aom_codec_ctx_t *ctx, const aom_codec_enc_cfg_t *cfg) {
    return aom_codec_enc_init(ctx, aom_codec_av1_cx(), cfg, 0);
}
static inline aom_codec_err_t ua_aom_set_cpuused(aom_codec_ctx_t *ctx, int value) {
    return aom_codec_control(ctx, AOME_SET_CPUUSED, value);
}
static inline aom_codec_err_t ua_aom_set_aq_mode(aom_codec_ctx_t *ctx, unsigned int value) {
    return aom_codec_control(ctx, AV1E_SET_AQ_MODE, value);
}
static inline aom_codec_err_t ua_aom_set_enable_tpl_model(aom_codec_ctx_t *ctx, unsigned int value) {
    return aom_codec_control(ctx, AV1E_SET_ENABLE_TPL_MODEL, value);
}
static inline aom_codec_err_t ua_aom_set_enable_order_hint(aom_codec_ctx_t *ctx, unsigned int value) {
    return aom_codec_control(ctx, AV1E_SET_ENABLE_ORDER_HINT, value);
}
static inline aom_codec_err_t ua_aom_set_deltaq_mode(aom_codec_ctx_t *ctx, unsigned int value) {
    return aom_codec_control(ctx, AV1E_SET_DELTAQ_MODE, value);
}
/* Macros as plain constants. */
static const aom_enc_frame_flags_t ua_aom_efflag_force_kf = AOM_EFLAG_FORCE_KF;
static const aom_codec_frame_flags_t ua_aom_frame_is_key = AOM_FRAME_IS_KEY;
