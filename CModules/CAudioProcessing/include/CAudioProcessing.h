#pragma once
// C interface over webrtc-audio-processing 0.3 (C++), so Swift can use it.
// Audio is deinterleaved float in [-1, 1], processed in 10 ms chunks.
#ifdef __cplusplus
extern "C" {
#endif

/// Opaque audio processing pipeline (echo cancellation, noise suppression, gain control).
typedef struct ua_apm ua_apm;

/// Feature switches for ua_apm_create.
typedef struct ua_apm_config {
    int echo_cancellation;  ///< nonzero: enable AEC (needs ua_apm_process_reverse + delay)
    int noise_suppression;  ///< nonzero: enable noise suppression (high level)
    int gain_control;       ///< nonzero: enable adaptive digital AGC
    int high_pass_filter;   ///< nonzero: enable the high-pass filter
} ua_apm_config;

/// Creates a pipeline for `channels` channels at `sample_rate` Hz (8000/16000/32000/48000).
/// Returns NULL on failure.
ua_apm *ua_apm_create(int sample_rate, int channels, const ua_apm_config *config);
/// Frees the pipeline. NULL is allowed.
void ua_apm_destroy(ua_apm *apm);
/// Number of samples per channel in one 10 ms chunk.
int ua_apm_frames_per_chunk(const ua_apm *apm);
/// Processes one 10 ms near-end (capture) chunk in place. `channels` points to one buffer per
/// channel. Returns 0 on success, a negative webrtc error code otherwise.
int ua_apm_process(ua_apm *apm, float *const *channels);
/// Feeds one 10 ms far-end (playback) chunk, the echo reference. Returns 0 on success.
int ua_apm_process_reverse(ua_apm *apm, float *const *channels);
/// Sets the delay between playback and capture for echo cancellation.
int ua_apm_set_stream_delay_ms(ua_apm *apm, int delay_ms);

#ifdef __cplusplus
}
#endif
