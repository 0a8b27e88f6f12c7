/* sweep_impl.h — the state a running sweep keeps, shared by sweep.c (the
 * loop: slots, launches, watching, reports) and sweep_setup.c (the output
 * folder, the restart's checks, the slots). */
#ifndef SCORCH_HOST_SWEEP_IMPL_H
#define SCORCH_HOST_SWEEP_IMPL_H

#include <sys/types.h>
#include <time.h>

#include "base/config.h"
#include "sweep/curve.h"
#include "sweep/plan.h"
#include "sweep/sweep.h"

enum { SWEEP_SLOTS_MAX = 256 };

typedef struct sweep_slot {
    char device[HOST_TRIAL_DEVICE_MAX]; /* "cpu", "cuda:1" */
    int gpu;                            /* its GPU, or -1 */
    int threads;                        /* compute threads of a trial it starts */
    host_trial *trial;                  /* running here, or NULL */
    bool told_held;                     /* said that another run holds its GPU */
} sweep_slot;

/* What the loop knows of a trial beyond its record. */
typedef struct sweep_watch {
    host_curve curve;
    double started;   /* host_now() at its launch */
    long err_from;    /* stderr.log's size at its launch */
    off_t seen_size;  /* metrics.jsonl's size and time when last read */
    struct timespec seen_mtime;
    bool left;        /* interrupted by a signal the sweep did not send: left to the next run */
    bool told_busy;   /* said that another process holds its run directory */
} sweep_watch;

typedef struct sweep {
    const host_sweep_options *o;
    host_sweep_settings settings;  /* as the sweep began (the state file's) */
    host_sweep_plan plan;
    host_trial *trials;
    sweep_watch *watch;
    int64_t count;
    sweep_slot slots[SWEEP_SLOTS_MAX];
    int slot_count;
    int workers;                   /* loader threads per trial */
    char metric[64];               /* the metric's name, "" until a trial has records */
    bool maximize;
    char out[HOST_PATH_MAX];
    char state_path[HOST_PATH_MAX + 32];
    int lock_fd;                   /* OUT/.lock */
    bool dirty;                    /* the state changed since it was written */
    bool results_dirty;            /* a trial ended since results.csv was written */
    bool broken;                   /* the state could not be written: the sweep stops */
} sweep;

/* sweep_setup.c */

/* Takes OUT (creating it) for this process: a second sweep on it is
 * refused, naming the first one's PID. */
sc_status sweep_lock_out(sweep *s);

/* Reads the sweep file, and OUT's state when the sweep ran before
 * (refusing differences), and makes the trials. */
sc_status sweep_prepare(sweep *s);

/* The slots of --parallel, --device, --threads and --launcher: refused
 * before the sweep writes anything. */
sc_status sweep_make_slots(sweep *s);

/* Interrupted trials resume on the device they had: it must be a slot's. */
sc_status sweep_check_resumable(const sweep *s);

/* OUT/trial-NNNN (and a file in it, when name is not NULL). */
void sweep_trial_path(const sweep *s, const host_trial *t, const char *name, char *buf,
                      size_t size);

void sweep_free(sweep *s);

#endif
