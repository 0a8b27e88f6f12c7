/* scorch/status.h — status codes and the per-thread error message.
 *
 * Every fallible call in libscorch and in a plugin returns an sc_status and,
 * on failure, records a human-readable message with sc_error_set(). The
 * message is per thread (like errno or dlerror), so a data-loader worker and
 * the training thread never overwrite each other's message. Nothing in
 * libscorch calls exit() or abort() on bad input.
 */
#ifndef SCORCH_STATUS_H
#define SCORCH_STATUS_H

#include "scorch/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sc_status {
    SC_OK = 0,
    SC_ERR_INVALID,     /* bad argument, shape or dtype */
    SC_ERR_NOMEM,       /* allocation failed */
    SC_ERR_IO,          /* a file could not be read or written */
    SC_ERR_FORMAT,      /* a file is malformed, truncated or corrupt */
    SC_ERR_UNSUPPORTED, /* no kernel for this op on this backend, or similar */
    SC_ERR_NUMERIC,     /* NaN or infinity where a finite value is required */
    SC_ERR_PLUGIN,      /* a plugin broke its contract */
    SC_ERR_STATE,       /* call made in the wrong state */
} sc_status;

/* Records a printf-style message for the calling thread and returns code,
 * so that `return sc_error_set(SC_ERR_IO, "...")` reads naturally. */
SC_API sc_status sc_error_set(sc_status code, const char *fmt, ...)
           __attribute__((format(printf, 2, 3)));

/* Prefixes the current message with more context ("loading x.ckpt: ...")
 * and returns code. */
SC_API sc_status sc_error_wrap(sc_status code, const char *fmt, ...)
           __attribute__((format(printf, 2, 3)));

/* The calling thread's last message; "" when none. Valid until the next
 * sc_error_set/wrap/clear on this thread. */
SC_API const char *sc_error_message(void);

/* The code of the calling thread's last sc_error_set/wrap (SC_OK after
 * sc_error_clear): what a plugin returns after an op gave NULL. */
SC_API sc_status sc_error_code(void);
SC_API void sc_error_clear(void);

/* "invalid argument", "I/O error", ... */
SC_API const char *sc_status_name(sc_status status);

/* Propagates a failure status to the caller. */
#define SC_TRY(expr)                                                           \
    do {                                                                       \
        sc_status sc_try_status_ = (expr);                                     \
        if (sc_try_status_ != SC_OK)                                           \
            return sc_try_status_;                                             \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
