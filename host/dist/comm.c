/* comm.c — what every transport (comm.h) waits with. */
#include "dist/comm.h"

#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "base/clock.h"
#include "dist/launch.h"

enum { NAP_NS = 200000 };

/* A wait this long (s) is no step's communication but a rank busy with
 * something else (rank 0 writing a checkpoint): naps from then on. */
static const double YIELD_S = 0.05;

void host_comm_wait(const host_comm_ops *ops, host_comm *c, double timeout_s,
                    bool (*test)(void *), void *arg, const char *what)
{
    double start = host_now();
    const struct timespec nap = {0, NAP_NS};
    while (!test(arg)) {
        double waited = host_now() - start;
        if (waited > timeout_s) {
            fprintf(stderr,
                    "%sscorch-train: %s did not complete within %g s: another rank died, "
                    "hangs or fell that far behind (its own output says which; "
                    "--collective-timeout sets the limit); aborting the job\n",
                    host_log_prefix(), what, timeout_s);
            fflush(stderr);
            ops->abort_job(c);
        }
        if (waited < YIELD_S)
            sched_yield();
        else
            nanosleep(&nap, NULL);
    }
}
