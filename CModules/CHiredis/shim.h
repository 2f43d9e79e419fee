#pragma once
#include <hiredis/hiredis.h>

// The reply type constants are macros in read.h; named here so Swift sees them as one set.
static inline int shim_REDIS_REPLY_STRING(void) { return REDIS_REPLY_STRING; }
static inline int shim_REDIS_REPLY_ARRAY(void) { return REDIS_REPLY_ARRAY; }
static inline int shim_REDIS_REPLY_INTEGER(void) { return REDIS_REPLY_INTEGER; }
static inline int shim_REDIS_REPLY_NIL(void) { return REDIS_REPLY_NIL; }
static inline int shim_REDIS_REPLY_STATUS(void) { return REDIS_REPLY_STATUS; }
static inline int shim_REDIS_REPLY_ERROR(void) { return REDIS_REPLY_ERROR; }
