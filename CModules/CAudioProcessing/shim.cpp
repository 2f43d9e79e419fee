#include "CAudioProcessing.h"
#include <webrtc/modules/audio_processing/include/audio_processing.h>

// Uses only the float StreamConfig interface: Debian's AudioFrame header includes a missing file.

struct ua_apm {
    webrtc::AudioProcessing *apm;
    webrtc::StreamConfig config;
};

extern "C" ua_apm *ua_apm_create(int sample_rate, int channels, const ua_apm_config *cfg) {
    if (channels < 1 || channels > 2) return nullptr;
    if (sample_rate != 8000 && sample_rate != 16000 && sample_rate != 32000 && sample_rate != 48000)
        return nullptr;
    webrtc::AudioProcessing *p = webrtc::AudioProcessing::Create();
    if (!p) return nullptr;
    if (cfg) {
        p->echo_cancellation()->Enable(cfg->echo_cancellation != 0);
        if (cfg->noise_suppression) {
            p->noise_suppression()->set_level(webrtc::NoiseSuppression::kHigh);
        }
        p->noise_suppression()->Enable(cfg->noise_suppression != 0);
        if (cfg->gain_control) {
            p->gain_control()->set_mode(webrtc::GainControl::kAdaptiveDigital);
        }
        p->gain_control()->Enable(cfg->gain_control != 0);
        p->high_pass_filter()->Enable(cfg->high_pass_filter != 0);
    }
    return new ua_apm{p, webrtc::StreamConfig(sample_rate, channels)};
}

extern "C" void ua_apm_destroy(ua_apm *apm) {
    if (!apm) return;
    delete apm->apm;
    delete apm;
}

extern "C" int ua_apm_frames_per_chunk(const ua_apm *apm) {
    return apm ? (int)apm->config.num_frames() : 0;
}

extern "C" int ua_apm_process(ua_apm *apm, float *const *channels) {
    if (!apm || !channels) return -1;
    return apm->apm->ProcessStream(channels, apm->config, apm->config, channels);
}

extern "C" int ua_apm_process_reverse(ua_apm *apm, float *const *channels) {
    if (!apm || !channels) return -1;
    return apm->apm->ProcessReverseStream(channels, apm->config, apm->config, channels);
}

extern "C" int ua_apm_set_stream_delay_ms(ua_apm *apm, int delay_ms) {
    if (!apm) return -1;
    return apm->apm->set_stream_delay_ms(delay_ms);
}
