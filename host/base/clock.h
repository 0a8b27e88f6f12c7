/* clock.h — seconds on a monotonic clock, for timing steps, phases and
 * collectives, and for deadlines. Any thread.
 */
#ifndef SCORCH_HOST_CLOCK_H
#define SCORCH_HOST_CLOCK_H

/* Seconds since an arbitrary start, never going back. */
double host_now(void);

#endif
