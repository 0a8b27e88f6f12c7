/* waits.h — how long the CPU's compute threads spin before they sleep,
 * from how busy the machine is.
 *
 * A thread that waits for the others (at the end of an OpenMP region, or
 * for the next) spins first. On an idle machine a long spin saves the
 * wake-up between a step's many short regions: the mlp trains some 10%
 * faster spinning 10,000 turns than 100. On a busy one the spin takes the
 * core from the thread it waits for, and the same mlp trains twice as slow
 * (docs/cli.md, Threads). libgomp reads its spin (GOMP_SPINCOUNT) once, as
 * it loads; a host program sets it to 10,000 before that (waits.c), unless
 * the user set GOMP_SPINCOUNT or OMP_WAIT_POLICY, and then turns libscorch's
 * short waits (sc_cpu_set_short_waits: 100 turns) on while other
 * processes keep busy a quarter of a core more than the machine has beyond
 * our threads, and off again below an eighth, measured over half a second
 * or more (/proc/stat against this process's own CPU time).
 *
 * Thread rule: the training thread.
 */
#ifndef SCORCH_HOST_WAITS_H
#define SCORCH_HOST_WAITS_H

#include <stdbool.h>

typedef struct host_waits {
    bool adaptive;    /* the spin is ours to choose, on several threads */
    bool short_waits; /* on now */
    double spare;     /* the machine's cores beyond our threads */
    double since;     /* host_now() at the window's start */
    double machine;   /* the machine's busy CPU seconds then */
    double own;       /* this process's CPU seconds then */
    double others;    /* the last window's cores busy with other work */
    double window;    /* the last window's length (s) */
} host_waits;

/* After sc_cpu_set_threads(threads), before the first step: long waits,
 * or short ones when other processes were busy since the program started
 * (then true). */
bool host_waits_start(host_waits *w, int threads);

/* Between steps. True when it turned short waits on or off (w->others
 * says why). */
bool host_waits_check(host_waits *w);

/* The rule: short waits when other processes keep `over` cores busy
 * beyond the machine's spare ones, given whether they are on now. */
bool host_waits_wanted(bool short_now, double over);

#endif
