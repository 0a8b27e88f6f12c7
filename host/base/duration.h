/* duration.h — a length of time as the user writes it (--max-time):
 * "2h30m", "90m", "45s", "1h", "1d12h", "1.5h", or plain seconds
 * ("5400", "0.5"). Units d, h, m, s, each at most once and in that order.
 */
#ifndef SCORCH_HOST_DURATION_H
#define SCORCH_HOST_DURATION_H

#include "scorch/status.h"

/* The duration in seconds (>= 0); SC_ERR_INVALID with a message quoting
 * the text and saying what is accepted. */
sc_status host_duration_parse(const char *text, double *seconds);

/* The same check, for config.c's option table. */
sc_status host_duration_check(const char *text);

#endif
