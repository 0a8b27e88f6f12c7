#include "scorch/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { SC_ERROR_MESSAGE_MAX = 1024 };

static _Thread_local char error_message[SC_ERROR_MESSAGE_MAX];
static _Thread_local sc_status error_code;

sc_status sc_error_set(sc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    error_code = code;
    return code;
}

sc_status sc_error_wrap(sc_status code, const char *fmt, ...)
{
    /* Two halves, so "prefix: old" always fits the message buffer. */
    char prefix[SC_ERROR_MESSAGE_MAX / 2 - 8];
    char old[SC_ERROR_MESSAGE_MAX / 2 - 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, error_message, sizeof old - 1);
    old[sizeof old - 1] = '\0';
    snprintf(error_message, sizeof error_message, "%s: %s", prefix,
             old[0] ? old : sc_status_name(code));
    error_code = code;
    return code;
}

const char *sc_error_message(void) { return error_message; }

sc_status sc_error_code(void) { return error_code; }

void sc_error_clear(void)
{
    error_message[0] = '\0';
    error_code = SC_OK;
}

const char *sc_status_name(sc_status status)
{
    switch (status) {
    case SC_OK: return "ok";
    case SC_ERR_INVALID: return "invalid argument";
    case SC_ERR_NOMEM: return "out of memory";
    case SC_ERR_IO: return "I/O error";
    case SC_ERR_FORMAT: return "malformed data";
    case SC_ERR_UNSUPPORTED: return "unsupported";
    case SC_ERR_NUMERIC: return "numeric error";
    case SC_ERR_PLUGIN: return "plugin error";
    case SC_ERR_STATE: return "invalid state";
    }
    return "unknown status";
}
