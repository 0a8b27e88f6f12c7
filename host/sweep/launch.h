/* launch.h — a trial's scorch-train as a child process of the sweep.
 *
 *   [LAUNCHER...] scorch-train --config RUN/trial.ini --run-dir RUN
 *       --threads=T --workers=W --device=D [--resume]
 *
 * with its standard output and error appended to RUN/stdout.log and
 * RUN/stderr.log. The child leads a process group of its own, so that a
 * Ctrl-C at the terminal reaches only the sweep, which then sends each
 * trial one SIGTERM (scorch-train: a checkpoint after the batch, exit
 * 130; mpirun and srun pass it on to their ranks). It also gets SIGTERM
 * when the sweep dies, however it dies (PR_SET_PDEATHSIG), so that no
 * trial runs on unwatched.
 */
#ifndef SCORCH_HOST_SWEEP_LAUNCH_H
#define SCORCH_HOST_SWEEP_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "scorch/status.h"

typedef struct host_trial_launch {
    const char *train;    /* scorch-train's path */
    const char *launcher; /* words put before it ("mpirun -np 2"), or "" */
    const char *run_dir;
    const char *ini;      /* the trial's configuration */
    int threads, workers;
    const char *device;
    bool resume;
} host_trial_launch;

/* Starts the trial; *pid is its process (the launcher's, with one). */
sc_status host_trial_spawn(const host_trial_launch *launch, pid_t *pid);

/* The processes a launcher starts per trial, read from its -np N, -n N,
 * --np N or --ntasks N (also as --opt=N); 1 when it says none. */
int host_launcher_ranks(const char *launcher);

/* Why a trial failed, from what it wrote to `err_log` after byte `from`:
 * its last line that scorch-train (or a rank of it) began with
 * "scorch-train: ", else its last line; "" when it wrote nothing. */
void host_trial_last_error(const char *err_log, long from, char *out, size_t size);

#endif
