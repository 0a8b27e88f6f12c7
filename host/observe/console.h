/* console.h — the console sink of a run's reports (observer.h): on a
 * terminal a progress line per pass, redrawn in place; one summary line
 * per epoch and phase; informational lines; the run's final summary.
 * docs/inspecting.md shows them.
 *
 * Thread rule: the training thread only.
 */
#ifndef SCORCH_HOST_CONSOLE_H
#define SCORCH_HOST_CONSOLE_H

#include <stdbool.h>

#include "observe/observer.h"

typedef struct host_console {
    bool progress;    /* stdout is a terminal and not quiet */
    bool quiet;       /* final lines only */
    bool silent;      /* not even final lines: a rank other than 0, whose
                         stdout is not /dev/null (a replica's thread) */
    int epochs;       /* of the run, for "epoch E/N"; 0: none (scorch-test) */
    double last_draw; /* when the progress line was last drawn */
} host_console;

/* A console printing to stdout; `epochs` as in host_console. */
void host_console_init(host_console *c, bool quiet, int epochs);

/* The sink of c's reports: progress lines (at most ten redraws a second,
 * and a pass's last batch), phase lines (`final` ones even when quiet)
 * and messages. */
host_observer host_console_observer(host_console *c);

#endif
