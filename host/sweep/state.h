/* state.h — a sweep's trials and the state file that lets a sweep stop
 * and go on: OUT/state.jsonl (docs/sweeps.md).
 *
 * The file is rewritten whole, to a temporary file that is synced and
 * renamed over it, after every change of a trial, so that it always holds
 * one consistent state, whenever the sweep is killed. Its first record
 * holds the settings a restarted sweep must repeat; then one record per
 * trial (its number, status, launches, device and threads, the metric so
 * far, its time, why it stopped or failed, and "param:NAME" for each
 * swept value), all flat, as base/jsonl.h reads them.
 */
#ifndef SCORCH_HOST_SWEEP_STATE_H
#define SCORCH_HOST_SWEEP_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "sweep/early_stop.h"
#include "sweep/space.h"

typedef enum host_trial_status {
    HOST_TRIAL_PENDING, /* not started */
    HOST_TRIAL_RUNNING, /* started; read back from a file, it was interrupted */
    HOST_TRIAL_DONE,    /* trained every epoch */
    HOST_TRIAL_STOPPED, /* stopped by the early-stopping rule */
    HOST_TRIAL_FAILED,  /* its scorch-train failed */
} host_trial_status;

enum { HOST_TRIAL_MESSAGE_MAX = 1024, HOST_TRIAL_DEVICE_MAX = 32 };

typedef struct host_trial {
    int64_t number;           /* 1-based: OUT/trial-0001 */
    char **values;            /* one per dimension of the space */
    host_trial_status status;
    int starts;               /* launches from scratch */
    int resumes;              /* launches with --resume */
    long pid;                 /* while it runs: its process (the launcher's) */
    int threads;              /* compute threads, fixed at its first start */
    char device[HOST_TRIAL_DEVICE_MAX];
    int epochs;               /* what it trains (its --epochs) */
    int epoch;                /* the last epoch with a metric */
    double best, last;        /* the metric: best so far and of that epoch (NaN: none) */
    int best_epoch;
    double time_s;            /* wall time of its launches */
    int judged_epoch;         /* the early-stopping rule has seen epochs up to this */
    bool stop_sent;           /* the rule stopped it, and it has not ended yet */
    char stop[HOST_TRIAL_MESSAGE_MAX];    /* why the rule stopped it */
    char message[HOST_TRIAL_MESSAGE_MAX]; /* why it failed */
} host_trial;

/* What a restarted sweep must repeat (but --trials, which may grow). */
typedef struct host_sweep_settings {
    uint64_t seed;
    int64_t samples;          /* --trials: random draws of the grid (0: the grid once) */
    char metric[64];          /* --metric; "" for the default (curve.h) */
    char mode[8];             /* --mode max|min; "" for the metric's own */
    host_stop_policy stop;    /* --early-stop and its knobs; stop.maximize: the metric's way */
    char ranked_by[64];       /* the metric's name, once known (found, not compared) */
} host_sweep_settings;

const char *host_trial_status_name(host_trial_status status);

/* `count` pending trials with their values (space.h); free with
 * host_trials_free. */
sc_status host_trials_make(const host_space *space, uint64_t seed, int64_t count,
                           host_trial **trials);
void host_trials_free(host_trial *trials, int64_t count, int dims);

/* Writes the state file (atomically, as above). */
sc_status host_sweep_state_write(const char *path, const host_sweep_settings *settings,
                                 const host_space *space, const host_trial *trials,
                                 int64_t count);

/* Reads a state file: its settings and its trials, with their values read
 * back for the space's dimensions; *count is 0 when there is no file. */
sc_status host_sweep_state_read(const char *path, const host_space *space,
                                host_sweep_settings *settings, host_trial **trials,
                                int64_t *count);

/* Replaces the file at path with text: written to path.tmp, synced,
 * renamed, and the folder synced. */
sc_status host_sweep_file_replace(const char *path, const char *text, size_t len);

#endif
