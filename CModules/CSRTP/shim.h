#pragma once
#include <srtp2/srtp.h>

// SRTP_MAX_TRAILER_LEN is a compound macro that Swift does not import.
static inline int shim_SRTP_MAX_TRAILER_LEN(void) { return SRTP_MAX_TRAILER_LEN; }
