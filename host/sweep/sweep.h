/* sweep.h — scorch-sweep: the trials of a sweep file (plan.h), run as
 * scorch-train processes in parallel slots, watched, stopped early by a
 * rule, resumable, and reported (docs/sweeps.md).
 *
 *   OUT/sweep.ini          the sweep file as the sweep began
 *   OUT/state.jsonl        the trials' state (state.h)
 *   OUT/results.csv        one row per trial (results.h)
 *   OUT/summary.md         the trials ranked by the metric
 *   OUT/trial-NNNN/        a run directory each: trial.ini, scorch-train's
 *                          config.ini, metrics.jsonl and checkpoints,
 *                          stdout.log and stderr.log
 *
 * A slot is a share of the machine that runs one trial at a time: on the
 * cpu, the cores divided among the slots (each trial computes on its
 * share, --threads, with as many loader threads); on GPUs, one GPU each,
 * taken only while no other run holds its lock (base/device.h); with a
 * launcher (mpirun, srun), whatever it starts per trial, where it places
 * it: --device then goes to every trial as it is.
 *
 * Run again with the same command, a sweep skips the trials that ended
 * (done, stopped or failed), resumes the interrupted ones with --resume on
 * the device and threads they had, and starts the rest; a sweep file or a
 * setting that differs is refused, naming each difference.
 */
#ifndef SCORCH_HOST_SWEEP_SWEEP_H
#define SCORCH_HOST_SWEEP_SWEEP_H

#include <stdbool.h>

#include "sweep/state.h"

typedef struct host_sweep_options {
    const char *sweep;             /* --sweep FILE */
    const char *out;               /* --out DIR */
    int parallel;                  /* --parallel N (0: 1 on the cpu, one per GPU listed) */
    int threads;                   /* --threads N per trial (0: the slot's share) */
    const char *device;            /* --device cpu | cuda | cuda:N,M,... (any, with a launcher) */
    const char *launcher;          /* --launcher WORDS ("" for none) */
    host_sweep_settings settings;  /* --seed, --trials, --metric, --mode, --early-stop, knobs */
    const char *train;             /* the scorch-train to run */
    bool progress;                 /* redraw a progress line (stdout is a terminal) */
} host_sweep_options;

enum { HOST_SWEEP_EXIT_FAILED = 1, HOST_SWEEP_EXIT_USAGE = 2, HOST_SWEEP_EXIT_INTERRUPTED = 130 };

/* Whether a higher `metric` is better: `mode` ("max", "min") when given,
 * else true for accuracy and false for loss. False with a message for
 * another metric without a mode. */
sc_status host_sweep_metric_mode(const char *metric, const char *mode, bool *maximize);

/* Runs the sweep: 0 when every trial has ended and some did not fail;
 * HOST_SWEEP_EXIT_FAILED when every trial failed or the sweep could not go
 * on; _USAGE for a refused command (a bad sweep file, a changed one);
 * _INTERRUPTED after SIGINT or SIGTERM, the interrupted trials left to the
 * next run. Messages go to stderr, as "scorch-sweep: ...". */
int host_sweep_run(const host_sweep_options *options);

#endif
