#pragma once
#include <alsa/asoundlib.h>

// ALSA's error handler type is variadic, which Swift cannot express. This silences ALSA's
// default stderr printing (e.g. when "default" has no card) or restores it.
static void ua_alsa_quiet_handler(const char *file, int line, const char *function, int err,
                                  const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}
static inline int ua_alsa_silence_errors(int silent) {
    return snd_lib_error_set_handler(silent ? ua_alsa_quiet_handler : NULL);
}
